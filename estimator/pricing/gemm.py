"""The tile-level model of one GEMM (MatMul, Gemm, FusedMatMul, implicit-GEMM convolution): the time a
well-tuned library kernel takes with a given CTA tile, and the tile it would pick.

For a CTA tile (tile_m x tile_n, k step `k_bytes` of operand per row) and a split-K factor s:

    tiles      = batch * ceil(M / tile_m) * ceil(N / tile_n)        (padding: edge tiles run whole)
    ctas       = tiles * s ;  slots = SMs * ctas_per_sm ;  waves = ceil(ctas / slots)
    iters      = ceil(ceil(K / tile_k) / s)                           (k-steps per CTA)
    t_mma      = 2 * tile_m * tile_n * tile_k / (peak_per_SM * eff_tensor)   (one CTA's k-step MMA)
    t_iter     = max(t_mma * ctas_per_sm, mem_latency_s / stages) + t_promote
                                                                      (MMA, or the load pipeline)
    t_compute  = ((waves - 1) * t_iter + t_last) * iters + waves * t_epilogue + iters * t_edge
    t_last     = max(t_mma * busiest, mem_latency_s / stages) + t_promote
                 (the last wave's CTAs spread breadth-first: busiest = ceil(leftover CTAs / SMs))
    t_epilogue = ctas_per_sm * tile_m * tile_n * c_bytes / (l2_bytes_per_s / SMs * eff_epilogue_store)
                 (C tiles stored after the mainloop; 0 for a persistent scheduler, which overlaps them)
    t_promote  = 2 * tile_m * tile_n / (cuda_fp32_per_SM * eff_block_scale)
                 (block-scaled operand on a family whose MMA takes no scales: per 128-K block, else 0)
    t_edge     = (ceil(M / rows) * rows - M) * batch * tiles_n * block_scale_oob_s  (rows: the tile's side
                 along M; a library-picked block-scaled kernel's k-step on its partial M tile, else 0)
    t_dram     = reads / (dram_bytes_per_s * eff_dram) + C / (dram_bytes_per_s * eff_dram_store)
                                                                      (operand re-reads when A + B spill L2)
    t_l2       = L2 bytes / (l2_bytes_per_s * eff_l2)                 (every CTA loads its A and B panels;
                                                                      a cluster multicasts a shared one)
    estimate   = launch_s + mem_latency_s + max(t_compute, t_dram, t_l2) [+ split_k_s when s > 1]

Blackwell (sm_100, hwdesc/tiles/blackwell.yaml) adds three mechanisms, all data in its menu: tiles over
a CTA pair (`sms: 2`, 2-CTA tcgen05 with M = 256: each SM holds half of A and of the accumulator, the
pair is one slot); TMEM columns bounding a tile and its co-resident CTAs (estimator/pricing/tmem.py);
and a persistent scheduler (`scheduler: persistent`: one CTA per slot pulling tiles from a queue, as
cluster launch control runs it), which besides every split-K offers the stream-K tail (`_stream_k`):
the last wave's leftover tiles spread by K over every slot instead of leaving slots idle. Hopper,
Ampere and sm_120 menus keep `waves` (the formula above, as fitted on the H100 tables).

A block-scaled GEMM whose family names its library's kernel (`block_scaled.tiles` and `pick`: Hopper's
DeepGEMM) is priced on that kernel's one tile, the one the library sets from the shape
(estimator/pricing/pick.py), with that kernel's costs (`_edge`, `_straddles`, `_store_key`). On sm_100
(`block_scaled.promote: false`: tcgen05.mma applies the 1 x 16 NVFP4 scales itself) the block-scaled
kernel is TensorRT-LLM's CUTLASS one: its own tiles, no split-K, no stream-K tail, a k-step no shorter
than `block_scale_step_s` (_step_floor: t_load = max(mem_latency_s / stages, block_scale_step_s)) and a
fixed `block_scale_fill_s` (_block_fill) added to the estimate.

`mem_latency_s` is the pipeline fill (the first k-step's load) and, divided by the stage count, the
fastest a CTA can stream operands (Little's law: `stages` loads in flight); it is what makes a GEMM with
few CTAs slow although the machine's bandwidth is idle, and split-K the cure. Swap-AB (putting the
small activation dim on the MMA's N side, as cuBLAS and TensorRT-LLM do for small M) is tried for every
tile. Split-K writes fp32 partials and reads them back (DRAM bytes) and pays `split_k_s` for the
reduction. Every number above is a sympy expression when a dim is free (then the tile is chosen by the rule
in `estimator/pricing/plan.py`), a float for one bound kernel, or a numpy array (calibration/tables.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from estimator import symmath as sm
from estimator.pricing import pick
from estimator.pricing import tmem as tmem_model
from estimator.pricing.menu import FamilyMenu, GemmTile

FP32_BYTES = 4  # split-K partial sums are fp32


@dataclass(frozen=True)
class Gemm:
    """One GEMM as the tile model sees it: C[batch, M, N] = A[batch, M, K] . B[batch, K, N].
    Bytes per element include block-scale factors (NVFP4: + 1/16 byte). `a_in_l2` / `b_in_l2`: the
    operand is resident in L2 when the kernel starts (read from L2, not DRAM)."""

    batch: Any
    m: Any
    n: Any
    k: Any
    a_bytes: float
    b_bytes: float
    c_bytes: float
    peak: float  # FLOP/s of the unit the MMA runs on (whole GPU)
    eff_unit: float  # achievable fraction of that peak (hw.efficiency[unit])
    dram_bytes: Any = 0  # the kernel's minimum DRAM traffic: Work.dram_bytes less its L2-resident reads
    a_in_l2: Any = False
    b_in_l2: Any = False
    scale_block: int = 0  # K elements per scale of a block-scaled operand (0: none)


@dataclass(frozen=True)
class Hw:
    """The hardware figures the tile model reads (from a HardwareDescriptor, see plan.hw_params)."""

    sm_count: int
    dram_bytes_per_s: float
    l2_bytes_per_s: float
    l2_bytes: float
    smem_bytes_per_sm: float
    eff: dict = field(default_factory=dict)  # efficiency constants (hw.efficiency)
    cuda_flops_per_s: float = 0.0  # fp32 CUDA-core peak, whole GPU (block-scale promotion)
    # a two-die L2 (estimator/pricing/l2.py): the share of L2 lines homed in a far partition, (P - 1) / P,
    # and the die-to-die link's rate (descriptor figure, both directions together); 0 on one die
    l2_far_share: float = 0.0
    l2_link_bytes_per_s: float = 0.0


@dataclass(frozen=True)
class Choice:
    """One (tile, split) candidate priced. Fields are numbers, arrays or sympy expressions."""

    tile: GemmTile
    swap: bool
    split: int
    ctas_per_sm: int
    stages: int
    tiles: Any
    ctas: Any
    waves: Any
    wave_eff: Any
    t_compute: Any
    t_dram: Any
    t_l2: Any
    dram_extra: Any  # DRAM bytes beyond each operand read once (re-reads, split-K partials)
    l2_bytes: Any
    time: Any
    tile_k_elems: int = 64
    stream_k: bool = False  # persistent scheduler: the last wave's tiles spread over every slot

    @property
    def name(self) -> str:
        t = self.tile
        rows, cols = (t.n, t.m) if self.swap else (t.m, t.n)
        label = f"{rows}x{cols}x{self.tile_k_elems}"
        if self.swap:
            label += " swapAB"
        if self.split > 1:
            label += f" splitK{self.split}"
        if self.stream_k:
            label += " streamK"
        return label


def _data_bytes(size: float) -> float:
    """An operand's element size without its block-scale share: the power of two at or below `size`."""
    return 2.0 ** math.floor(math.log2(size))


def occupancy(tile: GemmTile, menu: FamilyMenu, hw: Hw, a_bytes: float, b_bytes: float,
              c_bytes: float) -> tuple[int, int, int] | None:
    """(ctas_per_sm, stages, tile_k) of `tile` for these operand sizes, or None when even `min_stages`
    stages do not fit in shared memory (or its accumulator not in TMEM). tile_k = k_bytes / operand
    bytes (bf16: 64, fp8: 128). Accumulators bound the CTAs: registers (`accumulator_bytes_per_sm` of
    fp32), or on a tcgen05 family TMEM columns (estimator/pricing/tmem.py)."""
    # K per stage counts the data, not its block scales (NVFP4: 0.5 + 1/16 B is 256 elements per 128 B)
    tile_k = max(8, int(menu.gemm_k_bytes / _data_bytes(max(a_bytes, b_bytes))))
    # a tile spanning `sms` SMs (Blackwell CTA pair) keeps 1/sms of its operands and accumulator per SM
    stage = (tile.m * a_bytes + tile.n * b_bytes) * tile_k / tile.sms
    epilogue = min(tile.m * tile.n * c_bytes / tile.sms, menu.epilogue_smem_bytes)
    smem = hw.smem_bytes_per_sm - menu.smem_reserved_bytes
    by_smem = int(smem // (menu.min_stages * stage + epilogue))
    if menu.tmem is not None:
        by_regs = tmem_model.ctas_per_sm(tile, menu.tmem)
    else:
        by_regs = int(menu.accumulator_bytes_per_sm // (tile.m * tile.n * FP32_BYTES / tile.sms))
    ctas = min(tile.max_ctas_per_sm, by_smem, by_regs)
    if ctas < 1:
        return None
    stages = min(menu.max_stages, int((smem / ctas - epilogue) // stage))
    return ctas, stages, tile_k


@dataclass(frozen=True)
class _Fixed:
    """What a GEMM's DRAM side costs whatever the candidate, computed once for all of them (with arrays
    of points every operation counts: a sweep prices ~1000 candidates a kernel)."""

    a_total: Any  # A's bytes, read once (and B's)
    b_total: Any
    fits: Any  # A and B fit in the usable L2 (None: free dims, assumed to fit)
    all_fit: bool  # ... at every point
    no_extra: Any  # the re-reads where all fit: 0 in the operands' number type
    dram_base: Any  # the DRAM bytes at the read rate (Work's, less C where C is stored at its own rate)
    dram_rate: float  # bytes per second of the reads
    t_store: Any  # C's store time at its own rate, None where the descriptor has none
    t_dram0: Any  # t_dram with no extra bytes


def _fixed(g: Gemm, menu: FamilyMenu | None, hw: Hw) -> _Fixed:
    """The GEMM's _Fixed (`menu` None: only the L2 figures are wanted, the DRAM ones left None)."""
    a_total = g.batch * g.m * g.k * g.a_bytes
    b_total = g.batch * g.n * g.k * g.b_bytes
    fits = None
    if sm.numeric(a_total + b_total):
        fits = a_total + b_total <= hw.l2_bytes * hw.eff["l2_resident"]
    all_fit = fits is not None and bool(np.all(fits))
    # the arrays' re-reads are a zero beside them (the same value as the zero array 0 * a_total)
    no_extra = 0.0 if isinstance(a_total, np.ndarray) else 0 * a_total
    if menu is None:
        return _Fixed(a_total, b_total, fits, all_fit, no_extra, None, 0.0, None, None)
    store_key = _store_key(g, menu)
    bw = hw.dram_bytes_per_s
    if store_key not in hw.eff:
        store_key = "dram_store"
    if store_key not in hw.eff:
        base, t_store = g.dram_bytes, None
    else:
        store = g.batch * g.m * g.n * g.c_bytes
        base, t_store = g.dram_bytes - store, store / (bw * hw.eff[store_key])
    rate = bw * hw.eff["dram"]
    f = _Fixed(a_total, b_total, fits, all_fit, no_extra, base, rate, t_store, None)
    return replace(f, t_dram0=_t_dram(f, 0))


# Rasterization swizzles of the tile scheduler (CUTLASS sm90 `max_swizzle_size`, raster along M or N):
# a wave's CTAs cover a block of `s` tile rows (or columns) by as many columns (rows) as fill the wave.
RASTER_SWIZZLES = (1, 2, 4, 8)


def _dram_extra(g: Gemm, rows: int, cols: int, tiles_m: Any, tiles_n: Any, slots: int, hw: Hw,
                fixed: _Fixed | None = None) -> Any:
    """DRAM bytes re-read beyond each operand once. While A and B fit in the usable L2 nothing is
    re-read; past it the cheaper of two L2 reuses (the cache keeps whichever the access stream gives):
    panels: the kernel walks the output in panels of P tile rows whose A rows stay in half the L2, B
      streamed once per panel (or symmetrically A per column panel);
    waves (`_wave_rereads`): the CTAs of one wave run their K loops in lockstep, so each k-slab of the
      wave's A rows and B columns is fetched once and shared through L2, whatever K; an operand is read
      again for every wave that covers it.
    `fixed`: the GEMM's candidate-free figures (_fixed), made here when not given.
    NB: an operand resident in L2 is charged no re-reads."""
    f = _fixed(g, None, hw) if fixed is None else fixed
    if f.fits is None:
        return 0  # NB: with free dims the operands are assumed to fit (no re-reads)
    if f.all_fit:  # nothing to re-read at any point (the common case: skip the raster search)
        return f.no_extra
    a_total, b_total = f.a_total, f.b_total
    half = hw.l2_bytes * hw.eff["l2_resident"] / 2
    panel_rows = sm.maximum(1, sm.minimum(tiles_m, sm.floor_div(half, sm.maximum(1, rows * g.k * g.a_bytes))))
    panel_cols = sm.maximum(1, sm.minimum(tiles_n, sm.floor_div(half, sm.maximum(1, cols * g.k * g.b_bytes))))
    rereads_b = _times(b_total * (sm.ceil(tiles_m / panel_rows) - 1), 1 - g.b_in_l2)
    rereads_a = _times(a_total * (sm.ceil(tiles_n / panel_cols) - 1), 1 - g.a_in_l2)
    extra = sm.minimum(rereads_a, rereads_b, _wave_rereads(g, a_total, b_total, tiles_m, tiles_n, slots))
    return sm.where(f.fits, 0 * extra, extra)


def _times(x: Any, factor: Any) -> Any:
    """`x * factor`, skipped where `factor` is the number 1 (the same value: an operand not in L2)."""
    return x if isinstance(factor, (int, float)) and factor == 1 else x * factor


def _wave_rereads(g: Gemm, a_total: Any, b_total: Any, tiles_m: Any, tiles_n: Any, slots: int) -> Any:
    """Re-reads when each wave fetches its own A rows and B columns once (see _dram_extra): a wave of
    `slots` CTAs rastered with swizzle s covers r = max(s, slots / tiles_n) tile rows (at most tiles_m)
    by c = slots / r columns (at most tiles_n), or the transpose; A is then read ceil(tiles_n / c)
    times and B ceil(tiles_m / r) times. The best swizzle of either raster order."""
    # rows of the swizzled dim a wave needs whatever the swizzle: ceil(slots / far), once per raster order
    fill = {True: sm.ceil_div(slots, tiles_n), False: sm.ceil_div(slots, tiles_m)}
    best, seen = None, set()
    for s in RASTER_SWIZZLES:
        for along_n in (True, False):
            far, near = (tiles_n, tiles_m) if along_n else (tiles_m, tiles_n)
            wide = sm.maximum(s, fill[along_n])
            if type(wide) in (int, float):  # a swizzle below the fill: the same raster as one before
                if (along_n, wide) in seen:
                    continue
                seen.add((along_n, wide))
            r = sm.minimum(near, wide)  # the swizzled dim's extent
            c = sm.minimum(far, sm.ceil_div(slots, r))
            rows_per_wave, cols_per_wave = (r, c) if along_n else (c, r)
            # a_total * (ceil(tiles_n / cols_per_wave) - 1) * (1 - a_in_l2) + the same of B
            reads_a = _into(_into(sm.ceil_div(tiles_n, cols_per_wave), 1, np.subtract), a_total, np.multiply)
            reads_b = _into(_into(sm.ceil_div(tiles_m, rows_per_wave), 1, np.subtract), b_total, np.multiply)
            extra = _into(_times(reads_a, 1 - g.a_in_l2), _times(reads_b, 1 - g.b_in_l2), np.add)
            best = extra if best is None else _into(best, extra, np.minimum)
    return best


@dataclass(frozen=True)
class _Oriented:
    """What a (tile, orientation) costs whatever the split-K: computed once for all splits."""

    tile: GemmTile
    swap: bool
    cpsm: int
    stages: int
    tile_k: int
    tiles: Any
    slots: int
    k_steps: Any
    t_iter: Any
    t_mma_one: Any  # one CTA alone on its SM(s): the MMA time of a k-step
    t_load: Any  # the load pipeline's k-step time (mem_latency_s / stages)
    t_epilogue: float  # a wave's epilogues on one SM (_epilogue x ctas_per_sm)
    t_promote: float  # a k-step's block-scale promotion (_promotion), after its MMAs
    dram_extra: Any
    l2: Any
    t_l2: Any
    t_edge: Any = 0.0  # a k-step's extra time on the partial M tile (_edge), once per kernel
    fixed: _Fixed | None = None  # the GEMM's candidate-free DRAM figures (_fixed)
    menu_scaled: bool = False  # the menu's block-scaled kernel takes the scales in its MMA (_block_fill)


def _oriented(g: Gemm, tile: GemmTile, swap: bool, menu: FamilyMenu, hw: Hw,
              fixed: _Fixed | None = None) -> _Oriented | None:
    occ = occupancy(tile, menu, hw, g.a_bytes, g.b_bytes, g.c_bytes)
    if occ is None:
        return None
    cpsm, stages, tile_k = occ
    eff = hw.eff
    rows, cols = (tile.n, tile.m) if swap else (tile.m, tile.n)
    if _straddles(g, cols, menu) and menu.block_scaled.straddle_max_stages:  # the library's shorter pipeline
        stages = min(stages, menu.block_scaled.straddle_max_stages)
    tiles_m = sm.ceil_div(g.m, rows)
    tiles_n = sm.ceil_div(g.n, cols)
    per_sm_peak = g.peak * g.eff_unit / hw.sm_count
    t_mma_one = 2 * rows * cols * tile_k / (per_sm_peak * tile.sms)
    t_load = max(eff["mem_latency_s"] / stages, _step_floor(g, menu, hw))
    t_promote = _promotion(g, rows, cols, tile_k, menu, hw)
    t_iter = sm.maximum(t_mma_one * cpsm, t_load) + t_promote
    k_steps = sm.ceil_div(g.k, tile_k)
    # TMA multicast: the CTAs of a cluster along N share one load of their A tile (and along M of B).
    cl_rows, cl_cols = (tile.cluster_n, tile.cluster_m) if swap else (tile.cluster_m, tile.cluster_n)
    per_step = rows * g.a_bytes / cl_cols + cols * g.b_bytes / cl_rows
    l2 = g.batch * k_steps * tile_k * tiles_m * tiles_n * per_step + g.batch * g.m * g.n * g.c_bytes
    slots = (hw.sm_count // tile.sms) * cpsm
    # a persistent kernel's epilogue runs under the next tile's mainloop (a second accumulator buffer)
    epilogue = cpsm * _epilogue(rows, cols, g.c_bytes, hw) if menu.scheduler == "waves" else 0.0
    fixed = _fixed(g, menu, hw) if fixed is None else fixed
    return _Oriented(tile, swap, cpsm, stages, tile_k, g.batch * tiles_m * tiles_n, slots, k_steps, t_iter,
                     t_mma_one, t_load, epilogue, t_promote,
                     _dram_extra(g, rows, cols, tiles_m, tiles_n, slots, hw, fixed), l2,
                     l2 / (hw.l2_bytes_per_s * eff["l2"]),
                     t_edge=_edge(g, lambda: (tiles_m * rows - g.m) * tiles_n * g.batch, menu, hw),
                     fixed=fixed,
                     menu_scaled=menu.block_scaled is not None and not menu.block_scaled.promote)


def _split(g: Gemm, o: _Oriented, split: int, hw: Hw) -> Choice:
    eff = hw.eff
    ctas = o.tiles * split
    waves = _fresh_ceil(ctas / o.slots)
    iters = sm.ceil(o.k_steps / split)
    earlier = waves - 1  # the full waves before the last
    # t_compute = ((waves - 1) * t_iter + t_last) * iters + waves * t_epilogue [+ iters * t_edge]
    t_compute = _into(earlier * o.t_iter, _last_round(o, ctas, earlier), np.add)
    t_compute = _into(t_compute, iters, np.multiply)
    if not _is_zero(o.t_epilogue):  # a persistent kernel's (0.0) adds nothing
        t_compute = _into(t_compute, waves * o.t_epilogue, np.add)
    if not _is_zero(o.t_edge):
        t_compute = _into(t_compute, iters * o.t_edge, np.add)
    dram_extra = o.dram_extra
    if split > 1:  # fp32 partials written by every split and read back by the reduction
        partials = _into(_into(2 * split * g.batch * g.m, g.n, np.multiply), FP32_BYTES, np.multiply)
        dram_extra = _into(partials, dram_extra, np.add)  # dram_extra + 2 * split * batch * M * N * 4
    t_dram = _t_dram(o.fixed, dram_extra)
    # launch_s + mem_latency_s [+ block_scale_fill_s] + max(t_compute, t_dram, t_l2) [+ split_k_s]
    fixed = eff["launch_s"] + eff["mem_latency_s"] + _block_fill(g, o.menu_scaled, hw)
    time = _into(sm.maximum(t_compute, t_dram, o.t_l2), fixed, np.add)
    if split > 1:
        time = _into(time, eff["split_k_s"], np.add)
    return Choice(o.tile, o.swap, split, o.cpsm, o.stages, o.tiles, ctas, waves, ctas / (waves * o.slots),
                  t_compute, t_dram, o.t_l2, dram_extra, o.l2, time, tile_k_elems=o.tile_k)


def _is_zero(x: Any) -> bool:
    """The float 0.0 a term is where a mechanism is absent: adding it to the (positive) times changes
    no value, so it is not added (each addition is an array operation per candidate at points)."""
    return isinstance(x, float) and x == 0.0


_OPERATORS = {np.add: operator.add, np.multiply: operator.mul, np.subtract: operator.sub,
              np.true_divide: operator.truediv, np.maximum: lambda a, b: sm.maximum(a, b),
              np.minimum: lambda a, b: sm.minimum(a, b)}


def _into(a: Any, b: Any, ufunc: np.ufunc) -> Any:
    """`ufunc(a, b)` (np.add: a + b...) written over `a` when `a` is a float array that the caller has
    just built (so that nothing else holds it) and the result has its shape: the same values, without
    a new array (at points, a candidate's dozens of operations are the sweep's inner loop; allocating
    their results cost as much as the arithmetic). Numbers and sympy expressions: the plain operation.
    NB: only for commutative or left-to-right uses where `a` is the left operand."""
    if type(a) is np.ndarray and a.dtype == np.float64 and (
            type(b) in (float, int) or (type(b) is np.ndarray and b.shape == a.shape)):
        return ufunc(a, b, out=a)
    return _OPERATORS[ufunc](a, b)


def _fresh_ceil(x: Any) -> Any:
    """sm.ceil of a value the caller has just built (a float array rounded in place, see _into)."""
    if type(x) is np.ndarray and x.dtype == np.float64:
        return np.ceil(x, out=x)
    return sm.ceil(x)


def _store_key(g: Gemm, menu: FamilyMenu) -> str:
    """The efficiency key of C's DRAM store: `block_scale_store` for a library-picked block-scaled kernel
    (DeepGEMM's epilogue writes C with 16-byte st.global from its math threads, write_result_to_gmem in
    TensorRT-LLM's deep_gemm/fp8_gemm_impl.cuh, not TMA bulk stores), else `dram_store`."""
    scaled = menu.block_scaled
    return "block_scale_store" if g.scale_block and scaled is not None and scaled.pick else "dram_store"


def _t_dram(f: _Fixed, dram_extra: Any) -> Any:
    """DRAM time: reads (and any epilogue traffic) at `dram` of the bandwidth, the output C at
    `dram_store` of it where the descriptor has one (`block_scale_store` for a library-picked
    block-scaled kernel, _store_key): a GEMM stores C tile by tile (rows of tile_n elements scattered at
    a stride of N), which the DRAM absorbs at a smaller share of its bandwidth than the long streams of
    its reads. `f`: the GEMM's figures of both (_fixed). NB: split-K partials are charged at the read
    rate."""
    if f.t_dram0 is not None and isinstance(dram_extra, (int, float)) and dram_extra == 0:
        return f.t_dram0  # no extra bytes: the GEMM's one value, for every such candidate
    reads = _into(f.dram_base + dram_extra, f.dram_rate, np.true_divide)
    return reads if f.t_store is None else _into(reads, f.t_store, np.add)


def _epilogue(rows: int, cols: int, c_bytes: float, hw: Hw) -> float:
    """The epilogue of one tile, after its mainloop: its C tile stored from the SM at `epilogue_store` of
    the SM's share of the L2 bandwidth. A wave-scheduled CTA runs it after its last k-step, with the
    tensor cores idle; the co-resident CTAs of a wave share the SM's store path (ctas_per_sm tiles per
    wave, see _oriented). 0 where the descriptor has no `epilogue_store`. NB: the DRAM write-back of C
    is t_dram's, overlapped."""
    if "epilogue_store" not in hw.eff:
        return 0.0
    return rows * cols * c_bytes / (hw.l2_bytes_per_s / hw.sm_count * hw.eff["epilogue_store"])


def _promotion(g: Gemm, rows: int, cols: int, tile_k: int, menu: FamilyMenu, hw: Hw) -> float:
    """A block-scaled GEMM on a family whose MMA takes no scales (menu `block_scaled.promote`): every
    `scale_block` K elements the CTA waits for its MMAs, multiplies its rows x cols partial accumulator
    by the scales and adds it into the fp32 result on CUDA cores (2 FLOPs an element, at `block_scale`
    of the SM's fp32 rate), not overlapped with its own MMAs (one CTA per round exposed: a co-resident
    CTA's MMAs may run under it). A tile whose N does not divide the weights' scale block straddles two
    of them (`_straddles`) and pays `block_scale_straddle_s` more a k-step (its promotion picks between
    two weight scales per column).
    0 otherwise (a family whose MMA takes the scales pays its k-step floor instead, _step_floor)."""
    if not g.scale_block or menu.block_scaled is None or not menu.block_scaled.promote:
        return 0.0
    if "block_scale" not in hw.eff or not hw.cuda_flops_per_s:
        return 0.0
    per_sm = hw.cuda_flops_per_s / hw.sm_count * hw.eff["block_scale"]
    straddle = hw.eff.get("block_scale_straddle_s", 0.0) if _straddles(g, cols, menu) else 0.0
    return 2 * rows * cols * max(1.0, tile_k / g.scale_block) / per_sm + straddle


def _step_floor(g: Gemm, menu: FamilyMenu, hw: Hw) -> float:
    """The shortest k-step of a block-scaled kernel whose MMA takes the scales (`promote: false`,
    sm_100's tcgen05.mma kind::mxf4nvf4), `block_scale_step_s` where the descriptor has it: a k-step's
    scale factors are copied from shared memory into tensor memory (tcgen05.cp) and read by its MMAs,
    a chain the one MMA-issuing thread runs in order for every k-block (CUTLASS's sm100 block-scaled
    mainloop: the SFA/SFB smem -> TMEM copy ahead of each k-block's MMA), so a CTA's k-loop runs no
    faster than one chain a k-step however few its MMAs (the small-M rows: a K loop's time whatever N),
    and a large tile's MMAs hide it. 0 otherwise."""
    scaled = menu.block_scaled
    if not g.scale_block or scaled is None or scaled.promote:
        return 0.0
    return hw.eff.get("block_scale_step_s", 0.0)


def _block_fill(g: Gemm, scaled_tmem: bool, hw: Hw) -> float:
    """The fixed cost of a block-scaled kernel whose MMA takes the scales (`scaled_tmem`: sm_100's), before
    its first k-step: `block_scale_fill_s` where the descriptor has it (the scale-factor pipeline's own
    fill: the first k-blocks' SFA/SFB loads and their copies into TMEM ahead of the first MMA, on top of
    the data pipeline's mem_latency_s; and the 2-SM cluster launch). 0 otherwise."""
    return hw.eff.get("block_scale_fill_s", 0.0) if g.scale_block and scaled_tmem else 0.0


def _straddles(g: Gemm, cols: int, menu: FamilyMenu) -> bool:
    """Whether a block-scaled tile of `cols` columns (along N) straddles the weights' scale blocks
    (`scale_block` x `scale_block`, DeepSeek-V3 style): some tiles then span two of them. Only for a
    library-picked kernel (`block_scaled.pick`): DeepGEMM keeps the second scale and, per its
    get_best_gemm_config, at most 6 pipeline stages (`straddle_max_stages`) for such a block N."""
    scaled = menu.block_scaled
    return bool(g.scale_block and scaled is not None and scaled.pick and g.scale_block % cols)


def _edge(g: Gemm, padded_rows: Callable[[], Any], menu: FamilyMenu, hw: Hw) -> Any:
    """The k-step of a block-scaled kernel's partial M tile (the library-picked kernel of
    `block_scaled.pick`): `block_scale_oob_s` per padded row (the tile's rows past M) of every CTA on
    that tile (one per tile along N), paid once per kernel: a GPU-wide cost, as if the padded rows
    were loaded at a shared rate, whichever waves those CTAs run in. 0 otherwise.
    NB: inferred from the H100 fp8_block rows (DeepGEMM through TensorRT-LLM), not from a document:
    within each 128-row step of M the time falls as M fills the last tile (N 16384, K 8192: 117.5 us at
    M = 129, 71.5 us at 256), in proportion to K and growing with the CTAs on the partial tile (N 128:
    hardly any step); the TMA loads of the tile's out-of-bounds rows are the likely cause. Padded rows
    are the activation rows (M) of the tile in either orientation (swapped, the MMA's N side)."""
    scaled = menu.block_scaled
    if not g.scale_block or scaled is None or not scaled.pick or "block_scale_oob_s" not in hw.eff:
        return 0.0
    return padded_rows() * hw.eff["block_scale_oob_s"]  # built only here: sweeps price ~1000 tiles a kernel


def _last_round(o: _Oriented, ctas: Any, earlier: Any) -> Any:
    """A k-step of the last wave (after `earlier` full waves). The block scheduler hands CTAs out
    breadth-first (one per SM before a second on any), so the busiest SM of the last wave holds only
    the CTAs left over after the full waves, spread evenly: ceil(leftover / SMs) of them, at most
    ctas_per_sm (a GEMM of fewer CTAs than SMs runs each alone, with its SM's whole tensor rate)."""
    per_sm = o.slots // o.cpsm  # SMs (CTA pairs on a 2-SM tile)
    left = ctas - earlier * o.slots
    busiest = _fresh_ceil(_into(left, per_sm, np.true_divide))  # ceil(left / per_sm)
    # max(t_mma_one * busiest, t_load) + t_promote (a product of two numbers is the same either way)
    step = _into(_into(busiest, o.t_mma_one, np.multiply), o.t_load, np.maximum)
    return step if _is_zero(o.t_promote) else _into(step, o.t_promote, np.add)


def _stream_k(g: Gemm, o: _Oriented, hw: Hw) -> Choice:
    """A persistent kernel (one CTA per slot, tiles from a queue) whose last, partial wave is spread over
    every slot by K (CUTLASS's sm100 stream-K scheduler): full waves run data-parallel, then each slot
    takes ceil(tail * k_steps / slots) k-steps of the `tail` leftover tiles, and the partial sums of the
    tail are fixed up (fp32 partials written and read back by up to one CTA per slot, and `split_k_s`).
    With no tail it is the plain kernel (tail = 0: no fixup), which the selection then prefers as
    listed first. Everything is exact integer arithmetic on numbers, arrays or sympy expressions."""
    eff = hw.eff
    full = sm.floor(o.tiles / o.slots)
    tail = o.tiles - full * o.slots
    has_tail = sm.minimum(1, tail)  # 1 when a partial wave is left, else 0 (tail is an integer >= 0)
    tail_steps = sm.ceil(tail * o.k_steps / o.slots)
    rows, cols = (o.tile.n, o.tile.m) if o.swap else (o.tile.m, o.tile.n)
    partials = 2 * sm.minimum(o.slots, tail * o.k_steps) * rows * cols * FP32_BYTES
    dram_extra = o.dram_extra + partials
    t_compute = (full * o.k_steps + tail_steps) * o.t_iter + has_tail * eff["split_k_s"]
    t_dram = _t_dram(o.fixed, dram_extra)
    time = (eff["launch_s"] + eff["mem_latency_s"] + _block_fill(g, o.menu_scaled, hw)
            + sm.maximum(t_compute, t_dram, o.t_l2))
    waves = full + has_tail
    busy = o.tiles * o.k_steps / (o.slots * (full * o.k_steps + tail_steps))  # the machine's busy share
    return Choice(o.tile, o.swap, 1, o.cpsm, o.stages, o.tiles, o.tiles, waves, busy, t_compute,
                  t_dram, o.t_l2, dram_extra, o.l2, time, tile_k_elems=o.tile_k, stream_k=True)


def price_tile(g: Gemm, tile: GemmTile, swap: bool, split: int, menu: FamilyMenu, hw: Hw,
               stream_k: bool = False) -> Choice | None:
    """One candidate's time (see the module docstring); None when the tile does not fit."""
    o = _oriented(g, tile, swap, menu, hw)
    if o is None:
        return None
    return _stream_k(g, o, hw) if stream_k else _split(g, o, split, hw)


def candidates(g: Gemm, menu: FamilyMenu, hw: Hw) -> list[Choice]:
    """Every legal candidate of `iter_candidates`, as a list."""
    return list(iter_candidates(g, menu, hw))


def iter_candidates(g: Gemm, menu: FamilyMenu, hw: Hw) -> Iterator[Choice]:
    """Every legal (tile, orientation, split-K) of the family's menu priced for `g` (the split-free part
    of a tile once for all its splits: arrays of points make this the sweep's inner loop). A block-scaled
    GEMM takes its kernel's own menu where the family has one (`block_scaled.tiles`), and under a
    library pick (`block_scaled.pick`, estimator/pricing/pick.py) only the tile the library sets: with
    arrays of points, every other candidate's time is infinite where the library would not run it."""
    scaled = menu.block_scaled if g.scale_block else None
    splits = scaled.split_k if scaled is not None else menu.split_k
    tiles = scaled.tiles if scaled is not None and scaled.tiles else menu.gemm_tiles
    runs = None
    if scaled is not None and scaled.pick and all(sm.numeric(x) for x in (g.batch, g.m, g.n)):
        runs = pick.picked(g.batch, g.m, g.n, tiles, hw.sm_count, scaled.swap_below_m)
    fixed = _fixed(g, menu, hw)  # once for every candidate
    for tile in tiles:
        for swap in ((False, True) if tile.m != tile.n or runs is not None else (False,)):
            kept = True if runs is None else runs[(tile, swap)]
            if kept is False or (isinstance(kept, np.ndarray) and not kept.any()):
                continue  # the library runs this tile at no point
            o = _oriented(g, tile, swap, menu, hw, fixed)
            if o is None:
                continue
            choices = [_split(g, o, split, hw) for split in splits]
            if menu.scheduler == "persistent" and (scaled is None or scaled.stream_k):
                choices.append(_stream_k(g, o, hw))
            if kept is not True:  # arrays of points: a tile the library does not run never wins
                choices = [replace(c, time=np.where(kept, c.time, math.inf)) for c in choices]
            yield from choices
