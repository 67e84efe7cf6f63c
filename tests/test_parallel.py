"""Deployments as serving frameworks state them (estimator/serve/parallel.py): --tp, --attention-dp,
--moe-tp, --expert-parallel, --pp; MLA sharded by heads under TP with its latent replicated; the
attention-DP MoE (all-to-all under EP, all-gather / reduce-scatter under MoE-TP). Hand-worked numbers."""

import json
from dataclasses import replace

import pytest
import sympy

from estimator.frontends.hf_config import build_graph
from estimator.serve.parallel import ParallelError, Parallelism
from models.decoder_config import DecoderConfig, MlaSpec, MoeSpec, deploy_moe
from passes.shard_tp import shard_tp
from tests.cliutil import assert_one_error_line, cli

# 2 layers, hidden 64, 8 heads; 8 experts top-4, each 48 wide; fp32 (4 bytes)
MOE = DecoderConfig("qwen3_moe", num_layers=2, hidden=64, num_heads=8, num_kv_heads=4, head_dim=16, ffn=128,
                    vocab=256, qk_norm=True, moe=MoeSpec(8, 4, 48))
# MLA: q_lora 32, kv_lora 16, nope 16, rope 8 (q/k heads 24 wide), v 16
MLA = replace(MOE, model_type="deepseek_v3", num_kv_heads=8, head_dim=24, qk_norm=False,
              mla=MlaSpec(32, 16, 16, 8, 16), moe=MoeSpec(8, 4, 48, shared_experts=1, router="sigmoid"))


def _nodes(graph, op_type):
    return [n for n in graph.topo_nodes() if n.op_type == op_type]


def test_parallelism_fills_and_checks_the_moe_split():
    p = Parallelism(tp=8, ep=8)
    assert (p.moe_tp, p.gpus, p.label()) == (1, 8, "tp 8, ep 8")
    assert Parallelism(tp=8).moe_tp == 8 and Parallelism(tp=8).ep == 1  # MoE-TP = tp by default
    wide = Parallelism.from_flags(ep=8)  # --expert-parallel alone: attention DP 8
    assert (wide.tp, wide.attention_dp, wide.ep, wide.moe_tp, wide.gpus) == (1, 8, 8, 1, 8)
    assert Parallelism(attention_dp=4, pp=2).gpus == 1 * 4 * 2
    with pytest.raises(ParallelError, match="must equal tp 2 x attention-dp 1 = 2"):
        Parallelism(tp=2, moe_tp=2, ep=2)
    with pytest.raises(ParallelError, match="does not divide"):
        Parallelism(tp=4, ep=3)


def test_inconsistent_flags_are_one_error_line(capsys):
    code, _, err = cli(capsys, "--model", "mixtral-8x7b", "--tp", "2", "--moe-tp", "2", "--expert-parallel",
                       "2", "--memory")
    assert_one_error_line(code, err, "moe-tp 2 x expert-parallel 2 = 4")


def test_mla_is_sharded_by_heads_and_its_latent_replicated():
    s = shard_tp(build_graph(MLA, decode=True), 2).graph
    t = s.tensors
    assert t["model.layers.0.self_attn.q_b_proj.weight"].shape == (32, 4 * 24)  # 8 heads x 24 / 2
    assert t["model.layers.0.self_attn.kv_b_proj.w_uk"].shape == (4, 16, 16)  # absorbed W_UK per head
    assert t["model.layers.0.self_attn.kv_b_proj.w_uv"].shape == (4, 16, 16)
    assert t["model.layers.0.self_attn.o_proj.weight"].shape == (4 * 16, 64)  # 8 heads x v 16 / 2
    assert t["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"].shape == (64, 16 + 8)  # replicated
    assert t["present.0.latent"].shape[-1] == 16 + 8 and t["present.0.latent"].shape[1] == 1  # whole
    pre = shard_tp(build_graph(MLA), 2).graph
    assert pre.tensors["model.layers.0.self_attn.kv_b_proj.weight"].shape == (16, 4 * (16 + 16))


def test_attention_dp_with_ep_sends_every_route_of_the_ranks_tokens():
    moe = deploy_moe(MOE.moe, ep=2, attention_dp=2)
    assert (moe.experts, moe.top_k, moe.dispatch_group) == (4, 4, 2)  # E / 2 experts, all 4 routes
    g = build_graph(replace(MOE, moe=moe), decode=True)
    a2a = _nodes(g, "AllToAll")
    assert len(a2a) == 2 * 2 and {n.attrs["group_size"] for n in a2a} == {2}
    assert str(g.tensors[a2a[0].inputs[0]].shape[0]) == "4*batch"  # batch tokens x 4 routes
    assert not _nodes(g, "AllGather") and not _nodes(g, "ReduceScatter")


def test_attention_dp_with_moe_tp_gathers_and_reduce_scatters():
    moe = deploy_moe(MOE.moe, ep=1, attention_dp=2)
    assert (moe.experts, moe.top_k, moe.routed_tp, moe.token_gather, moe.dispatch_group) == (8, 4, 2, 2, 1)
    g = build_graph(replace(MOE, moe=moe), decode=True)
    assert g.tensors["model.layers.0.mlp.experts.gate_up_proj"].shape == (8, 2 * 48 // 2, 64)
    ag, rs = _nodes(g, "AllGather"), _nodes(g, "ReduceScatter")
    moe_ag = [n for n in ag if "mlp" in n.name]
    assert len(moe_ag) == 2 and len(rs) == 2 and not _nodes(g, "AllToAll")
    assert str(g.tensors[moe_ag[0].outputs[0]].shape[0]) == "2*batch"  # the 2 ranks' tokens
    assert str(g.tensors[rs[0].outputs[0]].shape[0]) == "batch"  # each rank's own back


def _mixtral_ep2_weight_bytes():
    """Mixtral-8x7B, one GPU of EP 2 (4 of 8 experts), bf16 (the checkpoint's torch_dtype)."""
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024  # q, o; k, v (8 kv heads x 128)
    experts = 4 * 3 * 4096 * 14336  # gate, up, down of 4 experts
    layer = attention + 8 * 4096 + experts + 2 * 4096  # + the router over all 8, two norms
    return 2 * (32 * layer + 2 * 32000 * 4096 + 4096)  # embedding, lm_head, final norm


def test_expert_parallel_alone_is_honoured_by_memory_and_serve(capsys):
    code, out, _ = cli(capsys, "--model", "mixtral-8x7b", "--arch", "h200", "--expert-parallel", "2",
                       "--memory", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["parallel"]["gpus"] == 2 and data["parallel"]["attention_dp"] == 2
    assert data["memory"]["weights"] == pytest.approx(_mixtral_ep2_weight_bytes(), rel=1e-3)
    code, out, _ = cli(capsys, "--model", "mixtral-8x7b", "--arch", "h200", "--expert-parallel", "2",
                       "--serve", "isl=128,osl=8,concurrency=4")
    assert code == 0
    assert "serving mixtral-8x7b on 2 x h200 (tp 1, attention-dp 2, ep 2)" in out
    # the decode step's dispatch / combine: each rank's 2 requests x top-2 routes x 4096 x bf16 = 32 KiB
    assert "AllToAll          32 KiB x2" in out
    assert f"{_mixtral_ep2_weight_bytes() / 1e9:.2f} GB" in out  # memory per GPU: weights


def test_attention_dp_alone_splits_the_experts_by_width(capsys):
    """--attention-dp 2 alone: MoE-TP 2 over the pair, all 8 experts at half width each: the same bytes
    per GPU as EP 2's 4 whole experts."""
    code, out, _ = cli(capsys, "--model", "mixtral-8x7b", "--arch", "h200", "--attention-dp", "2", "--memory",
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["parallel"]["attention_dp"], data["parallel"]["moe_tp"], data["parallel"]["ep"]) == (2, 2, 1)
    assert data["memory"]["weights"] == pytest.approx(_mixtral_ep2_weight_bytes(), rel=1e-3)


def test_attention_dp_moe_tp_keeps_shapes_past_the_gather_for_fp8_block():
    """Attention DP 2 at MoE-TP 2 (ep 1) on a DeepSeek-like MLA + shared-expert MoE: the AllGather's output
    [2*batch, 64] keeps its hidden dim as the integer 64 (collective_shapes wrote it as the text "64",
    which onnxruntime's inference then failed to merge with the shared experts' 64 at their Add, dropping
    every shape from the gather on: fp8-block's w8a8 then raised KeyError on the experts' token tensor)."""
    from estimator.w8a8 import w8a8

    moe = deploy_moe(MLA.moe, ep=1, attention_dp=2)
    g = build_graph(replace(MLA, moe=moe), decode=True)
    batch = sympy.Symbol("batch", integer=True, positive=True)
    gather = [n for n in _nodes(g, "AllGather") if "mlp" in n.name][0]  # layer 0's
    assert g.tensors[gather.outputs[0]].shape == (2 * batch, 64)  # the 2 ranks' tokens
    scatter = _nodes(g, "ReduceScatter")[0]
    assert g.tensors[scatter.outputs[0]].shape == (batch, 64)  # each rank's own back
    expert_up = next(n for n in _nodes(g, "MatMul") if n.name.endswith("layers.0/mlp/experts/MatMul"))
    token = expert_up.inputs[1]  # the repeated tokens, unsqueezed: 2 ranks x batch x 4 routes
    assert g.tensors[token].shape == (8 * batch, 64, 1)
    q = w8a8(g, "fp8e4m3", "bf16", block=128)
    assert q.tensors[token].dtype == "fp8e4m3"  # the routed tokens the grouped GEMM reads are fp8


def test_tp_with_ep_beyond_top_k_writes_the_same_expected_work_in_whole_routes():
    """TP 4 / EP 4 with top-2 of 8 experts (DeepSeek's top-8 at TP 16 / EP 16 in small): the tokens are
    replicated, a GPU runs its 2 experts (full width 96) on k / ep = 1/2 route a token. g = gcd(2, 4) = 2:
    written as 8 / 2 = 4 experts taking 2 / 2 = 1 route, width split tp / g = 2 by shard_moe."""
    top2 = replace(MOE.moe, top_k=2)
    moe = Parallelism(tp=4, ep=4).moe(top2)
    assert (moe.experts, moe.top_k, moe.expert_parallel) == (4, 1, 2)
    g = shard_tp(build_graph(replace(MOE, moe=moe), decode=True), 4).graph
    gate_up = g.tensors["model.layers.0.mlp.experts.gate_up_proj"]
    down = g.tensors["model.layers.0.mlp.experts.down_proj"]
    assert gate_up.shape == (4, 2 * 48 // 2, 64) and down.shape == (4, 64, 48 // 2)
    # weights per GPU as EP 4 holds them: 2 experts x (96 + 48) x 64 = 4 experts x (48 + 24) x 64
    assert gate_up.numel + down.numel == 2 * (96 + 48) * 64
    # pairs x width: batch x 1 route x 48 = (batch / 2 routes) x 96, the EP 4 GPU's expected work
    ar = [n for n in _nodes(g, "AllReduce") if "mlp" in n.name]
    assert len(ar) == 2 and not _nodes(g, "AllToAll")  # one all-reduce per MoE layer, tokens replicated
    # active experts at T = 8 tokens: 4 half-width experts active w.p. 1 - (1 - 1/4)^8 = 2 full-width
    # experts w.p. 1 - (1 - 2/8)^8 (the same k / E)
    from estimator.cost.moe import expected_active_experts
    assert float(expected_active_experts(4, 1, 8)) / 2 == pytest.approx(2 * (1 - (1 - 2 / 8) ** 8))
    # where ep divides top-k nothing changes: shard_experts
    assert (Parallelism(tp=4, ep=2).moe(top2).experts, Parallelism(tp=4, ep=2).moe(top2).top_k) == (4, 1)
    with pytest.raises(ParallelError, match="does not divide the 6 experts"):
        Parallelism(tp=4, ep=4).moe(replace(top2, experts=6))
