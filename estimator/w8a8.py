"""Per-tensor fp8 (W8A8) as serving engines run it: fp8 weights and GEMM inputs, bf16 elsewhere.

`--precision fp8` (estimator/precision.py) re-types every float tensor, a what-if. A deployed fp8
per-tensor checkpoint (TensorRT-LLM's FP8 QDQ linear, vLLM's fp8 linear) runs differently:
- the weights of the linear layers are fp8; the embedding and the lm_head stay at the activation dtype
  (the quantizer leaves them out: ModelOpt's default fp8 config disables `*lm_head*`);
- each linear's activation is quantized by its own kernel before the GEMM (TensorRT-LLM
  FP8QDQLinearMethod.apply: `static_quantize_e4m3_per_tensor(input, input_scale)` unless the input
  is already fp8), a `QuantizeLinear` node here: reads x at the activation dtype, writes it at fp8;
  layers that share an input (q/k/v, gate/up: one fused GEMM in the engine) share one quantization;
- the GEMM writes its output at the activation dtype (cublas_scaled_mm's out_dtype), so the norms,
  rotary, residual adds, the attention's Q and the all-reduces move bf16;
- the KV cache is at `kv_dtype` (fp8 where the checkpoint quantizes it).
NB: a static scale (the calibrated input_scale) is assumed: no amax pass over the activation; a
dynamic per-tensor scale would add one reduction kernel per quantization.
"""

from __future__ import annotations

from dataclasses import replace

from estimator.dtypes import FLOAT_DTYPES
from estimator.ir import Graph, Node, Tensor

GEMM_OPS = frozenset({"MatMul", "Gemm"})


def _is_kv(name: str) -> bool:
    return name.startswith(("past_key_values", "present"))


def _heads(graph: Graph, linear: set[str]) -> set[str]:
    """The linears nearest the graph's outputs: walking back from each output, the first linear met on
    every path (the lm_head, whose logits may pass an all-gather or a slice first)."""
    heads: set[str] = set()
    stack = [graph.producer[t] for t in graph.outputs if t in graph.producer]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in linear:
            heads.add(name)
            continue
        stack.extend(graph.producer[t] for t in graph.node(name).inputs if t in graph.producer)
    return heads


def _weight_gemms(graph: Graph) -> set[str]:
    """The linear layers: MatMul / Gemm nodes whose B is a float weight, less the output heads (the
    lm_head: a linear no other linear follows on the way to a graph output)."""
    linear = set()
    for node in graph.topo_nodes():
        if node.op_type not in GEMM_OPS or len(node.inputs) < 2:
            continue
        b = graph.tensors.get(node.inputs[1])
        if b is not None and b.is_weight and b.dtype in FLOAT_DTYPES:
            linear.add(node.name)
    return linear - _heads(graph, linear)


def w8a8(graph: Graph, weight_dtype: str, act_dtype: str, kv_dtype: str | None = None) -> Graph:
    """`graph` with every float tensor at `act_dtype`, the linear layers' weights at `weight_dtype`, a
    QuantizeLinear (act_dtype -> weight_dtype) before each distinct activation they read, and the KV
    cache (past / present tensors) at `kv_dtype` (default act_dtype)."""
    tensors = {name: replace(t, dtype=act_dtype) if t.dtype in FLOAT_DTYPES else t
               for name, t in graph.tensors.items()}
    if kv_dtype:
        tensors.update({name: replace(t, dtype=kv_dtype) for name, t in tensors.items()
                        if _is_kv(name) and t.dtype in FLOAT_DTYPES})
    gemms = _weight_gemms(graph)
    quantized: dict[str, str] = {}  # activation -> its fp8 copy
    nodes: list[Node] = []
    for node in (graph.node(m) for m in graph.nx.nodes):  # source order, a quantization before its GEMM
        if node.name not in gemms:
            nodes.append(node)
            continue
        tensors[node.inputs[1]] = replace(tensors[node.inputs[1]], dtype=weight_dtype)
        x = node.inputs[0]
        if x not in quantized:
            q, scale = f"{x}__fp8", f"{x}__fp8_scale"
            tensors[q] = replace(tensors[x], name=q, dtype=weight_dtype, is_weight=False, is_const=False)
            tensors[scale] = Tensor(scale, (), "fp32", is_weight=True, is_const=True)
            nodes.append(Node(f"{node.name}/QuantizeLinear", "QuantizeLinear", "", (x, scale), (q,)))
            quantized[x] = q
        nodes.append(replace(node, inputs=(quantized[x],) + node.inputs[1:]))
    return Graph(graph.name, nodes, tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)
