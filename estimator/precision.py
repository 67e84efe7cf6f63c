"""`--precision`: re-type every float tensor (weights and activations) to ask "what if".

Integer and bool tensors are untouched. A precision the GPU has no tensor cores for is an error
(fp32 is always allowed: it runs on CUDA cores)."""

from __future__ import annotations

from dataclasses import replace

from estimator.dtypes import FLOAT_DTYPES, PRECISIONS, tensor_peak_key
from estimator.errors import UserError
from estimator.ir import Graph
from hwdesc import HardwareDescriptor


class PrecisionError(UserError):
    pass


def check_precision(precision: str, hw: HardwareDescriptor) -> str:
    """The dtype `precision` maps to; PrecisionError when unknown or unsupported on `hw`."""
    if precision not in PRECISIONS:
        raise PrecisionError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    dtype = PRECISIONS[precision]
    key = tensor_peak_key(dtype)
    if key is not None and key not in hw.tensor_flops_per_s:
        have = ", ".join(sorted(hw.tensor_flops_per_s))
        raise PrecisionError(f"{hw.name} has no {precision} tensor cores (it has: {have})")
    return dtype


def retype(graph: Graph, dtype: str) -> Graph:
    new = {name: replace(t, dtype=dtype) for name, t in graph.tensors.items() if t.dtype in FLOAT_DTYPES}
    return graph.with_tensors(new) if new else graph
