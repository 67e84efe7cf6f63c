"""Expert parallelism (--expert-parallel: the dispatch and combine all-to-all) and --tp on the
config-driven MoE decoders (router replicated, experts width-sharded by MoE-TP = tp / ep).
Hand-worked numbers with their arithmetic beside them."""

import json
from dataclasses import replace

import pytest

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.hf_config import build_graph
from estimator.pricing.collectives import collective_cost
from models.decoder_config import DecoderConfig, MoeSpec, shard_experts
from passes import pipeline_for
from passes.shard_tp import ShardError, shard_tp
from tests.cliutil import assert_one_error_line, cli

H100 = hwdesc.load("h100-sxm")
# 2 layers, hidden 64, 8 query / 4 kv heads of 16; 8 experts top-4, each 48 wide (2I = 96: no width
# equals hidden, so every sharded axis is unambiguous). fp32 activations (4 bytes).
MOE = DecoderConfig("qwen3_moe", num_layers=2, hidden=64, num_heads=8, num_kv_heads=4, head_dim=16, ffn=128,
                    vocab=256, qk_norm=True, moe=MoeSpec(8, 4, 48))
GPT_OSS = replace(MOE, model_type="gpt_oss", qkv_bias=True, o_bias=True, sinks=True, qk_norm=False,
                  layer_windows=(16, -1), moe=MoeSpec(8, 4, 48, router="topk_softmax", expert_bias=True))


def _ep(cfg, ep):
    return replace(cfg, moe=shard_experts(cfg.moe, ep))


def _nodes(graph, op_type):
    return [n for n in graph.topo_nodes() if n.op_type == op_type]


def _comm(result, op):
    return [p for p in result.kernels if p.kernel.kind == "communication" and p.timing.comm["op"] == op]


def test_expert_parallel_inserts_dispatch_and_combine_all_to_all():
    g = build_graph(_ep(MOE, 2), decode=True)
    a2a = _nodes(g, "AllToAll")
    assert len(a2a) == 2 * 2  # dispatch + combine, per MoE layer, 2 layers
    assert {n.attrs["group_size"] for n in a2a} == {2}
    assert {n.domain for n in a2a} == {"com.microsoft"}
    for n in a2a:  # one GPU's pairs: batch tokens x (top-4 / 2 = 2 routes) x hidden 64 (shape inference
        # keeps the shapes through the AllToAll: estimator/frontends/collective_shapes.py)
        shape = g.tensors[n.inputs[0]].shape
        assert str(shape[0]) == "2*batch" and shape[1] == 64
        assert g.tensors[n.outputs[0]].shape == shape
    gate_up = g.tensors["model.layers.0.mlp.experts.gate_up_proj"]
    assert gate_up.shape == (4, 96, 64)  # 8 experts / 2 GPUs
    assert g.tensors["model.layers.0.mlp.gate.weight"].shape == (8, 64)  # the router scores all 8


def test_all_to_all_is_priced_by_the_collective_model():
    g = build_graph(_ep(MOE, 2), decode=True)
    r = estimate(g, H100, dims={"batch": 8, "past_seq": 32}, pipeline=pipeline_for("tensorrt"), roofline=True)
    a2a = _comm(r, "AllToAll")
    assert len(a2a) == 4
    message = 8 * 2 * 64 * 4  # batch 8 x 2 routes per GPU x hidden 64 x fp32 = 4096 bytes
    want = collective_cost("AllToAll", message, 2, H100)
    for p in a2a:
        assert p.timing.comm["bytes"] == message and p.timing.comm["group"] == 2
        assert p.timing.limiter == "communication"
        assert float(p.timing.estimate_s) == pytest.approx(float(want.estimate_s))
        assert float(p.timing.bound_s) == pytest.approx(float(want.bound_s))
    # the AllToAll sits between the views and the grouped GEMM: fuse-moe still forms both projections
    assert sum(1 for p in r.kernels if p.kernel.kind == "moe") == 2 * 2


def test_ep_must_divide_the_experts():
    with pytest.raises(ValueError, match="does not divide the 8 experts"):
        shard_experts(MOE.moe, 3)
    with pytest.raises(ValueError, match="top-k 4"):
        shard_experts(MOE.moe, 8)  # 8 divides 8 experts but not top-4


def _hf(tmp_path, **over):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64,
                                "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 16,
                                "intermediate_size": 128, "vocab_size": 256, "num_experts": 8,
                                "num_experts_per_tok": 4, "moe_intermediate_size": 48, **over}))
    return str(path)


def test_cli_expert_parallel_json_and_explain(capsys, tmp_path):
    path = _hf(tmp_path)
    args = ("--hf-config", path, "--decode", "--dim", "batch=8", "--dim", "past_seq=32",
            "--expert-parallel", "2")
    code, out, _ = cli(capsys, *args, "--json")
    assert code == 0
    data = json.loads(out)
    # --expert-parallel 2 alone is attention DP 2 (estimator/serve/parallel.py): each GPU its own 8
    # tokens, all top-4 routes of them sent to their experts' GPUs
    assert data["parallel"]["ep"] == 2 and data["parallel"]["attention_dp"] == 2
    assert data["parallel"]["gpus"] == 2 and len(data["parallel"]["decisions"]) == 4
    a2a = [k for k in data["kernels"] if k.get("comm", {}).get("op") == "AllToAll"]
    assert a2a and all(k["comm"]["bytes"] == 8 * 4 * 64 * 4 for k in a2a)  # 8 tokens x 4 routes x 64 x fp32
    code, out, _ = cli(capsys, *args, "--explain")
    assert code == 0
    assert "sharding decisions (--expert-parallel 2):" in out
    assert out.count("expert parallel: AllToAll x2") == 4


def test_cli_expert_parallel_bad_input(capsys, tmp_path):
    code, _, err = cli(capsys, "--hf-config", _hf(tmp_path), "--expert-parallel", "3")
    assert_one_error_line(code, err, "does not divide the 8 experts")
    dense = _hf(tmp_path, model_type="qwen3")
    code, _, err = cli(capsys, "--hf-config", dense, "--expert-parallel", "2")
    assert_one_error_line(code, err, "needs a mixture-of-experts model")
    code, _, err = cli(capsys, "--model", "llama-tiny", "--expert-parallel", "2")
    assert_one_error_line(code, err, "not a bundled MoE decoder")
    code, _, err = cli(capsys, "model.onnx", "--expert-parallel", "2")
    assert_one_error_line(code, err, "needs --hf-config or a bundled MoE model")


def test_tp_shards_routed_experts_by_width():
    g = build_graph(MOE, decode=True)
    r = shard_tp(g, 2)
    assert r.modified
    s = r.graph
    assert s.tensors["model.layers.0.mlp.experts.gate_up_proj"].shape == (8, 48, 64)  # 2I 96 / 2
    assert s.tensors["model.layers.0.mlp.experts.down_proj"].shape == (8, 64, 24)  # I 48 / 2
    assert s.tensors["model.layers.0.mlp.gate.weight"].shape == (8, 64)  # router replicated
    split = _nodes(s, "Split")[0]
    assert [s.tensors[t].shape[1] for t in split.outputs] == [24, 24]  # gate, up: 48 / 2 each
    moe_ar = [n for n in _nodes(s, "AllReduce") if "experts/ReduceSum" in n.name]
    assert len(moe_ar) == 2 and {n.attrs["group_size"] for n in moe_ar} == {2}
    res = estimate(s, H100, dims={"batch": 8, "past_seq": 32}, pipeline=pipeline_for("tensorrt"),
                   roofline=True)
    # per layer: o_proj + MoE all-reduces; the embedding's; all of 8 tokens x hidden 64 x fp32 = 2 KiB
    ar = _comm(res, "AllReduce")
    assert len(ar) == 2 * 2 + 1 and {p.timing.comm["bytes"] for p in ar} == {8 * 64 * 4}
    assert any("MoE-TP 2" in d and "96 -> 48, 48 -> 24" in d for d in r.decisions)


def test_tp_equal_to_ep_keeps_experts_whole_and_reduces():
    """Under --tp every GPU holds every token: EP moves none, so the all-to-all pair goes and one
    all-reduce of the per-token output (8 tokens x 64 x fp32 = 2 KiB) sums the GPUs' partial outputs."""
    r = shard_tp(build_graph(_ep(MOE, 2), decode=True), 2)
    s = r.graph
    assert s.tensors["model.layers.0.mlp.experts.gate_up_proj"].shape == (4, 96, 64)  # EP's 4, full width
    assert not _nodes(s, "AllToAll")
    moe_ar = [n for n in _nodes(s, "AllReduce") if "experts" in n.name]
    assert len(moe_ar) == 2 and {n.attrs["group_size"] for n in moe_ar} == {2}
    res = estimate(s, H100, dims={"batch": 8, "past_seq": 32}, pipeline=pipeline_for("tensorrt"),
                   roofline=True)
    assert {p.timing.comm["bytes"] for p in _comm(res, "AllReduce")} == {8 * 64 * 4}
    assert sum(1 for p in res.kernels if p.kernel.kind == "moe") == 4  # still two grouped GEMMs a layer
    assert any("experts whole (EP = tp), expert parallelism 2; its 2 AllToAll dropped" in d
               for d in r.decisions)


def test_tp_with_smaller_ep_shards_the_rest_by_width():
    r = shard_tp(build_graph(_ep(MOE, 2), decode=True), 4)  # MoE-TP = 4 / 2 = 2
    s = r.graph
    assert s.tensors["model.layers.0.mlp.experts.gate_up_proj"].shape == (4, 48, 64)
    moe_ar = [n for n in _nodes(s, "AllReduce") if "experts" in n.name]
    assert {n.attrs["group_size"] for n in moe_ar} == {4}  # EP and width shards summed together
    with pytest.raises(ShardError, match="not a multiple of the expert-parallel size 4"):
        shard_tp(build_graph(_ep(MOE, 4), decode=True), 2)


def test_tp_replicates_a_topk_router():
    """gpt-oss's router takes top-k of the raw logits: its scores never meet a normalisation over the
    expert width, so before the TopK rule its 'region' ran into the next layer (an error)."""
    r = shard_tp(build_graph(GPT_OSS, decode=True), 2)
    s = r.graph
    assert s.tensors["model.layers.0.mlp.gate.weight"].shape == (8, 64)
    assert s.tensors["model.layers.0.mlp.experts.gate_up_proj_bias"].shape == (8, 48)  # 96 / 2
    assert s.tensors["model.layers.0.self_attn.q_proj.bias"].shape == (64,)  # 8 heads x 16 / 2
    assert sum("MoE-TP 2" in d for d in r.decisions) == 2


def test_tp_unsupported_cases_are_one_error_line(capsys, tmp_path):
    code, _, err = cli(capsys, "--hf-config", _hf(tmp_path), "--decode", "--tp", "3")
    assert_one_error_line(code, err, "not divisible by --tp 3")
    # (MLA under --tp is sharded by heads now: tests/test_parallel.py)


def test_cli_tp_with_expert_parallel(capsys, tmp_path):
    code, out, _ = cli(capsys, "--hf-config", _hf(tmp_path), "--decode", "--dim", "batch=8", "--dim",
                       "past_seq=32", "--tp", "2", "--expert-parallel", "2", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["parallel"]["tp"], data["parallel"]["ep"]) == (2, 2)
    decisions = data["parallel"]["decisions"]
    assert sum("experts whole (EP = tp)" in d for d in decisions) == 2  # one per MoE layer
    ops = [k["comm"]["op"] for k in data["kernels"] if "comm" in k]
    # per layer o_proj + MoE all-reduces, and the embedding's; the all-to-all pairs are dropped
    assert ops.count("AllToAll") == 0 and ops.count("AllReduce") == 2 * 2 + 1
