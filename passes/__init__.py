"""Graph passes. Importing this package registers every pass."""

from passes import dce  # noqa: F401  (registers its pass)
from passes.pipeline import PassResult, Pipeline, PipelineError, available_passes, register_pass

DEFAULT_PIPELINE = "dce"

__all__ = ["DEFAULT_PIPELINE", "PassResult", "Pipeline", "PipelineError", "available_passes",
           "register_pass"]
