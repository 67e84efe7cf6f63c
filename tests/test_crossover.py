"""Crossovers: scope definitions, a hand-computed matmul ridge, every crossover checked on both sides by
the independent `--dim` path, closed forms and leading terms."""

import json
import math

import numpy as np
import pytest
import sympy
from cliutil import cli
from onnx import TensorProto

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.pricing.units import CO_LIMITING
from estimator.report.table import to_symbolic
from estimator.study.crossover import (
    Piecewise,
    crossovers,
    family_name,
    groups,
    leading_term,
    roots_between,
    scope_of,
)
from estimator.study.sweep import Compiled
from onnxutil import matmul_model


@pytest.fixture(scope="module")
def tiny():
    return import_model(models.MODELS["llama-tiny"].build())


@pytest.fixture(scope="module")
def tiny_decode():
    return import_model(models.MODELS["llama-tiny-decode"].build())


@pytest.mark.parametrize("name, scope", [
    ("/model/layers.0/self_attn/q_proj/MatMul", "attention"),
    ("/model/layers.0/self_attn/Softmax", "attention"),
    ("/model/layers.0/mlp/gate_proj/MatMul", "mlp"),
    ("/model/layers.3/mlp/Sigmoid", "mlp"),
    ("/transformer/h.0/attn/c_proj/MatMul", "attention"),
    ("/transformer/h.0/mlp/c_fc/MatMul", "mlp"),
    ("/bert/encoder/layer.0/attention/output/dense/MatMul", "attention"),
    ("/bert/encoder/layer.0/intermediate/dense/MatMul", "mlp"),
    ("/bert/encoder/layer.0/output/dense/MatMul", "mlp"),  # BERT's FFN down projection
    ("/model/layers.0/input_layernorm/Mul", "other"),
    ("/model/layers.0/Add", "other"),
    ("/lm_head/MatMul", "other"),
    ("/model/Attention", "other"),  # the op's own name is not a scope (its kind decides, see below)
])
def test_scope_of(name, scope):
    assert scope_of(name) == scope


def test_family_name_stars_layer_indices():
    assert family_name("/model/layers.12/mlp/up_proj/MatMul") == "/model/layers.*/mlp/up_proj/MatMul"
    assert family_name("/lm_head/MatMul") == "/lm_head/MatMul"


def test_roots_between():
    x = sympy.Symbol("x", positive=True)
    assert roots_between(3 * x - 12, x, 1, 100) == [4.0]
    assert roots_between(x**2 - 5 * x, x, 1, 100) == pytest.approx([5.0])  # x = 0 is below 1
    assert roots_between(x**2 + 1, x, 1, 100) == []
    assert roots_between(sympy.floor(x) - 7.5, x, 1, 100) == pytest.approx([8.0], rel=1e-6)  # numeric path


def test_leading_term():
    seq, batch = dim("seq"), dim("batch")
    e = 3 * batch * seq**2 + sympy.Max(2 * seq, seq + 5) + 7
    coeff, degree = leading_term(e, "seq")
    assert degree == 2 and sympy.simplify(coeff - 3 * batch) == 0
    assert leading_term(sympy.Max(2 * seq, seq + 5), "seq") == (2, 1)  # Max picks the faster-growing term
    assert leading_term(1024 * seq / (seq + 1) + 3, "seq") == (1027, 0)
    assert leading_term(sympy.Max(2.5e-6, 1e-9 * batch * seq), "batch")[1] == 1


# --- a crossover computed by hand ---------------------------------------------------------------------

K = N = 4096


def test_matmul_ridge_by_hand():
    """y[m, N] = a[m, K] @ w[K, N] in bf16: FLOPs 2*m*K*N, bytes 2*(m*K + K*N + m*N) (read a, w; write y).
    Bound: compute = memory where 2*m*K*N/peak = 2*(m*K + K*N + m*N)/bw, i.e.
        m = (2*K*N/bw) / (2*K*N/peak - 2*(K + N)/bw);
    the estimate divides each side by its efficiency, and its label turns compute where compute is within
    CO_LIMITING (2 %) of memory (estimator/pricing/units.py): compute = 0.98 * memory."""
    hw = hwdesc.load("h100-sxm")
    graph = import_model(matmul_model("m", K, N, TensorProto.BFLOAT16, weight=True))
    peak, bw = hw.tensor_flops_per_s["bf16"], hw.dram_bytes_per_s
    eff_t, eff_d = hw.efficiency["tensor"], hw.efficiency["dram"]
    m_bound = (2 * K * N / bw) / (2 * K * N / peak - 2 * (K + N) / bw)
    keep = 1 - CO_LIMITING
    assert keep == 0.98
    m_est = ((keep * 2 * K * N / (bw * eff_d))
             / (2 * K * N / (peak * eff_t) - keep * 2 * (K + N) / (bw * eff_d)))
    result = estimate(graph, hw, roofline=True)
    found = [c for c in crossovers(result, "m", {}) if c.what == "limiter"]
    assert [(c.before, c.after) for c in found] == [("memory", "compute")]
    assert found[0].value == pytest.approx(m_est, rel=1e-9)
    assert found[0].bound_value == pytest.approx(m_bound, rel=1e-9)
    # Both sides, through the independent --dim path.
    below = estimate(graph, hw, dims={"m": math.floor(m_est)}, roofline=True).kernels[0].timing
    above = estimate(graph, hw, dims={"m": math.floor(m_est) + 1}, roofline=True).kernels[0].timing
    assert (below.limiter, above.limiter) == ("memory", "compute")


# --- every crossover of a small Llama, checked on both sides --------------------------------------------


def _at(graph, hw, dims):
    """Per-class estimate (attention, attention core, mlp) and per-group limiters, priced with --dim."""
    result = estimate(graph, hw, dims=dims, roofline=True)
    gl = groups(result)
    cls = {"attention": 0.0, "attention core": 0.0, "mlp": 0.0, "compute": 0.0, "memory": 0.0}
    for g in gl:
        t = g.count * float(g.timing.estimate_s)
        cls["attention"] += t if g.scope == "attention" else 0.0
        cls["attention core"] += t if g.core else 0.0
        cls["mlp"] += t if g.scope == "mlp" else 0.0
        if g.timing.limiter in ("compute", "memory"):
            cls[g.timing.limiter] += t
    limiters = {}
    for g in gl:
        limiters.setdefault(family_name(g.name), set()).add(g.timing.limiter)
    return cls, limiters


@pytest.mark.parametrize("which", ["prefill", "decode"])
def test_every_crossover_holds_on_both_sides(tiny, tiny_decode, which):
    graph, x, other = (tiny, "seq", "batch") if which == "prefill" else (tiny_decode, "past_seq", "batch")
    hw = hwdesc.load("b200")
    checked = 0
    for name, fixed in ((x, {other: 1}), (other, {x: 128})):
        result = estimate(graph, hw, roofline=True)
        found = crossovers(result, name, fixed)
        assert found, f"expected crossovers along {name}"
        for c in found:
            lo = math.floor(c.value)
            if lo < 2 or lo + 1 == c.value:  # a dim of 1 changes the graph; an integer root has no sides
                continue
            below, lim_below = _at(graph, hw, {**fixed, name: lo})
            above, lim_above = _at(graph, hw, {**fixed, name: lo + 1})
            if c.what == "limiter":
                key = family_name(c.subject)
                assert c.before in lim_below[key] and c.after in lim_above[key], c.message()
            else:
                assert below[c.after] < below[c.before] and above[c.after] > above[c.before], c.message()
            checked += 1
    assert checked >= 5


def test_attention_overtakes_mlp(capsys):
    """GPT-2 small, unfused, fp32, batch 1 on h100-sxm: at short seq the launch floor makes attention's
    many small kernels cost more than the MLP's four; the MLP overtakes once its matmuls leave the floor,
    and attention's seq^2 terms overtake it again later."""
    graph = import_model(models.MODELS["gpt2-small"].build())
    result = estimate(graph, hwdesc.load("h100-sxm"), roofline=True)
    found = [c for c in crossovers(result, "seq", {"batch": 1}) if c.what == "attention_vs_mlp"]
    assert [(c.before, c.after) for c in found] == [("attention", "mlp"), ("mlp", "attention")]
    assert 50 < found[0].value < found[1].value < 5000
    compiled = Compiled(result)
    for c in found:
        pts = compiled.evaluate({"seq": np.array([c.value * 0.999, c.value * 1.001]), "batch": 1})
        diff = pts.by_scope[c.after] - pts.by_scope[c.before]
        assert diff[0] < 0 < diff[1], c.message()
        assert c.check["diff_below"] < 0 < c.check["diff_above"]
    want = f"attention time exceeds MLP time above seq = {found[1].value:,.0f} on h100-sxm"
    assert found[1].message() == want


def test_pieces_match_the_total(tiny_decode):
    hw = hwdesc.load("b200")
    result = estimate(tiny_decode, hw, dims={"batch": 1}, roofline=True)
    compiled = Compiled(result)
    pw = Piecewise(groups(result), "past_seq", {}, "estimate")
    pieces = pw.pieces()
    assert len(pieces) >= 2
    for a, b, expr in pieces:
        for v in (a * 1.01, math.sqrt(a * min(b, 1e9))):
            want = compiled.evaluate({"past_seq": v}).estimate_s[0]
            assert float(expr.subs(pw.x, v)) == pytest.approx(want, rel=1e-9)


def test_symbolic_leading_term_matches_a_large_point(tiny):
    hw = hwdesc.load("h100-sxm")
    result = estimate(tiny, hw, dims={"batch": 1}, roofline=True)
    coeff, degree = leading_term(result.totals["bound_s"], "seq")
    assert degree == 2  # attention's scores: seq^2
    big = 1e8
    at = Compiled(result).evaluate({"seq": big}).bound_s[0]
    assert at / big**2 == pytest.approx(float(coeff), rel=1e-3)
    text = to_symbolic(result)
    assert "# where Max decides, along seq" in text
    assert "bound_s piecewise in seq" in text and "seq: bound_s ~ (" in text and ")*seq**2" in text


def test_symbolic_with_two_free_dims(tiny):
    text = to_symbolic(estimate(tiny, hwdesc.load("b200"), roofline=True))
    assert "thresholds solved for seq" in text
    assert "/batch" in text  # a matmul's ridge in seq scales as 1/batch
    assert "batch: bound_s ~ (" in text and "seq: bound_s ~ (" in text


# --- the CLI ------------------------------------------------------------------------------------------


def test_cli_crossover_text_and_json(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny-decode", "--crossover", "--arch", "h100-sxm,b200")
    assert code == 0
    assert "# crossovers on h100-sxm" in out and "# crossovers on b200" in out
    assert "along batch (past_seq = 127)" in out and "along past_seq (batch = 1)" in out
    code, out, _ = cli(capsys, "--model", "llama-tiny-decode", "--crossover", "--json", "--dim", "batch=1")
    doc = json.loads(out)
    assert doc["crossovers"] and {c["dim"] for c in doc["crossovers"]} == {"past_seq"}
    for c in doc["crossovers"]:
        assert c["from_int"] == math.floor(c["value"]) + 1 and c["message"]


def test_cli_crossover_with_sweep_solves_along_the_swept_dim(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--sweep", "seq=128:1024:x2", "--crossover")
    assert code == 0
    assert "estimate" in out.splitlines()[1]  # the table comes first
    assert "along seq (batch = 1)" in out and "along batch" not in out


def test_cli_crossover_needs_values_for_other_dims(capsys, tmp_path):
    import onnx

    from onnxutil import gpt_block_model

    path = tmp_path / "block.onnx"
    onnx.save(gpt_block_model(), str(path))
    code, _, err = cli(capsys, str(path), "--crossover")
    assert code == 2 and err.startswith("error: ") and "needs a value for" in err
    code, out, _ = cli(capsys, str(path), "--crossover", "--dim", "batch=1")
    assert code == 0 and "along seq (batch = 1)" in out
