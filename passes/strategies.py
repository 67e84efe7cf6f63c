"""Named fusion strategies, each written down once as data: the pass pipeline that lowers a graph the
way that compiler would. The order matters: attention first (it needs the raw score path), then the
fixed patterns (rotary before the norms: a q/k norm feeding the rotary, as in Gemma 3 and Qwen3, would
otherwise absorb the rotary's x * cos), then epilogues, then generic vertical fusion of what is left.

- none: one kernel per op (only canonicalization: views and shape arithmetic launch nothing anyway).
- ort: onnxruntime's CUDA provider with its transformer optimizer: Attention / MultiHeadAttention /
  GroupQueryAttention, (Skip)LayerNorm and SimplifiedLayerNorm, RotaryEmbedding, and bias + activation
  (BiasGelu, FastGelu, Gemm bias) fused; other pointwise ops stay separate kernels.
- inductor: torch.compile's Inductor as the issue defines it: vertical pointwise/reduction fusion
  (Triton) plus GEMM epilogues. NB: real Inductor also pattern-matches SDPA to flash attention; kept
  out so the strategy shows what fusion alone buys.
- tensorrt: TensorRT(-LLM)'s fusions: attention (fMHA), norms with their residual Add, GEMM epilogues, and
  the rotary and gated-MLP patterns its plugins fuse; other pointwise chains stay separate.
- fuse-moe (ort, tensorrt, max): per-token gathered expert weights become grouped GEMMs that read
  each active expert once (onnxruntime's MoE, TensorRT-LLM's MoE plugin).
- max: every rule the estimator knows: the most an inference compiler could fuse.
The default is tensorrt, the deployment most users target.
"""

from __future__ import annotations

STRATEGIES: dict[str, str] = {
    "none": "canonicalize",
    "ort": "canonicalize,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,fuse-bias-act",
    "inductor": "canonicalize,fuse-epilogue,fuse-elementwise",
    "tensorrt": "canonicalize,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,fuse-swiglu,fuse-epilogue",
    "max": ("canonicalize,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,fuse-swiglu,fuse-epilogue,"
            "fuse-elementwise"),
}
DEFAULT_STRATEGY = "tensorrt"


def pipeline_for(strategy: str) -> str:
    from passes.pipeline import PipelineError

    try:
        return STRATEGIES[strategy]
    except KeyError:
        raise PipelineError(
            f"unknown fusion strategy {strategy!r}; choose from {', '.join(STRATEGIES)}"
        ) from None
