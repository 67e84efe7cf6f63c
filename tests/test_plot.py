"""Plots: the figure's lines hold exactly the sweep's data; files are written; bad paths are one error."""

import numpy as np
import pytest
from cliutil import cli

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.study.plot import limiter_changes, make_figure, time_unit
from estimator.study.sweep import Compiled, grid, parse_sweeps


@pytest.fixture(scope="module")
def runs():
    graph = import_model(models.MODELS["gpt2-small"].build())
    out = []
    for arch in ("h100-sxm", "b200"):
        compiled = Compiled(estimate(graph, hwdesc.load(arch), dims={"batch": 1}, roofline=True))
        out.append((compiled, compiled.evaluate(grid(parse_sweeps(["seq=16:16384:x2"])))))
    return out


def _lines(fig):
    return {line.get_gid(): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}


def test_lines_hold_the_sweep(runs):
    fig = make_figure(runs, "seq", title="gpt2-small")
    lines = _lines(fig)
    _, factor = time_unit(np.concatenate([p.estimate_s for _, p in runs] + [p.bound_s for _, p in runs]))
    for _, pts in runs:
        est, bound = lines[f"estimate:{pts.arch}"], lines[f"bound:{pts.arch}"]
        assert np.array_equal(est.get_xdata(), pts.dims["seq"])
        assert np.allclose(est.get_ydata() / factor, pts.estimate_s, rtol=1e-12)
        assert np.allclose(bound.get_ydata() / factor, pts.bound_s, rtol=1e-12)
        assert est.get_linestyle() == "-" and bound.get_linestyle() == "--"
        assert est.get_color() == bound.get_color()
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "seq (tokens)"
    assert ax.get_ylabel().startswith("latency per forward pass (") and ax.get_ylabel().endswith("s)")
    assert "gpt2-small" in ax.get_title()
    # Each line is labelled at its right end (no legend hunt).
    assert {t.get_text() for t in ax.texts} >= {"h100-sxm", "b200"}


def test_limiter_change_markers_sit_where_the_dominant_limiter_changes(runs):
    fig = make_figure(runs, "seq")
    lines = _lines(fig)
    found = 0
    for compiled, pts in runs:
        changes = limiter_changes(compiled, pts, "seq", {}, np.arange(len(pts)))
        marker = lines.get(f"limiter-change:{pts.arch}")
        assert (marker is not None) == bool(changes)
        for x, _, before, after in changes:
            assert before != after
            # dims are counts: x is the first integer with the new limiter, x - 1 the last with the old
            assert x == int(x)
            near = compiled.evaluate({"seq": np.array([x - 1, x])}).dominant_limiter()
            assert list(near) == [before, after]
            found += 1
    assert found  # gpt2-small fp32 goes launch -> compute -> memory over this range


def test_stack_panels(runs):
    fig = make_figure(runs, "seq", stack="kind")
    assert len(fig.axes) == 3  # the latency plot and one share panel per GPU
    for ax, (_, pts) in zip(fig.axes[1:], runs, strict=True):
        assert ax.get_ylim() == (0, 100)
        assert len(ax.collections) == len(pts.by_kind)  # one stacked band per kind


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_cli_writes_the_file(capsys, tmp_path, suffix, magic):
    path = tmp_path / f"s{suffix}"
    code, out, err = cli(capsys, "--model", "llama-tiny", "--sweep", "seq=64:1024:x2",
                         "--arch", "h100-sxm,b200", "--plot", str(path), "--plot-stack", "limiter")
    assert code == 0, err
    assert path.read_bytes().startswith(magic)
    assert "plot written to" in err


def test_cli_bad_plot_directory_is_one_error(capsys, tmp_path):
    code, _, err = cli(capsys, "--model", "llama-tiny", "--sweep", "seq=64,128", "--plot",
                       str(tmp_path / "missing" / "s.png"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: --plot")
