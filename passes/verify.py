"""Invariants every pass must keep (`--verify-each` checks them after each pass)."""

from __future__ import annotations

from estimator.errors import UserError
from estimator.ir import Graph
from passes.graph_edit import is_fused


class VerifyError(UserError):
    pass


def verify(graph: Graph, after: str) -> None:
    """Raise VerifyError naming the pass when the graph is malformed: a cycle, a tensor read that no node,
    graph input or constant provides, two producers of one tensor, an empty fused node, a lost output."""
    try:
        order = list(graph.topo_nodes())
    except ValueError as exc:
        raise VerifyError(f"after {after}: {exc}") from None
    available = set(graph.inputs) | {n for n, t in graph.tensors.items() if t.is_const}
    produced: set[str] = set()
    for node in order:
        if is_fused(node) and not node.body:
            raise VerifyError(f"after {after}: fused node {node.name} has no members")
        for m in node.body:  # members are priced from the tensor table: their tensors must stay in it
            lost = [t for t in (*m.inputs, *m.outputs) if t and t not in graph.tensors]
            if lost:
                raise VerifyError(f"after {after}: {node.name} member {m.name} lost tensor {lost[0]!r}")
        for t in node.inputs:
            if t and t not in available and t not in produced:
                raise VerifyError(f"after {after}: {node.name} reads {t!r}, which nothing produces before it")
        for t in node.outputs:
            if t and t in produced:
                raise VerifyError(f"after {after}: {t!r} is produced twice")
            produced.add(t)
    missing = [o for o in graph.outputs if o not in produced and o not in available]
    if missing:
        raise VerifyError(f"after {after}: graph output {missing[0]!r} is no longer produced")
