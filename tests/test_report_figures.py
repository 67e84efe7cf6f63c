"""The roofline and breakdown figures (estimator/report/figures.py), read back from the Figure's artists."""

from __future__ import annotations

import pytest
from cliutil import assert_one_error_line, cli

import hwdesc
import models
from estimator.estimate import estimate, group_totals
from estimator.frontends.onnx_import import import_model
from estimator.report import figures
from passes import pipeline_for

H100 = hwdesc.load("h100-sxm")


@pytest.fixture(scope="module")
def result():
    return estimate(import_model(models.MODELS["llama-tiny"].build()), H100, precision="bf16",
                    dims={"batch": 1, "seq": 128}, pipeline=pipeline_for("tensorrt"))


def _gids(fig, prefix: str) -> dict[str, object]:
    return {a.get_gid(): a for ax in fig.axes for a in ax.get_children()
            if (a.get_gid() or "").startswith(prefix)}


def test_roofline_places_each_distinct_kernel_at_its_intensity_and_throughput(result):
    fig = figures.roofline(result)
    marks = _gids(fig, "kernel-")
    placed, moving = figures.placed(result), figures.movers(result)
    assert len(marks) == len(figures.distinct_kernels(result)) == len(placed) + len(moving)  # one each
    assert placed and moving  # llama-tiny has GEMMs and FLOP-free gathers / transposes
    for i, p, *_ in placed:
        xs, ys = marks[f"kernel-{i}"].get_data()
        w = p.kernel.work
        assert xs[0] == pytest.approx(float(w.total_flops) / float(w.dram_bytes))  # FLOP per DRAM byte
        assert ys[0] == pytest.approx(float(w.total_flops) / float(p.timing.estimate_s))  # FLOP/s
    # roofs: min(peak, intensity x DRAM bandwidth); H100 SXM bf16 dense tensor peak 989.4 TFLOP/s
    roof = _gids(fig, "roof-")["roof-tensor-bf16"]
    xs, ys = roof.get_data()
    assert ys.max() == pytest.approx(989.4e12)
    assert ys[0] == pytest.approx(xs[0] * H100.dram_bytes_per_s)  # the bandwidth slope at the left end
    # kernels without FLOPs (gathers, copies) sit in the left panel at the DRAM bandwidth they reach
    for i, p, _calls, _bw in moving:
        assert marks[f"kernel-{i}"].get_data()[1][0] == pytest.approx(
            float(p.kernel.work.dram_bytes) / float(p.timing.estimate_s))  # bytes per second
        assert float(p.kernel.work.total_flops) == 0
    assert not _gids(fig, "measured-")


def test_measured_marks_when_a_profile_is_joined(result):
    i, p, _, _, _ = figures.placed(result)[0]
    fig = figures.roofline(result, measured={p.kernel.name: 2 * float(p.timing.estimate_s)})
    (mark,) = _gids(fig, "measured-").values()
    assert mark.get_gid() == f"measured-{i}"
    flops, est = float(p.kernel.work.total_flops), float(p.timing.estimate_s)
    assert mark.get_data()[1][0] == pytest.approx(flops / (2 * est))  # measured twice the estimate


def test_breakdown_bars_sum_to_the_whole_estimate(result):
    fig = figures.breakdown(result)
    for key in ("kind", "limiter"):
        bars = _gids(fig, f"breakdown-{key}-")
        assert {g.split("-", 2)[2] for g in bars} == set(group_totals(result, key))
        assert sum(b.get_width() for b in bars.values()) == pytest.approx(100.0)


def test_svg_is_inline_and_ids_are_unique_per_figure(result):
    a, b = figures.to_svg(figures.breakdown(result)), figures.to_svg(figures.breakdown(result))
    assert a.startswith("<svg") and "<?xml" not in a
    assert 'id="figure_1"' not in a  # matplotlib's own ids carry a per-SVG prefix
    assert a != b


def test_cli_writes_the_figures(capsys, tmp_path):
    roof, bd = tmp_path / "roof.png", tmp_path / "bd.svg"
    code, _, err = cli(capsys, "--model", "llama-tiny", "--precision", "bf16", "--roofline-plot", str(roof),
                       "--breakdown-plot", str(bd))
    assert code == 0, err
    assert roof.read_bytes().startswith(b"\x89PNG")
    assert "<svg" in bd.read_text()
    code, _, err = cli(capsys, "--model", "llama-tiny", "--roofline-plot", str(tmp_path / "r.gif"))
    assert_one_error_line(code, err, "--roofline-plot")
    code, _, err = cli(capsys, "--model", "llama-tiny", "--breakdown-plot", str(tmp_path / "no" / "b.png"))
    assert_one_error_line(code, err, "--breakdown-plot")
