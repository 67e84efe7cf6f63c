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
- fuse-slice-scatter (ort, tensorrt, max; before attention, whose K it builds): a fresh buffer filled
  by exported slice_scatter writes (DeepSeek-V3's query / key assembly) is one concat kernel, as an
  engine builds it (passes/fuse_slice_scatter.py).
- max: every rule the estimator knows: the most an inference compiler could fuse.
ort, tensorrt and max also append the KV cache in place (kv-inplace: a decode step writes only
its new rows, as every serving engine's paged cache does); none keeps the literal Concat copy.
The default is tensorrt, the deployment most users target.

A strategy follows the execution provider it names: on a descriptor of another family the strategy may
lower differently (FAMILY_STRATEGIES). onnxruntime's CPU provider has no flash-attention kernel: its
fused Attention computes and stores the S x S scores (measured on transformers exports at seq 1024:
the flash pricing came out 50-65% below the run, `none` within ~6%), so `ort` on a `cpu` descriptor
keeps the score path as its ops (QK^T, softmax, PV, each through memory).
"""

from __future__ import annotations

STRATEGIES: dict[str, str] = {
    "none": "canonicalize",
    "ort": ("canonicalize,kv-inplace,fuse-slice-scatter,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,"
            "fuse-bias-act"),
    "inductor": "canonicalize,fuse-epilogue,fuse-elementwise",
    "tensorrt": ("canonicalize,kv-inplace,fuse-slice-scatter,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,"
                 "fuse-swiglu,fuse-epilogue"),
    "max": ("canonicalize,kv-inplace,fuse-slice-scatter,fuse-attention,fuse-moe,fuse-rotary,fuse-norm,"
            "fuse-swiglu,fuse-epilogue,fuse-elementwise"),
}
DEFAULT_STRATEGY = "tensorrt"
# (strategy, hardware family) -> its pipeline there, where it differs from STRATEGIES[strategy].
FAMILY_STRATEGIES: dict[tuple[str, str], str] = {
    ("ort", "cpu"): "canonicalize,fuse-rotary,fuse-norm,fuse-bias-act",
}


def pipeline_for(strategy: str, family: str | None = None) -> str:
    """The pass pipeline of `strategy`, on hardware of `family` when given (see FAMILY_STRATEGIES)."""
    from passes.pipeline import PipelineError

    try:
        return FAMILY_STRATEGIES.get((strategy, family)) or STRATEGIES[strategy]
    except KeyError:
        raise PipelineError(
            f"unknown fusion strategy {strategy!r}; choose from {', '.join(STRATEGIES)}"
        ) from None
