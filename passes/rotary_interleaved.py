"""The interleaved (even/odd pairs) rotary embedding, DeepSeek-V3's `rope_interleave`, as transformers
exports it; matched by fuse-rotary beside the rotate_half form of passes/fuse_patterns.py.

# before -> after:  a = Slice(x, 0::2), b = Slice(x, 1::2);
#                   Concat(a*cos - b*sin, b*cos + a*sin)   =>   Fused(rotary)
A candidate (a Concat of a Sub and an Add of products) that breaks the pattern is a near miss, refused
with the first part that does not fit.
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from passes.graph_edit import Consumers, Group, convexity_violation, producer


def _products(graph: Graph, node: Node) -> list[Node] | None:
    muls = [producer(graph, t) for t in node.inputs[:2]]
    return muls if all(m is not None and m.op_type == "Mul" for m in muls) else None


def _strided_slices(graph: Graph, muls: list[Node]) -> tuple[str, list[Node]] | str:
    """(x, [its two step-2 Slices]) read by the four products, or the reason there is none."""
    slices: dict[str, Node] = {}
    for m in muls:
        for t in m.inputs:
            p = producer(graph, t)
            if p is not None and p.op_type == "Slice":
                slices[p.name] = p
    sources = {s.inputs[0] for s in slices.values()}
    if len(slices) != 2 or len(sources) != 1:
        return "near miss (interleaved rotary): the products do not read two Slices of one tensor"
    for s in slices.values():
        step = graph.tensors.get(s.inputs[4]) if len(s.inputs) > 4 and s.inputs[4] else None
        if step is None or step.value is None or tuple(step.value) != (2,):
            return "near miss (interleaved rotary): a Slice does not take every other element"
    return sources.pop(), list(slices.values())


def match_interleaved(graph: Graph, cons: Consumers, concat: Node) -> Group | str | None:
    if concat.op_type != "Concat" or len(concat.inputs) != 2:
        return None
    parts = [producer(graph, t) for t in concat.inputs]
    if any(p is None for p in parts) or {p.op_type for p in parts} != {"Sub", "Add"}:
        return None
    sub, add = sorted(parts, key=lambda p: p.op_type != "Sub")
    muls_sub, muls_add = _products(graph, sub), _products(graph, add)
    if muls_sub is None or muls_add is None:
        return None  # not a rotary candidate at all
    found = _strided_slices(graph, muls_sub + muls_add)
    if isinstance(found, str):
        return found
    _, slices = found
    nodes = [*slices, *muls_sub, *muls_add, sub, add, concat]
    names = {n.name for n in nodes}
    for n in nodes[:-1]:
        for t in n.outputs:
            if t in graph.outputs or any(r.name not in names for r in cons.of(t)):
                return (f"near miss (interleaved rotary): {n.op_type} {n.name} is also read outside "
                        "the pattern")
    reason = convexity_violation(graph, names)
    return reason or Group("fuse-rotary", frozenset(names), "rotary", anchor=concat.name)
