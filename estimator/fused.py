"""Work of a fused kernel: its members' operations, and DRAM traffic only for the tensors that cross
its boundary (each boundary input read once, each boundary output written once).

NB: a boundary input is counted whole. A member that reads only part of a tensor (Gather, Slice) may
read less; the fusion rules therefore only absorb such ops where another member reads the whole tensor
anyway (rotary) or the tensor is small.

An attention group (attrs["attention"]) replaces the work of its score path (QK^T, scale, mask, softmax,
PV) by the flash-attention core of estimator/cost/attention.py: the same 4*d FLOPs per score, but with
causal tile skipping when the mask was recognized as causal, and no S x S tensor in DRAM.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from estimator.cost.attention import Core, attention_core
from estimator.cost.registry import Work, traffic
from estimator.dtypes import DtypeError
from estimator.ir import Graph, Node, Tensor

WorkOf = Callable[[Node], "Work | str | None"]  # None: a free member (view, host-side)


def fused_work(graph: Graph, node: Node, member_work: WorkOf) -> Work | str:
    """Work of fused `node`, or the reason it cannot be priced (a member's reason)."""
    core = node.attrs.get("attention")
    skip = set(core["_members"]) if core else set()
    flops: dict = {}
    for m in node.body:
        if m.name in skip:
            continue
        w = member_work(m)
        if isinstance(w, str):
            return f"member {m.name}: {w}"
        if w is not None:
            for k, v in w.flops.items():
                flops[k] = flops.get(k, 0) + v
    if core:
        for k, v in attention_core(core_of(core)).flops.items():
            flops[k] = flops.get(k, 0) + v
    try:
        read = sympy.Add(*(traffic(_tensor(graph, t)) for t in node.inputs if t))
        written = sympy.Add(*(traffic(_tensor(graph, t)) for t in node.outputs if t))
    except DtypeError as exc:
        return str(exc)
    except ValueError as exc:  # CostError: an unshaped boundary tensor
        return str(exc)
    return Work(flops, read, written)


def core_of(info: dict) -> Core:
    """The group's attention core. A grouped-query group (kv_group g > 1: g query heads read each K/V
    head) is batch x kv heads sequences of g query heads over one K/V head each, so the tile model
    sees the grouping; otherwise batch x heads folded into `batch` with one head each."""
    group = int(info.get("kv_group", 1))
    return Core(
        batch=info["batch_heads"] / group,
        heads=sympy.Integer(group),
        kv_heads=sympy.Integer(1) if group > 1 else None,
        seq_q=info["seq_q"],
        seq_new=info["seq_q"],
        past=info["seq_kv"] - info["seq_q"],
        dk=info["dk"],
        dv=info["dv"],
        causal=info["causal"],
        dtype=info["dtype"],
    )


def _tensor(graph: Graph, name: str) -> Tensor:
    return graph.tensors.get(name) or Tensor(name, None, "undefined")
