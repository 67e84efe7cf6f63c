"""A lowered graph's kernels priced at arrays of points: the pricing core (estimator/pricing/plan.py's
plans and estimator/pricing/price.py's `price`) run on numpy arrays of the free dims' values, so that
every point is priced as `--dim` prices it. Nothing here prices: it evaluates a kernel's problem (GEMM M,
N, K, batch, DRAM bytes; attention batch, heads, lengths; its Work) at the points and hands it to the
core, which is written once over numbers, arrays and sympy expressions (estimator/symmath.py).

A kernel whose dims are free keeps, in its symbolic plan, the tile chosen as if every free dim were
`SYMBOLIC_DIM_VALUE`; that formula is exact only where that tile stays the best. At arrays each point
takes its own best candidate (symmath.argmin over the family's menu), attention its own kind (decode or
prefill, `plan.is_decode`).

`plan_gemms` plans many GEMMs at their points with one walk of the menu per group of alike GEMMs (the
serving steps' speed: estimator/serve/step_points.py).

NB: residency (--warm-inputs) is not modelled here; kernels priced with L2-resident reads, and
kernels of a Result without tile plans, get no point pricer (their symbolic formula is used).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import sympy

from estimator import symmath as sm
from estimator.ir import Graph, dim
from estimator.pricing import gemm as gemm_model
from estimator.pricing import plan as tp
from estimator.pricing import quant
from estimator.pricing.menu import menu_for
from estimator.pricing.price import Timing, price
from estimator.pricing.problem import attention_of_kernel, gemm_of_kernel
from estimator.pricing.residency import Residency
from hwdesc import HardwareDescriptor

NO_RESIDENCY = Residency({}, {})


@dataclass(frozen=True)
class PointWork:
    """A kernel's Work at arrays of points (what `price` and the plans read of a Work)."""

    flops: Mapping[tuple[str, str], np.ndarray]
    dram_bytes: np.ndarray
    comm: None = None


class Lambdas:
    """Sympy expressions in the free dims evaluated on arrays (each distinct expression lambdified once)."""

    def __init__(self, free: Sequence[str]) -> None:
        self.free = tuple(free)
        self.symbols = [dim(n) for n in self.free]
        self._cache: dict[Any, Callable] = {}

    def __call__(self, expr: Any, values: Mapping[str, np.ndarray], n: int) -> Any:
        """A number stays a number; an expression of the free dims becomes a float array of length n."""
        e = sympy.sympify(expr) if not isinstance(expr, np.ndarray) else expr
        if isinstance(e, np.ndarray):
            return e
        if not e.free_symbols:
            return sm.num(e)
        fn = self._cache.get(e)
        if fn is None:
            fn = self._cache[e] = sympy.lambdify(self.symbols, e, "numpy")
        out = fn(*[values[s] for s in self.free])
        return np.broadcast_to(np.asarray(out, dtype=float), (n,)).copy()

    def array(self, expr: Any, values: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """`expr` at the points as one float per point (a number broadcast)."""
        return np.broadcast_to(np.asarray(self(expr, values, n), dtype=float), (n,))


def _subst(obj: Any, lam: Lambdas, values: Mapping[str, np.ndarray], n: int) -> Any:
    """A frozen dataclass with every sympy field on the arrays (an expression of the free dims) or a
    python number (a sympy number would turn the arrays it meets into slow object arrays)."""
    changes = {f.name: lam(getattr(obj, f.name), values, n) for f in fields(obj)
               if isinstance(getattr(obj, f.name), sympy.Basic)}
    return replace(obj, **changes) if changes else obj


class KernelPricer:
    """Prices one kernel of a lowered graph at arrays of its free dims, through the pricing core
    (`tiling=False`: no plans, the kernel is priced by `price` alone). A fused MoE kernel is priced by
    its MoE plan (plan.moe_plan) at the points, as `--dim` prices it."""

    def __init__(self, graph: Graph, kernel, hw: HardwareDescriptor, lam: Lambdas,
                 tiling: bool = True) -> None:
        self.graph, self.kernel, self.hw, self.lam = graph, kernel, hw, lam
        self.menu = menu_for(hw.family) if tiling else None
        self.hwp = tp.hw_params(hw) if self.menu is not None else None
        self.unit = tp._mma_unit(kernel.work)
        tiled = self.unit is not None and self.menu is not None
        self.gemm = gemm_of_kernel(graph, kernel) if tiled else None
        self.attention = attention_of_kernel(graph, kernel) if tiled and self.gemm is None else None
        # a fused MoE kernel: its grouped GEMM over the active experts (plan.moe_plan), as --dim prices it
        self.moe = tp.moe_problem(graph, kernel, hw) if tiled else None
        warps = self.menu.block_quant_warps_per_sm if self.menu is not None else 0
        self.rounds = quant.block_quant_rounds(graph, kernel, hw.sm_count, warps)

    @property
    def tiled(self) -> bool:
        """Whether the kernel is a GEMM or an attention the tile model plans at the points (`tile_plan`
        then gives a plan, unless the points' plan is the streaming one)."""
        return self.gemm is not None or self.attention is not None

    def work(self, values: Mapping[str, np.ndarray], n: int) -> PointWork:
        w = self.kernel.work
        return PointWork({ud: self.lam.array(f, values, n) for ud, f in w.flops.items()},
                         self.lam.array(w.dram_bytes, values, n))

    def gemm_problem(self, values: Mapping[str, np.ndarray], n: int) -> gemm_model.Gemm | None:
        """The kernel's GEMM at the points (for plan_gemms), None when it is no tiled GEMM."""
        if self.gemm is None:
            return None
        spec = _subst(self.gemm, self.lam, values, n)
        dram = self.lam.array(self.kernel.work.dram_bytes, values, n).copy()
        return tp.gemm_problem(spec, self.unit, dram, 0, False, False, self.hw, self.menu)

    def plan(self, values: Mapping[str, np.ndarray], n: int, work: PointWork | None = None,
             gemm: bool = True) -> tp.TilePlan:
        """The kernel's plan at the points (plan.plan_problem on arrays); `gemm=False`: its GEMM was
        planned already (plan_gemms found no tile), the next plans are tried."""
        work = self.work(values, n) if work is None else work
        if self.moe is not None:
            return tp.moe_plan(self.moe, self.lam.array(self.moe.tokens, values, n), work.dram_bytes,
                               work.flops[self.unit], self.hw, NO_RESIDENCY)

        def found() -> Any:
            if self.attention is None:
                return None
            core, q_bytes, kv_bytes = self.attention
            return _subst(core, self.lam, values, n), q_bytes, kv_bytes

        def rounds() -> Any:
            return None if self.rounds is None else self.lam(self.rounds, values, n)

        spec = _subst(self.gemm, self.lam, values, n) if gemm and self.gemm is not None else None
        return tp.plan_problem(lambda: spec, found, rounds, work, self.hw, self.hwp, self.menu, NO_RESIDENCY,
                               unit=self.unit)

    def tile_plan(self, values: Mapping[str, np.ndarray], n: int,
                  work: PointWork | None = None) -> tp.TilePlan | None:
        """The plan at the points where the kernel is priced by a tile (GEMM, attention), else None (a
        streaming kernel, or a MoE kernel (plan.moe_plan): its symbolic formula is exact at every point)."""
        if not self.tiled:
            return None
        plan = self.plan(values, n, work)
        return None if plan.kind == "stream" else plan

    def price(self, values: Mapping[str, np.ndarray], n: int, plan: tp.TilePlan | None = None,
              work: PointWork | None = None) -> Timing:
        """The kernel's Timing at the points: `price` of its Work there with `plan` (None: the roofline,
        or the descriptor's kernel class)."""
        work = self.work(values, n) if work is None else work
        return price(work, self.hw, plan, self.kernel.kind, self.kernel.op)


_ARRAY_FIELDS = ("batch", "m", "n", "k", "dram_bytes")


def plan_gemms(problems: Sequence[tuple[gemm_model.Gemm, int]],
               hw: HardwareDescriptor) -> list[tp.TilePlan | None]:
    """Each (GEMM at n points, n) planned as plan.gemm_plan plans it alone, the menu walked once per
    group: problems alike in everything but their arrays (batch, M, N, K, DRAM bytes: the operand and
    output bytes, the unit's peak and efficiency, L2 residency, block scales) are concatenated into one
    problem, which the elementwise tile model plans point by point exactly as each alone. None: no tile
    (the caller plans the kernel's next plan)."""
    menu, hwp = menu_for(hw.family), tp.hw_params(hw)
    groups: dict[tuple, list[int]] = {}
    for i, (g, _) in enumerate(problems):
        key = (g.a_bytes, g.b_bytes, g.c_bytes, g.peak, g.eff_unit, bool(g.a_in_l2), bool(g.b_in_l2),
               g.scale_block)
        groups.setdefault(key, []).append(i)
    out: list[tp.TilePlan | None] = [None] * len(problems)
    for idx in groups.values():
        sizes = [problems[i][1] for i in idx]
        arrays = {f: np.concatenate([np.broadcast_to(np.asarray(getattr(problems[i][0], f), dtype=float),
                                                     (problems[i][1],)) for i in idx])
                  for f in _ARRAY_FIELDS}
        joined = replace(problems[idx[0]][0], **arrays)
        plan = tp.gemm_plan(joined, None, None, hw, hwp, menu, NO_RESIDENCY)  # no tensor_util wanted
        if plan is None:
            continue
        ends = np.cumsum(sizes)
        for i, end, size in zip(idx, ends, sizes, strict=True):
            out[i] = _sliced(plan, slice(end - size, end))
    return out


def _sliced(plan: tp.TilePlan, part: slice) -> tp.TilePlan:
    """The plan of some of its points."""
    def cut(x: Any) -> Any:
        return x[part] if isinstance(x, np.ndarray) and x.ndim == 1 else x

    return replace(plan, tile=cut(plan.tile), ctas=cut(plan.ctas), waves=cut(plan.waves),
                   wave_eff=cut(plan.wave_eff), tensor_util=cut(plan.tensor_util),
                   estimate_s=cut(plan.estimate_s), limiter=cut(plan.limiter),
                   terms={k: cut(v) for k, v in plan.terms.items()},
                   parts={k: cut(v) for k, v in plan.parts.items()})


def point_pricers(result, free: Sequence[str], kernels: Sequence) -> list[KernelPricer | None]:
    """A pricer per kernel of `kernels` (of `result`) whose plan chose a tile (None for the others)."""
    if not getattr(result, "tiling", False) or result.warm_inputs:
        return [None] * len(kernels)
    lam = Lambdas(free)
    out = []
    for k in kernels:
        plan = getattr(k, "tile", None)
        if plan is None or plan.kind == "stream" or plan.resident_bytes or plan.resident_bytes_bound:
            out.append(None)
            continue
        out.append(KernelPricer(result.graph, k, result.hw, lam))
    return out
