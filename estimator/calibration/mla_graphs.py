"""ONNX graphs for the rows of TensorRT-LLM's MLA tables (mla_context, mla_generation, mla_bmm), as the
DeepSeek builder (models/decoder_attention.py) writes the same ops, so that a row is priced by the
kernels a DeepSeek model lowers to.

- mla_context: the attention op of the MLA module in prefill: ordinary causal attention over the
  expanded per-head K and V, Q and K 192 wide (qk_nope 128 + rope 64), V 128 (v_head_dim); heads are per
  GPU. TensorRT-LLM's context op also applies RoPE to the rope part of Q and K and writes the latent
  (kv_lora_rank + rope) to the cache: written as a RotaryEmbedding over the rope slice of Q (the
  preprocessing kernel) and the latent cache as an output. An fp8 cache runs the FP8 FMHA (Q, K, V in
  fp8, as the context attention table's rows do).
- mla_generation: the absorbed-weight decode: a query already projected into the latent space
  ([b, H, 1, kv_lora_rank + rope] = 576) against the latent cache [b, 1, step + 1, 576] shared by every
  head, V the cache's first kv_lora_rank columns (a Slice), exactly the pattern _mla_absorbed writes.
- mla_bmm: the absorbed weights, one batched GEMM over the heads: mla_gen_pre q_nope [H, t, 128] x
  W_UK [H, 128, 512]; mla_gen_post [H, t, 512] x W_UV [H, 512, 128]. An fp8 row has fp8 weights and
  activation (TensorRT-LLM quantizes the activation per token block first on Hopper).
"""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper

from estimator.calibration.kernel_graphs import BF16, _external, _model

# DeepSeek-V3's MLA dimensions (the tables' model): kv_lora_rank, rope, qk_nope, v_head_dim
KV_LORA, ROPE, NOPE, V_DIM = 512, 64, 128, 128


def mla_context(b, s, h, fp8: bool = False) -> onnx.ModelProto:
    """`fp8` (an fp8 cache): the FP8 FMHA, Q, K and V quantized first (per tensor, one kernel each; the
    caller re-types qq, kq, vq and the cache to fp8)."""
    info = helper.make_tensor_value_info
    qk = NOPE + ROPE
    inputs = [info("q", BF16, [b, h, s, qk]), info("k", BF16, [b, h, s, qk]),
              info("v", BF16, [b, h, s, V_DIM]),
              info("latent", BF16, [b, 1, s, KV_LORA + ROPE]),
              info("cos", BF16, [b, s, ROPE // 2]), info("sin", BF16, [b, s, ROPE // 2])]
    outputs = [info("y", BF16, [b, h, s, V_DIM]), info("cache", BF16, [b, 1, s, KV_LORA + ROPE])]
    nodes = [helper.make_node("RotaryEmbedding", ["latent", "cos", "sin"], ["cache"], name="rope_k")]
    inits = []
    qkv = ["q", "k", "v"]
    if fp8:
        inits.append(helper.make_tensor("qkv_scale", TensorProto.FLOAT, [], [1.0]))
        nodes += [helper.make_node("QuantizeLinear", [t, "qkv_scale"], [t + "q"], name=f"quantize_{t}")
                  for t in qkv]
        qkv = [t + "q" for t in qkv]
    nodes.append(helper.make_node("Attention", qkv, ["y"], name="attention", is_causal=1))
    return _model(nodes, inputs, outputs, inits)


def mla_generation(b, step, h) -> onnx.ModelProto:
    """Dims as ints, or names (a symbolic template: validate_kernels prices every row at once)."""
    info = helper.make_tensor_value_info
    d = KV_LORA + ROPE
    inputs = [info("q", BF16, [b, h, 1, d]), info("past", BF16, [b, 1, step, d]),
              info("new", BF16, [b, 1, 1, d])]
    present = f"{step} + 1" if isinstance(step, str) else step + 1
    # the present latent is an output, as a decoder's present cache: the append is done in place
    outputs = [info("y", BF16, [b, h, 1, KV_LORA]), info("latent", BF16, [b, 1, present, d])]
    inits = [helper.make_tensor("scale", TensorProto.BFLOAT16, [], [1.0 / math.sqrt(NOPE + ROPE)]),
             helper.make_tensor("starts", TensorProto.INT64, [1], [0]),
             helper.make_tensor("ends", TensorProto.INT64, [1], [KV_LORA]),
             helper.make_tensor("axes", TensorProto.INT64, [1], [-1])]
    nodes = [
        helper.make_node("Concat", ["past", "new"], ["latent"], name="append", axis=2),
        helper.make_node("Transpose", ["latent"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale_mul"),
        helper.make_node("Softmax", ["scaled"], ["probs"], name="softmax", axis=-1),
        helper.make_node("Slice", ["latent", "starts", "ends", "axes"], ["values"], name="values"),
        helper.make_node("MatMul", ["probs", "values"], ["y"], name="pv"),
    ]
    return _model(nodes, inputs, outputs, inits)


def mla_bmm(op: str, t, h, block_scaled: bool = False) -> onnx.ModelProto:
    """bf16 (or weights dequantized to bf16), or `block_scaled`: the activation quantized per 1 x 128
    block (QuantizeLinear with its scales an output-sized input, as validate_kernels.fp8_gemm), then the
    fp8 BMM (the caller re-types xq to fp8)."""
    info = helper.make_tensor_value_info
    k, n = (NOPE, KV_LORA) if op == "mla_gen_pre" else (KV_LORA, V_DIM)
    inputs = [info("x", BF16, [h, t, k])]
    outputs = [info("y", BF16, [h, t, n])]
    if not block_scaled:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="bmm")]
        return _model(nodes, inputs, outputs, [_external("w", [h, k, n])])
    inits = [_external("w", [h, k, n], TensorProto.FLOAT8E4M3FN),
             _external("x_scale", [h, t, k // 128], TensorProto.FLOAT)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize", axis=2,
                              block_size=128),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="bmm")]
    return _model(nodes, inputs, outputs, inits)
