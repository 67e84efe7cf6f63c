"""ONNX graphs for the rows of the measured kernel tables (`estimate validate kernels`, `estimate calibrate`).

What each table measures, written as ONNX ops (dims are ints, or dim_param strings for a symbolic
template):
- gemm: y[m, n] = x[m, k] . W^T, W an initializer (stored as W^T [k, n]: the same bytes) -> MatMul.
- context attention: TensorRT-LLM's context op = a preprocessing kernel (RoPE on Q and K, K/V written to
  the cache) + the fused FMHA kernel. As ONNX: RotaryEmbedding(Q), RotaryEmbedding(K), then the opset-23
  Attention (is_causal) writing Y and present K/V (the cache). NB: two rotary kernels where TensorRT-LLM
  runs one preprocessing kernel; the extra launch is inside the fitted `attention_prefill_s`.
- generation attention: one new token per sequence over `step` cached tokens: the opset-23 Attention with
  past_key / past_value (TensorRT-LLM's XQA applies RoPE and appends K/V inside the kernel; the in-place
  append of one token is not expressible in ONNX and negligible, so there are no present outputs).
Layout is [batch, heads, seq, head_dim] throughout. fp8 dtypes are not legal for ONNX Attention; `retype`
re-types the estimator's graph afterwards, as --precision does.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from estimator.ir import Graph

BF16 = TensorProto.BFLOAT16
OPSET = 23


def _external(name: str, dims: list, dtype: int = BF16) -> TensorProto:
    """An initializer whose bytes live in a file that is never read (the estimator needs shapes only)."""
    t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
    for key, val in (("location", "weights.bin"), ("offset", "0"), ("length", "0")):
        entry = t.external_data.add()
        entry.key, entry.value = key, val
    return t


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "kernel", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def gemm(m, n, k, weight_initializer: bool = True) -> onnx.ModelProto:
    """y = x . W^T as MatMul(x[m, k], Wt[k, n]); `weight_initializer=False` makes Wt a graph input (for
    a symbolic template; the estimator then still reads it once, as a weight)."""
    x = helper.make_tensor_value_info("x", BF16, [m, k])
    y = helper.make_tensor_value_info("y", BF16, [m, n])
    inputs, inits = [x], []
    if weight_initializer:
        inits.append(_external("w", [k, n]))
    else:
        inputs.append(helper.make_tensor_value_info("w", BF16, [k, n]))
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="gemm")], inputs, [y], inits)


def nvfp4_gemm(m, n, k, weight_initializer: bool = True) -> tuple[onnx.ModelProto, dict[str, str]]:
    """NVFP4 as TensorRT-LLM's Linear runs it: its fp4_quantize kernel turns x into fp4 (e2m1) values
    with one e4m3 scale per 16 of them (the per-tensor global scale is a calibrated constant: no amax
    kernel), then the block-scaled fp4 GEMM with an fp4 weight and its own 1 x 16 scales. As ONNX:
    QuantizeLinear without a blocked scale (estimator/cost/quant.py counts the 1 x 16 scales an fp4
    output writes) and MatMul with an fp4 weight (the tile model reads the scales beside the data).
    Returns the model and the tensors to re-type (`xq` to fp4: ONNX has no fp4 QuantizeLinear output
    here). `weight_initializer=False`: W a graph input, as in `gemm`."""
    info = helper.make_tensor_value_info
    x, y = info("x", BF16, [m, k]), info("y", BF16, [m, n])
    inputs = [x]
    inits = [helper.make_tensor("x_scale", TensorProto.FLOAT, [], [1.0])]
    if weight_initializer:
        inits.append(_external("w", [k, n], TensorProto.FLOAT4E2M1))
    else:
        inputs.append(info("w", TensorProto.FLOAT4E2M1, [k, n]))
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize"),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="gemm")]
    return _model(nodes, inputs, [y], inits), {"xq": "fp4e2m1", "y": "bf16"}


def context_attention(b, s, h, kv, d) -> onnx.ModelProto:
    """RoPE on Q and K, then causal Attention writing Y and the cache (present K/V)."""
    half = f"{d}/2" if isinstance(d, str) else d // 2
    info = helper.make_tensor_value_info
    inputs = [info("q", BF16, [b, h, s, d]), info("k", BF16, [b, kv, s, d]), info("v", BF16, [b, kv, s, d]),
              info("cos", BF16, [b, s, half]), info("sin", BF16, [b, s, half])]
    outputs = [info("y", BF16, [b, h, s, d]), info("present_key", BF16, [b, kv, s, d]),
               info("present_value", BF16, [b, kv, s, d])]
    nodes = [
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin"], ["q_rot"], name="rope_q"),
        helper.make_node("RotaryEmbedding", ["k", "cos", "sin"], ["k_rot"], name="rope_k"),
        helper.make_node("Attention", ["q_rot", "k_rot", "v"], ["y", "present_key", "present_value"],
                         name="attention", is_causal=1),
    ]
    return _model(nodes, inputs, outputs)


def generation_attention(b, step, h, kv, d) -> onnx.ModelProto:
    """One query token per sequence attending to `step` cached plus one new key."""
    info = helper.make_tensor_value_info
    inputs = [info("q", BF16, [b, h, 1, d]), info("k", BF16, [b, kv, 1, d]), info("v", BF16, [b, kv, 1, d]),
              info("past_key", BF16, [b, kv, step, d]), info("past_value", BF16, [b, kv, step, d])]
    outputs = [info("y", BF16, [b, h, 1, d])]
    nodes = [helper.make_node("Attention", ["q", "k", "v", "", "past_key", "past_value"], ["y"],
                              name="attention", is_causal=1)]
    return _model(nodes, inputs, outputs)


# Tensors re-typed to fp8 (e4m3) per table and dtype column (attn_dtype, kv_cache_dtype).
def fp8_tensors(table: str, attn_dtype: str, kv_dtype: str) -> tuple[str, ...]:
    """Context: TensorRT-LLM runs its FP8 FMHA whenever the KV cache is fp8 (the preprocessing kernel
    quantizes Q, K and V), so Q, K, V and the cache are fp8; Y stays bf16 unless attn_dtype is fp8.
    Generation: the cache (and the new K/V) at kv_cache_dtype; Q and the math at attn_dtype."""
    fp8_kv = kv_dtype == "fp8"
    if table == "context":
        fp8_math = fp8_kv or attn_dtype == "fp8"
        names = ("q_rot", "k_rot", "v", "present_key", "present_value") if fp8_math else ()
        return names + (("y",) if attn_dtype == "fp8" else ())
    return ("k", "v", "past_key", "past_value") if fp8_kv else ()


def retype(graph: Graph, names: tuple[str, ...], dtype: str = "fp8e4m3") -> Graph:
    from dataclasses import replace

    new = {n: replace(graph.tensors[n], dtype=dtype) for n in names if n in graph.tensors}
    return graph.with_tensors(new) if new else graph
