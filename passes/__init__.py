"""Graph passes. Importing this package registers every pass."""

from passes import (  # noqa: F401  (registers their passes)
    canonicalize,
    dce,
    fuse_attention,
    fuse_elementwise,
    fuse_epilogue,
    fuse_moe,
    fuse_norm,
    fuse_patterns,
    fuse_slice_scatter,
    kv_inplace,
    last_token_logits,
)
from passes.pipeline import PassResult, Pipeline, PipelineError, available_passes, register_pass
from passes.strategies import DEFAULT_STRATEGY, STRATEGIES, pipeline_for

DEFAULT_PIPELINE = STRATEGIES["none"]  # the library default; the CLI defaults to DEFAULT_STRATEGY

__all__ = [
    "DEFAULT_PIPELINE",
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "pipeline_for",
    "PassResult",
    "Pipeline",
    "PipelineError",
    "available_passes",
    "register_pass",
]
