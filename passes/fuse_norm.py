"""fuse-norm: LayerNorm and RMSNorm, single ops or decomposed as torch's exporter writes them, with the
residual Add in front (skip-connection + norm), become one kernel.

# before -> after:  Add(x, r) -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Reciprocal -> Mul(x) -> Mul(w)
#                   =>  Fused(norm)   (writes the normalized output and the residual sum)
Decomposed norms are found from a ReduceMean over the last axis: its region is every pointwise op or
last-axis ReduceMean downstream whose activation inputs come only from the region or from the norm
input x. Refused (with the reason) when the region has no normalization step (Sqrt, Reciprocal, Div).
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from estimator.ops import ELEMENTWISE
from passes.fusion_common import closure, data_inputs, last_axis_reduction, numel, same
from passes.graph_edit import Consumers, Group, Refusal, apply_groups, convexity_violation, is_fused, producer
from passes.pipeline import PassResult, register_pass

RULE = "fuse-norm"
NORM_OPS = frozenset({"LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"})
SQUARES = frozenset({"Pow", "Mul"})
NORMALIZERS = frozenset({"Sqrt", "Reciprocal", "Div"})


def _decomposed(graph: Graph, cons: Consumers, mean: Node) -> tuple[set[str], str] | str:
    """(region, norm input) of a decomposed norm anchored at a last-axis ReduceMean, or a reason."""
    if not last_axis_reduction(graph, mean):
        return "ReduceMean does not reduce the last axis only"
    start = {mean.name}
    x = mean.inputs[0]
    sq = producer(graph, x)
    if sq is not None and sq.op_type in SQUARES and not is_fused(sq) and cons.only(x) is mean:
        src = data_inputs(graph, sq)
        if src and all(t == src[0] for t in src):  # Pow(x, 2) or Mul(x, x): an RMS norm
            start.add(sq.name)
            x = src[0]

    def admit(n: Node, produced: set[str]) -> bool:
        if is_fused(n) or not (
            n.op_type in ELEMENTWISE or (n.op_type == "ReduceMean" and last_axis_reduction(graph, n))
        ):
            return False
        return all(t in produced or t == x for t in data_inputs(graph, n))

    region = closure(graph, cons, [x], start, admit)
    if not any(graph.node(n).op_type in NORMALIZERS for n in region):
        return "no normalization step (Sqrt, Reciprocal or Div) after the mean"
    return region, x


def _skip_add(graph: Graph, x: str, taken: set[str]) -> Node | None:
    """The residual Add producing the norm input, when it adds two activations of the same size."""
    add = producer(graph, x)
    if add is None or add.op_type != "Add" or add.name in taken or is_fused(add):
        return None
    ins = data_inputs(graph, add)
    if len(ins) != 2 or not all(same(numel(graph, t), numel(graph, x)) for t in ins):
        return None
    return add


def match(graph: Graph, cons: Consumers, node: Node, taken: set[str]) -> Group | str | None:
    if node.op_type in NORM_OPS:
        region, x = {node.name}, node.inputs[0]
    elif node.op_type == "ReduceMean":
        found = _decomposed(graph, cons, node)
        if isinstance(found, str):
            return found
        region, x = found
    else:
        return None
    if region & taken:
        return "already part of another fused kernel"
    add = _skip_add(graph, x, taken)
    if add is not None:
        region = region | {add.name}
    if len(region) == 1:
        return None  # a lone norm op is one kernel already
    reason = convexity_violation(graph, region)
    return reason or Group(RULE, frozenset(region), "norm", anchor=node.name)


@register_pass(RULE)
def fuse_norm(graph: Graph) -> PassResult:
    cons = Consumers(graph)
    groups, refusals, taken = [], [], set()
    for node in graph.topo_nodes():
        if node.name in taken:
            continue
        found = match(graph, cons, node, taken)
        if isinstance(found, str):
            refusals.append(Refusal(RULE, (node.name,), found))
        elif found is not None:
            groups.append(found)
            taken |= found.names
    if not groups:
        return PassResult(graph, False, tuple(refusals))
    return PassResult(apply_groups(graph, groups), True, tuple(refusals))
