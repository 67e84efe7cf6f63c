"""One attention price whatever the graph's form: decode recognised by shapes (a past input or plain
K/V inputs), GQA grouping kept through fuse-attention, fp32/tf32/bf16 through the same tile model."""

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.pricing.plan import DECODE_MAX_Q, is_decode
from models import build as build_model
from passes import STRATEGIES

B, H, HKV, D = 4, 32, 8, 128  # Llama-3-8B-like heads


def _vi(name, shape, dtype=TensorProto.BFLOAT16):
    return helper.make_tensor_value_info(name, dtype, shape)


def attention_model(q_len: int, kv_len: int, past: int = 0, dtype=TensorProto.BFLOAT16) -> onnx.ModelProto:
    """Opset-23 Attention, Q [B, H, q, D] over K/V [B, HKV, kv, D]; with `past`, also past_key/value
    [B, HKV, past, D] (no present outputs: they would add a copy of the cache, another computation)."""
    inputs = [_vi("q", [B, H, q_len, D], dtype), _vi("k", [B, HKV, kv_len, D], dtype),
              _vi("v", [B, HKV, kv_len, D], dtype)]
    names, outs = ["q", "k", "v"], [_vi("y", [B, H, q_len, D], dtype)]
    out_names = ["y"]
    if past:
        inputs += [_vi("pk", [B, HKV, past, D], dtype), _vi("pv", [B, HKV, past, D], dtype)]
        names += ["", "pk", "pv"]
    node = helper.make_node("Attention", names, out_names, name="attn")
    g = helper.make_graph([node], "attn", inputs, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def run(model, arch="h100-sxm", **kw):
    return estimate(import_model(model), hwdesc.load(arch), **kw)


def test_is_decode_by_shapes():
    assert is_decode(1, 4096) and is_decode(DECODE_MAX_Q, 4096)
    assert not is_decode(DECODE_MAX_Q + 1, 4096)  # 9 query rows: a prefill tile
    assert not is_decode(1, 1)  # one token, no cache: nothing to split
    assert list(is_decode(np.array([1, 1, 16]), np.array([1, 8, 8]))) == [False, True, False]


def test_one_query_over_plain_kv_prices_as_decode_within_5_percent_of_past_form():
    plain = run(attention_model(1, 8192)).kernels[0]
    cached = run(attention_model(1, 1, past=8191)).kernels[0]
    assert plain.kernel.tile.tile.startswith("decode mma")  # grouped: 4 query heads per KV head
    assert cached.kernel.tile.tile.startswith("decode mma")
    a, b = float(plain.timing.estimate_s), float(cached.timing.estimate_s)
    # same bytes (Q, 8192 K/V rows, Y) and scores; the forms differ only in the new row's extra read
    assert abs(a - b) / b < 0.05


def test_llama_70b_decode_fused_attention_keeps_its_groups():
    g = import_model(build_model("llama-3-70b-decode"))
    r = estimate(g, hwdesc.load("h200"), precision="bf16", dims={"batch": 64, "past_seq": 5120},
                 pipeline=STRATEGIES["tensorrt"])
    (att,) = {p.kernel.signature: p for p in r.kernels if p.kernel.kind == "attention"}.values()
    info = r.graph.node(att.kernel.name).attrs["attention"]
    assert info["kv_group"] == 64 // 8  # 64 query heads over 8 KV heads (HF repeat_kv's Expand)
    assert att.kernel.tile.tile.startswith("decode mma")
    # one CTA per (sequence, KV head, split): 64 x 8 = 512 per split, not 64 x 64 = 4096
    split = att.kernel.tile.ctas / (64 * 8)
    assert split == int(split) and "splitKV" not in att.kernel.tile.tile or f"splitKV{int(split)}" in \
        att.kernel.tile.tile
    assert float(att.timing.estimate_s) < 1.5 * float(att.timing.bound_s)


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
def test_fp32_tf32_bf16_attention_rank_as_their_peaks(arch):
    times = {}
    for p in ("fp32", "tf32", "bf16"):
        (k,) = run(attention_model(4096, 4096), arch=arch, precision=p).kernels
        assert k.kernel.tile is not None and k.kernel.tile.kind == "attention", p
        times[p] = float(k.timing.estimate_s)
    assert times["fp32"] > times["tf32"] > times["bf16"]
    hw = hwdesc.load(arch)
    # compute-bound prefill: fp32 (CUDA cores) over bf16 at least a quarter of the ratio of their peaks.
    # Not the whole ratio: a bf16 step also pays the exp on the SFU and the O rescale on the FP32 pipe,
    # which do not scale with the tensor peak (B200: peaks 2250 / 75 = 30x, times ~13x; H100: ~15x, ~12x)
    ratio = hw.tensor_flops_per_s["bf16"] / hw.cuda_flops_per_s["fp32"]
    assert times["fp32"] / times["bf16"] > ratio / 4
    assert math.isfinite(times["tf32"])
