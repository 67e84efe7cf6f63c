"""--trace: the estimated timeline as Chrome trace events (JSON Object Format)."""

from __future__ import annotations

import json

import pytest
from cliutil import assert_one_error_line, cli

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.report.trace import TraceError, to_trace
from passes import pipeline_for

# The Chrome trace event format (the spec Perfetto's JSON importer follows): phases this file may use.
PHASES = {"X", "B", "E", "i", "I", "M", "C", "b", "e", "n", "s", "t", "f"}


def check_chrome_trace(doc: dict) -> None:
    """Every event has ph, ts, dur, pid, tid of the right types; complete events have dur >= 0; names
    are strings; the object form has a traceEvents list and a known displayTimeUnit."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    for ev in doc["traceEvents"]:
        assert {"ph", "ts", "dur", "pid", "tid", "name"} <= set(ev), ev
        assert ev["ph"] in PHASES
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        assert isinstance(ev["name"], str)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            # the format's *_sort_index events carry an integer sort_index, the *_name ones a name
            key = "sort_index" if ev["name"].endswith("_sort_index") else "name"
            assert set(ev["args"]) == {key}, ev
            assert isinstance(ev["args"][key], int if key == "sort_index" else str), ev
    json.dumps(doc, allow_nan=False)  # no NaN / Infinity: strict JSON parsers reject them


def test_trace_file_is_a_chrome_trace_whose_slices_sum_to_the_estimate(capsys, tmp_path):
    path = tmp_path / "t.json"
    code, out, err = cli(capsys, "--model", "llama-tiny", "--precision", "bf16", "--trace", str(path),
                         "--json")
    assert code == 0, err
    assert f"trace written to {path}" in err
    doc = json.loads(path.read_text())
    est = json.loads(out)
    check_chrome_trace(doc)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(est["kernels"])  # one slice per kernel
    assert [s["name"] for s in slices] == [k["name"] for k in est["kernels"]]
    # the slices sum to the estimate (microseconds), and lie end to end from 0
    assert sum(s["dur"] for s in slices) == pytest.approx(est["total"]["estimate_s"] * 1e6, rel=1e-9)
    assert slices[0]["ts"] == 0
    for a, b in zip(slices, slices[1:], strict=False):
        assert b["ts"] == pytest.approx(a["ts"] + a["dur"], rel=1e-12)
    first = slices[0]["args"]
    assert set(first) >= {"bound_s", "estimate_s", "limiter", "op", "flops", "dram_bytes", "tile"}
    assert first["estimate_s"] == est["kernels"][0]["estimate_s"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {"GPU 0: NVIDIA H100 SXM5 80GB (h100-sxm)"}


def test_one_process_per_gpu_and_collectives_on_their_own_track():
    hw = hwdesc.load("h100-sxm")
    r = estimate(import_model(models.MODELS["llama-tiny"].build()), hw, precision="bf16",
                 dims={"batch": 1, "seq": 8}, pipeline=pipeline_for("tensorrt"))
    doc = to_trace(r, gpus=2)
    check_chrome_trace(doc)
    assert {e["pid"] for e in doc["traceEvents"]} == {0, 1}
    per_gpu = [sum(e["dur"] for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == g) for g in (0, 1)]
    assert per_gpu[0] == per_gpu[1]
    # no collectives in one GPU's graph
    assert {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"} == {0}
    from dataclasses import replace

    comm = replace(r.kernels[0], kernel=replace(r.kernels[0].kernel, kind="communication"))
    r.kernels = [comm, *r.kernels[1:]]
    doc = to_trace(r)
    assert doc["traceEvents"][-len(r.kernels)]["tid"] == 1  # the collective's slice
    assert any(e["name"] == "thread_name" and e["args"]["name"] == "collectives" for e in doc["traceEvents"])


def test_trace_errors(capsys, tmp_path):
    r = estimate(import_model(models.MODELS["llama-tiny"].build()), hwdesc.load("h100-sxm"), roofline=True)
    with pytest.raises(TraceError, match="bind every free dim"):
        to_trace(r)
    code, _, err = cli(capsys, "--model", "llama-tiny", "--trace", str(tmp_path / "t.txt"))
    assert_one_error_line(code, err, "ending in .json")
    code, _, err = cli(capsys, "--model", "llama-tiny", "--trace", str(tmp_path / "no" / "t.json"))
    assert_one_error_line(code, err, "--trace")
