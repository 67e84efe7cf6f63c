"""The graph cache of bundled models (estimator/frontends/bundled.py): a cached graph is the built one, a
cached run imports no onnx, and a changed source, a broken file or the off switch builds afresh."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import models
from estimator.frontends import bundled
from estimator.frontends.onnx_import import import_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(bundled.CACHE_ENV, raising=False)  # conftest.py points it at the session's folder
    return tmp_path / "gpu-estimator" / "graphs"


def _same(a, b):
    assert (a.name, a.inputs, a.outputs, a.opsets, a.dims) == (b.name, b.inputs, b.outputs, b.opsets, b.dims)
    assert a.tensors == b.tensors
    assert [a.node(n) for n in a.nx.nodes] == [b.node(n) for n in b.nx.nodes]
    assert list(a.nx.edges(data=True)) == list(b.nx.edges(data=True))


def test_a_miss_writes_the_built_graph_and_a_hit_reads_it(cache):
    built = import_model(models.MODELS["llama-tiny"].build())
    graph, dims = bundled.bundled_graph("llama-tiny")  # miss: built here and written
    assert dims == {"batch": 1, "seq": 128}
    [path] = cache.glob("llama-tiny-*.pickle")
    _same(graph, built)
    again, _ = bundled.bundled_graph("llama-tiny")  # hit: read back
    _same(again, built)
    assert again is not graph


def test_an_unknown_name_is_none(cache):
    assert bundled.bundled_graph("no-such-model") is None
    assert not cache.exists() or not list(cache.iterdir())


def test_a_broken_file_is_rebuilt_and_overwritten(cache):
    bundled.bundled_graph("llama-tiny")
    [path] = cache.glob("llama-tiny-*.pickle")
    path.write_bytes(b"not a pickle")
    graph, _ = bundled.bundled_graph("llama-tiny")
    _same(graph, import_model(models.MODELS["llama-tiny"].build()))
    assert path.read_bytes() != b"not a pickle"


def test_a_new_source_tag_replaces_the_older_file(cache, monkeypatch):
    bundled.bundled_graph("llama-tiny")
    [old] = cache.glob("llama-tiny-*.pickle")
    monkeypatch.setattr(bundled, "_source_tag", lambda: "0123456789abcdef")  # as after an edit
    bundled.bundled_graph("llama-tiny")
    assert [p.name for p in cache.glob("llama-tiny-*.pickle")] == [old.name.rsplit("-", 1)[0] +
                                                                  "-0123456789abcdef.pickle"]


def test_the_off_switch_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv(bundled.CACHE_ENV, "0")
    graph, _ = bundled.bundled_graph("llama-tiny")
    assert graph.tensors and not cache.exists()


def test_a_folder_of_ones_own(tmp_path, monkeypatch):
    monkeypatch.setenv(bundled.CACHE_ENV, str(tmp_path / "mine"))
    bundled.bundled_graph("llama-tiny")
    assert len(list((tmp_path / "mine").glob("llama-tiny-*.pickle"))) == 1


def test_the_digest_follows_the_builders_frontends_and_ir_source(tmp_path):
    for rel in ("models/llama.py", "estimator/frontends/onnx_import.py", "estimator/ir.py",
                "estimator/pricing/price.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    before = bundled.source_digest(tmp_path)
    (tmp_path / "estimator/pricing/price.py").write_text("x = 2\n")  # pricing runs after the cache
    assert bundled.source_digest(tmp_path) == before
    for rel in ("models/llama.py", "estimator/frontends/onnx_import.py", "estimator/ir.py"):
        (tmp_path / rel).write_text("x = 3\n")
        assert bundled.source_digest(tmp_path) != before
        before = bundled.source_digest(tmp_path)


def _cli(env: dict, *argv: str) -> tuple[dict, list[str]]:
    """The CLI's JSON and the onnx modules the process imported."""
    code = ("import sys, json, io, contextlib\nfrom estimator.cli.main import main\nout = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n    rc = main(sys.argv[1:])\n"
            "print(json.dumps({'rc': rc, 'out': out.getvalue(), "
            "'onnx': sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'ml_dtypes'))}))")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    doc = json.loads(proc.stdout)
    assert doc["rc"] == 0
    return json.loads(doc["out"]), doc["onnx"]


def test_a_cached_cli_run_prints_the_same_and_imports_no_onnx(tmp_path):
    env = {**os.environ, bundled.CACHE_ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    argv = ("--model", "llama-tiny-decode", "--arch", "b200", "--json")
    first, imported = _cli(env, *argv)  # builds (onnx) and writes
    assert "onnx" in imported
    cached, imported = _cli(env, *argv)
    assert cached == first
    assert imported == []  # not onnx, not ml_dtypes (~0.4 s of start-up)
