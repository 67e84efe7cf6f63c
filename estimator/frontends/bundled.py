"""The IR graph of a bundled model (`--model NAME`), kept in a file cache between processes.

Building a bundled model writes ONNX (models/) and imports it (onnx_import.py). Both need onnx, and
importing onnx imports ml_dtypes, whose numpy type registration alone is ~0.4 s of a 1.5 s `estimate
--model llama-3-8b` (numpy's ufunc loop registration, quadratic in the loops of a ufunc); the build and
import are ~0.2 s more. A process that finds the graph here unpickles it (~0.05 s for llama-3-8b) and
imports neither onnx nor the builders.

A file is named by what its bytes depend on, as models/hf.py names its exports: the model name, a digest
of the source of the builders (models/), the frontends (estimator/frontends/) and the IR's modules
(estimator/*.py), and of Python's version and the installed onnx, sympy, numpy and networkx (the path,
size and mtime of their `__init__.py`, read without importing them). An edit there or an upgrade builds
afresh; writing a file removes that model's older files of the same source tree. The graph is the one
`import_model(build())` returns, pickled as it leaves the import (before any pass), so a cached run prices
the graph a fresh build would give (tools/check_same_numbers.py compares the two).

Location: `$XDG_CACHE_HOME/gpu-estimator/graphs/` (else `~/.cache/...`), beside the host descriptor
(estimator/truth/host.py), or the folder `GPU_ESTIMATOR_GRAPH_CACHE` names (the tests use one of their
own); `GPU_ESTIMATOR_GRAPH_CACHE=0` turns the cache off. An unwritable folder only means every run builds.
NB: the files are pickles, loaded as code would be: the folder must be one only its user writes to.
"""

from __future__ import annotations

import copyreg
import functools
import hashlib
import importlib.util
import os
import pickle
import sys
from collections.abc import Mapping
from pathlib import Path

from estimator.ir import Graph, Node

CACHE_ENV = "GPU_ESTIMATOR_GRAPH_CACHE"  # a folder, or 0: no cache
THIRD_PARTY = ("onnx", "sympy", "numpy", "networkx")  # what the build, the import and the pickle rely on
_ROOT = Path(__file__).resolve().parents[2]  # the source tree holding estimator/ and models/


def bundled_graph(name: str) -> tuple[Graph, dict[str, int]] | None:
    """(graph, default dims) of bundled model `name` as `import_model(models.MODELS[name].build())`
    gives it, from the cache when it holds it; None when no bundled model has that name."""
    path = _path(name)
    if path is not None and path.exists():
        try:
            with path.open("rb") as f:
                graph, dims = pickle.load(f)
            return graph, dims
        except Exception:  # a truncated or foreign file: build afresh (and overwrite it)
            pass
    # NB: imported on a miss only, not to break a cycle: the builders and the ONNX import both import onnx
    # (and with it ml_dtypes), the start-up a hit exists to save
    import models
    from estimator.frontends.onnx_import import import_model

    if name not in models.MODELS:
        return None
    spec = models.MODELS[name]
    graph, dims = import_model(spec.build()), dict(spec.default_dims)
    if path is not None:
        _write(path, graph, dims)
    return graph, dims


def cache_dir() -> Path | None:
    """The cache folder, None when the cache is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "0":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-estimator" / "graphs"


def _path(name: str) -> Path | None:
    folder = cache_dir()
    if folder is None or not name.replace("-", "").replace(".", "").replace("_", "").isalnum():
        return None
    return folder / f"{name}-{_tree_tag()}-{_source_tag()}.pickle"


@functools.cache
def _tree_tag() -> str:
    """Which source tree (several checkouts share one cache folder)."""
    return hashlib.sha256(str(_ROOT).encode()).hexdigest()[:8]


@functools.cache
def _source_tag() -> str:
    return source_digest(_ROOT)


def source_digest(root: Path) -> str:
    """Digest of what a bundled model's graph is made from, under source tree `root`."""
    h = hashlib.sha256(sys.version.encode())
    sources = [*sorted((root / "models").rglob("*.py")),
               *sorted((root / "estimator" / "frontends").rglob("*.py")),
               *sorted((root / "estimator").glob("*.py"))]
    for src in sources:
        h.update(str(src.relative_to(root)).encode())
        h.update(src.read_bytes())
    for package in THIRD_PARTY:
        spec = importlib.util.find_spec(package)
        origin = spec.origin if spec is not None and spec.origin else ""
        st = os.stat(origin) if origin else None
        h.update(f"{package}:{origin}:{st and st.st_size}:{st and st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _node(node: Node):
    """A Node pickles through its constructor: its attrs are a mappingproxy, which pickle refuses."""
    return Node, (node.name, node.op_type, node.domain, node.inputs, node.outputs, dict(node.attrs),
                  node.body)


def _write(path: Path, graph: Graph, dims: Mapping[str, int]) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as f:
            pickler = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.dispatch_table = {**copyreg.dispatch_table, Node: _node}
            pickler.dump((graph, dict(dims)))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
        stem = path.name.rsplit("-", 1)[0]
        for old in path.parent.glob(f"{stem}-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except Exception:  # a read-only or full disk, a value pickle refuses: no cache, the same graph
        tmp.unlink(missing_ok=True)
