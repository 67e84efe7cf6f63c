"""Collectives: onnxruntime's collective contrib ops (com.microsoft AllReduce, AllGather, AllToAll; and
ReduceScatter, which the sharding passes insert in the same domain) and the pipeline send (estimator Send).

Counting rule: no FLOPs (NB: a reduction's adds are hidden under the link time); DRAM bytes = the input
read once and the output written once, the output's size from the collective's semantics (the input's;
all-gather group_size times it, reduce-scatter 1/group_size of it), so an output shape that shape
inference left unknown (onnxruntime's contrib ops) does not matter. The Work carries the message
(`Comm`) that estimator/pricing/price.py hands to the collective model (estimator/pricing/collectives.py):
- AllReduce, AllToAll, ReduceScatter: the input's bytes;
- AllGather (attribute `axis`): the gathered output's bytes (the input's times group_size);
- Send (attribute `peer_stage`): the input's bytes, between two GPUs.
The group is the integer attribute `group_size`, as onnxruntime's ops have it; a collective without it
is bad input (the sharding passes set it from --tp), not an uncosted op. NB: --tp shards an unsharded
decoder; it does not size the collectives of a graph exported already sharded.
"""

from __future__ import annotations

from estimator.cost.registry import Comm, CostError, OpView, Work, register, traffic
from estimator.errors import UserError

DOMAIN = "com.microsoft"


class CollectiveNodeError(UserError):
    pass


def group_size(op: OpView) -> int:
    group = op.attr("group_size")
    if group is None:
        raise CollectiveNodeError(f"node {op.node.name!r} ({op.node.qualified_op}): no group_size attribute "
                                  f"(how many GPUs it spans); set it on the node (the collectives --tp "
                                  f"inserts carry it)")
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise CollectiveNodeError(f"node {op.node.name!r} ({op.node.qualified_op}): group_size must be an "
                                  f"integer >= 1, got {group!r}")
    return group


def _work(op: OpView, kind: str, nbytes, written, group: int) -> Work:
    x = op.input(0)
    return Work({}, traffic(x), written, Comm(kind, nbytes, group, x.dtype))


@register("AllReduce", "AllToAll", "ReduceScatter", domain=DOMAIN)
def reduce_like(op: OpView) -> Work:
    """All-reduce / all-to-all / reduce-scatter: the message is the input (the total buffer); the output
    is the input's size (reduce-scatter: 1/group_size of it)."""
    group, x = group_size(op), op.input(0)
    written = x.nbytes / group if op.op_type == "ReduceScatter" else x.nbytes
    return _work(op, op.op_type, x.nbytes, written, group)


@register("AllGather", domain=DOMAIN)
def all_gather(op: OpView) -> Work:
    """All-gather along `axis`: the message is the gathered output, group_size times the input."""
    group = group_size(op)
    x = op.input(0)
    axis = op.attr("axis", 0)
    if not -len(x.shape) <= axis < max(len(x.shape), 1):
        raise CostError(f"AllGather: axis {axis} out of range for rank {len(x.shape)}")
    return _work(op, "AllGather", group * x.nbytes, group * x.nbytes, group)


@register("Send", domain="estimator")
def send(op: OpView) -> Work:
    """Point-to-point send of the input to the next pipeline stage (attribute `peer_stage`); no output
    is written on the sender. NB: the receive on the peer is not a kernel of this graph."""
    x = op.input(0)
    return Work({}, traffic(x), 0, Comm("Send", x.nbytes, 2, x.dtype))
