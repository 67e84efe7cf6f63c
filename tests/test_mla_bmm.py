"""The absorbed-weight MLA BMMs as a kernel of their own (estimator/pricing/mla.py bmm_time): DeepGEMM's
tile pick and the wave / stream price by hand, the shapes that are recognized, and one price for the
calibration row's graph and a DeepSeek decode's BMM."""

from __future__ import annotations

import pytest

import hwdesc
from estimator.calibration import kernel_graphs, mla_graphs, validate_kernels
from estimator.estimate import estimate
from estimator.frontends.hf_config import build_graph
from estimator.frontends.onnx_import import import_model
from estimator.pricing import mla
from models.decoder_config import DecoderConfig, MlaSpec, MoeSpec
from passes import DEFAULT_STRATEGY, pipeline_for

DEEPGEMM = mla.MlaBmmKernel("deepgemm", 128, 128)
CUBLAS = mla.MlaBmmKernel("cublas", 64, 128)
EFF = {"launch_s": 1e-6, "mem_latency_s": 1e-6, "mla_bmm_s": 0.5e-6, "mla_bmm_wave_s": 1e-6,
       "mla_bmm_dram": 0.5}


def test_deepgemm_tile_pick_by_hand():
    # 1 token, 128 heads, N = 512 on 132 SMs: block_m 64 (M <= 64); block_n 128 gives 4 x 128 = 512 CTAs,
    # 4 waves; any narrower block_n needs ceil(512 / bn) >= 5 tiles per head: 640 CTAs, 5 waves
    assert mla.deepgemm_tile(1, 512, 128, 132, DEEPGEMM) == (64, 128)
    # 16 heads: every block_n >= 64 fits one wave (8 x 16 = 128 CTAs at 64); the fullest last wave is 128
    # CTAs (block_n 64 and 72: ceil(512 / 72) = 8), the tie goes to the narrower: 64
    assert mla.deepgemm_tile(1, 512, 16, 132, DEEPGEMM) == (64, 64)
    # 200 tokens: block_m 128
    assert mla.deepgemm_tile(200, 512, 128, 132, DEEPGEMM)[0] == 128


def test_bmm_time_by_hand():
    peak, sms, bw, dram = 1e15, 132, 1e12, 1e6
    tile_mma = 2 * 64 * 128 * 128 / (peak / sms)  # one 64 x 128 tile, K = 128, on one SM: 0.277 us
    fixed = 1e-6 + 1e-6 + 0.5e-6
    memory = dram / (bw * 0.5)  # 2 us
    # 16 heads x ceil(100 / 64) = 2 x ceil(512 / 128) = 4: 128 CTAs, one wave: the stream (2 us) bounds it
    t = mla.bmm_time(16, 100, 512, 128, peak, dram, sms, bw, EFF, CUBLAS, False)
    assert t.ctas == 128 and t.waves == 1
    assert t.time == pytest.approx(fixed + memory)
    # 128 heads x 1 x 4 = 512 CTAs on 132 SMs: 4 waves of (1 us + 0.277 us) = 5.11 us > 2 us
    t = mla.bmm_time(128, 1, 512, 128, peak, dram, sms, bw, EFF, CUBLAS, False)
    assert t.ctas == 512 and t.waves == 4
    assert t.time == pytest.approx(fixed + 4 * (1e-6 + tile_mma))


def test_absorbed_bmm_is_recognized_by_shape():
    # the calibration row's [H, t, K] x [H, K, N] and the decoder's [b, H, 1, K] x [H, K, N]
    assert mla.absorbed_bmm((128, 7, 128), (128, 128, 512), (128, 7, 512), True) == 128
    assert mla.absorbed_bmm((64, 16, 1, 128), (16, 128, 512), (64, 16, 1, 512), True) == 16
    assert mla.absorbed_bmm((128, 7, 128), (128, 128, 512), (128, 7, 512), False) is None  # activations
    assert mla.absorbed_bmm((64, 7, 128), (128, 512), (64, 7, 512), True) is None  # a linear layer
    assert mla.absorbed_bmm((4, 8, 7, 64), (4, 8, 64, 7), (4, 8, 7, 7), False) is None  # attention scores


def test_fp8_bmm_row_keeps_a_bf16_output():
    row = {"op_name": "mla_gen_pre", "bmm_dtype": "fp8", "num_tokens": 8.0, "num_heads": 16.0}
    _, retype, _ = validate_kernels.model_of("mla_bmm", row, False, "block_scaled")
    assert retype == {"xq": "fp8e4m3", "y": "bf16"}  # fp8_block_scaling_bmm_out writes bf16


TINY_DS = DecoderConfig("deepseek_v3", num_layers=1, hidden=256, num_heads=16, num_kv_heads=16, head_dim=192,
                        ffn=512, vocab=256, qk_norm=False, mla=MlaSpec(None, 512, 128, 64, 128),
                        moe=MoeSpec(8, 2, 128, shared_experts=1, router="sigmoid"))


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
def test_decoder_bmm_and_calibration_row_are_one_kernel(arch):
    hw = hwdesc.load(arch)
    pipe = pipeline_for(DEFAULT_STRATEGY)
    r = estimate(build_graph(TINY_DS, decode=True), hw, dims={"batch": 64, "past_seq": 4096}, pipeline=pipe,
                 precision="bf16")
    bmms = [p for p in r.kernels if str(p.kernel.tile.tile).startswith("mla bmm")]
    assert len(bmms) == 2  # q_nope x W_UK and the context x W_UV
    row = estimate(import_model(mla_graphs.mla_bmm("mla_gen_pre", 64, 16)), hw, pipeline=pipe)
    (ref,) = row.kernels
    assert ref.kernel.tile.tile == bmms[0].kernel.tile.tile == "mla bmm cublas 64x128"
    assert float(bmms[0].timing.estimate_s) == pytest.approx(float(ref.timing.estimate_s), rel=1e-6)


def _row_kernels(op: str, hw, pipe) -> dict:
    row = {"op_name": op, "bmm_dtype": "fp8", "num_tokens": 64.0, "num_heads": 16.0}
    model, retype, _ = validate_kernels.model_of("mla_bmm", row, False, mla.bmm_fp8_kind(hw.family))
    graph = import_model(model)
    for dtype in set(retype.values()):
        graph = kernel_graphs.retype(graph, tuple(n for n, d in retype.items() if d == dtype), dtype)
    return {p.kernel.name: p for p in estimate(graph, hw, pipeline=pipe).kernels}


@pytest.mark.parametrize("precision", ["fp8-w8a8", "fp8-block"])
def test_decoder_fp8_bmm_is_the_calibration_rows_kernel(precision):
    # Hopper: fp8_block_scaling_bmm_out, a 1 x 128 quantize then DeepGEMM, whatever the linears' scaling
    hw = hwdesc.load("h100-sxm")
    pipe = pipeline_for(DEFAULT_STRATEGY)
    r = estimate(build_graph(TINY_DS, decode=True), hw, dims={"batch": 64, "past_seq": 4096}, pipeline=pipe,
                 precision=precision)
    by_name = {p.kernel.name: p for p in r.kernels}
    for node, op in (("MatMul", "mla_gen_pre"), ("MatMul_3", "mla_gen_post")):
        ref = _row_kernels(op, hw, pipe)
        bmm = by_name[f"/model/layers.0/self_attn/{node}"]
        assert str(bmm.kernel.tile.tile).startswith("mla bmm deepgemm")
        assert bmm.kernel.tile.tile == ref["bmm"].kernel.tile.tile
        assert float(bmm.timing.estimate_s) == pytest.approx(float(ref["bmm"].timing.estimate_s), rel=1e-6)
    # the context's quantize is its own kernel (the attention writes bf16 for it, not fp8 as for an o_proj)
    q = by_name["/model/layers.0/self_attn/MatMul_3/QuantizeLinear"]
    assert float(q.timing.estimate_s) == pytest.approx(float(_row_kernels("mla_gen_post", hw, pipe)
                                                             ["quantize"].timing.estimate_s), rel=0.01)


@pytest.mark.parametrize("precision", ["fp8-w8a8", "fp8-block"])
def test_decoder_fp8_bmm_on_blackwell_is_bf16(precision):
    # Blackwell: a bf16 BMM on weights dequantized at load, no quantize before it
    hw = hwdesc.load("b200")
    r = estimate(build_graph(TINY_DS, decode=True), hw, dims={"batch": 64, "past_seq": 4096},
                 pipeline=pipeline_for(DEFAULT_STRATEGY), precision=precision)
    names = {p.kernel.name: p for p in r.kernels}
    assert names["/model/layers.0/self_attn/MatMul"].kernel.tile.tile == "mla bmm cublas 64x128"
    assert not any(n.startswith("/model/layers.0/self_attn/MatMul_3/") or n.startswith(
        "/model/layers.0/self_attn/MatMul/") for n in names)
