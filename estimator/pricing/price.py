"""Prices a kernel's Work on a HardwareDescriptor: the bound and the estimate, with the limiter.

bound_s    = max(flops_u / peak_u for each unit u, dram_bytes / dram_bytes_per_s)
             (speed of light: units run concurrently, so the slowest one is the floor)
estimate_s = max(flops_u / (peak_u * eff_u), dram_bytes / (dram_bytes_per_s * eff_dram), min_kernel_s)
             (achievable fractions of peak from the descriptor, and its minimum kernel time)
             + op_overhead_s (optional, CPU descriptors: the runtime's own time per op; 0 on GPUs)
A descriptor's `kernel_classes` (a host's fitted per-class figures; GPUs have none) replace that for
kernels of a listed class, the op type first, then the kernel kind:
estimate_s = max(bound_s / roofline, min_kernel_s) + the class's op_overhead_s
The limiter is whichever term of the estimate is largest: compute, memory or launch. With free dims it
may not be decidable; then every term that is not provably smaller is named ("compute|memory").
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

from estimator.cost.registry import ALU, CUDA, SFU, TENSOR, Work
from estimator.dtypes import tensor_peak_key
from estimator.errors import UserError
from estimator.ir import Expr
from estimator.symmath import flat, sym_max
from hwdesc import HardwareDescriptor


class PriceError(UserError):
    pass


@dataclass(frozen=True)
class Timing:
    bound_s: Expr
    estimate_s: Expr
    limiter: str
    compute_s: Expr  # slowest unit at peak
    memory_s: Expr  # DRAM bytes at peak bandwidth
    terms: Mapping[str, Expr]  # the estimate's terms: "compute", "memory", "launch" (estimate = their max)
    comm: Mapping[str, object] | None = None  # collectives: {"op", "bytes", "group", "algorithm", "protocol"}


def unit_peak(hw: HardwareDescriptor, unit: str, dtype: str) -> float:
    """Peak operations per second of `unit` for math in `dtype`."""
    if unit == TENSOR:
        key = tensor_peak_key(dtype)
        if key is None or key not in hw.tensor_flops_per_s:
            raise PriceError(f"{hw.name} has no {dtype} tensor cores (it has: "
                             f"{', '.join(sorted(hw.tensor_flops_per_s))}); try --precision")
        return hw.tensor_flops_per_s[key]
    if unit == CUDA:
        return hw.cuda_flops_per_s.get(dtype, hw.cuda_flops_per_s["fp32"])
    if unit == ALU:  # instructions: the FLOP peak counts each lane's FMA as 2
        return hw.cuda_flops_per_s.get(dtype, hw.cuda_flops_per_s["fp32"]) / 2
    if unit == SFU:
        return hw.sfu_ops_per_s
    raise PriceError(f"unknown execution unit {unit!r}")


def provably_greater(a: Expr, b: Expr) -> bool:
    """a > b for every value of the free dims; False when unsure (and, under symmath.flat(), over
    a graph of many unknown dims, without asking sympy's assumptions: unsure)."""
    diff = sympy.sympify(a - b)
    if diff.is_number:
        return diff.is_extended_real is True and bool(diff > 0)  # nan (0/0 of an empty tensor): unsure
    return not flat() and diff.is_positive is True


def dominant(terms: dict[str, Expr]) -> str:
    """Name of the largest term; with free symbols, all terms not provably smaller joined by '|'."""
    alive = [k for k in terms if not any(provably_greater(terms[j], terms[k]) for j in terms if j != k)]
    numeric = all(sympy.sympify(v).is_number for v in terms.values())
    if numeric or len(alive) == 1:
        return alive[0]
    return "|".join(alive)


def kernel_class(hw: HardwareDescriptor, kind: str | None, op: str | None) -> Mapping[str, float] | None:
    """The descriptor's figures for a kernel of this op type (first) or kind, None if it lists neither."""
    classes = hw.kernel_classes
    return (classes.get(op) or classes.get(kind)) if classes else None


def price(work: Work, hw: HardwareDescriptor, plan=None, kind: str | None = None,
          op: str | None = None, framework: str | None = None, comm_graphed: bool = True) -> Timing:
    """The kernel's Timing; with a `plan` (estimator.pricing.plan.TilePlan, set when the tiling step ran)
    the estimate is the plan's tile-level one, see `_tiled`; a kernel whose class (`op` type or `kind`)
    the descriptor lists is priced by `_classed`; a collective by `_communication` (`framework`: the
    serving framework whose custom all-reduce it may use, `comm_graphed`: inside a CUDA graph)."""
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
    bound_s = sympy.Max(compute_s, memory_s)
    terms = {
        "compute": sympy.Max(*achievable_times) if achievable_times else sympy.Integer(0),
        "memory": memory_s / eff["dram"],
        "launch": sympy.Float(eff["min_kernel_s"]),
    }
    estimate_s = sympy.Max(*terms.values())
    if eff.get("op_overhead_s"):  # estimate only: the bound stays the speed of light
        estimate_s = estimate_s + eff["op_overhead_s"]
    return Timing(bound_s, estimate_s, dominant(terms), compute_s, memory_s, MappingProxyType(terms))


def peak_times(flops: Mapping[tuple[str, str], Any], dram_bytes: Any,
               hw: HardwareDescriptor) -> tuple[list, Any]:
    """(each unit's time at its peak, the DRAM bytes' time at peak) for flops per (unit, dtype): sympy
    expressions or numpy arrays alike (estimator/serve/step_points.py prices the same bound on arrays)."""
    return ([f / unit_peak(hw, unit, dtype) for (unit, dtype), f in flops.items()],
            dram_bytes / hw.dram_bytes_per_s)


def _roofline(work: Work, hw: HardwareDescriptor) -> tuple[Expr, Expr]:
    """(compute_s, memory_s) at peak: the slowest unit's time and the DRAM bytes' time."""
    units, memory_s = peak_times(work.flops, work.dram_bytes, hw)
    return (sym_max(*units) if units else sympy.Integer(0)), memory_s


def _classed(work: Work, hw: HardwareDescriptor, figures: Mapping[str, float]) -> Timing:
    """Hockney's model on the roofline, for a kernel class the descriptor fitted: the class reaches
    `roofline` of the speed of light on large kernels and costs `op_overhead_s` per op on top."""
    compute_s, memory_s = _roofline(work, hw)
    roofline = figures["roofline"]
    terms = {"compute": compute_s / roofline, "memory": memory_s / roofline,
             "launch": sympy.Float(hw.efficiency["min_kernel_s"])}
    estimate_s = sympy.Max(*terms.values()) + figures.get("op_overhead_s", 0.0)
    return Timing(sympy.Max(compute_s, memory_s), estimate_s, dominant(terms), compute_s, memory_s,
                  MappingProxyType(terms))


def _tiled(work: Work, hw: HardwareDescriptor, plan) -> Timing:
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
    bound_s = sym_max(compute_s, memory_s)
    if plan.resident_bytes_bound and hw.l2_bytes_per_s:
        bound_s = sym_max(bound_s, work.dram_bytes / hw.l2_bytes_per_s)
    estimate_s = sym_max(sympy.sympify(plan.estimate_s), bound_s)
    if eff.get("op_overhead_s"):
        estimate_s = estimate_s + eff["op_overhead_s"]
    terms = {k: sympy.sympify(v) for k, v in plan.terms.items()}
    return Timing(bound_s, estimate_s, plan.limiter, compute_s, memory_s, MappingProxyType(terms))


def _communication(work: Work, hw: HardwareDescriptor, framework: str | None, graphed: bool) -> Timing:
    from estimator.pricing.collectives import collective_cost  # the serve package builds on this module

    c = work.comm
    cost = collective_cost(c.op, c.nbytes, c.group, hw, dtype=c.dtype, framework=framework, graphed=graphed)
    memory_s = work.dram_bytes / hw.dram_bytes_per_s
    detail = {"op": c.op, "bytes": c.nbytes, "group": c.group, "algorithm": cost.algorithm,
              "protocol": cost.protocol}
    return Timing(cost.bound_s, cost.estimate_s, "communication", sympy.Integer(0), memory_s,
                  MappingProxyType({"communication": cost.estimate_s}), MappingProxyType(detail))
