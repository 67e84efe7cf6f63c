"""The precision a checkpoint ships in, the default `--precision` of `--model NAME` and `--hf-config`
(estimator/cli/options.py): a bundled LLM's from the table below (its published config.json), a
config.json's from its `quantization_config`, else its `torch_dtype`.

Kept apart from models/ and hf_config.py, which import onnx: a `--model NAME` run whose graph comes
from the cache (estimator/frontends/bundled.py) imports no onnx, and finding its precision must not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The precision each bundled LLM's published checkpoint ships in (its config.json torch_dtype and
# quantization_config), the default of `estimate --model NAME` (estimator/cli/options.py). Models not
# listed keep their graph's dtypes (the small ones run under onnxruntime in fp32).
CHECKPOINT_PRECISION: dict[str, str] = {
    # meta-llama/Meta-Llama-3-8B, -70B, Llama-3.1-8B, -70B: "torch_dtype": "bfloat16"
    "llama-3-8b": "bf16", "llama-3-70b": "bf16", "llama-3.1-8b": "bf16", "llama-3.1-70b": "bf16",
    # Qwen/Qwen3-32B, Qwen3-235B-A22B, mistralai/Mixtral-8x7B-v0.1: "torch_dtype": "bfloat16"
    "qwen3-32b": "bf16", "qwen3-235b-a22b": "bf16", "mixtral-8x7b": "bf16",
    # deepseek-ai/DeepSeek-V3, moonshotai/Kimi-K2-Instruct: quantization_config {"quant_method": "fp8",
    # "weight_block_size": [128, 128]} (1 x 128 activation blocks at run time)
    "deepseek-v3": "fp8-block", "kimi-k2": "fp8-block",
    # openai/gpt-oss-*: "torch_dtype": "bfloat16", the experts MXFP4 (stored so by the builder)
    "gpt-oss-120b": "bf16", "gpt-oss-20b": "bf16",
}


def bundled_precision(name: str) -> str | None:
    """The published checkpoint's precision of bundled model `name` (its -decode twin alike), or None."""
    return CHECKPOINT_PRECISION.get(name.removesuffix("-decode"))


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def checkpoint_precision(cfg: Mapping[str, Any]) -> str | None:
    """The --precision a config.json's checkpoint runs at: its quantization_config (fp8 with
    weight_block_size: fp8-block; per-tensor fp8: fp8-w8a8; ModelOpt NVFP4: nvfp4; AWQ / GPTQ /
    compressed-tensors 4-bit integer weights: w4a16; MXFP4: the experts are stored so and the rest runs at
    torch_dtype), else its torch_dtype (`dtype` in newer transformers); None when it says neither."""
    if not isinstance(cfg, Mapping):
        return None
    text = cfg.get("text_config")
    q = cfg.get("quantization_config") or (text.get("quantization_config") if isinstance(text, Mapping)
                                            else None) or {}
    if isinstance(q, Mapping):
        method = str(q.get("quant_method") or "").lower()
        algo = str(q.get("quant_algo") or "").upper()
        if method == "fp8":
            return "fp8-block" if q.get("weight_block_size") else "fp8-w8a8"
        if method == "modelopt" and algo in ("NVFP4", "FP8"):
            return "nvfp4" if algo == "NVFP4" else "fp8-w8a8"
        if method in ("awq", "gptq") and (q.get("bits") or q.get("w_bit") or 4) == 4:
            return "w4a16"
        if method == "compressed-tensors" and _int4_weights(q):
            return "w4a16"
    for source in (cfg, text if isinstance(text, Mapping) else {}):
        dtype = source.get("torch_dtype") or source.get("dtype")
        if isinstance(dtype, str) and dtype.removeprefix("torch.") in TORCH_DTYPES:
            return TORCH_DTYPES[dtype.removeprefix("torch.")]
    return None


def _int4_weights(q: Mapping[str, Any]) -> bool:
    groups = q.get("config_groups") or {}
    for g in groups.values() if isinstance(groups, Mapping) else ():
        w = g.get("weights") if isinstance(g, Mapping) else None
        if isinstance(w, Mapping) and w.get("num_bits") == 4 and w.get("type", "int") == "int":
            return True
    return False


