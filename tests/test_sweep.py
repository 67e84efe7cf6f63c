"""Sweeps: spec parsing, the lambdified evaluation against `--dim` estimates, table / CSV / JSON output."""

import csv
import io
import json

import numpy as np
import pytest
from cliutil import assert_one_error_line, cli

import hwdesc
import models
from estimator.estimate import estimate, group_totals
from estimator.frontends.onnx_import import import_model
from estimator.study.sweep import Compiled, Sweep, Sweeper, SweepError, grid, parse_sweep, parse_sweeps
from onnxutil import gpt_block_model


@pytest.fixture(scope="module")
def tiny():
    return import_model(models.MODELS["llama-tiny"].build())


@pytest.fixture(scope="module")
def block():
    return import_model(gpt_block_model())


# --- spec parsing -----------------------------------------------------------------------------------


def test_geometric_linear_and_list_specs():
    assert parse_sweep("seq=128:1024:x2") == Sweep("seq", (128, 256, 512, 1024))
    assert parse_sweep("seq=128:1000:x2").values == (128, 256, 512)  # stop is an upper limit
    assert parse_sweep("seq=128:512:+128").values == (128, 256, 384, 512)
    assert parse_sweep("seq=128:512:128").values == (128, 256, 384, 512)  # a bare step is linear too
    assert parse_sweep("seq=8192,512,2048").values == (512, 2048, 8192)  # sorted, for plotting
    assert parse_sweep("seq=4").values == (4,)
    # x1.5 from 2: 2, 3, 4.5 -> 4 (rounded; dims are integers), 6.75 -> 7
    assert parse_sweep("seq=2:8:x1.5").values == (2, 3, 4, 7)


@pytest.mark.parametrize("spec, fragment", [
    ("seq=10:1:x2", "below start"),
    ("seq=abc", "not an integer"),
    ("seq=1:10:x1", "above 1"),
    ("seq=1:10:x0.5", "above 1"),
    ("seq=1:10:+0", "positive"),
    ("seq=1:10", "expected NAME="),
    ("seq", "expected NAME="),
    ("seq=0,4", "positive"),
    ("seq=1:10:xz", "not a number"),
    ("seq=1:100000000:+1", "at most"),
])
def test_bad_specs(spec, fragment):
    with pytest.raises(SweepError, match=fragment):
        parse_sweep(spec)


def test_grid_first_sweep_varies_fastest():
    g = grid(parse_sweeps(["seq=1,2,3", "batch=10,20"]))
    assert list(g["seq"]) == [1, 2, 3, 1, 2, 3]
    assert list(g["batch"]) == [10, 10, 10, 20, 20, 20]
    with pytest.raises(SweepError, match="swept twice"):
        parse_sweeps(["seq=1,2", "seq=3"])


@pytest.mark.parametrize("argv, fragment", [
    (["--sweep", "seq=10:1:x2"], "below start"),
    (["--sweep", "seq=abc"], "not an integer"),
    (["--sweep", "foo=1,2"], "no dim 'foo'"),
    (["--sweep", "seq=1:64:x1"], "above 1"),
    (["--sweep", "seq=4,8", "--dim", "seq=4"], "give one or the other"),
    (["--plot", "p.png"], "needs --sweep"),
    (["--csv", "p.csv"], "needs --sweep"),
    (["--sweep", "seq=4,8", "--plot", "p.txt"], ".png"),
    (["--sweep", "seq=4", "--plot", "p.png"], "at least two values"),
    (["--sweep", "seq=4,8", "--plot-stack", "kind"], "needs --plot"),
    (["--sweep", "seq=4,8", "--plot-stack", "bogus", "--plot", "p.png"], "invalid choice"),
    (["--sweep", "seq=4,8", "--arch", "h100-sxm,,b200"], "empty name"),
    (["--sweep", "seq=4,8", "--arch", "b200,nope"], "unknown GPU"),
])
def test_bad_usage_is_one_error_line(capsys, argv, fragment):
    code, _, err = cli(capsys, "--model", "llama-tiny", *argv)
    assert_one_error_line(code, err, fragment)


def test_unbound_dim_of_a_file_is_an_error(capsys, tmp_path):
    import onnx

    path = tmp_path / "block.onnx"
    onnx.save(gpt_block_model(), str(path))
    code, _, err = cli(capsys, str(path), "--sweep", "seq=4,8")
    assert_one_error_line(code, err, "batch are neither swept nor bound")


# --- values: the sweep equals what --dim gives --------------------------------------------------------


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
def test_sweep_equals_dim_estimates(tiny, arch):
    hw = hwdesc.load(arch)
    sweeper = Sweeper(lambda extra: estimate(tiny, hw, dims={"batch": 1, **extra}, roofline=True))
    # 1 is special (binding it turns size-1 transposes into views; the Sweeper re-prices it); 64 is the
    # head dim, 256 the hidden size.
    seqs = [1, 2, 7, 64, 128, 256, 1000, 4096]
    pts = sweeper.evaluate({"seq": np.array(seqs)})
    for i, seq in enumerate(seqs):
        ref = estimate(tiny, hw, dims={"batch": 1, "seq": seq}, roofline=True)
        assert pts.estimate_s[i] == pytest.approx(float(ref.totals["estimate_s"]), rel=1e-9)
        assert pts.bound_s[i] == pytest.approx(float(ref.totals["bound_s"]), rel=1e-9)
        assert pts.flops[i] == pytest.approx(float(ref.totals["flops"]), rel=1e-12)
        assert pts.dram_bytes[i] == pytest.approx(float(ref.totals["dram_bytes"]), rel=1e-12)
        assert pts.kernels[i] == len(ref.kernels)
        for key, got in (("kind", pts.by_kind), ("limiter", pts.by_limiter)):
            want = {g: float(v["estimate_s"]) for g, v in group_totals(ref, key).items()}
            have = {g: float(v[i]) for g, v in got.items() if v[i] > 0}
            assert have == pytest.approx(want, rel=1e-9), (key, seq)


def test_generic_expressions_overcount_at_one(tiny):
    """Why the Sweeper exists: the generic build keeps transposes that seq=1 turns into views."""
    hw = hwdesc.load("b200")
    generic = Compiled(estimate(tiny, hw, dims={"batch": 1}, roofline=True)).evaluate({"seq": 1})
    exact = estimate(tiny, hw, dims={"batch": 1, "seq": 1}, roofline=True)
    assert generic.kernels[0] > len(exact.kernels)


def test_grid_equals_dim_estimates(block):
    hw = hwdesc.load("h100-sxm")
    sweeper = Sweeper(lambda extra: estimate(block, hw, dims=extra, roofline=True))
    assert sweeper.compiled.free == ("batch", "seq")
    pts = sweeper.evaluate(grid(parse_sweeps(["seq=1,16,300", "batch=1,8"])))
    for i in range(len(pts)):
        dims = {"batch": int(pts.dims["batch"][i]), "seq": int(pts.dims["seq"][i])}
        ref = estimate(block, hw, dims=dims, roofline=True)
        assert pts.estimate_s[i] == pytest.approx(float(ref.totals["estimate_s"]), rel=1e-9)
        assert pts.bound_s[i] == pytest.approx(float(ref.totals["bound_s"]), rel=1e-9)


def test_shares_add_up(tiny):
    compiled = Compiled(estimate(tiny, hwdesc.load("b200"), dims={"batch": 1}, roofline=True))
    pts = compiled.evaluate({"seq": np.geomspace(1, 1e6, 50).round()})
    for groups in (pts.by_kind, pts.by_limiter, pts.by_scope):
        assert sum(groups.values()) == pytest.approx(pts.estimate_s, rel=1e-12)
    assert np.all(pts.estimate_s >= pts.bound_s)


def test_cli_sweep_json_matches_cli_dim_json(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--sweep", "seq=64,200", "--arch", "h100-sxm,b200",
                       "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["sweep"] == {"seq": [64, 200]} and doc["archs"] == ["h100-sxm", "b200"]
    assert len(doc["points"]) == 4
    point = next(p for p in doc["points"] if p["arch"] == "b200" and p["dims"]["seq"] == 200)
    assert point["dims"] == {"batch": 1, "seq": 200}
    assert set(point) >= {"total", "limiter", "by_limiter", "by_kind", "by_scope"}
    # sweeps price every point by the tile model, as --dim does (estimator/pricing/points.py)
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--dim", "seq=200", "--arch", "b200", "--json")
    ref = json.loads(out)
    for key in ("bound_s", "estimate_s", "flops", "dram_bytes", "kernels"):
        assert point["total"][key] == pytest.approx(ref["total"][key], rel=1e-9), key
    for kind, vals in ref["by_kind"].items():
        assert point["by_kind"][kind]["estimate_s"] == pytest.approx(vals["estimate_s"], rel=1e-9)
    for limiter, vals in ref["by_limiter"].items():
        assert point["by_limiter"][limiter]["estimate_s"] == pytest.approx(vals["estimate_s"], rel=1e-9)


def test_cli_table_and_csv(capsys, tmp_path):
    path = tmp_path / "s.csv"
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--sweep", "seq=128:1024:x2", "--arch",
                       "h100-sxm,b200", "--csv", str(path))
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("arch"))
    for col in ("seq", "estimate", "bound", "limiter", "compute%", "launch%", "attn%", "mlp%", "speedup"):
        assert col in header
    # a limiter no kernel has at any point gets no column (llama-tiny has no memory-limited kernel here);
    # the CSV keeps every one
    assert "memory%" not in header
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert len(rows) == 8  # 4 seq values x 2 GPUs
    assert [r["arch"] for r in rows[:2]] == ["h100-sxm", "b200"]
    assert [int(r["seq"]) for r in rows[::2]] == [128, 256, 512, 1024]
    for r in rows:
        assert float(r["estimate_s"]) >= float(r["bound_s"]) > 0
        shares = sum(float(v) for k, v in r.items() if k.startswith("share_limiter_"))
        assert shares == pytest.approx(1.0)
        assert float(r["share_limiter_memory"]) == 0.0
        assert sum(float(v) for k, v in r.items() if k.startswith("share_kind_")) == pytest.approx(1.0)


def test_comma_arch_alone_compares_gpus(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--arch", "h100-sxm,b200")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith(("h100-sxm", "b200"))]
    assert len(rows) == 2 and rows[0].rstrip().endswith("1.00x")


def test_single_arch_without_sweep_is_unchanged(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--arch", "b200", "--top", "3")
    assert code == 0 and "top 3 of" in out


def test_evaluation_is_vectorised(tiny):
    # structure, not a clock (timings: tools/bench_sweep.py): the lambdified formulas are called once,
    # with every point's dims as one array, never once per point
    compiled = Compiled(estimate(tiny, hwdesc.load("b200"), dims={"batch": 1}, roofline=True))
    calls = []
    fn = compiled._fn

    def counted(*arrays):
        calls.append([np.shape(a) for a in arrays])
        return fn(*arrays)

    compiled._fn = counted
    seqs = np.arange(1, 10_001)
    pts = compiled.evaluate({"seq": seqs})
    assert calls == [[(10_000,)]]
    assert len(pts) == 10_000
