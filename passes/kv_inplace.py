"""KV cache appended in place: a decode step writes only its new rows into the cache.

# before -> after:  present = Concat(past, new, axis=seq)   =>   present = KvAppend(past, new, axis=seq)
An exported decoder (the bundled builders, transformers with a legacy or dynamic cache) returns the
grown cache as `Concat(past_key, new_key)`; priced literally that is a copy of the whole cache every
step (at past 32k, about twice the attention itself). Serving engines (TensorRT-LLM, vLLM, SGLang,
onnxruntime's GroupQueryAttention with a shared buffer) keep a preallocated, paged cache and write only
the new token's rows into it. `KvAppend` (domain ``estimator``) is that write; its cost
(estimator/cost/kv_append.py) reads and writes the new rows only; the attention that reads `present`
still reads the whole cache, so the bytes of the cache are counted once, where they are really read.

A Concat qualifies when its first input is a graph input (the past cache), it has exactly two inputs,
and its output is a graph output (the present cache). The cache may have another dtype than the new
rows (an fp8 KV cache of a bf16 model): engines quantize the rows in the append kernel, so the write is
counted at the cache's dtype. Every other Concat is left alone; one that
looks like a cache append but fails a condition is refused with the reason (shown by --explain).
The `none` strategy does not run this pass: it keeps the literal copy.
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from passes.graph_edit import Refusal
from passes.pipeline import PassResult, register_pass

KV_APPEND_OP, KV_APPEND_DOMAIN = "KvAppend", "estimator"
RULE = "kv-inplace"


def check_append(graph: Graph, node: Node) -> str | None:
    """None when `node` is an in-place cache append; else the reason it is not one."""
    if len(node.inputs) != 2:
        return f"a cache Concat has 2 inputs (past, new), this one has {len(node.inputs)}"
    if not node.outputs or node.outputs[0] not in graph.outputs:
        return "its output is not a graph output (not a present cache)"
    past = graph.tensors.get(node.inputs[0])
    new = graph.tensors.get(node.inputs[1])
    if past is None or new is None or past.shape is None or new.shape is None:
        return "the past or new rows have no shape"
    return None  # a cache of another dtype (an fp8 cache of bf16 rows) quantizes the rows as it writes


def _looks_like_cache(graph: Graph, node: Node) -> bool:
    return node.op_type == "Concat" and node.domain in ("", "ai.onnx") and bool(node.inputs) \
        and node.inputs[0] in graph.inputs


@register_pass(RULE)
def kv_inplace(graph: Graph) -> PassResult:
    """Replace every cache-append Concat by KvAppend; modified=False (same graph) when none qualifies."""
    nodes, refusals, changed = [], [], False
    for name in graph.nx.nodes:
        node = graph.node(name)
        if _looks_like_cache(graph, node):
            reason = check_append(graph, node)
            if reason is None:
                node = Node(node.name, KV_APPEND_OP, KV_APPEND_DOMAIN, node.inputs, node.outputs,
                            dict(node.attrs))
                changed = True
            else:
                refusals.append(Refusal(RULE, (node.name,), reason))
        nodes.append(node)
    if not changed:
        return PassResult(graph, False, tuple(refusals))
    new = Graph(graph.name, nodes, graph.tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)
    return PassResult(new, True, tuple(refusals))
