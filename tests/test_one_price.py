"""One price per kernel whatever the path: a sweep point equals --dim at that point (the sweep's builds and
the pricing core at arrays, estimator/pricing/points.py; the core itself on each number type:
tests/test_pricing_core.py); the closed form says which kernels it approximates; `ort` on a CPU
descriptor follows onnxruntime's CPU provider (no flash attention)."""

import json

import numpy as np
import onnx
import pytest
from cliutil import cli

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.study.closed_form import closed_form
from estimator.study.crossover_points import point_crossovers
from estimator.study.sweep import Compiled, Sweeper
from models import build as build_model
from onnxutil import matmul_model
from passes import STRATEGIES, pipeline_for

B200 = hwdesc.load("b200")


def _sweeper(graph, hw, fixed, precision=None):
    pipe = pipeline_for("tensorrt", hw.family)
    return lambda extra: estimate(graph, hw, precision=precision, dims={**fixed, **extra}, pipeline=pipe)


@pytest.mark.parametrize("name,swept,precision", [("llama-tiny", "seq", None), ("llama-tiny", "seq", "bf16"),
                                                  ("llama-tiny-decode", "past_seq", "bf16")])
def test_sweep_points_equal_dim_estimates(name, swept, precision):
    graph = import_model(build_model(name))
    build = _sweeper(graph, B200, {"batch": 2}, precision)
    values = [1, 5, 64, 1000, 8192]
    pts = Sweeper(build).evaluate({swept: np.array(values, dtype=float)})
    for i, v in enumerate(values):
        r = build({swept: v})
        assert float(pts.estimate_s[i]) == pytest.approx(float(r.totals["estimate_s"]), rel=1e-9), v
        assert float(pts.bound_s[i]) == pytest.approx(float(r.totals["bound_s"]), rel=1e-9), v


def test_closed_form_names_the_kernels_it_approximates():
    # one GEMM [m, 4096] x [4096, 4096] with m free: its formula keeps the tile chosen at m = 4096
    r = estimate(import_model(matmul_model("m", 4096, 4096, weight=True)), B200)
    cf = closed_form(r, {"m": (16, 4096)})
    (approx,) = cf.kernels
    assert approx.kernel == "mm" and approx.tile == r.kernels[0].kernel.tile.tile
    errors = dict((at["m"], e) for at, e in approx.rel_error)
    assert abs(errors[4096]) < 1e-9  # exact where the tile was chosen
    assert errors[16] > 0.05  # a 16-row GEMM runs a smaller (or split-K) tile: the formula is slower
    assert "approximate 1 kernel(s)" in "\n".join(cf.lines())
    # the per-point price is what --dim gives at m = 16
    (k,) = estimate(import_model(matmul_model(16, 4096, 4096, weight=True)), B200).kernels
    formula = float(r.totals["estimate_s"].subs(dim("m"), 16))
    assert errors[16] == pytest.approx(formula / float(k.timing.estimate_s) - 1, rel=1e-9)


def test_cli_free_dim_json_and_symbolic_carry_the_closed_form_report(capsys, tmp_path):
    path = tmp_path / "mm.onnx"
    onnx.save(matmul_model("m", 4096, 4096), str(path))
    code, out, _ = cli(capsys, str(path), "--json", "--arch", "b200")
    assert code == 0
    report = json.loads(out)["closed_form"]
    assert report["range"] == {"m": [64, 16384]} and not report["exact"]
    assert [a["kernel"] for a in report["approximate"]] == ["mm"]
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--symbolic", "--arch", "b200")
    assert code == 0 and "# closed form" in out


def test_ort_on_a_cpu_descriptor_keeps_the_score_path():
    assert pipeline_for("ort") == STRATEGIES["ort"] and "fuse-attention" in STRATEGIES["ort"]
    assert "fuse-attention" not in pipeline_for("ort", "cpu")
    assert pipeline_for("ort", "hopper") == STRATEGIES["ort"]
    assert pipeline_for("none", "cpu") == STRATEGIES["none"]


def test_crossovers_are_found_on_the_priced_points():
    # one GEMM [m, 4096] x [4096, 4096] (a weight): memory-limited at small m, compute-limited at large;
    # the change is where --dim's own limiter changes, to the integer
    graph = import_model(matmul_model("m", 4096, 4096, weight=True))
    r = estimate(graph, B200)
    found = [c for c in point_crossovers(Compiled(r), "m", {}) if c.what == "limiter"]
    assert found  # (at small m the load pipeline, counted as compute, limits the few CTAs)
    for c in found:
        b = c.to_json()["from_int"]
        a = b - 1
        (ka,) = estimate(graph, B200, dims={"m": a}).kernels
        (kb,) = estimate(graph, B200, dims={"m": b}).kernels
        assert (ka.timing.limiter, kb.timing.limiter) == (c.before, c.after), c


def test_closed_form_corners_stay_linear_in_many_free_dims():
    from estimator.study.closed_form import _corners

    two = {"a": (1, 9), "b": (2, 8)}
    assert sorted(_corners(list(two), two)) == [(1, 2), (1, 8), (9, 2), (9, 8)]  # all 2**2 corners
    many = {f"d{i}": (64, 16384) for i in range(17)}  # 2**17 corners: 2 x 17 + 2 = 36 points instead
    pts = _corners(list(many), many)
    assert len(pts) == 2 * 17 + 2
    assert (64,) * 17 in pts and (16384,) * 17 in pts
    assert all(sum(v == 16384 for v in p) in (0, 1, 16, 17) for p in pts)  # at most one dim off its end


def test_check_one_price_serve_holds_a_moe_model():
    """tools/check_one_price --serve: gpt-oss-20b's serving steps (MoE kernels included) equal --dim's
    price of the same folded graphs (the streaming-model MoE pricing of the points path was 18 % off on
    gpt-oss-120b)."""
    from tools.check_one_price import check_serve

    worst = check_serve("gpt-oss-20b", hwdesc.load("h100-sxm"), decode=((16, 1536), (64, 1)),
                        prefill=((2, 512),))
    assert worst < 1e-9
