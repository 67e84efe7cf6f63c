"""Graph surgery shared by the fusion rules: consumers, convexity, and replacing a group of nodes by
one fused node.

A fused node has op_type "Fused" in domain "estimator" (`is_fused`, `members`: estimator/ir.py); its
`body` holds the member nodes (flattened: fusing a fused node splices its members in), its inputs are
the tensors its members read that no member produces, its outputs the tensors members produce that are
graph outputs or read outside the group. Its attrs carry the `rules` that built it and its kernel
`kind`; an attention group also carries `attention` (the flash-attention core, see estimator/fused.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from estimator.ir import FUSED_DOMAIN, FUSED_OP, Graph, Node, is_fused, members
from estimator.ops import kind_of

# Which kind a multi-kind group reports, strongest first.
_KIND_PRIORITY = ("attention", "matmul", "conv", "norm", "rotary", "reduction", "elementwise", "movement")


def node_kind(node: Node) -> str:
    return node.attrs["kind"] if is_fused(node) else kind_of(node.op_type)


@dataclass(frozen=True)
class Refusal:
    """A fusion a rule considered and did not make, with the reason (shown by --explain)."""

    rule: str
    nodes: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Group:
    """Nodes (by name) one rule wants fused into one kernel."""

    rule: str
    names: frozenset[str]
    kind: str
    attrs: Mapping[str, Any] | None = None
    anchor: str | None = None  # the member the kernel is named after (default: the first)
    drop_inputs: frozenset[str] = frozenset()  # tensors the fused kernel no longer needs to read


class Consumers:
    """tensor -> names of the nodes that read it, built once per graph."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.readers: dict[str, list[str]] = {}
        for name in graph.nx.nodes:
            for t in graph.node(name).inputs:
                if t:
                    self.readers.setdefault(t, []).append(name)

    def of(self, tensor: str) -> list[Node]:
        return [self.graph.node(n) for n in self.readers.get(tensor, ())]

    def only(self, tensor: str) -> Node | None:
        """The single consumer of `tensor` (None when it has several, none, or is a graph output)."""
        readers = self.readers.get(tensor, ())
        if len(readers) != 1 or tensor in self.graph.outputs:
            return None
        return self.graph.node(readers[0])


def producer(graph: Graph, tensor: str) -> Node | None:
    name = graph.producer.get(tensor)
    return None if name is None else graph.node(name)


def upstream(graph: Graph, tensors, budget: int) -> Iterator[tuple[str, Node | None]]:
    """(tensor, its producer or None) for `tensors` and what they are computed from, depth first, each
    tensor once, at most `budget` tensors: the bounded backward walk of the mask and band checks."""
    seen: set[str] = set()
    frontier = list(tensors)
    while frontier and len(seen) < budget:
        t = frontier.pop()
        if t in seen:
            continue
        seen.add(t)
        p = producer(graph, t)
        yield t, p
        if p is not None:
            frontier.extend(i for i in p.inputs if i)


def is_host(graph: Graph, tensor: str) -> bool:
    """A value known before run time that is not a weight (shape vectors, scalars, axes)."""
    t = graph.tensors.get(tensor)
    return t is not None and t.is_const and not t.is_weight


def is_weight(graph: Graph, tensor: str) -> bool:
    t = graph.tensors.get(tensor)
    return t is not None and t.is_weight


def convexity_violation(graph: Graph, names: set[str]) -> str | None:
    """Why fusing `names` would create a cycle (a path leaving the group and re-entering it), or None."""
    index = graph.topo_index
    last = max(index[n] for n in names)
    frontier = [s for n in names for s in graph.nx.successors(n) if s not in names]
    seen: set[str] = set()
    while frontier:
        n = frontier.pop()
        if n in seen or index[n] > last:
            continue
        seen.add(n)
        for s in graph.nx.successors(n):
            if s in names:
                return "fusing would make a cycle (a path leaves the group and comes back)"
            frontier.append(s)
    return None


def boundary(graph: Graph, names: set[str]) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of the group in first-use order."""
    produced = {t for n in names for t in graph.node(n).outputs if t}
    order = sorted(names, key=graph.topo_index.__getitem__)
    inputs: list[str] = []
    for n in order:
        for t in graph.node(n).inputs:
            if t and t not in produced and t not in inputs:
                inputs.append(t)
    outside = set(graph.outputs)
    for n in names:  # readers outside the group sit on the producer -> consumer edges
        for succ in graph.nx.successors(n):
            if succ not in names:
                outside.update(t for t in graph.node(succ).inputs if t in produced)
    outputs = [t for n in order for t in graph.node(n).outputs if t in outside]
    return inputs, outputs


def _merged_kind(kinds: Iterable[str]) -> str:
    kinds = set(kinds)
    for k in _KIND_PRIORITY:
        if k in kinds:
            return k
    return sorted(kinds)[0] if kinds else "other"


def fused_node(graph: Graph, group: Group) -> Node:
    order = sorted(group.names, key=graph.topo_index.__getitem__)
    parts = [graph.node(n) for n in order]
    body = tuple(m for p in parts for m in members(p))
    rules = []
    attrs: dict[str, Any] = {}
    for p in parts:
        if is_fused(p):
            rules.extend(p.attrs["rules"])
            attrs.update({k: v for k, v in p.attrs.items() if k not in ("rules", "kind")})
    rules.append(group.rule)
    attrs.update(group.attrs or {})
    inputs, outputs = boundary(graph, set(group.names))
    inputs = [t for t in inputs if t not in group.drop_inputs]
    anchor = (group.anchor or parts[0].name).removesuffix("#fused")
    return Node(
        f"{anchor}#fused",
        FUSED_OP,
        FUSED_DOMAIN,
        tuple(inputs),
        tuple(outputs),
        {**attrs, "rules": tuple(dict.fromkeys(rules)), "kind": group.kind},
        body,
    )


def apply_groups(graph: Graph, groups: Iterable[Group]) -> Graph:
    """A new graph with each (disjoint) group replaced by one fused node, in the first member's place."""
    groups = list(groups)
    replaced: dict[str, Node] = {}
    dropped: set[str] = set()
    for g in groups:
        first = min(g.names, key=graph.topo_index.__getitem__)
        replaced[first] = fused_node(graph, g)
        dropped |= set(g.names) - {first}
    nodes = []
    for name in graph.nx.nodes:
        if name in dropped:
            continue
        nodes.append(replaced.get(name, graph.node(name)))
    return Graph(graph.name, nodes, graph.tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)


def group_kind(graph: Graph, names: Iterable[str]) -> str:
    return _merged_kind(node_kind(graph.node(n)) for n in names)
