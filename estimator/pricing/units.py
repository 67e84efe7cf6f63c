"""What every part of pricing reads first: an execution unit's peak on a descriptor, and which of a
kernel's terms limits it. The lowest module of estimator/pricing/ (plan.py, collectives.py and price.py
all build on it), so none of them imports another to reach these.

`dominant` names the largest term on every number type the pricing core runs on (see
estimator/symmath.py): numbers, sympy expressions (every term not provably smaller, joined by '|') and
numpy arrays of points (an array of names, ties to the first term, as on numbers).
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
    """Name of the largest term; with free symbols, all terms not provably smaller joined by '|'; on
    arrays of points, an array of names (per point the largest, ties to the first listed)."""
    if any(isinstance(v, np.ndarray) for v in terms.values()):
        names = np.array(list(terms), dtype=object)
        return names[np.argmax(np.stack(np.broadcast_arrays(*terms.values())), axis=0)]
    alive = [k for k in terms if not any(provably_greater(terms[j], terms[k]) for j in terms if j != k)]
    numeric = all(sympy.sympify(v).is_number for v in terms.values())
    if numeric or len(alive) == 1:
        return alive[0]
    return "|".join(alive)
