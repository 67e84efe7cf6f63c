"""MLA decode and the MoE layer as kernels of their own (estimator/pricing/mla.py, moe.py): hand-worked
numbers, and a DeepSeek-style decode lowering its attention to the MLA tensor-core kernel."""

from __future__ import annotations

import pytest

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.hf_config import build_graph
from estimator.pricing import mla, moe
from models.decoder_config import DecoderConfig, MlaSpec, MoeSpec
from passes import DEFAULT_STRATEGY, pipeline_for

EFF = {"launch_s": 1e-6, "mem_latency_s": 1e-6, "mla_decode_s": 2e-6, "mla_decode_seq_s": 1e-7,
       "mla_decode_row_s": 1e-9, "mla_overlap": 0.5, "mla_tensor": 0.5, "mla_dram": 0.8}


def test_expected_active_experts_by_hand():
    # 2 tokens, top-1 of 4 experts: 4 * (1 - (3/4)^2) = 4 * 7/16 = 1.75 distinct experts expected
    assert moe.active_uniform(2, 1, 4) == pytest.approx(1.75)
    # 2 tokens, top-2 of 8: each expert idle with probability (6/8)^2 = 9/16: 8 * 7/16 = 3.5
    assert moe.active_uniform(2, 2, 8) == pytest.approx(3.5)
    # one token hits exactly its k; many tokens hit them all
    assert moe.active_uniform(1, 2, 8) == pytest.approx(2.0)
    assert moe.active_uniform(10_000, 2, 8) == pytest.approx(8.0)
    # the benchmark's balanced (strided) routing: 3 assignments -> 3 distinct experts, never more than E
    assert moe.active_balanced(3, 8) == 3 and moe.active_balanced(100, 8) == 8
    # balanced, 4 tokens x top-2 over 8 experts on 2 EP ranks: 8 assignments, 8 active, 4 on rank 0,
    # 1 token each
    assert list(moe.rank_loads(4, 2, 8, 2, "balanced")) == [1.0, 1.0, 1.0, 1.0]


def test_power_law_draws_keep_the_assignments_and_measure_the_heaviest_rank():
    # the generator's rounding remainder is redistributed: every draw routes exactly 64 x 8 = 512 pairs
    for loads in moe.power_law_loads(64, 8, 256, 1.2, ep=1, draws=3):
        assert loads.sum() == 512 and len(loads) == 256
    # over 2 EP ranks the measured one holds the heavier half: at least 256 of the 512 pairs
    for loads in moe.power_law_loads(64, 8, 256, 1.2, ep=2, draws=3):
        assert len(loads) == 128 and loads.sum() >= 256


def test_moe_layer_work_by_hand():
    # 1 token, top-1 of 4 experts, hidden 128, inter 64, bf16, gated: one active expert of 4 local
    w = moe.layer_work(1, 128, 64, 1, 4, 1, 1, "bfloat16", "balanced", True, 132)
    assert w["active"] == 1 and w["local"] == 4 and w["mma"] == "bf16"
    assert w["row_tiles"] == 1 and w["assignments"] == 1  # one token row, padded to one 128-row tile
    assert (w["n1"], w["k1"], w["n2"], w["k2"]) == (128, 128, 128, 64)  # fc1: gate + up 2 x 64 wide
    assert w["rows"] == 1 * 128 * 2 * 2 and w["io"] == 1 * 128 * 2 * 2  # bf16 rows gathered / in and out


def test_grouped_gemm_by_hand():
    eff = {"moe_tensor": 0.5, "moe_dram": 0.5, "moe_cta_stream": 2.0, "moe_gemm_s": 1e-6,
           "moe_expert_s": 1e-7, "moe_overlap": 1.0}
    # 2 active experts of 4, 2 row tiles, N = K = 256, 1-byte weights, 1e12 FLOP/s and 1e12 B/s, 100 SMs
    compute, memory, fixed, time = moe.grouped_gemm(2, 2, 4, 256, 256, 1.0, 1e12, 100, 1e12, eff)
    assert compute == pytest.approx(2 * 2 * 128 * 256 * 256 / (1e12 * 0.5))  # padded rows x N x K
    # 2 row tiles x 2 column tiles = 4 CTAs, each streaming at 2 x its 1/100 share: 8 % of the bandwidth
    assert memory == pytest.approx(2 * 256 * 256 / (1e12 * 0.5 * 0.08))
    assert fixed == pytest.approx(1e-6 + 4 * 1e-7)  # every local expert's bookkeeping
    assert time == pytest.approx(fixed + max(compute, memory))  # fully overlapped


def test_mla_decode_kernel_flops_and_bytes_at_one_shape():
    k = mla.MlaDecodeKernel(q_rows=64, kv_block=64, fp8_mma=False)
    # batch 2, 128 heads, 64 cached tokens: 2 sequences x 2 head blocks x 1 page = 4 items on 132 SMs,
    # one per SM: 2 * 64 rows * 64 keys * (576 + 512) = 8,912,896 FLOPs on one SM's share of the peak
    peak = 132e12  # 1e12 per SM
    dram = 2 * 64 * 576 * 2 + 2 * 128 * (576 + 512) * 2  # the bf16 latent cache, Q in and O out
    t = mla.decode_time(2, 128, 64, 576, 512, 2.0, 2.0, dram, 132, 1e12, {"bf16": peak}, EFF, k)
    assert t.ctas == 4 and t.waves == 1 and t.mma_dtype == "bf16"
    assert t.compute == pytest.approx(8_912_896 / (1e12 * 0.5))
    assert t.memory == pytest.approx(dram / (1e12 * 0.8))
    fixed = 1e-6 + 1e-6 + 2e-6 + 1e-7 * 2 + 1e-9 * 2 * 128
    assert t.fixed == pytest.approx(fixed)
    assert t.time == pytest.approx(fixed + max(t.compute, t.memory) + 0.5 * min(t.compute, t.memory))
    # an fp8 cache under an fp8 query multiplies in fp8; under a bf16 query it is widened to bf16
    assert mla.mma_dtype(1.0, 1.0) == "fp8" and mla.mma_dtype(2.0, 1.0) == "bf16"


def test_latent_attention_is_recognized_by_shape():
    assert mla.is_latent(1, 576, 512)
    assert not mla.is_latent(8, 576, 512)  # grouped-query
    assert not mla.is_latent(1, 128, 128)  # multi-query: V as wide as K


TINY_DS = DecoderConfig("deepseek_v3", num_layers=1, hidden=256, num_heads=16, num_kv_heads=16, head_dim=192,
                        ffn=512, vocab=256, qk_norm=False, mla=MlaSpec(None, 512, 128, 64, 128),
                        moe=MoeSpec(8, 2, 128, shared_experts=1, router="sigmoid"))


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
def test_deepseek_decode_attention_is_the_mla_tensor_core_kernel(arch):
    r = estimate(build_graph(TINY_DS, decode=True), hwdesc.load(arch), dims={"batch": 64, "past_seq": 4096},
                 pipeline=pipeline_for(DEFAULT_STRATEGY), precision="bf16")
    attn = [p for p in r.kernels if p.kernel.kind == "attention"]
    assert len(attn) == 1
    k = attn[0].kernel
    assert str(k.tile.tile).startswith("mla decode")
    assert any(unit == "tensor" for unit, _ in k.work.flops)
    # within 2x of its bound at this shape (the per-head CUDA-core kernel was ~100x)
    assert float(attn[0].timing.estimate_s) < 2 * float(attn[0].timing.bound_s)


def test_group_limited_gate_by_hand():
    """16 experts in 8 groups of 2, top-4, 2 groups kept. Tokens choosing experts 0, 2, 4, 6 (groups 0-3,
    each scoring 1) keep groups 0 and 1 (ties: lower index) and fill their top-4 with 0 and 2 (score 1)
    then 1 and 3 (score 0, lower index first); the token choosing 9, 11, 13, 15 keeps groups 4 and 5:
    experts 9, 11, then 8, 10."""
    import numpy as np

    from estimator.pricing.moe import group_limited_gate

    choices = np.array([[0, 2, 4, 6], [0, 2, 4, 6], [9, 11, 13, 15]])
    counts = group_limited_gate(choices, experts=16, topk=4, groups=8, topk_groups=2)
    expected = np.zeros(16)
    expected[[0, 1, 2, 3]] = 2
    expected[[8, 9, 10, 11]] = 1
    assert counts.tolist() == expected.tolist()
    # with every group kept the gate routes as the choices
    same = group_limited_gate(choices, experts=16, topk=4, groups=8, topk_groups=8)
    assert same.tolist() == np.bincount(choices.reshape(-1), minlength=16).astype(float).tolist()
