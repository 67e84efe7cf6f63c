"""MXFP4 expert weights (gpt-oss): stored at 4.25 bits a weight, read by a W4A16 grouped GEMM.

Hand-worked numbers: an MXFP4 weight is an e2m1 value (4 bits) plus its share of one e8m0 scale
(8 bits) per 32 values, 4 + 8/32 = 4.25 bits = 17/32 bytes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
import pytest
import sympy

import hwdesc
from estimator.dtypes import STORED_FORMATS, itemsize
from estimator.errors import UserError
from estimator.estimate import estimate
from estimator.frontends import hf_config, stored_formats
from models import named_configs
from models._builder import STORED_FORMATS_KEY
from models.decoder_config import DecoderConfig, MoeSpec
from passes import pipeline_for

H100 = hwdesc.load("h100-sxm")
H = 2880  # gpt-oss's hidden size and expert width
EXPERT_2880 = 2880 * 2880 * 4.25 / 8  # one 2880 x 2880 MXFP4 projection: 4,406,400 bytes


def _tiny_oss(fmt: str = "mxfp4", experts: int = 4) -> DecoderConfig:
    """One gpt-oss-shaped layer: hidden 2880, experts 2880 wide, top-1 of `experts`."""
    moe = MoeSpec(experts, 1, H, router="topk_softmax", weight_format=fmt)
    return DecoderConfig("gpt_oss", num_layers=1, hidden=H, num_heads=8, num_kv_heads=8, head_dim=64, ffn=H,
                         vocab=256, moe=moe)


def _moe_kernels(cfg: DecoderConfig, precision: str = "bf16") -> list:
    graph = hf_config.build_graph(cfg, decode=True)
    result = estimate(graph, H100, precision=precision, dims={"batch": 1, "past_seq": 16},
                      pipeline=pipeline_for("tensorrt"), roofline=True)
    return [p.kernel for p in result.kernels if p.kernel.kind == "moe"]


def test_mxfp4_is_4_25_bits_a_weight():
    assert itemsize("mxfp4") == sympy.Rational(17, 32)  # (4 + 8 / 32) / 8 bytes
    f = STORED_FORMATS["mxfp4"]
    assert itemsize("mxfp4") == sympy.Rational(f["value_bits"] * f["block"] + f["scale_bits"], 8 * f["block"])
    assert stored_formats.KEY == STORED_FORMATS_KEY  # the builders write what the frontend reads


def test_expert_weights_are_stored_as_mxfp4():
    graph = hf_config.build_graph(_tiny_oss())
    down = graph.tensors["model.layers.0.mlp.experts.down_proj"]
    gate_up = graph.tensors["model.layers.0.mlp.experts.gate_up_proj"]
    assert down.dtype == gate_up.dtype == "mxfp4"
    assert float(down.nbytes) == 4 * EXPERT_2880  # 4 experts x 2880*2880*4.25/8
    assert float(gate_up.nbytes) == 4 * 2 * EXPERT_2880  # [4, 2 * 2880, 2880]
    assert graph.tensors["model.layers.0.self_attn.q_proj.weight"].dtype == "fp32"  # attention stays float


def test_w4a16_grouped_gemm_reads_one_mxfp4_expert_per_token():
    gate_up, down = _moe_kernels(_tiny_oss())  # batch 1: one token, its top-1 expert
    w = down.work
    assert w.flops[("tensor", "bf16")] == 2 * 1 * 2880 * 2880  # one (token, expert) pair, bf16 MMA
    assert float(w.flops[("alu", "fp32")]) == pytest.approx(2 * 2880 * 2880)  # 2 ops a weight read, 1 tile
    weights = float(w.dram_bytes) - float(_moe_kernels(_tiny_oss(""), "bf16")[1].work.dram_bytes) \
        + 2880 * 2880 * 2  # the same kernel with bf16 experts reads 2880*2880*2 bytes of weights
    assert weights == pytest.approx(EXPERT_2880)  # 4,406,400 bytes: 2880*2880*4.25/8
    assert ("tensor", "bf16") in gate_up.work.flops


def test_precision_leaves_stored_experts_alone():
    (_, down), (_, plain) = _moe_kernels(_tiny_oss(), "fp8"), _moe_kernels(_tiny_oss(""), "fp8")
    # fp8 experts read 2880*2880 bytes; MXFP4 ones still 2880*2880*4.25/8
    assert float(down.work.dram_bytes - plain.work.dram_bytes) == pytest.approx(EXPERT_2880 - 2880 * 2880)
    assert ("tensor", "fp8e4m3") in down.work.flops  # the activations are fp8: the MMA runs in fp8


def test_gpt_oss_ships_mxfp4_experts():
    assert named_configs.GPT_OSS_120B.moe.weight_format == "mxfp4"
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64, "vocab_size": 256,
           "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8}
    assert hf_config.decoder_config(cfg).moe.weight_format == ""
    quantized = {**cfg, "quantization_config": {"quant_method": "mxfp4"}}
    assert hf_config.decoder_config(quantized).moe.weight_format == "mxfp4"


def test_expert_parallel_keeps_the_format():
    from models.decoder_config import shard_experts

    assert shard_experts(replace(_tiny_oss().moe, top_k=2), 2).weight_format == "mxfp4"


def _with_metadata(value: str) -> onnx.ModelProto:
    m = onnx.ModelProto()
    entry = m.metadata_props.add()
    entry.key, entry.value = stored_formats.KEY, value
    return m


@pytest.mark.parametrize("value,message", [("{", "not valid JSON"), ('["w"]', "must map"),
                                           ('{"w": "nvfp9"}', "unknown format nvfp9")])
def test_bad_stored_format_metadata_is_a_user_error(value, message):
    with pytest.raises(UserError, match=message):
        stored_formats.read(_with_metadata(value))


def test_stored_format_of_a_non_weight_is_a_user_error():
    graph = hf_config.build_graph(_tiny_oss(""))
    with pytest.raises(UserError, match="not a weight"):
        stored_formats.apply(graph, {"logits": "mxfp4"})


def test_weight_only_tile_follows_vllm_marlin_moe_rule():
    from estimator.pricing.moe import TILE_M, weight_only_tile_m

    # vLLM fused_marlin_moe: the smallest of 8, 16, 32, 48, 64 with rows per expert / tile < 0.9, else 64
    assert weight_only_tile_m(8 * 4 / 128) == 8  # gpt-oss decode, batch 8, top-4 of 128: 0.25 < 7.2
    assert weight_only_tile_m(7.2) == 16  # 7.2 / 8 = 0.9 is not < 0.9
    assert weight_only_tile_m(20.0) == 32  # 20 / 16 = 1.25, 20 / 32 = 0.625
    assert weight_only_tile_m(1000.0) == 64  # past every threshold: the last tile
    assert list(weight_only_tile_m(np.array([0.5, 14.0, 40.0]))) == \
        [8.0, 16.0, 48.0]  # on arrays of points: 14 / 16 = 0.875; 40 / 32 = 1.25, 40 / 48 = 0.83
    b = sympy.Symbol("batch", positive=True)
    assert weight_only_tile_m(b / 4).subs(b, 8) == 8  # symbolic rows: a Piecewise in the dim
    assert TILE_M == 128  # float experts keep the 128-row tile


def _moe_tiles(result) -> list[str]:
    return [p.kernel.tile.tile for p in result.kernels
            if p.kernel.kind == "moe" and p.kernel.tile is not None]


def test_mxfp4_experts_price_with_the_weight_only_tile():
    graph = hf_config.build_graph(_tiny_oss(), decode=True)
    result = estimate(graph, H100, precision="bf16", dims={"batch": 1, "past_seq": 16},
                      pipeline=pipeline_for("tensorrt"))
    tiles = _moe_tiles(result)
    assert tiles and all(t == "grouped 8x128 moe" for t in tiles)  # 1 row per expert: Marlin's 8-row tile
    graph = hf_config.build_graph(_tiny_oss(""), decode=True)  # bf16 experts: the 128-row grouped GEMM
    result = estimate(graph, H100, precision="bf16", dims={"batch": 1, "past_seq": 16},
                      pipeline=pipeline_for("tensorrt"))
    tiles = _moe_tiles(result)
    assert tiles and all(t == "grouped 128x128 moe" for t in tiles)
