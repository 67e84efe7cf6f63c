"""Issue 13: MoE, MLA, sliding windows and --hf-config. Hand-worked numbers with their arithmetic."""

from __future__ import annotations

import json

import pytest
import sympy

import hwdesc
from estimator.cost.moe import expected_active_experts
from estimator.estimate import estimate
from estimator.frontends import hf_config
from estimator.ir import dim
from models import named_configs
from models.decoder_config import DecoderConfig
from passes import pipeline_for
from tests.cliutil import assert_one_error_line, cli

H100 = hwdesc.load("h100-sxm")


def test_expected_active_experts():
    assert float(expected_active_experts(8, 2, 1)) == pytest.approx(2)  # one token: exactly its k experts
    assert float(expected_active_experts(8, 2, 2)) == pytest.approx(8 * (1 - 0.75 ** 2))  # 3.5
    assert expected_active_experts(8, 8, 5) == 8  # top-k = E: every expert
    t = dim("tokens")
    assert float(expected_active_experts(256, 8, t).subs(t, 10_000)) == pytest.approx(256, rel=1e-9)


# (total, active) parameters from the model cards (cited in models/named_configs.py); NB: active leaves
# out the input embedding table (a token reads one row), as the gpt-oss and DeepSeek cards count.
CARDS = {
    "qwen3-32b": (32.8e9, None),  # "Number of Parameters: 32.8B"
    "qwen3-235b-a22b": (235e9, 22e9),  # "235B in total and 22B activated"
    "mixtral-8x7b": (46.7e9, 12.9e9),  # Mistral: 46.7B total, 12.9B per token
    "deepseek-v3": (671e9, 37e9),  # "671B total parameters with 37B activated" (MTP module apart)
    "kimi-k2": (1.0e12, 32e9),  # "32 billion activated parameters and 1 trillion total"
    "gpt-oss-120b": (117e9, 5.1e9),  # "117B parameters with 5.1B active"
    "gpt-oss-20b": (21e9, 3.6e9),  # "21B parameters with 3.6B active"
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_param_counts_match_model_cards(name):
    total, active = named_configs.NAMED[name].param_counts()
    card_total, card_active = CARDS[name]
    assert total == pytest.approx(card_total, rel=0.03)  # cards round to 2-3 digits ("1T")
    if card_active:
        assert active == pytest.approx(card_active, rel=0.03)


def test_qwen3_32b_param_count_by_hand():
    # per layer: q 5120*8192 + k,v 2*5120*1024 + o 8192*5120 + qk norms 2*128 + MLP 3*5120*25600 + 2 norms
    layer = 5120 * 8192 + 2 * 5120 * 1024 + 8192 * 5120 + 2 * 128 + 3 * 5120 * 25600 + 2 * 5120
    total = 64 * layer + 2 * 151936 * 5120 + 5120  # untied embedding and LM head, final norm
    assert named_configs.QWEN3_32B.param_counts()[0] == total


def test_mla_latent_kv_cache():
    cfg = named_configs.DEEPSEEK_V3
    assert cfg.kv_bytes_per_token(itemsize=2) == 61 * (512 + 64) * 2  # latent + rope key per layer, bf16
    g = hf_config.build_graph(cfg, decode=True)
    past = g.tensors["past_key_values.0.latent"]
    assert past.shape == (dim("batch"), 1, dim("past_seq"), 576)


def test_sliding_window_decode_cache_holds_the_window():
    g = hf_config.build_graph(named_configs.GPT_OSS_20B, decode=True)
    assert g.tensors["past_key_values.0.key"].shape[2] == sympy.Min(dim("past_seq"), 128)  # sliding
    assert g.tensors["past_key_values.1.key"].shape[2] == dim("past_seq")  # full


def _config(**over) -> dict:
    base = {"model_type": "mistral", "num_hidden_layers": 1, "hidden_size": 256, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 128, "intermediate_size": 512, "vocab_size": 128,
            "sliding_window": 128}
    return {**base, **over}


def _attention_tensor_flops(cfg: DecoderConfig, seq: int) -> list:
    g = hf_config.build_graph(cfg)
    r = estimate(g, H100, dims={"batch": 1, "seq": seq}, pipeline=pipeline_for("tensorrt"), roofline=True)
    return [p.kernel.work.flops[("cuda", "fp32")] for p in r.kernels if p.kernel.kind == "attention"]


def test_mistral_window_prices_the_band():
    flops = _attention_tensor_flops(hf_config.decoder_config(_config()), 8192)
    # window 128 = the query and 127 keys left of it: <= 128 scores per query; 2 heads, 4 * 128 per score
    assert flops == [1 * 2 * 8192 * 128 * 4 * 128]
    full = _attention_tensor_flops(hf_config.decoder_config(_config(sliding_window=None)), 8192)
    assert full == [1 * 2 * (8192 * 8193 // 2) * 4 * 128]  # the causal triangle: 32x the window


def test_gemma3_local_and_global_layers():
    cfg = hf_config.decoder_config(_config(model_type="gemma3_text", num_hidden_layers=2, sliding_window=64,
                                           layer_types=["sliding_attention", "full_attention"]))
    assert _attention_tensor_flops(cfg, 1024) == [2 * 1024 * 64 * 512, 2 * (1024 * 1025 // 2) * 512]


def test_gemma2_softcap_counts_tanh():
    cfg = hf_config.decoder_config(_config(model_type="gemma2", num_hidden_layers=2,
                                           attn_logit_softcapping=50.0))
    g = hf_config.build_graph(cfg)
    assert sum(1 for n in g.topo_nodes() if n.op_type == "Tanh") >= 2  # one soft-cap per layer


def test_unknown_model_type_is_one_error_line(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "bloom"}))
    code, _, err = cli(capsys, "--hf-config", str(path))
    assert_one_error_line(code, err, "supported: deepseek_v3")


def test_missing_key_is_one_error_line(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = cli(capsys, "--hf-config", str(path))
    assert_one_error_line(code, err, "missing key")


def test_hf_config_cli_prices_a_moe_decode(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_config(model_type="qwen3_moe", hidden_size=64, head_dim=16),
                                "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32}))
    code, out, _ = cli(capsys, "--hf-config", str(path), "--decode", "--dim", "batch=1", "--dim",
                       "past_seq=16", "--json")
    assert code == 0
    kinds = {k["kind"] for k in json.loads(out)["kernels"]}
    assert "moe" in kinds


@pytest.mark.parametrize("name", sorted(named_configs.NAMED))
@pytest.mark.parametrize("decode", [False, True])
def test_named_families_price_fully_under_every_strategy(name, decode):
    """Each bundled family on a 4-layer copy (DeepSeek's dense first layers and MoE layers, gpt-oss's
    sliding and full layers all present): no uncosted op, fusion never adds bytes, and tensor FLOPs
    are kept (prefill: flash attention's skipped causal tiles aside)."""
    from dataclasses import replace

    from estimator.frontends.onnx_import import import_model
    from models import decoder
    from passes import STRATEGIES

    full = named_configs.NAMED[name]
    windows = full.layer_windows[:4]
    moe = replace(full.moe, first_dense=min(full.moe.first_dense, 1)) if full.moe else None
    cfg = replace(full, num_layers=4, layer_windows=windows, moe=moe)
    g = import_model(decoder.build(name, cfg, "decode" if decode else "prefill"))
    dims = {"batch": 2, "past_seq": 300} if decode else {"batch": 1, "seq": 256}
    base = estimate(g, H100, precision="bf16", dims=dims, roofline=True)
    assert not base.uncosted and not base.graph.unknown_dims

    def tensor(r):
        return float(sum(p.kernel.work.flops.get(("tensor", "bf16"), 0) for p in r.kernels))

    for strategy, pipeline in STRATEGIES.items():
        r = estimate(g, H100, precision="bf16", dims=dims, pipeline=pipeline, roofline=True)
        assert not r.uncosted, strategy
        assert float(r.totals["dram_bytes"]) <= float(base.totals["dram_bytes"]), strategy
        if decode or "fuse-attention" not in pipeline:
            assert tensor(r) == pytest.approx(tensor(base), rel=1e-9), strategy
        else:
            assert tensor(r) <= tensor(base), strategy


def test_window_tile_estimate_follows_the_band():
    """The tile model prices a sliding-window layer over its band: at seq 8192, window 128, the
    attention estimate is a small fraction of the full causal layer's (which visits ~32x the keys)."""
    def attention_estimate(cfg_dict):
        r = estimate(hf_config.build_graph(hf_config.decoder_config(cfg_dict)), H100, precision="bf16",
                     dims={"batch": 1, "seq": 8192}, pipeline=pipeline_for("tensorrt"))
        return sum(float(p.timing.estimate_s) for p in r.kernels if p.kernel.kind == "attention")

    windowed, full = attention_estimate(_config()), attention_estimate(_config(sliding_window=None))
    assert windowed < full / 4


def test_expert_parallel_prices_one_gpus_share(capsys, tmp_path):
    """--tp 2 --expert-parallel 2 on 8 experts, top-2: 4 experts per GPU and, the tokens replicated on the
    pair, 1 route per token; at batch 1 the active expert weights read per GPU halve (2 of 8 -> 1 of 4
    experts, each 3 * 64 * 32 fp32). (--expert-parallel 2 alone is attention DP 2: tests/test_parallel.py.)"""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_config(model_type="qwen3_moe", hidden_size=64, head_dim=16),
                                "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32}))
    totals = {}
    for ep in ("1", "2"):
        code, out, _ = cli(capsys, "--hf-config", str(path), "--decode", "--dim", "batch=1", "--dim",
                           "past_seq=16", "--json", "--fusion", "max", "--tp", ep, "--expert-parallel", ep)
        assert code == 0
        moe = [k for k in json.loads(out)["kernels"] if k["kind"] == "moe"]
        totals[ep] = sum(float(k["dram_bytes"]) for k in moe)
    expert = 3 * 64 * 32 * 4
    assert totals["1"] - totals["2"] == pytest.approx(expert, rel=0.05)  # 2 experts read -> 1
    code, _, err = cli(capsys, "--hf-config", str(path), "--expert-parallel", "3")
    assert_one_error_line(code, err, "does not divide the 8 experts")
