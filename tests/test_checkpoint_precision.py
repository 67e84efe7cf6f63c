"""Precisions as checkpoints ship them: the default of a bundled LLM and of --hf-config is the
checkpoint's own (torch_dtype, quantization_config), and the deployment precisions fp8-block, nvfp4 and
w4a16 (estimator/precision.py, estimator/w8a8.py). Hand-worked numbers."""

import json

import pytest

import hwdesc
from estimator.cli.main import build_parser
from estimator.cli.options import from_args
from estimator.dtypes import itemsize
from estimator.estimate import estimate
from estimator.frontends.checkpoint_precision import checkpoint_precision
from estimator.frontends.hf_config import build_graph
from estimator.precision import PrecisionError, apply_precision
from estimator.pricing.problem import scale_block
from models.decoder_config import DecoderConfig
from tests.cliutil import assert_one_error_line, cli

H200 = hwdesc.load("h200")
# 2 layers, hidden 64, 4 heads / 2 kv heads of 16, MLP 128, vocab 256
TINY = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 256}
PARAMS = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 2 * 256 * 64 + 64  # layers, emb+head, norm


def _opts(*argv):
    return from_args(build_parser().parse_args(list(argv)))


def test_bundled_llm_defaults_to_its_checkpoint_precision():
    assert _opts("--model", "llama-3-8b", "--arch", "b200").precision == "bf16"  # torch_dtype bfloat16
    assert _opts("--model", "deepseek-v3", "--arch", "h200").precision == "fp8-block"
    assert _opts("--model", "deepseek-v3", "--arch", "a100").precision == "bf16"  # no fp8 tensor cores
    assert _opts("--model", "llama-3-8b", "--precision", "fp8").precision == "fp8"  # the flag wins
    assert _opts("--model", "gpt2-small").precision is None  # small graphs keep their dtypes


def test_checkpoint_precision_reads_quantization_config_then_torch_dtype():
    assert checkpoint_precision({"torch_dtype": "bfloat16"}) == "bf16"
    assert checkpoint_precision({"dtype": "float16"}) == "fp16"
    assert checkpoint_precision({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}) == "fp8-block"
    assert checkpoint_precision({"quantization_config": {"quant_method": "fp8"}}) == "fp8-w8a8"
    assert checkpoint_precision({"quantization_config": {"quant_method": "awq", "bits": 4}}) == "w4a16"
    ct = {"quant_method": "compressed-tensors",
          "config_groups": {"g0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}
    assert checkpoint_precision({"quantization_config": ct}) == "w4a16"
    assert checkpoint_precision({"quantization_config": {"quant_method": "modelopt",
                                                         "quant_algo": "NVFP4"}}) == "nvfp4"
    assert checkpoint_precision({"torch_dtype": "bfloat16",
                                 "quantization_config": {"quant_method": "mxfp4"}}) == "bf16"
    assert checkpoint_precision({}) is None


def test_hf_config_torch_dtype_gives_bf16_weight_bytes(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "torch_dtype": "bfloat16"}))
    code, out, _ = cli(capsys, "--hf-config", str(path), "--arch", "h100-sxm", "--dim", "batch=1",
                       "--dim", "seq=8", "--roofline", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["precision"] == "bf16"
    assert data["total"]["weight_bytes"] == 2 * PARAMS  # 2 bytes a parameter, not fp32's 4


def test_fp32_graph_on_a_gpu_gets_a_note(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))  # no torch_dtype: the graph's fp32
    code, out, _ = cli(capsys, "--hf-config", str(path), "--arch", "h100-sxm", "--dim", "batch=1",
                       "--dim", "seq=8", "--roofline")
    assert code == 0
    assert "precision graph" in out and "note: the graph is fp32" in out and "--precision bf16" in out


def _tiny_graph():
    cfg = DecoderConfig("llama", num_layers=1, hidden=256, num_heads=4, num_kv_heads=2, head_dim=64, ffn=512,
                        vocab=512)
    return build_graph(cfg, decode=True)


def test_fp8_block_quantizes_activations_in_1x128_blocks():
    g = apply_precision(_tiny_graph(), "fp8-block", H200)
    quant = [n for n in g.topo_nodes() if n.op_type == "QuantizeLinear"]
    # q/k/v share one input, gate/up another, o_proj's comes from the attention (fp8 itself), down's
    # from the SwiGLU product: 3 quantizations, each 1 x 128 blocks along the last axis
    assert len(quant) == 3 and {n.attrs["block_size"] for n in quant} == {128}
    w = g.tensors["model.layers.0.self_attn.q_proj.weight"]
    assert w.dtype == "fp8e4m3" and g.tensors["lm_head.weight"].dtype == "bf16"  # lm_head unquantized
    q_proj = next(n for n in g.topo_nodes() if n.name.endswith("q_proj/MatMul"))
    assert scale_block(g, q_proj) == 128  # priced as a block-scaled GEMM (estimator/pricing/problem.py)
    r = estimate(g, H200, dims={"batch": 64, "past_seq": 1024}, roofline=True)
    assert sum(1 for p in r.kernels if p.kernel.kind == "quant") == 3


def test_w4a16_stores_int4_group_128_weights_and_no_activation_quantization():
    g = apply_precision(_tiny_graph(), "w4a16", H200)
    assert not [n for n in g.topo_nodes() if n.op_type == "QuantizeLinear"]
    w = g.tensors["model.layers.0.mlp.gate_proj.weight"]
    assert w.dtype == "int4g128" and int(w.nbytes) == 256 * 512 * 33 // 64  # 4 + 16 / 128 = 4.125 bits each
    assert itemsize("int4g128") == pytest.approx(33 / 64)
    x = g.tensors[[n for n in g.topo_nodes() if n.name.endswith("gate_proj/MatMul")][0].inputs[0]]
    assert x.dtype == "bf16"  # the GEMM runs at bf16, dequantizing the weight


def test_nvfp4_needs_fp4_tensor_cores(capsys):
    with pytest.raises(PrecisionError, match="no nvfp4 tensor cores"):
        apply_precision(_tiny_graph(), "nvfp4", H200)
    g = apply_precision(_tiny_graph(), "nvfp4", hwdesc.load("b200"))
    assert g.tensors["model.layers.0.self_attn.q_proj.weight"].dtype == "fp4e2m1"
    code, _, err = cli(capsys, "--model", "llama-tiny", "--arch", "h200", "--precision", "nvfp4")
    assert_one_error_line(code, err, "no nvfp4 tensor cores")


def test_serve_over_a_list_of_gpus_prints_them_side_by_side(capsys):
    args = ("--model", "llama-tiny", "--arch", "h100-sxm,b200", "--serve", "isl=64,osl=8,concurrency=2")
    code, out, _ = cli(capsys, *args)
    assert code == 0
    lines = out.splitlines()
    gpu = next(line for line in lines if line.strip().startswith("GPU"))
    assert "1 x h100-sxm" in gpu and "1 x b200" in gpu
    for row in ("TTFT", "TPOT", "tokens/s/GPU"):
        assert any(line.strip().startswith(row) for line in lines)
    code, out, _ = cli(capsys, *args, "--json")
    data = json.loads(out)
    assert list(data["serve_by_arch"]) == ["h100-sxm", "b200"]
    assert all(v["serve"]["tpot_s"] > 0 for v in data["serve_by_arch"].values())


