"""`--precision`: re-type every float tensor (weights and activations) to ask "what if", or run a
deployment precision as serving engines do.

Integer and bool tensors are untouched. A precision the GPU has no tensor cores for is an error
(fp32 is always allowed: it runs on CUDA cores). `fp8-w8a8` (DEPLOYED) is a per-tensor fp8 checkpoint
as TensorRT-LLM / vLLM run it (estimator/w8a8.py): fp8 linear weights and GEMM inputs with their
quantization kernels, bf16 activations, norms and all-reduces, the lm_head and routers unquantized;
the KV cache at bf16 unless --kv-precision says otherwise."""

from __future__ import annotations

from dataclasses import replace

from estimator.dtypes import FLOAT_DTYPES, PRECISIONS, tensor_peak_key
from estimator.errors import UserError
from estimator.ir import Graph
from hwdesc import HardwareDescriptor


class PrecisionError(UserError):
    pass


def check_precision(precision: str, hw: HardwareDescriptor) -> str:
    """The dtype `precision` maps to (a deployment precision's: its weights' and GEMMs' dtype);
    PrecisionError when unknown or unsupported on `hw`."""
    if precision not in PRECISIONS and precision not in DEPLOYED:
        raise PrecisionError(f"unknown precision {precision!r}; choose from {', '.join(precision_names())}")
    dtype = PRECISIONS[precision] if precision in PRECISIONS else DEPLOYED[precision][0]
    key = tensor_peak_key(dtype)
    if key is not None and key not in hw.tensor_flops_per_s:
        have = ", ".join(sorted(hw.tensor_flops_per_s))
        raise PrecisionError(f"{hw.name} has no {precision} tensor cores (it has: {have})")
    return dtype


# precision -> (weight dtype, activation dtype) of a deployment precision (estimator/w8a8.py)
DEPLOYED: dict[str, tuple[str, str]] = {"fp8-w8a8": ("fp8e4m3", "bf16")}


def precision_names() -> list[str]:
    """--precision's choices: the re-typings (PRECISIONS) and the deployment precisions."""
    return [*PRECISIONS, *DEPLOYED]


def apply_precision(graph: Graph, precision: str, hw: HardwareDescriptor) -> Graph:
    """`graph` at `precision`: a deployment precision (DEPLOYED) through estimator/w8a8.py, else every
    float tensor re-typed (PrecisionError when unknown or without tensor cores on `hw`)."""
    if precision in DEPLOYED:
        from estimator.w8a8 import w8a8

        weight, act = DEPLOYED[precision]
        check_precision(precision, hw)
        return w8a8(graph, weight, act)
    return retype(graph, check_precision(precision, hw))


def retype(graph: Graph, dtype: str) -> Graph:
    new = {name: replace(t, dtype=dtype) for name, t in graph.tensors.items() if t.dtype in FLOAT_DTYPES}
    return graph.with_tensors(new) if new else graph
