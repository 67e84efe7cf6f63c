"""--no-kv-cache (a prefill without present K/V, transformers' use_cache=False) and the mixed-step TPOT
of estimate validate moe-serving, with hand-worked numbers."""

from __future__ import annotations

import json

import pytest

from estimator.calibration import validate_moe_serving as vms
from estimator.errors import UserError
from estimator.frontends import hf_config
from tests.cliutil import assert_one_error_line, cli

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256}


def test_prefill_without_cache_has_no_present_outputs():
    cfg = hf_config.decoder_config(LLAMA)
    assert hf_config.build_graph(cfg).outputs == ("logits", "present.0.key", "present.0.value",
                                                  "present.1.key", "present.1.value")
    assert hf_config.build_graph(cfg, kv_cache=False).outputs == ("logits",)
    with pytest.raises(UserError, match="needs the KV cache"):
        hf_config.build_graph(cfg, decode=True, kv_cache=False)


def test_no_kv_cache_cli(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    dims = ("--dim", "batch=2", "--dim", "seq=128", "--json")
    code, out, _ = cli(capsys, "--hf-config", str(path), *dims)
    code_bare, out_bare, _ = cli(capsys, "--hf-config", str(path), "--no-kv-cache", *dims)
    assert code == code_bare == 0
    cached, bare = (float(json.loads(o)["total"]["dram_bytes"]) for o in (out, out_bare))
    # V's head transpose fills the cache: [2, 2, 128, 16] fp32 read and written per layer, 2 layers
    assert cached - bare == 2 * (2 * 2 * 2 * 128 * 16 * 4)
    code, _, err = cli(capsys, "--hf-config", str(path), "--decode", "--no-kv-cache")
    assert_one_error_line(code, err, "--no-kv-cache")


def _const(value: float):
    return lambda _x: value


def test_mixed_step_shares_the_weight_reads():
    # decode step 30 ms, 25 ms of it outside attention; a prefill of s tokens 20 ms + 0.1 ms a token,
    # 12 ms + 0.05 ms a token outside attention; isl 128, B 64, osl 128: 64/128 = 0.5 prefills per step
    step = ((_const(0.030), _const(0.030)), (_const(0.025), _const(0.025)))

    def pre(s):
        return 0.020 + 1e-4 * s

    def pre_shared(s):
        return 0.012 + 5e-5 * s

    prefill = ((pre, pre), (pre_shared, pre_shared))
    separate = vms.tpot_s(step, prefill, 64, 128.0, 128.0, mixed=False)
    mixed = vms.tpot_s(step, prefill, 64, 128.0, 128.0, mixed=True)
    assert separate == pytest.approx(0.030 + 0.5 * 0.0328)  # 46.4 ms: every weight read twice
    # the mixed step's shared kernels at 128 + 64 tokens: 12 + 0.05 * 192 = 21.6 ms; its prefill
    # attention 32.8 - 18.4 = 14.4 ms; less the decode's 25 ms: 11 ms a prefill
    assert mixed == pytest.approx(0.030 + 0.5 * (0.0216 + 0.0144 - 0.025))  # 35.5 ms
    assert vms.tpot_s(step, None, 64, 128.0, 128.0, mixed=True) == pytest.approx(0.030)  # --no-steady


def test_row_precision_of_mxfp4_experts():
    from models.named_configs import GPT_OSS_120B, QWEN3_235B_A22B

    def row(precision, moe):
        return {"precision": precision, "moe_quant_mode": moe}

    assert vms.precision_of(row("fp4", "nvfp4"), GPT_OSS_120B) == ("bf16", "mxfp4")  # vLLM's W4A16
    assert vms.precision_of(row("fp8", "fp8"), GPT_OSS_120B) == ("fp8", "")  # TensorRT-LLM's fp8 MoE
    assert vms.precision_of(row("fp8", "fp8_block"), QWEN3_235B_A22B) == ("fp8", "")
    assert vms.with_expert_format(GPT_OSS_120B, "").moe.weight_format == ""


def test_wave_tpot_of_a_prefill_first_scheduler():
    # SGLang's lock-step waves: decode step 10 ms; a prefill of s tokens 20 ms + 0.1 ms a token, 12 ms +
    # 0.05 ms a token outside attention. B 16 prompts of isl 1024 = 16384 tokens in chunks of 8192:
    # 2 chunks, each 12 + 0.05 * 8192 = 421.6 ms outside attention; one prompt's attention is
    # (20 + 102.4) - (12 + 51.2) = 59.2 ms: the wave's prefill W = 2 * 421.6 + 16 * 59.2 = 1790.4 ms.
    # Prompts 0-7 end in chunk 1 (half of W still to run: 895.2 ms stalls their decoding), 8-15 in
    # chunk 2 (none): mean 447.6 ms, spread over osl - 1 = 127 tokens.
    step = ((_const(0.010), _const(0.010)), (_const(0.008), _const(0.008)))

    def pre(s):
        return 0.020 + 1e-4 * s

    def pre_shared(s):
        return 0.012 + 5e-5 * s

    prefill = ((pre, pre), (pre_shared, pre_shared))
    tpot = vms.wave_tpot_s(step, prefill, 16, 1024.0, 128.0, 8192)
    assert tpot == pytest.approx(0.010 + 0.4476 / 127)  # 13.52 ms
    # the in-flight model charges 16 / 128 of a whole prefill (122.4 ms) on every step: 25.3 ms
    assert vms.tpot_s(step, prefill, 16, 1024.0, 128.0, mixed=False) == pytest.approx(0.010 + 0.125 * 0.1224)
    # one prompt a wave: its first token ends the prefill, nothing stalls it
    assert vms.wave_tpot_s(step, prefill, 1, 1024.0, 128.0, 8192) == pytest.approx(0.010)


def test_per_tensor_fp8_rows_run_w8a8():
    from models.named_configs import QWEN3_32B

    row = {"precision": "fp8", "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8"}
    assert vms.precision_of(row, QWEN3_32B) == ("w8a8", "")
    assert vms.precision_of(row, QWEN3_32B, w8a8=False) == ("fp8", "")  # --no-w8a8: the figures before
    assert vms.precision_of({**row, "gemm_quant_mode": "fp8_block"}, QWEN3_32B) == ("fp8", "")
    small = hf_config.decoder_config(LLAMA)
    graph = hf_config.build_graph(small, decode=True)
    g, precision = vms.deployed(graph, "w8a8", "trtllm")
    assert precision is None  # the graph carries its dtypes
    assert g.tensors["past_key_values.0.key"].dtype == "fp8e4m3"  # TensorRT-LLM: the checkpoint's fp8 KV
    g, _ = vms.deployed(graph, "w8a8", "vllm")
    assert g.tensors["past_key_values.0.key"].dtype == "bf16"  # vLLM kv_cache_dtype auto
    assert vms.deployed(graph, "bf16", "vllm") == (graph, "bf16")
