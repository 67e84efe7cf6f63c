"""Per-tensor fp8 as serving engines run it (estimator/w8a8.py): fp8 linear weights, a quantization
kernel before each distinct GEMM input, bf16 elsewhere, lm_head / router / embedding left unquantized.
Hand-worked numbers with their arithmetic beside them."""

from dataclasses import replace

import sympy

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.hf_config import build_graph
from estimator.w8a8 import w8a8
from models.decoder_config import DecoderConfig, MoeSpec
from passes import pipeline_for

H100 = hwdesc.load("h100-sxm")
# 2 layers, hidden 64, 4 query / 2 kv heads of 16, MLP 128 wide, vocabulary 256
DENSE = DecoderConfig("qwen3", num_layers=2, hidden=64, num_heads=4, num_kv_heads=2, head_dim=16, ffn=128,
                      vocab=256, qk_norm=True)
MOE = replace(DENSE, model_type="qwen3_moe", moe=MoeSpec(8, 2, 48))


def _nodes(graph, op_type):
    return [n for n in graph.topo_nodes() if n.op_type == op_type]


def _weight_dtype(graph, name):
    return graph.tensors[name].dtype


def test_dense_decoder_quantizes_each_distinct_gemm_input_once():
    g = w8a8(build_graph(DENSE, decode=True), "fp8e4m3", "bf16", kv_dtype="fp8e4m3")
    quant = _nodes(g, "QuantizeLinear")
    # per layer: the input norm's output (q, k, v share it), the post-attention norm's output (gate,
    # up share it), the SwiGLU product (down): 3 x 2 layers. The attention writes the o_proj's input
    # in fp8 itself (no kernel): its P x V product and the views after it are fp8.
    assert len(quant) == 3 * 2
    o_proj = next(n for n in _nodes(g, "MatMul") if n.name.endswith("layers.0/self_attn/o_proj/MatMul"))
    assert g.tensors[o_proj.inputs[0]].dtype == "fp8e4m3"
    assert not o_proj.inputs[0].endswith("__fp8")
    for n in quant:
        assert g.tensors[n.inputs[0]].dtype == "bf16" and g.tensors[n.outputs[0]].dtype == "fp8e4m3"
    q_proj = next(n for n in _nodes(g, "MatMul") if n.name.endswith("layers.0/self_attn/q_proj/MatMul"))
    k_proj = next(n for n in _nodes(g, "MatMul") if n.name.endswith("layers.0/self_attn/k_proj/MatMul"))
    assert q_proj.inputs[0] == k_proj.inputs[0]  # one fp8 copy read by both
    assert g.tensors[q_proj.inputs[0]].dtype == "fp8e4m3"
    assert _weight_dtype(g, "model.layers.0.self_attn.q_proj.weight") == "fp8e4m3"
    assert _weight_dtype(g, "model.layers.1.mlp.down_proj.weight") == "fp8e4m3"
    # left unquantized: the lm_head and the embedding; norms' weights stay bf16 too
    assert _weight_dtype(g, "lm_head.weight") == "bf16"
    assert _weight_dtype(g, "model.embed_tokens.weight") == "bf16"
    assert _weight_dtype(g, "model.norm.weight") == "bf16"
    # the KV cache at kv_dtype, every other float activation at bf16
    assert g.tensors["past_key_values.0.key"].dtype == "fp8e4m3"
    assert g.tensors["logits"].dtype == "bf16"


def test_kv_cache_defaults_to_the_activation_dtype():
    g = w8a8(build_graph(DENSE, decode=True), "fp8e4m3", "bf16")
    assert g.tensors["past_key_values.0.key"].dtype == "bf16"
    assert g.tensors["present.1.value"].dtype == "bf16"


def test_quantization_kernel_bytes_and_ops():
    # one bf16 -> fp8 cast of T x hidden with a static fp32 scale: reads 2 T x 64 bytes + the 4-byte
    # scale, writes T x 64 bytes, 3 CUDA ops per element (scale, round, saturate). Unfused pipeline:
    # each QuantizeLinear is its own kernel.
    g = w8a8(build_graph(DENSE, decode=True), "fp8e4m3", "bf16")
    r = estimate(g, H100, dims={"batch": 8, "past_seq": 32}, roofline=True)
    quant = [p for p in r.kernels if p.kernel.nodes[0].op_type == "QuantizeLinear"]
    assert len(quant) == 3 * 2
    first = quant[0]  # the input norm's output: 8 tokens x 64
    assert sympy.simplify(first.kernel.work.bytes_read - (2 * 8 * 64 + 4)) == 0
    assert sympy.simplify(first.kernel.work.bytes_written - 8 * 64) == 0
    assert first.kernel.work.flops[("alu", "fp32")] == 3 * 8 * 64
    down = quant[2]  # the SwiGLU product: 8 tokens x 128
    assert sympy.simplify(down.kernel.work.bytes_read - (2 * 8 * 128 + 4)) == 0
    assert sympy.simplify(down.kernel.work.bytes_written - 8 * 128) == 0


def test_linear_weights_are_read_at_fp8_and_outputs_written_at_bf16():
    # q_proj at batch 8: A 8 x 64 fp8 (1 byte), B 64 x 64 fp8, output 8 x 64 bf16 (2 bytes)
    g = w8a8(build_graph(DENSE, decode=True), "fp8e4m3", "bf16")
    r = estimate(g, H100, dims={"batch": 8, "past_seq": 32}, roofline=True)
    q = next(p for p in r.kernels if p.kernel.nodes[0].name.endswith("layers.0/self_attn/q_proj/MatMul"))
    assert sympy.simplify(q.kernel.work.bytes_read - (8 * 64 + 64 * 64)) == 0
    assert sympy.simplify(q.kernel.work.bytes_written - 2 * 8 * 64) == 0
    assert q.kernel.work.flops == {("tensor", "fp8e4m3"): 2 * 8 * 64 * 64}  # one multiply-add per (m, n, k)


def test_moe_experts_fp8_router_unquantized():
    g = w8a8(build_graph(MOE, decode=True), "fp8e4m3", "bf16")
    assert _weight_dtype(g, "model.layers.0.mlp.experts.gate_up_proj") == "fp8e4m3"
    assert _weight_dtype(g, "model.layers.0.mlp.experts.down_proj") == "fp8e4m3"
    assert _weight_dtype(g, "model.layers.0.mlp.gate.weight") == "bf16"  # the router: feeds the TopK
    # the expert GEMMs' token operand is fp8 (the permutation writes it), with no quantization node:
    # per layer only the q/k/v input's (the attention writes the o_proj's input in fp8)
    assert len(_nodes(g, "QuantizeLinear")) == 1 * 2
    r = estimate(g, H100, dims={"batch": 4, "past_seq": 32}, pipeline=pipeline_for("tensorrt"), roofline=True)
    moe = [p for p in r.kernels if p.kernel.kind == "moe"]
    assert moe and all(("tensor", "fp8e4m3") in p.kernel.work.flops for p in moe)


def test_only_quantization_nodes_are_added():
    g = build_graph(DENSE, decode=True)
    out = w8a8(g, "fp8e4m3", "bf16")
    assert len(out) == len(g) + 3 * 2  # only the quantization nodes were added
    assert {t.dtype for t in out.tensors.values() if t.dtype not in ("int64", "bool", "int32")} \
        <= {"bf16", "fp8e4m3", "fp32"}


LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256}


def test_cli_precision_fp8_w8a8(capsys, tmp_path):
    import json

    from tests.cliutil import cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    dims = ("--hf-config", str(path), "--decode", "--dim", "batch=8", "--dim", "past_seq=32", "--json")
    code, out, _ = cli(capsys, *dims, "--precision", "fp8-w8a8", "--fusion", "none")
    assert code == 0
    doc = json.loads(out)
    assert doc["precision"] == "fp8-w8a8"
    quant = [k for k in doc["kernels"] if k["kind"] == "quant"]
    assert len(quant) == 3 * 2  # q/k/v input, gate/up input, SwiGLU product; 2 layers
    # the first: 8 tokens x 64 hidden, bf16 in (2 bytes) + the fp32 scale, fp8 out (1 byte)
    assert float(quant[0]["dram_bytes"]) == 2 * 8 * 64 + 4 + 8 * 64
    # every float tensor fp8: the lm_head (256 x 64) read at 1 byte, not the 2 w8a8 keeps
    code, out_fp8, _ = cli(capsys, *dims, "--precision", "fp8", "--fusion", "none")
    head = [k for k in json.loads(out_fp8)["kernels"] if k["name"].startswith("/lm_head/MatMul")][0]
    head_w8a8 = [k for k in doc["kernels"] if k["name"].startswith("/lm_head/MatMul")][0]
    # logits 8 x 256 and the input 8 x 64 at 2 bytes against 1; the weight 256 x 64 the same
    assert float(head_w8a8["dram_bytes"]) - float(head["dram_bytes"]) == 256 * 64 + 8 * 64 + 8 * 256


def test_cli_unknown_precision_lists_fp8_w8a8(capsys):
    from tests.cliutil import assert_one_error_line, cli

    code, _, err = cli(capsys, "--model", "llama-3-8b", "--precision", "fp9")
    assert_one_error_line(code, err, "fp8-w8a8")


def test_precision_recommender_sees_fp8_w8a8_as_8_bit(capsys, tmp_path):
    # the graph's widest float tensors are the fp32 quantization scales: the recommender must judge a
    # deployment precision by its GEMMs' width (8 bits), so it offers no bf16 or fp8 on an H100
    import json

    from tests.cliutil import cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    code, out, _ = cli(capsys, "--hf-config", str(path), "--decode", "--dim", "batch=4", "--dim",
                       "past_seq=64", "--precision", "fp8-w8a8", "--recommend", "--recommend-only",
                       "precision", "--json")
    assert code == 0
    assert json.loads(out)["recommendations"] == []
