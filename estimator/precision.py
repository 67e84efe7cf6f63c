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
    key = tensor_peak_key(DEPLOYED[precision][1] if precision in WEIGHT_ONLY else dtype)
    if key is not None and key not in hw.tensor_flops_per_s:
        have = ", ".join(sorted(hw.tensor_flops_per_s))
        raise PrecisionError(f"{hw.name} has no {precision} tensor cores (it has: {have})")
    return dtype


# precision -> (weight dtype, activation dtype) of a deployment precision (estimator/w8a8.py)
DEPLOYED: dict[str, tuple[str, str]] = {
    "fp8-w8a8": ("fp8e4m3", "bf16"),  # per-tensor fp8 (ModelOpt FP8, vLLM fp8)
    # 128 x 128 weight blocks, 1 x 128 activation blocks (DeepSeek-V3/R1, Qwen3 FP8 checkpoints:
    # quantization_config {"quant_method": "fp8", "weight_block_size": [128, 128]})
    "fp8-block": ("fp8e4m3", "bf16"),
    # NVFP4 weights and activations (ModelOpt NVFP4: e2m1 with an e4m3 scale per 16), Blackwell's fp4 MMA
    "nvfp4": ("fp4e2m1", "bf16"),
    # int4 weight-only, group 128 (AWQ / GPTQ / compressed-tensors; Kimi-K2.5): bf16 GEMMs dequantizing
    # the weight in their mainloop, no activation quantization
    "w4a16": ("int4g128", "bf16"),
}
# 1 x BLOCK activation scales of a block-scaled deployment precision (the QuantizeLinear's block_size)
ACTIVATION_BLOCK = {"fp8-block": 128}
# weight-only: the GEMM runs at the activation dtype (the tensor-core check is on that dtype)
WEIGHT_ONLY = frozenset({"w4a16"})


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
        from estimator.cost import mla_bmm

        return w8a8(graph, weight, act, block=ACTIVATION_BLOCK.get(precision, 0),
                    quantize_activations=precision not in WEIGHT_ONLY,
                    bmm_fp8=mla_bmm.bmm_fp8_kind(hw.family) if weight == "fp8e4m3" else None)
    return retype(graph, check_precision(precision, hw))


def retype(graph: Graph, dtype: str) -> Graph:
    new = {name: replace(t, dtype=dtype) for name, t in graph.tensors.items() if t.dtype in FLOAT_DTYPES}
    return graph.with_tensors(new) if new else graph
