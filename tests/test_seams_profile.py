"""`estimate profile FILE --model M --recommend / --report`: measured kernels far from their estimate or
their peak, with the counter that shows why; the report's roofline places the measured throughput.

The model is test_profile_join's y = softmax(x @ w) + b (fp32, x [64, 4096], w [4096, 4096]); on H100,
fusion none, tile-level: mm 49.9 us, sm 3.39 us, add 3.77 us estimated (bounds 32.1, 0.626, 0.939 us).
The synthetic Nsight Systems export runs mm 50 us (near its estimate, CUDA cores busy), sm 12 us (3.5x
its estimate) and add 5 us (1.3x its estimate, but DRAM at 3.15 MB / 5 us = 0.63 TB/s, 19% of 3.35 TB/s:
no unit busy)."""

from __future__ import annotations

import json
import re

import pytest
from cliutil import assert_one_error_line, cli
from test_profile_join import _iteration, _model

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_file
from estimator.profile import synthetic
from passes import pipeline_for


@pytest.fixture()
def run(tmp_path):
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 50, 12, 5))
    return path, _model(tmp_path)


def _estimates(model: str) -> dict[str, tuple[float, float]]:
    r = estimate(import_file(model), hwdesc.load("h100-sxm"), pipeline=pipeline_for("none"))
    return {p.kernel.name: (float(p.timing.estimate_s), float(p.timing.bound_s)) for p in r.kernels}


def test_kernels_far_from_their_estimate_or_peak_with_the_counter(run, capsys):
    path, model = run
    code, out, err = cli(capsys, "profile", path, "--model", model, "--json", "--recommend")
    assert code == 0, err
    doc = json.loads(out)
    est = _estimates(model)
    measured = {k["name"]: k["measured_s"] for k in doc["estimate"]["kernels"]}
    recs = {r["evidence"]["trigger"]: r for r in doc["recommendations"]}
    assert set(recs) == {"estimate", "peak"}  # mm: near its estimate with its CUDA cores busy: not listed
    sm, add = recs["estimate"], recs["peak"]
    assert "tune sm" in sm["action"] and "tune add" in add["action"]
    # sm: 12 us measured, 3.39 us estimated: gain = measured - estimate
    assert sm["gain_s"] == pytest.approx(measured["sm"] - est["sm"][0], rel=1e-12)
    assert measured["sm"] == pytest.approx(12e-6)
    # add: 5 us, within 1.5x of its 3.77 us estimate but no unit busy: gain = measured - bound
    assert add["gain_s"] == pytest.approx(measured["add"] - est["add"][1], rel=1e-12)
    assert add["evidence"]["bottleneck"] == "latency"
    assert add["evidence"]["counter"] == "dram % of peak"
    # DRAM share from the estimator's Work over the measured time: 3 x 64 x 4096 x 4 B / 5 us over the
    # export's own DRAM peak (synthetic.py's TARGET_INFO_GPU: 3.35232 TB/s)
    dram = 100 * 3 * 64 * 4096 * 4 / 5e-6 / 3_352_320_000_000
    assert add["evidence"]["counter_value"] == pytest.approx(dram, rel=1e-9)  # 18.77%
    # the metric is measured time: gain_pct of the joined kernels' measured total (50 + 12 + 5 us)
    total = sum(measured.values())
    assert total == pytest.approx(67e-6)
    assert sm["metric"] == "measured_s" and sm["gain_pct"] == pytest.approx(100 * sm["gain_s"] / total)
    assert {r["action"] for r in doc["whatifs"]} == {r["action"] for r in doc["recommendations"]}


def test_text_output_lists_the_findings(run, capsys):
    path, model = run
    code, out, _ = cli(capsys, "profile", path, "--model", model, "--recommend")
    assert code == 0
    tail = out[out.index("recommendations"):]
    assert "tune sm (measured 3.5x its estimate)" in tail and "measured -" in tail
    assert "no unit busy" in tail


def test_report_places_the_measured_marks(run, capsys, tmp_path):
    path, model = run
    page = tmp_path / "p.html"
    code, _, err = cli(capsys, "profile", path, "--model", model, "--report", str(page), "--recommend")
    assert code == 0 and "report written" in err
    html = page.read_text()
    assert len(set(re.findall(r'<g id="measured-(\d+)"', html))) == 3  # mm, sm, add: all joined
    assert "hollow: measured" in html and "tune sm" in html


def test_recommend_needs_a_model_and_a_good_threshold(run, capsys):
    path, model = run
    code, _, err = cli(capsys, "profile", path, "--recommend")
    assert_one_error_line(code, err, "give --model")
    code, _, err = cli(capsys, "profile", path, "--model", model, "--recommend",
                       "--recommend-threshold", "-1")
    assert_one_error_line(code, err, "must be >= 0")
    code, _, err = cli(capsys, "profile", path, "--model", model, "--report", "x.txt")
    assert_one_error_line(code, err, "ending in .html")
