"""fuse-moe: per-token gathered expert weights and their batched MatMul become one grouped GEMM.

# before -> after:  Gather[ND](W[E, a, b], expert_ids) -> [Transpose] -> MatMul   =>   Fused(moe)
This is how transformers' `batched_mm` experts (and the builders in models/) write a MoE projection:
each routed (token, expert) pair gathers its expert's weight matrix, a [pairs, a, b] tensor, and a
batched MatMul multiplies it by the token. Priced as written, every pair reads a whole weight matrix.
A serving engine's grouped GEMM instead reads each *active* expert once: the fused kernel's FLOPs stay
its members' (the routed pairs only) and its read of W is `active_fraction(E, k, T)` of W
(estimator/cost/moe.py), with k and T read off the TopK that produced the expert ids (without one:
every expert, an upper bound). The [pairs, a, b] gathered tensor never reaches DRAM.

A per-expert bias gathered by the same ids and added to the product joins the kernel as its epilogue.

Legality (a reason when refused): the gathered weights may only feed the MatMul; fusing must not make
a cycle. Near misses (a Gather of a rank-3 weight by run-time ids whose output is not multiplied) are
refused with the op that broke the pattern.
"""

from __future__ import annotations

import sympy

from estimator.ir import Graph, Node
from passes.fuse_patterns import run_matcher
from passes.graph_edit import (
    Consumers,
    Group,
    convexity_violation,
    is_fused,
    producer,
)
from passes.moe_gathers import GATHERS, ID_VIEWS, gathers_expert_rows, ids_root
from passes.pipeline import PassResult, register_pass

RULE = "fuse-moe"


def routing(graph: Graph, ids: str, budget: int = 8) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(top_k, tokens) of the TopK whose indices reach `ids` through views, or None."""
    tensor = ids
    for _ in range(budget):
        p = producer(graph, tensor)
        if p is None:
            return None
        if p.op_type == "TopK" and len(p.outputs) > 1 and p.outputs[1] == tensor:
            t = graph.tensors.get(tensor)
            if t is None or t.shape is None or not t.shape:
                return None
            axis = int(p.attrs.get("axis", -1)) % len(t.shape)
            k = t.shape[axis]
            return k, t.numel / k
        if p.op_type not in ID_VIEWS:
            return None
        tensor = p.inputs[0]
    return None


def _bias_epilogue(graph: Graph, cons: Consumers, out: str, ids: str) -> list[Node]:
    """[Squeeze] + Add(Gather(bias[E, n], same ids)) after the product, when each is read only here."""
    nodes: list[Node] = []
    c = cons.only(out)
    if c is not None and c.op_type == "Squeeze":
        nodes.append(c)
        out = c.outputs[0]
        c = cons.only(out)
    if c is None or c.op_type != "Add":
        return nodes
    other = next((t for t in c.inputs if t != out), None)
    g = producer(graph, other) if other else None
    if g is None or not gathers_expert_rows(graph, g, 2) or cons.only(other) is None:
        return nodes
    if ids_root(graph, g.inputs[1]) != ids_root(graph, ids):
        return nodes
    return [*nodes, g, c]


def match(graph: Graph, cons: Consumers, gather: Node) -> Group | str | None:
    """The grouped-GEMM group anchored at an expert-weight Gather, a near-miss reason, or None."""
    if not gathers_expert_rows(graph, gather, 3):
        return None
    nodes = [gather]
    out = gather.outputs[0]
    readers = cons.of(out)
    if len(readers) == 1 and readers[0].op_type == "Transpose":
        nodes.append(readers[0])
        out = readers[0].outputs[0]
        readers = cons.of(out)
    if len(readers) != 1 or out in graph.outputs:
        return "the gathered expert weights are read outside one MatMul"
    mm = readers[0]
    if mm.op_type != "MatMul" or is_fused(mm):
        return f"the gathered expert weights feed {mm.op_type}, not a MatMul"
    nodes.append(mm)
    nodes += _bias_epilogue(graph, cons, mm.outputs[0], gather.inputs[1])
    names = {n.name for n in nodes}
    reason = convexity_violation(graph, names)
    if reason:
        return reason
    w = graph.tensors[gather.inputs[0]]
    route = routing(graph, gather.inputs[1])
    info = {"weights": tuple(n.inputs[0] for n in nodes if n.op_type in GATHERS),
            "experts": w.shape[0],
            "top_k": route[0] if route else None,
            "tokens": route[1] if route else None}
    return Group(RULE, frozenset(names), "moe", {"moe": info}, anchor=mm.name)


@register_pass(RULE)
def fuse_moe(graph: Graph) -> PassResult:
    """Every gathered-expert pattern (anchored at its weight Gather) becomes one grouped-GEMM kernel."""
    return run_matcher(graph, RULE, lambda g, cons, node: match(g, cons, node) if node.op_type in GATHERS
                       else None)
