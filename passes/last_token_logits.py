"""Logits for the last position only: a serving prefill computes the lm_head for each prompt's last
token, not for every prompt token (TensorRT-LLM gather_context_logits=False, vLLM, SGLang).

# before -> after:  h[b, s, hidden] -> lm_head -> logits[b, s, V]
#                   h[b, s, hidden] -> Slice(s-1:s) -> lm_head -> logits[b, 1, V]
The lm_head is the linear (a MatMul with a 2-D weight) writing a graph output from a rank-3 input;
the sliced axis is 1 (sequence). A graph whose lm_head already sees one position (decode) is left
alone (modified=False). NB: the final norm before the lm_head still runs on every token, as the
exported graph has it (TensorRT-LLM gathers before it; the norm is a few microseconds).
"""

from __future__ import annotations

from dataclasses import replace

import sympy

from estimator.ir import Graph, Node, Tensor
from passes.pipeline import PassResult, register_pass
from passes.shard_tp import weight_of


def _lm_heads(graph: Graph) -> list[Node]:
    return [n for n in graph.topo_nodes() if weight_of(graph, n) is not None
            and n.outputs and n.outputs[0] in graph.outputs]


@register_pass("last-token-logits")
def last_token_logits(graph: Graph) -> PassResult:
    nodes = {n: graph.node(n) for n in graph.nx.nodes}
    tensors = dict(graph.tensors)
    extra: dict[str, Node] = {}
    for head in _lm_heads(graph):
        x, y = tensors[head.inputs[0]], tensors[head.outputs[0]]
        if x.shape is None or len(x.shape) != 3 or x.shape[1] == 1 or y.shape is None:
            continue
        name = f"{head.name}/last_token"
        consts = {}
        for what in ("starts", "ends", "axes"):  # host-side [-1], [2**62], [1]: values travel as arguments
            consts[what] = f"{name}/{what}"
            tensors[consts[what]] = Tensor(consts[what], (sympy.Integer(1),), "int64", is_const=True)
        last = f"{x.name}/last_token"
        tensors[last] = replace(x, name=last, shape=(x.shape[0], sympy.Integer(1), x.shape[2]))
        tensors[y.name] = replace(y, shape=(y.shape[0], sympy.Integer(1), *y.shape[2:]))
        extra[head.name] = Node(name, "Slice", "", (x.name, consts["starts"], consts["ends"], consts["axes"]),
                                (last,))
        nodes[head.name] = replace(head, inputs=(last, *head.inputs[1:]))
    if not extra:
        return PassResult(graph, False)
    ordered = []
    for name, node in nodes.items():
        if name in extra:
            ordered.append(extra[name])
        ordered.append(node)
    return PassResult(Graph(graph.name, ordered, tensors, graph.inputs, graph.outputs, graph.opsets,
                            graph.dims), True)
