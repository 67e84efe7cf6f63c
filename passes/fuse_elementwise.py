"""fuse-elementwise: vertical fusion of pointwise, broadcast, layout and reduction ops into their
producers and consumers, as Inductor/Triton generates one kernel per such region.

# before -> after:  Add -> Pow -> ReduceMean -> Add -> Sqrt -> Reciprocal -> Mul -> Mul   =>   Fused
Greedy over producer -> consumer edges in topological order (union of groups). Legality, with the
reason recorded on refusal:
- both sides fusible (pointwise, reductions, softmax and norms, Transpose/Expand/Concat/Split, Q/DQ, or
  a fused kernel of those kinds; never GEMMs, convolutions or attention, which are library kernels);
- iteration spaces compatible: the larger side's element count is provably a whole multiple of the
  smaller's (a broadcast or a row reduction apart);
- no cycle: no path may leave the merged group and come back.
A value read by several consumers stays legal to fuse: it is simply also written out if any reader stays
outside (so DRAM bytes never grow).
"""

from __future__ import annotations

import functools

import sympy

from estimator.ir import Graph, Node
from estimator.ops import ELEMENTWISE, NORMALIZATION, QUANTIZATION, REDUCTION
from passes.fusion_common import data_inputs, divides, numel
from passes.graph_edit import (
    Group,
    Refusal,
    apply_groups,
    convexity_violation,
    group_kind,
    is_fused,
    node_kind,
)
from passes.pipeline import PassResult, register_pass

RULE = "fuse-elementwise"
FUSIBLE_OPS = (
    ELEMENTWISE
    | REDUCTION
    | NORMALIZATION
    | QUANTIZATION
    | frozenset({"Transpose", "Expand", "Concat", "Split"})
)
FUSIBLE_KINDS = frozenset({"elementwise", "norm", "rotary", "reduction", "movement"})


def fusible(node: Node) -> bool:
    return node_kind(node) in FUSIBLE_KINDS if is_fused(node) else node.op_type in FUSIBLE_OPS


def _size(graph: Graph, node: Node) -> sympy.Expr | None:
    sizes = [numel(graph, t) for t in (*data_inputs(graph, node), *node.outputs) if t]
    known = [s for s in sizes if s is not None]
    if not known or len(known) < len(sizes):
        return None
    return known[0] if len(known) == 1 else _max(tuple(known))


@functools.lru_cache(maxsize=4096)
def _max(sizes: tuple) -> sympy.Expr:
    """sympy.Max of the sizes, built once per distinct tuple (identical layers ask the same thousands of
    times; each Max runs sympy's pairwise comparisons)."""
    return sympy.Max(*sizes)


class _Groups:
    """Union-find over node names, keeping each root's members and iteration size."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.members: dict[str, set[str]] = {}
        self.size: dict[str, sympy.Expr | None] = {}

    def add(self, name: str, size) -> None:
        self.parent[name], self.members[name], self.size[name] = name, {name}, size

    def root(self, name: str) -> str:
        while self.parent[name] != name:
            self.parent[name] = self.parent[self.parent[name]]
            name = self.parent[name]
        return name

    def union(self, a: str, b: str) -> None:
        big = a if (self.size[a] is not None and divides(self.size[b], self.size[a])) else b
        small = b if big == a else a
        self.parent[small] = big
        self.members[big] |= self.members.pop(small)


def _why_not(graph: Graph, groups: _Groups, a: str, b: str) -> str | None:
    sa, sb = groups.size[a], groups.size[b]
    if sa is None or sb is None:
        return "a member has no known shape"
    if not (divides(sa, sb) or divides(sb, sa)):
        return "iteration spaces differ by more than a broadcast or a reduction"
    return convexity_violation(graph, groups.members[a] | groups.members[b])


@register_pass(RULE)
def fuse_elementwise(graph: Graph) -> PassResult:
    groups = _Groups()
    refusals = []
    for node in graph.topo_nodes():
        if not fusible(node):
            continue
        groups.add(node.name, _size(graph, node))
        for t in data_inputs(graph, node):
            src = graph.producer.get(t)
            if src is None or src not in groups.parent:
                continue
            a, b = groups.root(src), groups.root(node.name)
            if a == b:
                continue
            reason = _why_not(graph, groups, a, b)
            if reason:
                refusals.append(Refusal(RULE, (src, node.name), reason))
            else:
                groups.union(a, b)
    fused = [
        Group(RULE, frozenset(m), group_kind(graph, m), anchor=min(m, key=graph.topo_index.__getitem__))
        for m in groups.members.values()
        if len(m) > 1
    ]
    if not fused:
        return PassResult(graph, False, tuple(refusals))
    return PassResult(apply_groups(graph, fused), True, tuple(refusals))
