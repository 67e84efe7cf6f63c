"""Prices a kernel's Work on a HardwareDescriptor: the bound and the estimate, with the limiter.

bound_s    = max(flops_u / peak_u for each unit u, dram_bytes / dram_bytes_per_s)
             (speed of light: units run concurrently, so the slowest one is the floor)
estimate_s = max(flops_u / (peak_u * eff_u), dram_bytes / (dram_bytes_per_s * eff_dram), min_kernel_s)
             (achievable fractions of peak from the descriptor, and its minimum kernel time)
             + op_overhead_s (optional, CPU descriptors: the runtime's own time per op; 0 on GPUs)
A descriptor's `kernel_classes` (a host's fitted per-class figures; GPUs have none) replace that for
kernels of a listed class, the op type first, then the kernel kind:
estimate_s = max(bound_s / roofline, min_kernel_s) + the class's op_overhead_s
The limiter is the term of the estimate its time is spent on, by the rule of estimator/pricing/units.py
(`dominant`: the largest term, co-limiting ones named compute first): here compute, memory or launch; a
tile plan's terms add l2 and latency (estimator/pricing/plan.py `_plan`). With free dims it may not be
decidable; then every term that is not provably smaller is named ("compute|memory").
A collective (a Work with `comm`, estimator/cost/collective.py) is priced by the collective model
instead (estimator/pricing/collectives.py: bound = its bytes over the link's peak, estimate = the NCCL or
the framework's custom all-reduce time), limiter `communication`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import sympy

from estimator import symmath as sm
from estimator.cost.registry import ALU, CUDA
from estimator.ir import Expr
from estimator.pricing import deferred
from estimator.pricing.collectives import collective_cost
from estimator.pricing.units import PriceError, dominant, provably_greater, unit_peak
from hwdesc import HardwareDescriptor

__all__ = ["PriceError", "Timing", "dominant", "kernel_class", "price", "provably_greater", "unit_peak"]


@dataclass(frozen=True)
class Timing:
    bound_s: Expr
    estimate_s: Expr
    limiter: str  # on arrays of points, an array of names
    compute_s: Expr  # slowest unit at peak
    memory_s: Expr  # DRAM bytes at peak bandwidth
    terms: Mapping[str, Expr]  # the estimate's terms: "compute", "memory", "launch" (a tile plan's add "l2",
    # "latency"); estimate = their max
    comm: Mapping[str, object] | None = None  # collectives: {"op", "bytes", "group", "algorithm", "protocol"}


def kernel_class(hw: HardwareDescriptor, kind: str | None, op: str | None) -> Mapping[str, float] | None:
    """The descriptor's figures for a kernel of this op type (first) or kind, None if it lists neither."""
    classes = hw.kernel_classes
    return (classes.get(op) or classes.get(kind)) if classes else None


def price(work, hw: HardwareDescriptor, plan=None, kind: str | None = None,
          op: str | None = None, framework: str | None = None, comm_graphed: bool = True) -> Timing:
    """The kernel's Timing; with a `plan` (estimator.pricing.plan.TilePlan, set when the tiling step ran)
    the estimate is the plan's tile-level one, see `_tiled`; a kernel whose class (`op` type or `kind`)
    the descriptor lists is priced by `_classed`; a collective by `_communication` (`framework`: the
    serving framework whose custom all-reduce it may use, `comm_graphed`: inside a CUDA graph).

    One price over every number type (estimator/symmath.py): `work` is a Work (sympy: the kernel with
    its dims free or bound) or a Work-like record of numpy arrays of points (estimator/pricing/points.py,
    with a plan of the same points); the Timing comes out in the same type."""
    if work.comm is not None:
        return _communication(work, hw, framework, comm_graphed)
    if plan is not None:
        return _tiled(work, hw, plan)
    figures = kernel_class(hw, kind, op)
    if figures is not None:
        return _classed(work, hw, figures)
    eff = hw.efficiency
    compute_s, memory_s = _roofline(work, hw)
    achievable_times = [flops / unit_peak(hw, unit, dtype) / eff[CUDA if unit == ALU else unit]
                        for (unit, dtype), flops in work.flops.items()]
    like = work.dram_bytes
    bound_s = sm.max_of(compute_s, memory_s)
    terms = {
        "compute": sm.max_of(*achievable_times) if achievable_times else sm.lift(0, like),
        "memory": memory_s / eff["dram"],
        "launch": sm.lift(float(eff["min_kernel_s"]), like),
    }
    estimate_s = sm.max_of(*terms.values())
    if eff.get("op_overhead_s"):  # estimate only: the bound stays the speed of light
        estimate_s = estimate_s + eff["op_overhead_s"]
    return Timing(bound_s, estimate_s, dominant(terms), compute_s, memory_s, MappingProxyType(terms))


def _roofline(work, hw: HardwareDescriptor) -> tuple[Any, Any]:
    """(compute_s, memory_s) at peak: the slowest unit's time and the DRAM bytes' time."""
    units = [f / unit_peak(hw, unit, dtype) for (unit, dtype), f in work.flops.items()]
    memory_s = work.dram_bytes / hw.dram_bytes_per_s
    return (sm.max_of(*units) if units else sm.lift(0, memory_s)), memory_s


def _classed(work, hw: HardwareDescriptor, figures: Mapping[str, float]) -> Timing:
    """Hockney's model on the roofline, for a kernel class the descriptor fitted: the class reaches
    `roofline` of the speed of light on large kernels and costs `op_overhead_s` per op on top."""
    compute_s, memory_s = _roofline(work, hw)
    roofline = figures["roofline"]
    terms = {"compute": compute_s / roofline, "memory": memory_s / roofline,
             "launch": sm.lift(float(hw.efficiency["min_kernel_s"]), memory_s)}
    estimate_s = sm.max_of(*terms.values()) + figures.get("op_overhead_s", 0.0)
    return Timing(sm.max_of(compute_s, memory_s), estimate_s, dominant(terms), compute_s, memory_s,
                  MappingProxyType(terms))


def _tiled(work, hw: HardwareDescriptor, plan) -> Timing:
    """Bound and estimate of a tiled kernel.

    bound_s = max(flops_u / peak_u, (dram_bytes - reads resident in L2) / dram_bytes_per_s,
                  dram_bytes / l2_bytes_per_s)
    Reads resident in L2 (a tensor an earlier kernel left there, or a graph input under --warm-inputs,
    judged against the whole L2: estimator/pricing/residency.py) come from L2, not DRAM, so they lower
    the DRAM term; every byte still crosses L2, at most at its peak. Without resident reads this is the
    roofline bound exactly (the L2 term never exceeds the DRAM one: L2 is the faster of the two).
    estimate_s = the plan's tile-level estimate, never below the bound (+ op_overhead_s if any)."""
    eff = hw.efficiency
    compute_s, _ = _roofline(work, hw)
    memory_s = (work.dram_bytes - plan.resident_bytes_bound) / hw.dram_bytes_per_s
    bound_s = sm.max_of(compute_s, memory_s)
    if plan.resident_bytes_bound and hw.l2_bytes_per_s:
        bound_s = sm.max_of(bound_s, work.dram_bytes / hw.l2_bytes_per_s)

    def estimate() -> Expr:
        estimate_s = sm.max_of(sm.lift(plan.estimate_s, bound_s), bound_s)
        if eff.get("op_overhead_s"):
            estimate_s = estimate_s + eff["op_overhead_s"]
        return estimate_s

    def terms() -> Mapping[str, Expr]:
        return {k: sm.lift(v, bound_s) for k, v in plan.terms.items()}

    # a plan whose fields are computed when read (estimator/pricing/deferred.py: a tile-planned kernel
    # with free dims) gives a Timing whose fields built on them are too
    if deferred.is_pending(plan, "estimate_s"):
        estimate_s = deferred.Lazy(estimate)
    else:
        estimate_s = estimate()
    if isinstance(plan.terms, deferred.LazyMapping):
        terms_of = deferred.LazyMapping(plan.terms, terms)
    else:
        terms_of = MappingProxyType(terms())
    limiter = deferred.Lazy(lambda: plan.limiter) if deferred.is_pending(plan, "limiter") else plan.limiter
    return deferred.deferred(Timing, bound_s=bound_s, estimate_s=estimate_s, limiter=limiter,
                             compute_s=compute_s, memory_s=memory_s, terms=terms_of, comm=None)


def _communication(work, hw: HardwareDescriptor, framework: str | None, graphed: bool) -> Timing:
    c = work.comm
    cost = collective_cost(c.op, c.nbytes, c.group, hw, dtype=c.dtype, framework=framework, graphed=graphed)
    memory_s = work.dram_bytes / hw.dram_bytes_per_s
    detail = {"op": c.op, "bytes": c.nbytes, "group": c.group, "algorithm": cost.algorithm,
              "protocol": cost.protocol}
    return Timing(cost.bound_s, cost.estimate_s, "communication", sympy.Integer(0), memory_s,
                  MappingProxyType({"communication": cost.estimate_s}), MappingProxyType(detail))
