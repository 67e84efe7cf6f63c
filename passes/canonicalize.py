"""Canonicalization: remove what launches no kernel, so later rules see only real work.

# before -> after:  Shape -> Gather -> Unsqueeze -> Concat -> Reshape(x, ·) -> y   =>   Reshape(x) -> y
- shape arithmetic is dropped: host-side nodes (every output known before run time) whose values only
  ever reach shape-argument positions (Reshape's shape, Slice's starts, Unsqueeze's axes...), directly
  or through other such nodes; their outputs stay in the tensor table as constants. Host-side values
  that feed data inputs (a causal mask built from Range and a comparison) keep their producers, so
  rules can still read how they were built; they launch nothing either way;
- Identity and Dropout (inference) are bypassed, and so is a Cast to the dtype its input already has;
- dead nodes go (as in `dce`).
Returns modified=False and the same graph when there was nothing to do.
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from estimator.ops import REDUCTION
from passes.dce import dce
from passes.graph_edit import is_host
from passes.pipeline import PassResult, register_pass


def _bypass_source(graph: Graph, node: Node) -> str | None:
    """The tensor a no-op node forwards (its output is replaced by it), or None."""
    if node.op_type in ("Identity", "Dropout") and node.inputs and node.inputs[0]:
        return node.inputs[0]
    if node.op_type in ("Cast", "CastLike") and node.inputs:
        src, out = graph.tensors.get(node.inputs[0]), graph.tensors.get(node.outputs[0])
        if src is not None and out is not None and src.dtype == out.dtype:
            return node.inputs[0]
    return None


# Input positions that carry shapes, indices of axes or sizes rather than data.
_SHAPE_ARGS: dict[str, frozenset[int]] = {
    "Reshape": frozenset({1}),
    "Expand": frozenset({1}),
    "Slice": frozenset({1, 2, 3, 4}),
    "Unsqueeze": frozenset({1}),
    "Squeeze": frozenset({1}),
    "Tile": frozenset({1}),
    "Pad": frozenset({1, 2, 3}),
    "ConstantOfShape": frozenset({0}),
    "Range": frozenset({0, 1, 2}),
    "TopK": frozenset({1}),
    "Split": frozenset({1}),
    "Resize": frozenset({1, 2, 3}),
    "OneHot": frozenset({1}),
    "CumSum": frozenset({1}),
    "Upsample": frozenset({1}),
    **{op: frozenset({1}) for op in REDUCTION},
}


def _shape_only_nodes(graph: Graph) -> set[str]:
    """Host-side nodes whose outputs only reach shape-argument positions (walked outputs-first)."""
    readers: dict[str, list[tuple[Node, int]]] = {}
    for name in graph.nx.nodes:
        n = graph.node(name)
        for i, t in enumerate(n.inputs):
            if t:
                readers.setdefault(t, []).append((n, i))
    drop: set[str] = set()
    for node in reversed(list(graph.topo_nodes())):
        outs = [o for o in node.outputs if o]
        if not outs or set(outs) & set(graph.outputs) or not all(is_host(graph, o) for o in outs):
            continue
        if all(
            r.name in drop or i in _SHAPE_ARGS.get(r.op_type, ()) for o in outs for r, i in readers.get(o, ())
        ):
            drop.add(node.name)
    return drop


@register_pass("canonicalize")
def canonicalize(graph: Graph) -> PassResult:
    rename: dict[str, str] = {}
    keep: list[Node] = []
    changed = False
    shape_only = _shape_only_nodes(graph)
    for node in graph.topo_nodes():
        node = _renamed(node, rename)
        src = _bypass_source(graph, node)
        extra_outputs = node.outputs[1:] if node.op_type == "Dropout" else ()
        if src is not None and node.outputs[0] not in graph.outputs and not any(extra_outputs):
            rename[node.outputs[0]] = rename.get(src, src)
            changed = True
        elif node.name in shape_only:
            changed = True
        else:
            keep.append(node)
    result = dce(
        Graph(graph.name, keep, graph.tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)
        if changed
        else graph
    )
    return PassResult(result.graph, changed or result.modified)


def _renamed(node: Node, rename: dict[str, str]) -> Node:
    if not rename or not any(t in rename for t in node.inputs):
        return node
    inputs = tuple(rename.get(t, t) for t in node.inputs)
    return Node(node.name, node.op_type, node.domain, inputs, node.outputs, node.attrs, node.body)
