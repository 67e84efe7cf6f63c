"""What every part of pricing reads first: an execution unit's peak on a descriptor, and which of a
kernel's terms limits it. The lowest module of estimator/pricing/ (plan.py, collectives.py and price.py
all build on it), so none of them imports another to reach these.

`dominant` names a kernel's limiter on every number type the pricing core runs on (see
estimator/symmath.py): numbers, sympy expressions (every term not provably smaller, joined by '|') and
numpy arrays of points (an array of names, by the same rule as on numbers).

The limiter, one meaning in every mode: the term of the kernel's estimate that its time is spent on. A
term is one of LIMITERS, each the time of one resource of the model that priced the kernel (the tile
model's, estimator/pricing/plan.py, or the roofline's, price.py):
- compute: the math units (tensor-core MMA k-steps or CUDA-core / SFU work, with the waves they run in);
- memory: DRAM traffic at its achievable bandwidth;
- l2: L2 traffic (every CTA's operand panels, K/V re-reads) at the L2's achievable bandwidth;
- latency: per-CTA fixed costs paid wave after wave (attention's Q load and O store, a decode CTA's round
  trips) and latency-bound loops (block quantization rounds);
- launch: the kernel's fixed cost (launch, pipeline fill, split-K reduction, an attention op's companions);
- communication: a collective's time (estimator/pricing/collectives.py).
Terms within CO_LIMITING of the largest are co-limiting, and the label names the first of them in the
order above (the kernel's own work before the costs of how it runs): a tile choice often balances two
terms (an MMA k-step against the L2 panels that feed it), and a label that flipped with a 0.1 % change of
either would flip along every sweep.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from estimator.cost.registry import ALU, CUDA, SFU, TENSOR
from estimator.dtypes import tensor_peak_key
from estimator.errors import UserError
from estimator.ir import Expr
from estimator.symmath import flat
from hwdesc import HardwareDescriptor

LIMITERS = ("compute", "memory", "l2", "latency", "launch", "communication")
# NB: a reporting tolerance, not a fitted figure: terms closer than this are one regime within the
# precision of the efficiency constants they are priced with (a few percent).
CO_LIMITING = 0.02


class PriceError(UserError):
    pass


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


def unit_efficiency(hw: HardwareDescriptor, unit: tuple[str, str]) -> float:
    """The achievable fraction of `unit`'s peak for an MMA in its dtype: `tensor_<family>` (fp8) where the
    descriptor has one, else the unit's own (`tensor`, `cuda`)."""
    if unit[0] == TENSOR:
        key = tensor_peak_key(unit[1])
        if key and f"tensor_{key}" in hw.efficiency:
            return hw.efficiency[f"tensor_{key}"]
    return hw.efficiency[unit[0]]


def provably_greater(a: Expr, b: Expr) -> bool:
    """a > b for every value of the free dims; False when unsure (and, under symmath.flat(), over
    a graph of many unknown dims, without asking sympy's assumptions: unsure)."""
    diff = sympy.sympify(a - b)
    if diff.is_number:
        return diff.is_extended_real is True and bool(diff > 0)  # nan (0/0 of an empty tensor): unsure
    return not flat() and diff.is_positive is True


def dominant(terms: Mapping[str, Any]) -> Any:
    """The limiter (module docstring): the first term, in the order given (LIMITERS' for the pricing
    core's terms), within CO_LIMITING of the largest; with free symbols, all terms not provably smaller
    than that joined by '|'; on arrays of points, an array of names (per point, the same rule)."""
    if any(isinstance(v, np.ndarray) for v in terms.values()):
        names = np.array(list(terms), dtype=object)
        return names[dominant_index(np.stack(np.broadcast_arrays(*[np.asarray(v, dtype=float)
                                                                  for v in terms.values()])))]
    if all(sympy.sympify(v).is_number for v in terms.values()):
        values = {k: float(v) for k, v in terms.items()}
        top = max(values.values())
        # nan (0/0 of an empty tensor) compares false: the first term
        return next((k for k, v in values.items() if v >= top * (1 - CO_LIMITING)), next(iter(values)))
    alive = [k for k in terms if not any(provably_greater(terms[j] * (1 - CO_LIMITING), terms[k])
                                         for j in terms if j != k)]
    return alive[0] if len(alive) == 1 else "|".join(alive)


def dominant_index(terms: np.ndarray, axis: int = 0, tolerance: float = CO_LIMITING) -> np.ndarray:
    """`dominant` on a stack of terms along `axis` (their order the terms'): per point the index of the
    first term within `tolerance` of the largest."""
    top = terms.max(axis=axis, keepdims=True)
    return np.argmax(terms >= top * (1 - tolerance), axis=axis)
