"""The tiling step: after lowering, every kernel gets a TilePlan on its hardware.

GEMM-like kernels get the CTA tile (and split-K) the tile model of estimator/pricing/gemm.py prefers, as
cuBLAS's heuristics pick the kernel they expect to be fastest; attention kernels get a FlashAttention
tile (prefill) or a split-KV decode configuration (estimator/pricing/attention.py); every other kernel
gets the streaming model below. Each plan carries the tile-level estimate and the L2 residency of the
kernel's inputs (estimator/pricing/residency.py), which `estimator.pricing.price.price` turns into a Timing.

Streaming model (elementwise, norms, reductions, movement...):
    estimate = launch_s + mem_latency_s + max(flops_u / (peak_u * eff_u), DRAM / (BW * eff_dram),
                                                  L2 traffic / (L2 BW * eff_l2))

Every plan is written once over the three number types of estimator/symmath.py: python numbers (bound
dims), numpy arrays of points (a sweep's or a serving step's points: each point takes its own tile, the
argmin of symmath.argmin over the menu's candidates, estimator/pricing/points.py) and sympy expressions.
Free dims: the tile is chosen as if every free dim were `SYMBOLIC_DIM_VALUE` (a large, compute-bound
size: the tile a deployment at scale would run), and the chosen tile's formula is kept symbolic
(`ceiling(M / 128)` and so on). Once the dims are bound the choice may differ: sweeps therefore price
every point with its own choice, and estimator/study/closed_form.py says which kernels a closed form
approximates and by how much.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sympy

from estimator import symmath as sm
from estimator.cost.moe import expected_active_experts
from estimator.cost.registry import ALU, CUDA, TENSOR, Work, traffic
from estimator.dtypes import STORED_FORMATS, itemsize
from estimator.ir import Graph
from estimator.kernel import op_view, signature
from estimator.pricing import attention as attn_model
from estimator.pricing import deferred, memo, mla, moe, quant
from estimator.pricing import gemm as gemm_model
from estimator.pricing.compiled import SassPlan, for_kernel
from estimator.pricing.l2 import cross_share, effective_l2_bytes_per_s
from estimator.pricing.menu import FamilyMenu, menu_for
from estimator.pricing.problem import GemmSpec, attention_of_kernel, gemm_of_kernel, kernel_scale_block
from estimator.pricing.residency import Residency, residency
from estimator.pricing.units import dominant, unit_efficiency, unit_peak
from hwdesc import HardwareDescriptor

SYMBOLIC_DIM_VALUE = 4096
# Most query rows per sequence a decode (split-KV) kernel takes: one token, or a few for speculative /
# multi-token decoding. NB: such a kernel ignores the causal triangle among those few rows.
DECODE_MAX_Q = 8
WINDOW_TILE_ROWS = 128  # query rows of a FlashAttention tile, for a sliding window's band (see below)
# The efficiency constants the tile model reads (hwdesc `efficiency`; see hwdesc/schema.py).
TILE_KEYS = ("tensor", "cuda", "sfu", "dram", "launch_s", "l2", "l2_resident", "mem_latency_s",
             "split_k_s", "softmax_overlap", "attention_cta_s", "attention_step_s", "attention_prefill_s",
             "attention_decode_s")


@dataclass(frozen=True)
class TilePlan:
    """A kernel's tile choice and tile-level estimate. Numbers once dims are bound, else sympy."""

    kind: str  # "gemm", "attention" or "stream"
    tile: str | None  # e.g. "128x256x64", "64x16x64 swapAB splitK4", "128x128" (attention Q x KV)
    ctas: Any
    waves: Any
    wave_eff: Any  # ctas / (waves * slots): the share of the machine the last waves leave busy
    tensor_util: Any  # MMA FLOPs / (estimate_s * MMA peak)
    estimate_s: Any
    terms: dict = field(default_factory=dict)  # compute / memory / l2 / latency / launch: time = their max
    limiter: str = "memory"  # on arrays of points, an array of names
    resident_bytes: float = 0.0  # reads found in L2 (estimate's capacity)
    resident_bytes_bound: float = 0.0  # reads found in L2 (whole L2), for the bound
    sass: str | None = None  # "file#kernel" when a compiled kernel set the MMA path and CTAs/SM
    # what the limiter is named from (_plan): the max's terms, the per-CTA latency and the fixed part
    parts: dict = field(default_factory=dict)

    @property
    def key(self) -> Hashable:
        return (self.kind, self.tile, self.resident_bytes, self.resident_bytes_bound, self.sass)


def tiling_supported(hw: HardwareDescriptor) -> bool:
    """A family with a tile menu and a descriptor with the tile model's constants and L2 bandwidth."""
    return (menu_for(hw.family) is not None and getattr(hw, "l2_bytes_per_s", None) is not None
            and all(k in hw.efficiency for k in TILE_KEYS))


def hw_params(hw: HardwareDescriptor) -> gemm_model.Hw:
    # a two-die L2 is seen through its cross-partition link (estimator/pricing/l2.py)
    parts = getattr(hw, "l2_partitions", None) or 1
    link = getattr(hw, "l2_cross_partition_bytes_per_s", None) or 0.0
    far = cross_share(parts) if parts > 1 and link else 0.0
    return gemm_model.Hw(hw.sm_count, hw.dram_bytes_per_s, effective_l2_bytes_per_s(hw), hw.l2_bytes,
                         hw.smem_bytes_per_sm, dict(hw.efficiency), hw.cuda_flops_per_s["fp32"],
                         l2_far_share=far, l2_link_bytes_per_s=link)


def plan_kernels(graph: Graph, kernels: Sequence, hw: HardwareDescriptor,
                 warm_inputs: bool | Iterable[str] = False,
                 sass: dict | None = None, keys: Sequence[Hashable] | None = None) -> list[TilePlan | None]:
    """A plan per kernel (None for every kernel when the hardware has no tile model). `sass`: node name
    -> estimator.pricing.compiled.SassPlan, a compiled kernel's MMA path and occupancy (--kernel-sass).
    `keys`: each kernel's full signature; given, plans are remembered across calls (pricing/memo.py)."""
    if not tiling_supported(hw):
        return [None] * len(kernels)
    menu = menu_for(hw.family)
    hwp = hw_params(hw)
    # NB: L2 residency between kernels is modelled only under warm_inputs (the calibration benchmarks'
    # condition). Residency depends on sizes against the L2 capacity, which is undecidable while dims are
    # free; modelling it only for bound dims would make a closed form (and a sweep built from it) disagree
    # with --dim at the same point. A Piecewise residency would lift this.
    res = (residency(graph, kernels, hw.l2_bytes, hw.efficiency["l2_resident"], warm_inputs) if warm_inputs
           else [Residency({}, {}) for _ in kernels])
    cache: dict[Hashable, TilePlan] = {}
    plans = []
    for i, (k, r) in enumerate(zip(kernels, res, strict=True)):
        compiled = for_kernel(k, sass)
        # the plan is a function of the kernel's signature and of whether its GEMM is block-scaled (an
        # operand's producer, which the signature does not see)
        block = kernel_scale_block(graph, k)
        key = (k.signature, r.bytes, r.bytes_bound, tuple(sorted(r.resident)), compiled, block)
        if key not in cache:
            def make(k=k, r=r, compiled=compiled) -> TilePlan:
                return plan_kernel(graph, k, hw, hwp, menu, r, compiled)

            if sm.flat():  # many unknown dims: the plan of a kernel alike up to a renaming, renamed
                def make(k=k, r=r, planned=make, block=block) -> TilePlan:  # noqa: F811 - the flat path wraps it
                    return _renamed_plan(graph, k, r, cache, planned, block)
            remember = keys is not None and compiled is None and not (r.bytes or r.bytes_bound or r.resident)
            # flat or not builds the same values in other forms: never mixed
            cache[key] = memo.plan((memo.hw_key(hw), keys[i], sm.flat(), block), make) if remember else make()
        plans.append(cache[key])
    return plans


def _renamed_plan(graph: Graph, kernel, res: Residency, cache: dict, make, block=None) -> TilePlan:
    """Under symmath.flat() (a graph of many unknown dims: no two kernels have equal signatures, but many
    are alike up to a renaming of their dims) the plan of an alike kernel, renamed (symmath.renamed)."""
    extra = ("plan", res.bytes, res.bytes_bound, tuple(sorted(res.resident)), block)
    return sm.renamed(cache, alike_signature(graph, kernel), make, extra)


def alike_signature(graph: Graph, kernel) -> Hashable:
    """The kernel's node signature (estimator/kernel.py: what its Work and plan are a function of), with
    the tensors' shapes; symmath.canonical turns it into a key up to a renaming of the dims."""
    return signature(op_view(graph, graph.node(kernel.name)), graph)


def plan_kernel(graph: Graph, kernel, hw: HardwareDescriptor, hwp: gemm_model.Hw, menu: FamilyMenu,
                res: Residency, compiled: SassPlan | None = None) -> TilePlan:
    if kernel.kind == "moe":  # a grouped GEMM over the active experts (estimator/pricing/moe.py)
        plan = _moe_plan(graph, kernel, hw, res)
        if plan is not None:
            return plan
    return plan_problem(lambda: gemm_of_kernel(graph, kernel), lambda: attention_of_kernel(graph, kernel),
                        lambda: quant.block_quant_rounds(graph, kernel, hw.sm_count,
                                                         menu.block_quant_warps_per_sm),
                        kernel.work, hw, hwp, menu, res, compiled)


def plan_problem(gemm: Callable[[], GemmSpec | None], attention: Callable[[], Any], rounds: Callable[[], Any],
                 work: Work, hw: HardwareDescriptor, hwp: gemm_model.Hw, menu: FamilyMenu, res: Residency,
                 compiled: SassPlan | None = None, unit: tuple[str, str] | None = None) -> TilePlan:
    """The plan of a kernel given its problems (each asked only when needed: the GEMM spec, the attention
    core, the block-quantization rounds) and its Work, in whichever number type they hold (sympy for a
    graph's kernel, arrays of points for estimator/pricing/points.py): a GEMM tile, else an attention
    tile, else the streaming model. `unit`: the MMA's (unit, dtype), where `work` (arrays) cannot say
    (the kernel's symbolic Work's, _mma_unit)."""
    spec = gemm()
    if spec is not None:
        plan = _gemm_plan(spec, work, hw, hwp, _with_sass(menu, compiled), res, compiled, unit)
        if plan is not None:
            return plan
    found = attention()
    if found is not None:
        plan = _attention_plan(found, work, hw, hwp, menu, res, unit)
        if plan is not None:
            return plan
    return stream_plan(work, hw, res, rounds())


# ---- GEMM -----------------------------------------------------------------------------------------

def _mma_unit(work: Work) -> tuple[str, str] | None:
    """The (unit, dtype) carrying most of a kernel's FLOPs on tensor cores or CUDA-core FMAs."""
    units = [(u, d) for (u, d) in work.flops if u in (TENSOR, CUDA)]
    if not units:
        return None
    return max(units, key=lambda ud: _rank(work.flops[ud]))


def _rank(expr: Any) -> float:
    e = sympy.sympify(expr)
    if e.is_number:
        return float(e)
    return float(e.xreplace({s: SYMBOLIC_DIM_VALUE for s in e.free_symbols}))


def _peak(hw: HardwareDescriptor, unit: str, dtype: str) -> float | None:
    try:
        return unit_peak(hw, unit, dtype)
    except ValueError:  # PriceError: no such unit or dtype on this GPU
        return None


def operand_bytes(dtype: str, menu: FamilyMenu) -> float:
    """Bytes per element of an MMA operand, with its block-scale factors (NVFP4: 1 fp8 scale per 16)."""
    size = float(itemsize(dtype))
    scale = menu.block_scales.get(dtype)
    if scale:
        size += float(scale["bytes"]) / float(scale["block"])
    return size


def gemm_problem(spec: GemmSpec, unit: tuple[str, str], dram_bytes: Any, resident: Any, a_in_l2: Any,
                 b_in_l2: Any, hw: HardwareDescriptor, menu: FamilyMenu) -> gemm_model.Gemm | None:
    """The tile model's view of a GEMM kernel: `dram_bytes` its Work's, `resident` the bytes of its
    reads found in L2 (numbers, or arrays in calibration/tables.py)."""
    peak = _peak(hw, *unit)
    if peak is None:
        return None
    a_bytes, b_bytes = operand_bytes(spec.a.dtype, menu), operand_bytes(spec.b.dtype, menu)
    # block-scale factors (NVFP4) are read beside the data: in the graph they are no tensor of their own
    scales = (spec.batch * spec.m * spec.k * (a_bytes - spec.a_bytes)
              + spec.batch * spec.n * spec.k * (b_bytes - spec.b_bytes))
    n = sm.num  # bound dims as python numbers: the tile model then runs in floats, not sympy
    dram = dram_bytes - resident + scales
    if not isinstance(dram, np.ndarray):
        dram = n(sympy.sympify(dram))
    return gemm_model.Gemm(n(spec.batch), n(spec.m), n(spec.n), n(spec.k), a_bytes, b_bytes, spec.c_bytes,
                           peak, unit_efficiency(hw, unit), dram_bytes=dram, a_in_l2=a_in_l2, b_in_l2=b_in_l2,
                           scale_block=spec.scale_block or _inline_scale_block(spec, menu))


def _inline_scale_block(spec: GemmSpec, menu: FamilyMenu) -> int:
    """K elements per scale of an operand whose dtype carries its block scales beside the data (NVFP4:
    menu `block_scales`, one e4m3 scale per 16 fp4 values), on a family with a block-scaled kernel of
    its own (`block_scaled`); else 0 (the GEMM is priced as any other, its scale bytes included)."""
    if menu.block_scaled is None:
        return 0
    for dtype in (spec.a.dtype, spec.b.dtype):
        scale = menu.block_scales.get(dtype)
        if scale:
            return int(scale["block"])
    return 0


def _with_sass(menu: FamilyMenu, compiled) -> FamilyMenu:
    """The menu with every GEMM tile's co-resident CTAs capped by a compiled kernel's occupancy."""
    if compiled is None:
        return menu
    tiles = tuple(replace(t, max_ctas_per_sm=max(1, min(t.max_ctas_per_sm, compiled.ctas_per_sm)))
                  for t in menu.gemm_tiles)
    return replace(menu, gemm_tiles=tiles)


def _gemm_plan(spec: GemmSpec, work: Work, hw: HardwareDescriptor, hwp: gemm_model.Hw, menu: FamilyMenu,
               res: Residency, compiled: SassPlan | None = None,
               unit: tuple[str, str] | None = None) -> TilePlan | None:
    unit = unit or _mma_unit(work)
    if unit is None:
        return None
    bmm = _mla_bmm_plan(spec, unit, work, hw, res)
    if bmm is not None:
        return bmm
    g = gemm_problem(spec, unit, work.dram_bytes, res.bytes, spec.a.name in res.resident,
                     spec.b.name in res.resident, hw, menu)
    return gemm_plan(g, unit, work.flops[unit], hw, hwp, menu, res, compiled)


def _mla_bmm_plan(spec: GemmSpec, unit: tuple[str, str], work: Work, hw: HardwareDescriptor,
                  res: Residency) -> TilePlan | None:
    """A batched GEMM with one weight matrix per group (the absorbed MLA BMMs) as the engine runs it
    (estimator/pricing/mla.py bmm_time), where the family has that kernel; else None (the tile model)."""
    groups = mla.absorbed_bmm(spec.a.shape or (), spec.b.shape or (), spec.c.shape or (), spec.b.is_weight)
    block = bool(spec.scale_block) and unit[1] != "bf16"
    k = mla.bmm_kernel(hw.family, block, hw.efficiency) if groups is not None else None
    peak = _peak(hw, *unit) if k is not None else None
    if peak is None:
        return None
    # spec's dims, not the tensors' shapes: at arrays of points only the dims hold the points' values
    rows = spec.batch * spec.m / groups
    t = mla.bmm_time(groups, rows, spec.n, spec.k, peak, work.dram_bytes - res.bytes, hw.sm_count,
                     hw.dram_bytes_per_s, dict(hw.efficiency), k, block)
    util = work.flops[unit] / (t.time * peak) if unit[0] == TENSOR else None
    return _plan("gemm", t.name, t.ctas, t.waves, t.wave_eff, util, t.time, t.compute, t.memory, 0.0,
                 t.fixed, res)


def gemm_plan(g: gemm_model.Gemm | None, unit: tuple[str, str] | None, mma_flops: Any, hw: HardwareDescriptor,
              hwp: gemm_model.Hw, menu: FamilyMenu, res: Residency,
              compiled: SassPlan | None = None) -> TilePlan | None:
    """The plan of the tile model's GEMM `g` (numbers, arrays of points or sympy); `mma_flops` the
    kernel's FLOPs on `unit` (for tensor_util; None, with any unit: not wanted)."""
    if g is None or any(_zero(x) for x in (g.batch, g.m, g.n)):
        return None  # NB: an empty GEMM (a zero dim) has no tiles: the streaming plan prices it
    hw_peak = g.peak
    if compiled is not None and compiled.peak_flops_per_s:  # the compiled kernel's MMA path (sass/seam.py)
        g = replace(g, peak=compiled.peak_flops_per_s)

    def reprice(c):
        return gemm_model.price_tile(g, c.tile, c.swap, c.split, menu, hwp, c.stream_k)

    try:
        choice, symbolic = chosen(g, lambda p: gemm_model.iter_candidates(p, menu, hwp))
        if choice is None:
            return None
        if symbolic and deferred.enabled():
            # free dims: the tile is known (chosen on the numeric copy); its sympy price, done when read
            # (a sweep prices the kernel at its points instead: estimator/pricing/deferred.py)
            return _deferred_plan("gemm", _gemm_name(g, choice), res, compiled and compiled.label,
                                  lambda: _gemm_finish(g, reprice(choice), unit, mma_flops, hw_peak, hw, res,
                                                       compiled))
        best = reprice(choice) if symbolic else choice
    except ZeroDivisionError:  # a dim that is zero at the point the tile is chosen: no tiles either
        return None
    return _gemm_finish(g, best, unit, mma_flops, hw_peak, hw, res, compiled)


def _gemm_name(g: gemm_model.Gemm, best: Any) -> str:
    # the label names a block-scaled kernel (and keeps its plan key apart from a per-tensor one's)
    return best.name + (f" scales1x{g.scale_block}" if g.scale_block else "")


def _gemm_finish(g: gemm_model.Gemm, best: Any, unit: tuple[str, str] | None, mma_flops: Any, hw_peak: float,
                 hw: HardwareDescriptor, res: Residency, compiled: SassPlan | None) -> TilePlan:
    """The plan of the GEMM's chosen candidate `best` (priced in the problem's number type)."""
    eff = hw.efficiency
    fixed = eff["launch_s"] + eff["mem_latency_s"] + sm.where(best.split > 1, eff["split_k_s"], 0)
    util = mma_flops / (best.time * hw_peak) if mma_flops is not None and unit[0] == TENSOR else None
    plan = _plan("gemm", _gemm_name(g, best), best.ctas, best.waves, best.wave_eff, util, best.time,
                 best.t_compute, best.t_dram, best.t_l2, fixed, res)
    return plan if compiled is None else replace(plan, sass=compiled.label)


# The names of a plan's terms and parts (`_plan`), in the order the limiter rule reads them.
PLAN_TERMS = ("compute", "memory", "l2", "latency", "launch")
_DEFERRED_FIELDS = ("ctas", "waves", "wave_eff", "tensor_util", "estimate_s", "limiter")


def _deferred_plan(kind: str, tile: str, res: Residency, sass: str | None, make: Callable[[], TilePlan]
                   ) -> TilePlan:
    """A plan whose kind, tile, residency and compiled kernel are known and whose priced fields are
    `make()`'s, computed when first read (estimator/pricing/deferred.py). `make()` must name the same
    tile: it prices the candidate that was chosen."""
    def full() -> TilePlan:
        plan = make()
        if (plan.kind, plan.tile, plan.sass) != (kind, tile, sass):
            raise RuntimeError(f"deferred plan {kind} {tile!r} priced as {plan.kind} {plan.tile!r}")
        return plan

    full = deferred.once(full)
    lazy = {name: deferred.Lazy(lambda name=name: getattr(full(), name)) for name in _DEFERRED_FIELDS}
    return deferred.deferred(TilePlan, kind=kind, tile=tile, **lazy,
                             terms=deferred.LazyMapping(PLAN_TERMS, lambda: full().terms),
                             resident_bytes=res.bytes, resident_bytes_bound=res.bytes_bound, sass=sass,
                             parts=deferred.LazyMapping(PLAN_TERMS, lambda: full().parts))


def _zero(x: Any) -> bool:
    """A bound dim of 0 (arrays of points hold positive dims only)."""
    return not isinstance(x, np.ndarray) and sm.numeric(x) and x == 0


def chosen(problem: Any, candidates) -> tuple[Any, bool]:
    """(the best candidate for `problem` by the rule of symmath.argmin, whether `problem` has free dims):
    on numbers the one candidate, on arrays of points each point's own (symmath.Picked). With free dims
    the choice is made on a numeric copy (every free dim at SYMBOLIC_DIM_VALUE) and priced there: the
    caller reprices the chosen candidate symbolically (now, or when read: estimator/pricing/deferred.py)."""
    fields = {k: v for k, v in vars(problem).items() if isinstance(v, sympy.Basic) and v.free_symbols}
    if not fields:
        choices, index = sm.argmin_of(candidates(problem))  # consumed as made (arrays: the losers dropped)
        return (sm.pick(choices, index) if choices else None), False
    at = {s: SYMBOLIC_DIM_VALUE for v in fields.values() for s in v.free_symbols}
    numeric = replace(problem, **{k: sm.num(v.xreplace(at)) for k, v in fields.items()})
    choices = list(candidates(numeric))
    return (choices[sm.argmin(choices)] if choices else None), True


def _plan(kind: str, tile: Any, ctas: Any, waves: Any, wave_eff: Any, util: Any, time: Any,
          compute: Any, dram: Any, l2: Any, fixed: Any, res: Residency, overhead: Any = 0.0,
          latency: Any = 0.0) -> TilePlan:
    """A plan whose time is fixed + overhead + max(compute, dram, l2, latency), every tile model's shape:
    `overhead` the per-CTA costs outside the max, `latency` a latency-bound term inside it (0 for most).
    Its limiter (estimator/pricing/units.py) is the largest of the parts: compute, memory (DRAM), l2,
    latency (overhead + latency) and launch (the fixed part); its terms' max is the time."""
    parts = {"compute": compute, "memory": dram, "l2": l2, "latency": overhead + latency, "launch": fixed}
    base = fixed + overhead
    terms = {"compute": base + compute, "memory": base + dram, "l2": base + l2, "latency": base + latency,
             "launch": fixed}
    # with free dims the limiter is decided by sympy comparisons: done when read (a sweep names each
    # point's limiter from its arrays instead)
    limiter = (deferred.Lazy(lambda: dominant(parts))
               if deferred.enabled() and any(sm.is_sym(v) for v in parts.values()) else dominant(parts))
    return deferred.deferred(TilePlan, kind=kind, tile=tile, ctas=ctas, waves=waves, wave_eff=wave_eff,
                             tensor_util=util, estimate_s=time, terms=terms, limiter=limiter,
                             resident_bytes=res.bytes, resident_bytes_bound=res.bytes_bound, sass=None,
                             parts=parts)


def where_plan(cond: np.ndarray, a: TilePlan, b: TilePlan) -> TilePlan:
    """Per point `a` where `cond` else `b` (plans of one kernel at arrays of points)."""
    def w(x: Any, y: Any) -> Any:
        return None if x is None and y is None else np.where(cond, x, y)

    return replace(a, tile=w(a.tile, b.tile), ctas=w(a.ctas, b.ctas), waves=w(a.waves, b.waves),
                   wave_eff=w(a.wave_eff, b.wave_eff), tensor_util=w(a.tensor_util, b.tensor_util),
                   estimate_s=w(a.estimate_s, b.estimate_s), limiter=w(a.limiter, b.limiter),
                   terms={k: w(v, b.terms[k]) for k, v in a.terms.items()},
                   parts={k: w(v, b.parts[k]) for k, v in a.parts.items()})


# ---- attention ------------------------------------------------------------------------------------

def attention_problem(core, q_bytes: Any, kv_bytes: Any, unit: tuple[str, str], dram_bytes: Any,
                      resident: Any, hw: HardwareDescriptor) -> attn_model.Attn | None:
    """The tile model's view of an attention kernel (see gemm_problem)."""
    peak = _peak(hw, *unit)
    if peak is None:
        return None
    folded = _always(core.heads, 1)  # a fused group: batch x heads folded into `batch`
    heads = core.batch if folded else core.heads
    batch = 1 if folded else core.batch
    kv_heads = heads if folded or core.kv_heads is None else core.kv_heads
    decode = is_decode(core.seq_q, core.seq_kv)
    if isinstance(decode, np.ndarray):  # rows of one table (calibration/tables.py) are all of one kind;
        decode = bool(decode.all())  # attention_plan prices points of both kinds per kind
    n = sm.num
    dram = dram_bytes - resident
    if not isinstance(dram, np.ndarray):
        dram = n(sympy.sympify(dram))
    seq_kv, causal = core.seq_kv, core.causal
    if core.window >= 0 and not decode:
        # NB: a sliding window (issue 13) visits a band of window + 1 keys per query; a Q tile's band
        # spans up to WINDOW_TILE_ROWS more, priced as a non-causal pass over that many keys.
        seq_kv, causal = sm.minimum(core.seq_kv, core.window + 1 + WINDOW_TILE_ROWS), False
    return attn_model.Attn(n(batch), n(heads), n(kv_heads), n(core.seq_q), n(seq_kv), n(core.dk),
                           n(core.dv), causal, q_bytes, kv_bytes, peak, hw.efficiency[unit[0]],
                           hw.sfu_ops_per_s, hw.cuda_flops_per_s["fp32"] / 2, decode, dram)


def is_decode(seq_q: Any, seq_kv: Any) -> Any:
    """Decode is decided by the shapes, as a library's dispatch does, wherever K/V come from (a past
    input, a Concat, a plain input): at most DECODE_MAX_Q query rows over more keys than that. A free
    seq_q is a prefill; a free seq_kv counts as longer (its value 1 is a build of its own in sweeps).
    Elementwise on arrays (a sweep's points)."""
    q, kv = sm.num(sympy.sympify(seq_q) if not isinstance(seq_q, np.ndarray) else seq_q), seq_kv
    if isinstance(q, np.ndarray) or isinstance(kv, np.ndarray):
        return (np.asarray(q) <= DECODE_MAX_Q) & (np.asarray(kv) > np.asarray(q))
    if sm.is_sym(q) or q > DECODE_MAX_Q:
        return False
    longer = sympy.sympify(kv - q).is_positive
    return longer is not False


def _always(x: Any, value: int) -> bool:
    """x provably equals value (every element, for an array)."""
    if isinstance(x, np.ndarray):
        return bool(np.all(x == value))
    return bool(sympy.sympify(x) == value)


def _attention_plan(found, work: Work, hw: HardwareDescriptor, hwp: gemm_model.Hw, menu: FamilyMenu,
                    res: Residency, unit: tuple[str, str] | None = None) -> TilePlan | None:
    core, q_bytes, kv_bytes = found
    unit = unit or _mma_unit(work)
    if unit is None:
        return None
    # fp32 attention runs the same tiled kernel with CUDA-core FMAs for its two products (the unit's
    # peak and `cuda` efficiency); tf32/bf16/fp16/fp8 on tensor cores.
    a = attention_problem(core, q_bytes, kv_bytes, unit, work.dram_bytes, res.bytes, hw)
    if a is None:
        return None
    decode = is_decode(core.seq_q, core.seq_kv)
    if isinstance(decode, np.ndarray):  # points of a sweep: decode and prefill each where the shapes say
        decode = np.broadcast_to(decode, np.shape(a.dram_bytes))
        if decode.any() and not decode.all():
            return where_plan(decode, attention_plan(replace(a, decode=True), unit, work.flops[unit], hw, hwp,
                                                     menu, res),
                              attention_plan(replace(a, decode=False), unit, work.flops[unit], hw, hwp, menu,
                                             res))
    return attention_plan(a, unit, work.flops[unit], hw, hwp, menu, res)


def attention_plan(a: attn_model.Attn, unit: tuple[str, str] | None, mma_flops: Any, hw: HardwareDescriptor,
                   hwp: gemm_model.Hw, menu: FamilyMenu, res: Residency) -> TilePlan:
    """The plan of the tile model's attention `a` (one kind: prefill or decode) on any number type; a
    latent (MLA) decode runs the family's MLA kernel (estimator/pricing/mla.py)."""
    if a.decode and mla.is_latent(a.kv_heads, a.dk, a.dv):
        k = mla.decode_kernel(menu.family, hw.efficiency)
        if k is not None:
            return _mla_decode_plan(a, k, unit, mma_flops, hw, res)
    choice, symbolic = chosen(a, lambda p: attn_model.candidates(p, menu, hwp))

    def reprice(c):
        return attn_model.candidate(a, menu, hwp, c)

    if symbolic and choice is not None and not a.decode and deferred.enabled():
        # a prefill tile chosen on the numeric copy names the candidate repriced (attention.candidate):
        # its sympy price, done when read (see _gemm_plan)
        return _deferred_plan("attention", choice.name, res, None,
                              lambda: _attention_finish(a, reprice(choice), unit, mma_flops, hw, hwp, res))
    best = reprice(choice) if symbolic and choice is not None else choice
    return _attention_finish(a, best, unit, mma_flops, hw, hwp, res)


def _attention_finish(a: attn_model.Attn, best: Any, unit: tuple[str, str] | None, mma_flops: Any,
                      hw: HardwareDescriptor, hwp: gemm_model.Hw, res: Residency) -> TilePlan:
    """The plan of the attention's chosen candidate `best`."""
    eff = hw.efficiency
    fixed = attn_model.fixed_s(hwp, a.decode) + attn_model.combine_s(eff, best.split)
    util = mma_flops / (best.time * a.peak) if mma_flops is not None and unit[0] == TENSOR else None
    # the per-CTA overhead is outside the max (attention.py's estimate): latency, not compute; so is a
    # decode chain that is mostly CTA costs and load latency (chain_latency)
    chain = best.t_compute - best.t_overhead
    lat = best.chain_latency
    if isinstance(lat, sympy.Basic):  # free dims: decided as the tile is chosen (SYMBOLIC_DIM_VALUE)
        lat = bool(lat.xreplace({s: SYMBOLIC_DIM_VALUE for s in lat.free_symbols}))
    compute, latency = (sm.where(lat, 0.0, chain), sm.where(lat, chain, 0.0)) if not _is_false(lat) \
        else (chain, 0.0)
    return _plan("attention", best.name, best.ctas, best.waves, best.wave_eff, util, best.time,
                 compute, best.t_dram, best.t_l2, fixed, res, best.t_overhead, latency)


def _is_false(x: Any) -> bool:
    return not isinstance(x, np.ndarray) and not x


def _mla_decode_plan(a: attn_model.Attn, k: mla.MlaDecodeKernel, unit: tuple[str, str] | None, mma_flops: Any,
                     hw: HardwareDescriptor, res: Residency) -> TilePlan:
    peaks = {d: hw.tensor_flops_per_s[d] for d in ("bf16", "fp8") if d in hw.tensor_flops_per_s}
    if "fp8" not in peaks:
        k = replace(k, fp8_mma=False)
    t = mla.decode_time(a.batch, a.heads, a.seq_kv, a.dk, a.dv, a.q_bytes, a.kv_bytes, a.dram_bytes,
                        hw.sm_count, hw.dram_bytes_per_s, peaks, dict(hw.efficiency), k)
    util = mma_flops / (t.time * peaks[t.mma_dtype]) if mma_flops is not None and unit[0] == TENSOR else None
    # the latent pages stream from DRAM (no L2 term of their own: pricing/mla.py)
    return _plan("attention", t.name, t.ctas, t.waves, t.wave_eff, util, t.time, t.compute, t.memory, 0.0,
                 t.fixed, res)


# ---- MoE ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MoeProblem:
    """What the MoE plan reads off a fused grouped-GEMM MoE kernel (passes/fuse_moe.py): its routing
    (experts, top_k, and the routed tokens, an expression of the free dims), one expert's [K, N] GEMM, the
    weights' bytes per element, whether they are stored block-scaled (MXFP4: weight-only), the MMA unit."""

    experts: Any
    top_k: Any
    tokens: Any
    n: Any
    k: Any
    wbytes: Any
    stored: bool
    unit: tuple[str, str]


def moe_problem(graph: Graph, kernel, hw: HardwareDescriptor) -> MoeProblem | None:
    """The kernel's MoeProblem, or None (the streaming model prices it) when the routing is unknown, the
    family's engine kernel is not listed (estimator/pricing/mla_moe.yaml) or the descriptor has no MoE
    constants."""
    if kernel.kind != "moe":
        return None
    info = graph.node(kernel.name).attrs.get("moe")
    unit = _mma_unit(kernel.work)
    if (not info or info.get("top_k") is None or unit is None or unit[0] != TENSOR
            or not mla.family_kernels(hw.family).get("moe_grouped_gemm")
            or not all(k in hw.efficiency for k in moe.MOE_KEYS)):
        return None
    node = graph.node(kernel.name)
    w = graph.tensors.get(info["weights"][0])
    out = graph.tensors.get(node.outputs[0]) if node.outputs else None
    if w is None or out is None or w.shape is None or out.shape is None or len(w.shape) != 3:
        return None
    experts, top_k, tokens = (sympy.sympify(info[k]) for k in ("experts", "top_k", "tokens"))
    n = out.shape[-1]
    return MoeProblem(experts, top_k, tokens, n, w.numel / (w.shape[0] * n), traffic(w) / w.numel,
                      w.dtype in STORED_FORMATS, unit)


def _moe_plan(graph: Graph, kernel, hw: HardwareDescriptor, res: Residency) -> TilePlan | None:
    """The MoE plan of a kernel as its graph holds it (symbolic in the free dims, so sweeps evaluate the
    same formula); None: no MoeProblem."""
    p = moe_problem(graph, kernel, hw)
    if p is None:
        return None
    return moe_plan(p, p.tokens, kernel.work.dram_bytes, kernel.work.flops[p.unit], hw, res)


def moe_plan(p: MoeProblem, tokens: Any, dram_bytes: Any, mma_flops: Any, hw: HardwareDescriptor,
             res: Residency) -> TilePlan:
    """A fused grouped-GEMM MoE kernel priced by moe.grouped_gemm: tokens x top_k routed rows over the
    expected active experts (uniform routing, estimator/cost/moe.py), spread evenly over them and padded
    to the M tile; every local expert pays its bookkeeping. `tokens`, `dram_bytes` (the kernel's Work's)
    and `mma_flops` (its FLOPs on the MMA unit) in any one number type: sympy (a graph's kernel), or
    arrays of points (estimator/pricing/points.py, the serving steps)."""
    experts, top_k, n, k, wbytes = p.experts, p.top_k, p.n, p.k, p.wbytes
    if isinstance(tokens, np.ndarray) or isinstance(dram_bytes, np.ndarray):
        # arrays of points: the problem's sympy numbers as python numbers (a sympy number would turn the
        # arrays into object arrays), the expected active experts by the same formula on arrays
        experts, top_k, n, k, wbytes = (sm.num(x) for x in (experts, top_k, n, k, wbytes))
        active = experts if experts == top_k else moe.active_uniform(tokens, top_k, experts)
    else:
        active = expected_active_experts(experts, top_k, tokens)
    # stored block-scaled experts (MXFP4) run weight-only (W4A16: the MMA at the activations' dtype) with
    # the small M tiles vLLM's Marlin MoE picks from the rows per expert; other dtypes the 128-row tile
    tile_m = moe.weight_only_tile_m(tokens * top_k / experts) if p.stored else moe.TILE_M
    row_tiles = active * sm.ceil(tokens * top_k / (active * tile_m))
    weights = active * n * k * wbytes
    act = sm.maximum(dram_bytes - weights, 0)
    peak = unit_peak(hw, *p.unit)
    compute, memory, fixed, time = moe.grouped_gemm(row_tiles, active, experts, n, k, wbytes, peak,
                                                    hw.sm_count, hw.dram_bytes_per_s, dict(hw.efficiency),
                                                    out_bytes=act, tile_m=tile_m)
    util = mma_flops / (time * peak)
    ctas = row_tiles * sm.ceil_div(n, moe.TILE_N)
    # the experts' weights stream from DRAM (no L2 term of their own: pricing/moe.py)
    tile = f"{int(tile_m)}" if sm.numeric(tile_m) and np.ndim(tile_m) == 0 else "m"
    return _plan("gemm", f"grouped {tile}x{moe.TILE_N} moe", ctas, None, None, util, time, compute,
                 memory, 0.0, fixed, res)


# ---- everything else -------------------------------------------------------------------------------

def stream_time(flops: Mapping, dram_bytes: Any, resident: Any, hw: HardwareDescriptor) -> tuple:
    """(compute, dram, l2, fixed, estimate) of the streaming model for Work-like flops and bytes."""
    eff = hw.efficiency
    times = [f / (unit_peak(hw, u, d) * eff[CUDA if u == ALU else u]) for (u, d), f in flops.items()]
    compute = sm.maximum(*times) if len(times) > 1 else (times[0] if times else 0)
    dram = (dram_bytes - resident) / (hw.dram_bytes_per_s * eff["dram"])
    l2 = dram_bytes / (effective_l2_bytes_per_s(hw) * eff["l2"])
    # a streaming kernel (elementwise, reduction, quantization) takes at least min_kernel_s, the floor of a
    # kernel launched through a framework, even where the GEMMs' fitted fixed cost is less: B200's GEMMs
    # finish a tiny shape in 1.8 us (launch_s + mem_latency_s 2.05 us), but its per-tensor fp8 path of
    # four small kernels and a GEMM floors at 12.4 us, as H100's (12.2 us) does
    fixed = max(eff["launch_s"] + eff["mem_latency_s"], eff.get("min_kernel_s", 0.0))
    return compute, dram, l2, fixed, fixed + sm.maximum(compute, dram, l2)


def stream_plan(work: Work, hw: HardwareDescriptor, res: Residency, rounds: Any = None) -> TilePlan:
    """The streaming model; `rounds` of a latency-bound grid-stride loop (a block quantization kernel,
    estimator/pricing/quant.py) bound its memory term from below: the rounds after the first (whose load
    is the fixed part's mem_latency_s) at `block_quant_round_s` each."""
    compute, dram, l2, fixed, time = stream_time(work.flops, work.dram_bytes, res.bytes, hw)
    latency = 0.0
    if rounds is not None and "block_quant_round_s" in hw.efficiency:
        # the rounds' latency is a term of the max, beside compute and memory
        latency = (rounds - 1) * hw.efficiency["block_quant_round_s"]
        time = fixed + sm.maximum(compute, dram, l2, latency)
    return _plan("stream", None, None, None, None, None, time, compute, dram, l2, fixed, res, latency=latency)
