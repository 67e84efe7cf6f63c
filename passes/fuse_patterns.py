"""Small fixed patterns: rotary embedding and the gated-MLP (SwiGLU) product.

fuse-rotary
# before -> after:  x*cos + Concat(Neg(Slice(x, d/2:)), Slice(x, :d/2))*sin   =>  Fused(rotary)
# and the interleaved (even/odd) form of passes/rotary_interleaved.py
fuse-swiglu
# before -> after:  Mul(Mul(g, Sigmoid(g)), u)   =>  Fused(elementwise)
Each refuses (with the reason) when an intermediate is read outside the pattern.
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from passes.fusion_common import data_inputs
from passes.graph_edit import Consumers, Group, Refusal, apply_groups, convexity_violation, is_fused, producer
from passes.pipeline import PassResult, register_pass
from passes.rotary_interleaved import match_interleaved


def _single_use(graph: Graph, cons: Consumers, nodes: list[Node], inside: set[str]) -> str | None:
    for n in nodes:
        for t in n.outputs:
            readers = cons.of(t)
            if t in graph.outputs or any(r.name not in inside for r in readers):
                return f"an intermediate {n.op_type} is also read outside the pattern"
    return None


def match_rotary(graph: Graph, cons: Consumers, concat: Node) -> Group | str | None:
    if concat.op_type != "Concat" or len(concat.inputs) != 2:
        return None
    neg = producer(graph, concat.inputs[0])
    if neg is None or neg.op_type != "Neg":
        return None
    s_hi, s_lo = producer(graph, neg.inputs[0]), producer(graph, concat.inputs[1])
    if (
        s_hi is None
        or s_lo is None
        or s_hi.op_type != "Slice"
        or s_lo.op_type != "Slice"
        or s_hi.inputs[0] != s_lo.inputs[0]
    ):
        return "Concat(Neg(Slice(x)), Slice(x)) does not slice one tensor"
    x = s_hi.inputs[0]
    mul_sin = next((c for c in cons.of(concat.outputs[0]) if c.op_type == "Mul"), None)
    if mul_sin is None:
        return "rotate_half(x) is not multiplied by a sin table"
    add = next((c for c in cons.of(mul_sin.outputs[0]) if c.op_type == "Add"), None)
    if add is None or add.op_type != "Add":
        return "rotate_half(x) * sin is not added to x * cos"
    other = [t for t in add.inputs if t != mul_sin.outputs[0]]
    mul_cos = producer(graph, other[0]) if other else None
    if mul_cos is None or mul_cos.op_type != "Mul" or x not in mul_cos.inputs:
        return "the Add's other term is not x * cos"
    nodes = [s_hi, s_lo, neg, concat, mul_sin, mul_cos, add]
    names = {n.name for n in nodes}
    reason = _single_use(graph, cons, nodes[:-1], names) or convexity_violation(graph, names)
    return reason or Group("fuse-rotary", frozenset(names), "rotary", anchor=add.name)


def match_swiglu(graph: Graph, cons: Consumers, sig: Node) -> Group | str | None:
    if sig.op_type != "Sigmoid":
        return None
    g = sig.inputs[0]
    silu = cons.only(sig.outputs[0])
    if silu is None or silu.op_type != "Mul" or g not in silu.inputs:
        return None  # a plain sigmoid, not SiLU
    gate = cons.only(silu.outputs[0])
    if gate is None or gate.op_type != "Mul" or len(data_inputs(graph, gate)) != 2:
        return "SiLU(g) is not multiplied by an up projection"
    names = {sig.name, silu.name, gate.name}
    reason = convexity_violation(graph, names)
    return reason or Group("fuse-swiglu", frozenset(names), "elementwise", anchor=gate.name)


def run_matcher(graph: Graph, rule: str, matcher) -> PassResult:
    """Apply `matcher(graph, consumers, node) -> Group | reason | None` at every unfused node in
    topological order, taking each node into one group at most."""
    cons = Consumers(graph)
    groups, refusals, taken = [], [], set()
    for node in graph.topo_nodes():
        if node.name in taken or is_fused(node):
            continue
        found = matcher(graph, cons, node)
        if isinstance(found, str):
            refusals.append(Refusal(rule, (node.name,), found))
        elif found is not None and not found.names & taken:
            groups.append(found)
            taken |= found.names
    if not groups:
        return PassResult(graph, False, tuple(refusals))
    return PassResult(apply_groups(graph, groups), True, tuple(refusals))


def _any_rotary(graph: Graph, cons: Consumers, node: Node) -> Group | str | None:
    """rotate_half rotary, else the interleaved one (passes/rotary_interleaved.py)."""
    found = match_rotary(graph, cons, node)
    return found if found is not None else match_interleaved(graph, cons, node)


@register_pass("fuse-rotary")
def fuse_rotary(graph: Graph) -> PassResult:
    return run_matcher(graph, "fuse-rotary", _any_rotary)


@register_pass("fuse-swiglu")
def fuse_swiglu(graph: Graph) -> PassResult:
    return run_matcher(graph, "fuse-swiglu", match_swiglu)
