"""The tile model over arrays of points: one kernel's tile-level estimate at every point of a sweep,
each point priced exactly as `--dim` prices it (estimator/pricing/plan.py on bound dims).

A kernel whose dims are free keeps, in its symbolic plan, the tile chosen as if every free dim were
`SYMBOLIC_DIM_VALUE`; that formula is exact only where that tile stays the best. Here the kernel's
problem (GEMM M, N, K, batch, DRAM bytes; attention batch, heads, lengths) is evaluated on numpy arrays
of the dim values, every candidate of the family's menu is priced on the arrays (the same functions of
estimator/pricing/gemm.py and attention.py, elementwise), and each point takes its own best candidate by
the same rule as `plan._best` (fastest rounded to 1e-15 s, ties to the least padded MMA work, then to
the first listed). Attention picks decode or prefill per point by the same shape rule (`is_decode`).
The estimate is then composed as estimator/pricing/price.py's `_tiled` does: the plan's estimate, never below
the bound, plus the descriptor's op overhead.

NB: residency (--warm-inputs) is not modelled here; kernels priced with L2-resident reads, and
kernels of a Result without tile plans, get no point pricer (their symbolic formula is used).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import sympy

from estimator.ir import Graph, dim
from estimator.pricing import attention as attn_model
from estimator.pricing import gemm as gemm_model
from estimator.pricing import plan as tp
from estimator.pricing.menu import menu_for
from estimator.pricing.problem import attention_of_kernel, gemm_of_kernel
from hwdesc import HardwareDescriptor

ROUND_S = 15  # plan._best compares times rounded to 1e-15 s


@dataclass(frozen=True)
class PointPrice:
    """A kernel's tile-level figures at every point (arrays of one length)."""

    estimate_s: np.ndarray
    compute_s: np.ndarray  # the plan's compute part (fixed cost excluded), for the limiter
    memory_s: np.ndarray
    launch_s: np.ndarray  # the fixed part

    def parts(self) -> dict[str, np.ndarray]:
        return {"compute": self.compute_s, "memory": self.memory_s, "launch": self.launch_s}


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
            return tp.sm.num(e)
        fn = self._cache.get(e)
        if fn is None:
            fn = self._cache[e] = sympy.lambdify(self.symbols, e, "numpy")
        out = fn(*[values[s] for s in self.free])
        return np.broadcast_to(np.asarray(out, dtype=float), (n,)).copy()


def _subst(obj: Any, lam: Lambdas, values: Mapping[str, np.ndarray], n: int) -> Any:
    """A frozen dataclass with every sympy field on the arrays (an expression of the free dims) or a
    python number (a sympy number would turn the arrays it meets into slow object arrays)."""
    changes = {f.name: lam(getattr(obj, f.name), values, n) for f in fields(obj)
               if isinstance(getattr(obj, f.name), sympy.Basic)}
    return replace(obj, **changes) if changes else obj


def select(choices: list, n: int, fixed: Callable[[Any], float]) -> PointPrice:
    """Per point, the candidate plan._best picks: the least time rounded to 1e-15 s, then the least
    t_compute, then the first listed (a running minimum: no candidates x points matrix is built).
    `fixed(choice)` is a candidate's fixed cost as plan.py adds it."""
    def arr(x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray) and x.shape == (n,) and x.dtype == np.float64:
            return x  # already one float per point (broadcast_to costs more than the math here)
        return np.broadcast_to(np.asarray(x, dtype=float), (n,))

    best = None
    for c in choices:
        rt, tc = np.round(arr(c.time), ROUND_S), arr(c.t_compute)
        fields_ = (arr(c.time), tc, np.maximum(arr(c.t_dram), arr(c.t_l2)), arr(fixed(c)))
        if best is None:
            best_rt, best_tc = rt.copy(), tc.copy()
            best = [f.copy() for f in fields_]
            continue
        better = (rt < best_rt) | ((rt == best_rt) & (tc < best_tc))
        if not better.any():
            continue
        np.copyto(best_rt, rt, where=better)
        np.copyto(best_tc, tc, where=better)
        for b, f in zip(best, fields_, strict=True):
            np.copyto(b, f, where=better)
    return PointPrice(*best)


class KernelPricer:
    """Prices one (GEMM or attention) kernel of a Result at arrays of its free dims."""

    def __init__(self, graph: Graph, kernel, hw: HardwareDescriptor, lam: Lambdas) -> None:
        self.graph, self.kernel, self.hw, self.lam = graph, kernel, hw, lam
        self.menu = menu_for(hw.family)
        self.hwp = tp.hw_params(hw)
        self.eff = hw.efficiency
        self.gemm = gemm_of_kernel(graph, kernel)
        self.unit = tp._mma_unit(kernel.work)
        self.attention = None if self.gemm is not None else attention_of_kernel(graph, kernel)

    def price(self, values: Mapping[str, np.ndarray], n: int) -> PointPrice | None:
        """The plan's figures at the points, or None where the kernel is not priced by a tile (the
        caller keeps its symbolic stream formula, which is exact)."""
        if self.unit is None:
            return None
        if self.gemm is not None:
            out = self._gemm(values, n)
            if out is not None:
                return out
        if self.attention is not None:
            return self._attention(values, n)
        return None

    def gemm_problem(self, values, n) -> gemm_model.Gemm | None:
        """The kernel's GEMM at the points, None when it is no tiled GEMM (a streaming plan)."""
        if self.unit is None or self.gemm is None:
            return None
        spec = _subst(self.gemm, self.lam, values, n)
        dram = self.lam(self.kernel.work.dram_bytes, values, n)
        return tp.gemm_problem(spec, self.unit, np.broadcast_to(np.asarray(dram, float), (n,)).copy(), 0,
                               False, False, self.hw, self.menu)

    def _gemm(self, values, n) -> PointPrice | None:
        g = self.gemm_problem(values, n)
        return None if g is None else price_gemms([(g, n)], self.menu, self.hwp, self.eff)[0]

    def _attention(self, values, n) -> PointPrice | None:
        core, q_bytes, kv_bytes = self.attention
        core = _subst(core, self.lam, values, n)
        dram = np.broadcast_to(np.asarray(self.lam(self.kernel.work.dram_bytes, values, n), float), (n,))
        a = tp.attention_problem(core, q_bytes, kv_bytes, self.unit, dram.copy(), 0, self.hw)
        if a is None:
            return None
        mask = np.broadcast_to(np.asarray(tp.is_decode(_arr(core.seq_q, n), _arr(core.seq_kv, n))), (n,))
        out = None
        for decode in (False, True):
            if not (mask.any() if decode else (~mask).any()):
                continue
            price = self._attention_kind(replace(a, decode=decode), n)
            out = price if out is None else _where(mask if decode else ~mask, price, out)
        return out

    def _attention_kind(self, a: attn_model.Attn, n: int) -> PointPrice:
        choices = attn_model.candidates(a, self.menu, self.hwp)
        base = attn_model.fixed_s(self.hwp, a.decode)
        return select(choices, n, lambda c: base + attn_model.combine_s(self.eff, c.split))


_ARRAY_FIELDS = ("batch", "m", "n", "k", "dram_bytes")


def price_gemms(problems: Sequence[tuple[gemm_model.Gemm, int]], menu, hwp, eff) -> list[PointPrice | None]:
    """Each (GEMM at n points, n) priced as KernelPricer prices one, the menu walked once per group:
    problems alike in everything but their arrays (batch, M, N, K, DRAM bytes: the operand and output
    bytes, the unit's peak and efficiency, L2 residency) are concatenated into one problem, which the
    elementwise tile model prices point by point exactly as it prices each alone. None: no candidate."""
    groups: dict[tuple, list[int]] = {}
    for i, (g, _) in enumerate(problems):
        key = (g.a_bytes, g.b_bytes, g.c_bytes, g.peak, g.eff_unit, bool(g.a_in_l2), bool(g.b_in_l2))
        groups.setdefault(key, []).append(i)
    out: list[PointPrice | None] = [None] * len(problems)
    base = eff["launch_s"] + eff["mem_latency_s"]
    for idx in groups.values():
        sizes = [problems[i][1] for i in idx]
        arrays = {f: np.concatenate([np.broadcast_to(np.asarray(getattr(problems[i][0], f), dtype=float),
                                                     (problems[i][1],)) for i in idx])
                  for f in _ARRAY_FIELDS}
        choices = gemm_model.candidates(replace(problems[idx[0]][0], **arrays), menu, hwp)
        if not choices:
            continue
        p = select(choices, sum(sizes), lambda c: base + (eff["split_k_s"] if c.split > 1 else 0))
        ends = np.cumsum(sizes)
        for i, end, size in zip(idx, ends, sizes, strict=True):
            out[i] = PointPrice(*(getattr(p, f.name)[end - size:end] for f in fields(PointPrice)))
    return out


def _arr(x: Any, n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(tp.sm.num(x), dtype=float), (n,))


def _where(mask: np.ndarray, a: PointPrice, b: PointPrice) -> PointPrice:
    return PointPrice(*(np.where(mask, getattr(a, f.name), getattr(b, f.name)) for f in fields(PointPrice)))


def finish(p: PointPrice, bound_s: np.ndarray, hw: HardwareDescriptor) -> np.ndarray:
    """The kernel's estimate from its plan, as price._tiled: never below the bound, + op overhead."""
    est = np.maximum(p.estimate_s, bound_s)
    overhead = hw.efficiency.get("op_overhead_s")
    return est + overhead if overhead else est


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
