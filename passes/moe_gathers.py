"""How a MoE projection reads its experts in a graph: a Gather of an expert weight stack by the routed
expert ids. fuse_moe fuses what it finds into a grouped GEMM, shard_moe splits it under --tp; both ask
the same two questions here."""

from __future__ import annotations

from estimator.ir import Graph, Node
from passes.graph_edit import is_host, is_weight, producer

GATHERS = frozenset({"Gather", "GatherND"})
# Ops between TopK's indices and the Gather (flattening, casts): walked through to find k and T.
ID_VIEWS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Cast", "Identity"})


def gathers_expert_rows(graph: Graph, node: Node, rank: int) -> bool:
    """A Gather(axis 0) / GatherND(batch_dims 0, one index per row) of a rank-`rank` weight by
    run-time ids."""
    if node.op_type not in GATHERS or len(node.inputs) < 2:
        return False
    w, ids = node.inputs[0], node.inputs[1]
    wt = graph.tensors.get(w)
    if not is_weight(graph, w) or wt is None or wt.shape is None or len(wt.shape) != rank:
        return False
    if is_host(graph, ids) or is_weight(graph, ids):
        return False
    if node.op_type == "Gather":
        return int(node.attrs.get("axis", 0)) == 0
    it = graph.tensors.get(ids)
    return (int(node.attrs.get("batch_dims", 0)) == 0 and it is not None and it.shape is not None
            and bool(it.shape) and it.shape[-1] == 1)


def ids_root(graph: Graph, ids: str) -> str:
    """The tensor `ids` is a view of (through ID_VIEWS): two Gathers by the same routing share it."""
    tensor = ids
    while (p := producer(graph, tensor)) is not None and p.op_type in ID_VIEWS:
        tensor = p.inputs[0]
    return tensor
