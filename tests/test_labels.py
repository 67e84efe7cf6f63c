"""Issue 26: labels that agree with their own row, and outputs that agree with each other.

The limiter has one meaning (estimator/pricing/units.py): the term of the kernel's estimate its time is
spent on (compute, memory = DRAM, l2, latency, launch), co-limiting terms (within CO_LIMITING) named in
that order. Every check below failed on main 0e98aec.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from cliutil import assert_one_error_line, cli
from onnx import TensorProto

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.pricing.units import dominant
from estimator.study import plot
from estimator.study.sweep import Compiled
from onnxutil import matmul_model

# --- A: the limiter's rule -------------------------------------------------------------------------


def test_co_limiting_terms_are_named_in_the_documented_order():
    from estimator.pricing.units import CO_LIMITING, LIMITERS

    # memory 1 % above compute: within CO_LIMITING (2 %), so compute (first in LIMITERS) names it
    assert CO_LIMITING == 0.02 and LIMITERS[:5] == ("compute", "memory", "l2", "latency", "launch")
    assert dominant({"compute": 1.00, "memory": 1.01, "launch": 0.1}) == "compute"
    # 3 % above: memory
    assert dominant({"compute": 1.00, "memory": 1.03, "launch": 0.1}) == "memory"
    # arrays of points follow the same rule point by point
    got = dominant({"compute": np.array([1.0, 1.0, 0.1]), "memory": np.array([1.01, 1.03, 0.1]),
                    "launch": np.array([0.1, 0.1, 0.5])})
    assert list(got) == ["compute", "memory", "launch"]


def test_a_gemm_sweep_keeps_its_label_where_the_tile_choice_balances_two_terms():
    """The gate projection of Llama-3-8B (M = seq tokens, K = 4096, N = 14336, bf16) on the H100: from
    seq 1,024 up the GEMM is at ~1,000+ FLOP/B, 3x the ridge (989e12 / 3.35e12 = 295 FLOP/B), and
    the tile choice keeps its MMA term and its DRAM term within a fraction of a percent at many sizes.
    main flipped compute <-> memory 40-odd times between seq 1,024 and 8,192 (the gate/up GEMMs at seq
    4,096 labelled memory at TC 78 %); the label is compute at every point now, as on the --dim path."""
    hw = hwdesc.load("h100-sxm")
    graph = import_model(matmul_model("m", 4096, 14336, TensorProto.BFLOAT16, weight=True))
    result = estimate(graph, hw)
    c = Compiled(result)
    seq = np.arange(1024, 8193, 64)
    pts = c.evaluate({"m": seq})
    assert list(pts.dominant_limiter()) == ["compute"] * len(seq)
    # the --dim path at seq 4096 (the row) says the same
    at = estimate(graph, hw, dims={"m": 4096}).kernels[0].timing
    assert at.limiter == "compute"


def test_decode_attention_at_4_flop_per_byte_is_not_compute():
    """Decode attention of llama-tiny-decode (batch 1, 256 past tokens): ~1 FLOP/B, against a ridge of
    295; its time is the CTAs' fixed costs and the K/V load pipeline, labelled latency (main: compute)."""
    hw = hwdesc.load("h100-sxm")
    graph = import_model(models.MODELS["llama-tiny-decode"].build())
    result = estimate(graph, hw, precision="bf16", dims={"batch": 1, "past_seq": 256},
                      pipeline="canonicalize,kv-inplace,fuse-attention")
    attn = [p for p in result.kernels if p.kernel.kind == "attention"]
    assert attn
    for p in attn:
        assert p.timing.limiter == "latency", p.timing.limiter
        plan = p.kernel.tile
        # the terms' max is the estimate (main left the per-CTA overhead out of the memory term)
        assert max(float(v) for v in plan.terms.values()) == pytest.approx(float(plan.estimate_s), rel=1e-12)


def test_every_plans_terms_max_is_its_estimate():
    """fixed + overhead + max(compute, dram, l2, latency): each term holds what the max adds to, so a
    sweep or a closed form built from the terms prices the kernel as the plan does."""
    hw = hwdesc.load("b200")
    graph = import_model(models.MODELS["llama-tiny"].build())
    for seq in (64, 4096):
        result = estimate(graph, hw, precision="bf16", dims={"batch": 1, "seq": seq},
                          pipeline="canonicalize,fuse-attention,fuse-norm")
        for p in result.kernels:
            plan = p.kernel.tile
            if plan is None:
                continue
            assert set(plan.parts) == {"compute", "memory", "l2", "latency", "launch"}
            assert max(float(v) for v in plan.terms.values()) == pytest.approx(float(plan.estimate_s),
                                                                              rel=1e-12), p.kernel.name
            assert p.timing.limiter == dominant(plan.parts)


# --- D: the plot's limiter changes, found on integers, all intervals at once ------------------------


def test_limiter_changes_price_every_interval_in_few_calls(monkeypatch):
    """llama-tiny (graph precision) over seq 16..65536 on the H100 turns from launch- to memory-bound
    (at seq 1,901). main bisected each change 40 times, one Compiled.evaluate per step (10 s of a 16 s
    3-GPU sweep plot); now each round prices SEARCH_POINTS integers of every open interval in one call:
    an interval of n integers takes about log(n) / log(32) rounds, and one more call prices the ends."""
    hw = hwdesc.load("h100-sxm")
    graph = import_model(models.MODELS["llama-tiny"].build())
    c = Compiled(estimate(graph, hw, dims={"batch": 1}))
    pts = c.evaluate({"seq": 2.0 ** np.arange(4, 17)})
    calls = []
    real = Compiled.evaluate

    def counted(self, values):
        calls.append(np.size(values["seq"]))
        return real(self, values)

    monkeypatch.setattr(Compiled, "evaluate", counted)
    changes = plot.limiter_changes(c, pts, "seq", {}, np.arange(len(pts)))
    assert [(b, a) for _, _, b, a in changes] == [("launch", "memory")]
    # 1,023 integers between seq 1,024 and 2,048: 32 probes leave at most 32 apart, 31 more settle it
    assert len(calls) <= 2 + 1
    for x, _, before, after in changes:
        assert x == int(x)
        near = real(c, {"seq": np.array([x - 1, x])}).dominant_limiter()
        assert list(near) == [before, after]


# --- B: outputs that break or disagree --------------------------------------------------------------


@pytest.fixture
def tiny_onnx(tmp_path):
    path = tmp_path / "llama-tiny.onnx"
    onnx.save(models.MODELS["llama-tiny"].build(), str(path))
    return path


@pytest.mark.parametrize("flag, name", [("--report", "t.html"), ("--roofline-plot", "r.png"),
                                        ("--breakdown-plot", "b.svg"), ("--trace", "t.json")])
def test_outputs_of_numbers_refuse_free_dims(capsys, tmp_path, tiny_onnx, flag, name):
    """An ONNX file with free dims (batch, seq): --report was an internal error (AttributeError, exit 1),
    the two plots wrote empty figures and exited 0; now all say "needs numbers", as --trace did."""
    out = tmp_path / name
    code, _, err = cli(capsys, str(tiny_onnx), flag, str(out))
    assert_one_error_line(code, err, f"{flag} needs numbers")
    assert not out.exists()


def test_kv_precision_table_is_the_served_step(capsys):
    """--kv-precision fp8 --serve: the kernel table (JSON total) under the summary is the step the
    summary's decode step prices, with its fp8 cache (main: the bf16-KV step)."""
    args = ["--model", "llama-tiny", "--precision", "bf16", "--serve", "isl=256,osl=64,concurrency=4",
            "--json"]
    code, out, err = cli(capsys, *args, "--kv-precision", "fp8")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["total"]["estimate_s"] == pytest.approx(doc["serve"]["decode_step"]["gpu_s"], rel=1e-9)
    assert doc["precision"] == "bf16"
    code, out16, err = cli(capsys, *args)
    assert code == 0, err
    # the fp8 cache reads fewer bytes than the bf16 one
    assert doc["total"]["dram_bytes"] < json.loads(out16)["total"]["dram_bytes"]


def test_print_after_names_a_pass_of_the_pipeline(capsys):
    code, _, err = cli(capsys, "--model", "llama-tiny", "--print-after", "bogus")
    assert_one_error_line(code, err, "--print-after bogus")
    code, _, err = cli(capsys, "--model", "llama-tiny", "--print-after", "fuse-attention", "--json")
    assert code == 0 and "// ---- after fuse-attention" in err


def test_messages_carry_their_prefix_once(capsys, tmp_path):
    from estimator.serve.serving import ServeResult
    from estimator.serve.summary import serve_text

    class Memory:  # what the does-not-fit line reads of the memory
        non_kv_bytes, weights_bytes, device_bytes = 40e9, 38e9, 32e9

    class Unfit:  # what serve_text reads of a ServeResult that does not fit
        fits = False
        workload = None
        memory = Memory()
        smallest_fit = {"tp": 2}
        notes = ["does not fit: no room for one sequence's KV cache"]

    assert ServeResult  # the class the stand-in mirrors
    text = serve_text(Unfit(), "title")
    assert text.count("does not fit") == 1
    assert text.endswith("does not fit: 40.0 GB per GPU before any KV cache (38.0 GB of weights) on 32.0 GB; "
                         "no room for one sequence's KV cache; smallest fit: --tp 2")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = cli(capsys, "--hf-config", str(cfg))
    assert_one_error_line(code, err, "missing key")
    assert err.count("config.json (llama)") == 1


# --- C: conventions ---------------------------------------------------------------------------------


def test_tables_fit_the_terminal_and_wide_shows_everything(capsys, monkeypatch):
    """COLUMNS=100: every line of the default table fits (main: up to 216 columns); --wide keeps every
    column and whole kernel names."""
    args = ["--model", "llama-tiny", "--precision", "bf16", "--arch", "h100-sxm"]
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "--wide for" in out
    code, wide, err = cli(capsys, *args, "--wide")
    assert code == 0, err
    assert max(len(line) for line in wide.splitlines()) > 100
    assert "waves (fill) util" in wide and "--wide for" not in wide


def test_a_dropped_columns_room_goes_back_to_the_clipped_names():
    """Hand-sized: 40 columns; the name (30) and its two 10-wide neighbours (two spaces apart) need 54.
    The name is clipped to CLIP_MIN (24): 48 > 40, so the last column goes (36); the 4 columns that frees
    go back to the name (28 characters: '...' and its last 25)."""
    from estimator.textfit import CLIP_MIN, fit_table

    name = "/model/layers.0/mlp/up_proj/MatMul"[:30]
    rows = [["kernel", "a", "b"], [name, "1" * 10, "2" * 10]]
    lines = fit_table(rows, "lrr", clip=(0,), columns=40)
    assert CLIP_MIN == 24 and len(lines[1]) == 40
    assert lines[1] == "..." + name[-25:] + "  " + "1" * 10
    assert lines[-1] == "(--wide for 1 more column(s): b)"


def test_a_gpu_sweep_keeps_its_speedup_column(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = cli(capsys, "--model", "llama-tiny", "--precision", "bf16", "--arch", "h100-sxm,b200",
                         "--sweep", "seq=128:1024:x2")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    head = next(line for line in lines if line.startswith("arch"))
    assert head.split()[-1] == "speedup"


def test_numbers_carry_si_prefixes(capsys):
    from estimator.textfit import si

    assert si(3.186e13, "FLOP") == "31.9 TFLOP"
    assert si(5.875e10, "B") == "58.8 GB"
    assert si(528, "B") == "528 B"
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--precision", "bf16")
    assert code == 0
    head = out.splitlines()[3]
    assert head.startswith("model ") and "FLOP" in head and "e+" not in head


def test_an_unbound_files_closed_forms_are_summarised(capsys, tiny_onnx):
    """llama-tiny.onnx with batch and seq free: main printed the estimate's 2,000-character closed form
    in the table; the table summarises it and --symbolic prints it whole."""
    code, out, err = cli(capsys, str(tiny_onnx))
    assert code == 0, err
    assert "--symbolic prints it" in out
    assert max(len(line) for line in out.splitlines()[1:]) < 250
    code, sym, err = cli(capsys, str(tiny_onnx), "--symbolic")
    assert code == 0, err
    assert max(len(line) for line in sym.splitlines()) > 1000  # the full forms


@pytest.mark.parametrize("flag, name", [("--report", "r.html"), ("--trace", "t.json"), ("--csv", "s.csv"),
                                        ("--plot", "p.png"), ("--roofline-plot", "r.png"),
                                        ("--breakdown-plot", "b.png")])
def test_an_unwritable_output_fails_before_the_estimate(capsys, monkeypatch, flag, name):
    import estimator.estimate

    def never(*a, **k):
        raise AssertionError("estimated before the output path was checked")

    monkeypatch.setattr(estimator.estimate, "estimate", never)
    code, _, err = cli(capsys, "--model", "llama-tiny", "--precision", "bf16", flag, f"/nonexistent/{name}")
    assert_one_error_line(code, err, f"{flag} /nonexistent/{name}: no such directory")
