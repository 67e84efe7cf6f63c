"""Every bundled model estimates without uncosted ops; Llama-3-8B's FLOPs match a hand count."""

import math

import pytest
import sympy

import hwdesc
import models
from estimator.cli.main import main
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim

B, S, P = dim("batch"), dim("seq"), dim("past_seq")

# Llama-3-8B (HF config.json): hidden 4096, 32 layers, 32 heads, 8 kv heads, head_dim 128, ffn 14336,
# vocab 128256. Parameters in MatMuls per layer: q and o 4096x4096, k and v 4096x1024, gate/up/down
# 4096x14336; plus the LM head 4096x128256.
LAYER_PARAMS = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336  # 218,103,808
MATMUL_PARAMS = 32 * LAYER_PARAMS + 4096 * 128256  # 7,504,658,432


def tensor_flops(result):
    return sympy.expand(sum((p.kernel.work.flops.get(("tensor", "bf16"), 0) for p in result.kernels),
                            sympy.Integer(0)))


@pytest.fixture(scope="module")
def h100():
    return hwdesc.load("h100-sxm")


@pytest.mark.parametrize("name", models.SUITE_MODELS)
def test_every_model_prices_fully(name, h100):
    if name.startswith("resnet"):
        pytest.importorskip("onnx")
    spec = models.MODELS[name]
    r = estimate(import_model(spec.build()), h100, precision="bf16", dims=dict(spec.default_dims),
                 roofline=True)
    assert r.uncosted == [], r.uncosted[:3]
    assert not r.symbolic and not r.graph.unknown_dims
    assert float(r.totals["estimate_s"]) >= float(r.totals["bound_s"]) > 0


def test_llama3_8b_prefill_flops_by_hand(h100):
    r = estimate(import_model(models.build("llama-3-8b")), h100, precision="bf16", roofline=True)
    linear = 2 * B * S * MATMUL_PARAMS  # one multiply-add per token per weight
    attention = 32 * 2 * (2 * B * 32 * S * S * 128)  # QK^T and PV per layer, unfused: full s x s
    assert tensor_flops(r) == sympy.expand(linear + attention)
    assert float(r.totals["weight_bytes"]) == pytest.approx(2 * 8.03e9, rel=0.01)  # bf16 weights


def test_llama3_8b_decode_flops_by_hand(h100):
    r = estimate(import_model(models.build("llama-3-8b-decode")), h100, precision="bf16", roofline=True)
    linear = 2 * B * MATMUL_PARAMS  # one token per sequence
    attention = 32 * 2 * (2 * B * 32 * (P + 1) * 128)  # one query against past_seq + 1 keys
    assert tensor_flops(r) == sympy.expand(linear + attention)


def test_decode_symbolic_prints_batch_and_past_seq(capsys):
    assert main(["--model", "llama-3-8b-decode", "--symbolic"]) == 0
    out = capsys.readouterr().out
    bound = next(line for line in out.splitlines() if line.startswith("bound_s = "))
    assert "batch" in bound and "past_seq" in bound


def test_decode_is_memory_bound_at_batch_1(h100):
    spec = models.MODELS["llama-3-8b-decode"]
    r = estimate(import_model(spec.build()), h100, precision="bf16", dims={"batch": 1, "past_seq": 4096},
                 roofline=True)
    # At batch 1 every weight is read once per token: the bound is at least weight bytes / bandwidth.
    floor = float(r.totals["weight_bytes"]) / h100.dram_bytes_per_s
    assert float(r.totals["bound_s"]) >= floor
    assert math.isclose(float(r.totals["bound_s"]), floor, rel_tol=0.35)
