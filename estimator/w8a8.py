"""Per-tensor fp8 (W8A8) as serving engines run it: fp8 weights and GEMM inputs, bf16 elsewhere.

`--precision fp8` (estimator/precision.py) re-types every float tensor, a what-if. A deployed fp8
per-tensor checkpoint (TensorRT-LLM's FP8 QDQ linear, vLLM's fp8 linear) runs differently:
- the weights of the linear layers are fp8; the embedding, the lm_head and MoE routers stay at the
  activation dtype (the quantizer leaves them out: ModelOpt's default fp8 config disables `*lm_head*`,
  `*router*` and `*mlp.gate.*`);
- MoE experts (a MatMul reading a Gather of an expert weight stack, as models/decoder*.py and
  transformers' batched_mm export them) are fp8 and so are the routed tokens they multiply: the
  engine's token permutation writes them in fp8 (NB: no separate quantization kernel is counted);
- each linear's activation is quantized by its own kernel before the GEMM (TensorRT-LLM
  FP8QDQLinearMethod.apply: `static_quantize_e4m3_per_tensor(input, input_scale)` unless the input
  is already fp8), a `QuantizeLinear` node here: reads x at the activation dtype, writes it at fp8;
  layers that share an input (q/k/v, gate/up: one fused GEMM in the engine) share one quantization.
  The fusion passes may still fold it into its producer's kernel (the SwiGLU product's epilogue, as
  TensorRT-LLM's fused SwiGLU + quantize does). The attention writes the o_proj's input in fp8 itself
  (TensorRT-LLM passes the o_proj's scale to the attention op as out_scale): no kernel there;
- the GEMM writes its output at the activation dtype (cublas_scaled_mm's out_dtype), so the norms,
  rotary, residual adds, the attention's Q and the all-reduces move bf16;
- the KV cache is at `kv_dtype` (fp8 where the checkpoint quantizes it).
NB: a static scale (the calibrated input_scale) is assumed: no amax pass over the activation; a
dynamic per-tensor scale would add one reduction kernel per quantization. A linear is a MatMul / Gemm
whose B input is the weight itself: one that reads its weight through a Transpose node is not
recognised and stays at the activation dtype. The KV cache is recognised by name (past_key_values.*,
present.*, as the exporters and models/ name it, like report/recommendation.kv_tensors).
The absorbed MLA BMMs (a MatMul on a [G, K, N] weight, estimator/cost/mla_bmm.absorbed_bmm) run as the
family's engine runs them with fp8 weights (`bmm_fp8`, mla_bmm.bmm_fp8_kind): "block_scaled" (TensorRT-LLM
sm90 fp8_block_scaling_bmm_out: a 1 x 128 permute-quantize of the activation, the attention output
included, then DeepGEMM's strided batched fp8 GEMM, whatever the linears' scaling) or "dequant_bf16"
(Blackwell: a bf16 BMM on weights dequantized at load: weight and activation stay bf16, no quantize).
"""

from __future__ import annotations

from dataclasses import replace

from estimator.cost import mla_bmm
from estimator.dtypes import FLOAT_DTYPES
from estimator.ir import Graph, Node, Tensor

GEMM_OPS = frozenset({"MatMul", "Gemm"})


def _is_kv(name: str) -> bool:
    return name.startswith(("past_key_values", "present"))


def _heads(graph: Graph, linear: set[str]) -> set[str]:
    """The linears nearest the graph's outputs other than the KV cache: walking back from each, the first
    linear met on every path (the lm_head, whose logits may pass an all-gather or a slice first)."""
    heads: set[str] = set()
    stack = [graph.producer[t] for t in graph.outputs if t in graph.producer and not _is_kv(t)]
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


def _routers(graph: Graph, linear: set[str]) -> set[str]:
    """MoE routers: linears whose scores reach a TopK within two ops (Softmax / Sigmoid between);
    quantizers leave them at full precision (ModelOpt disables `*router*`, `*mlp.gate.*`)."""
    consumers: dict[str, list[str]] = {}
    for node in graph.topo_nodes():
        for t in node.inputs:
            consumers.setdefault(t, []).append(node.name)

    def reaches_topk(name: str, hops: int) -> bool:
        node = graph.node(name)
        if node.op_type == "TopK":
            return True
        return hops > 0 and any(reaches_topk(c, hops - 1) for t in node.outputs for c in consumers.get(t, ()))

    return {n for n in linear if reaches_topk(n, 2)}


def _float_weight(graph: Graph, name: str) -> bool:
    t = graph.tensors.get(name)
    return t is not None and t.is_weight and t.dtype in FLOAT_DTYPES


def _linears(graph: Graph) -> tuple[set[str], dict[str, tuple[int, str]]]:
    """(dense linears: MatMul / Gemm whose B is a float weight, less the output heads and routers;
    expert GEMMs: MatMul name -> (index of its gathered-weight operand, the weight)) (module doc)."""
    linear: set[str] = set()
    experts: dict[str, tuple[int, str]] = {}
    for node in graph.topo_nodes():
        if node.op_type not in GEMM_OPS or len(node.inputs) < 2:
            continue
        if _float_weight(graph, node.inputs[1]):
            linear.add(node.name)
            continue
        for i in (0, 1):
            src = graph.producer.get(node.inputs[i])
            gather = graph.node(src) if src else None
            if gather is not None and gather.op_type in ("Gather", "GatherND") \
                    and _float_weight(graph, gather.inputs[0]):
                experts[node.name] = (i, gather.inputs[0])
    return linear - _heads(graph, linear) - _routers(graph, linear), experts


VIEWS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"})


def _attention_output(graph: Graph, x: str) -> list[str] | None:
    """The tensors from an attention's P x V product to `x` through views, when `x` is one (the
    o_proj's input): TensorRT-LLM's attention then writes fp8 itself (out_scale = the o_proj's
    inv_input_scale when the o_proj is fp8 QDQ). None when `x` comes from anything else."""
    chain = [x]
    while (src := graph.producer.get(chain[-1])) is not None and graph.node(src).op_type in VIEWS:
        chain.append(graph.node(src).inputs[0])
    src = graph.producer.get(chain[-1])
    node = graph.node(src) if src else None
    if node is None or node.op_type != "MatMul" or any(_float_weight(graph, t) for t in node.inputs):
        return None
    a = graph.producer.get(node.inputs[0])
    # P x V: P comes out of the softmax (directly, or through a cast / a view)
    return chain if a is not None and graph.node(a).op_type in ("Softmax", "Cast", *VIEWS) else None


def _absorbed_bmm(graph: Graph, node: Node) -> bool:
    """Whether `node` is an absorbed MLA BMM (its B a [G, K, N] weight, one matrix per group)."""
    a, b = (graph.tensors.get(t) for t in node.inputs[:2])
    y = graph.tensors.get(node.outputs[0])
    if a is None or b is None or y is None:
        return False
    return mla_bmm.absorbed_bmm(a.shape or (), b.shape or (), y.shape or (), b.is_weight) is not None


def w8a8(graph: Graph, weight_dtype: str, act_dtype: str, kv_dtype: str | None = None, block: int = 0,
         quantize_activations: bool = True, bmm_fp8: str | None = None) -> Graph:
    """`graph` with every float tensor at `act_dtype`, the linear layers' weights at `weight_dtype`, a
    QuantizeLinear (act_dtype -> weight_dtype) before each distinct activation they read, and the KV
    cache (past / present tensors) at `kv_dtype` (default act_dtype).
    `block` > 0: 1 x `block` activation scales (fp8-block: the QuantizeLinear carries block_size, priced
    as the frameworks' grid-stride quantize kernel, estimator/pricing/quant.py, and the GEMM as a
    block-scaled one, estimator/pricing/problem.py scale_block). NB: the scales' own bytes (4 per 128
    activations, 4 per 128 x 128 weights) are left out (under 2 % of the activation, 0.03 % of the weight).
    `quantize_activations` False (weight-only, W4A16): no QuantizeLinear and the experts' tokens stay at
    `act_dtype`; the weights are a stored format (estimator/dtypes.STORED_FORMATS) the GEMM dequantizes.
    NVFP4 (`weight_dtype` fp4e2m1): the QuantizeLinear also writes the e4m3 scale per 16 (cost/quant.py).
    `bmm_fp8` (fp8 weights): how the absorbed MLA BMMs run (module doc); None: as any other linear."""
    tensors = {name: replace(t, dtype=act_dtype) if t.dtype in FLOAT_DTYPES else t
               for name, t in graph.tensors.items()}
    if kv_dtype:
        tensors.update({name: replace(t, dtype=kv_dtype) for name, t in tensors.items()
                        if _is_kv(name) and t.dtype in FLOAT_DTYPES})
    gemms, experts = _linears(graph)
    for name, (i, weight) in experts.items():  # fp8 experts; the permutation writes fp8 tokens
        node = graph.node(name)
        for t in (weight, node.inputs[i], node.inputs[1 - i]) if quantize_activations else (weight,):
            tensors[t] = replace(tensors[t], dtype=weight_dtype)
    quantized: dict[str, str] = {}  # activation -> its fp8 copy
    nodes: list[Node] = []
    for node in (graph.node(m) for m in graph.nx.nodes):  # source order, a quantization before its GEMM
        if node.name not in gemms:
            nodes.append(node)
            continue
        x = node.inputs[0]
        bmm = quantize_activations and bmm_fp8 is not None and _absorbed_bmm(graph, node)
        if bmm and bmm_fp8 == "dequant_bf16":
            nodes.append(node)  # bf16 BMM on the dequantized weight (module doc)
            continue
        tensors[node.inputs[1]] = replace(tensors[node.inputs[1]], dtype=weight_dtype)
        if not quantize_activations:
            nodes.append(node)
            continue
        if bmm:  # the 1 x 128 permute-quantize of fp8_block_scaling_bmm_out, its own kernel
            q, scale = f"{x}__fp8_1x128", f"{x}__fp8_1x128_scale"
            if q not in tensors:
                tensors[q] = replace(tensors[x], name=q, dtype=weight_dtype, is_weight=False, is_const=False)
                tensors[scale] = Tensor(scale, (), "fp32", is_weight=True, is_const=True)
                nodes.append(Node(f"{node.name}/QuantizeLinear", "QuantizeLinear", "", (x, scale), (q,),
                                  {"axis": -1, "block_size": mla_bmm.BMM_ACTIVATION_BLOCK}))
            nodes.append(replace(node, inputs=(q,) + node.inputs[1:]))
            continue
        if x not in quantized and (chain := _attention_output(graph, x)) is not None:
            for t in chain:  # the attention writes its output in fp8: no quantization kernel
                tensors[t] = replace(tensors[t], dtype=weight_dtype)
            quantized[x] = x
        if x not in quantized:
            q, scale = f"{x}__fp8", f"{x}__fp8_scale"
            tensors[q] = replace(tensors[x], name=q, dtype=weight_dtype, is_weight=False, is_const=False)
            tensors[scale] = Tensor(scale, (), "fp32", is_weight=True, is_const=True)
            attrs = {"axis": -1, "block_size": block} if block else {}
            nodes.append(Node(f"{node.name}/QuantizeLinear", "QuantizeLinear", "", (x, scale), (q,), attrs))
            quantized[x] = q
        nodes.append(replace(node, inputs=(quantized[x],) + node.inputs[1:]))
    return Graph(graph.name, nodes, tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)
