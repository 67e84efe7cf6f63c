"""GPU inference performance estimator.

`from_torch` (estimate a PyTorch module through torch-mlir) is resolved lazily, so importing
`estimator` never imports torch."""

from typing import Any

__all__ = ["from_torch"]


def __getattr__(name: str) -> Any:
    if name == "from_torch":
        from estimator.frontends.torch_api import from_torch

        return from_torch
    raise AttributeError(f"module 'estimator' has no attribute {name!r}")
