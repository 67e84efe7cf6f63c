"""A file cache over models/hf_tiny.py: each tiny Hugging Face export is written once per machine, since
an export takes several seconds. A file is named by what its bytes depend on: the family, the torch,
transformers and onnxscript versions, and a digest of models/hf_tiny.py (configs and export code), so an
edit there or an upgrade exports afresh instead of reading a stale file."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from importlib import metadata
from pathlib import Path

from models import hf_tiny


def export_tiny(family: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of `family`'s tiny model exported to ONNX (dims named batch and seq), exported on first use."""
    import torch
    import transformers

    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "estimator-hf-exports")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{family}-t{torch.__version__}-hf{transformers.__version__}-{_source_tag()}.onnx"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp.onnx")
        hf_tiny.export(family, tmp)
        os.replace(tmp, path)
    return path


@functools.cache
def _source_tag() -> str:
    """onnxscript's version (torch's dynamo exporter writes through it) and the first hex digits of
    models/hf_tiny.py's digest."""
    try:
        script = metadata.version("onnxscript")
    except metadata.PackageNotFoundError:
        script = "none"
    digest = hashlib.sha256(Path(hf_tiny.__file__).read_bytes()).hexdigest()[:12]
    return f"os{script}-{digest}"
