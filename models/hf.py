"""A file cache over models/hf_tiny.py: each tiny Hugging Face export is written once per machine (per
torch and transformers version), since an export takes several seconds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from models import hf_tiny


def export_tiny(family: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of `family`'s tiny model exported to ONNX (dims named batch and seq), exported on first use."""
    import torch
    import transformers

    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "estimator-hf-exports")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{family}-t{torch.__version__}-hf{transformers.__version__}-v2.onnx"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp.onnx")
        hf_tiny.export(family, tmp)
        os.replace(tmp, path)
    return path
