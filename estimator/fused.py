"""Work of a fused kernel: its members' operations, and DRAM traffic only for the tensors that cross
its boundary (each boundary input read once, each boundary output written once).

NB: a boundary input is counted whole. A member that reads only part of a tensor (Gather, Slice) may
read less; the fusion rules therefore only absorb such ops where another member reads the whole tensor
anyway (rotary) or the tensor is small.

An attention group (attrs["attention"]) replaces the work of its score path (QK^T, scale, mask, softmax,
PV) by the flash-attention core of estimator/cost/attention.py: the same 4*d FLOPs per score, but with
causal tile skipping when the mask was recognized as causal, and no S x S tensor in DRAM.

A MoE group (attrs["moe"], passes/fuse_moe.py) reads its expert weights at the active experts' share.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from estimator.cost.attention import Core, attention_core
from estimator.cost.moe import active_fraction
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
    scale = moe_read_scale(node.attrs.get("moe"))
    try:
        read = sympy.Add(*(traffic(_tensor(graph, t)) * scale.get(t, 1) for t in node.inputs if t))
        written = sympy.Add(*(traffic(_tensor(graph, t)) for t in node.outputs if t))
    except DtypeError as exc:
        return str(exc)
    except ValueError as exc:  # CostError: an unshaped boundary tensor
        return str(exc)
    return Work(flops, read, written)


def moe_read_scale(info: dict | None) -> dict:
    """A grouped-GEMM MoE kernel (passes/fuse_moe.py) reads each active expert's weights once: the
    share of its expert-weight inputs it reads (every expert when the routing is unknown)."""
    if not info or info.get("top_k") is None:
        return {}
    frac = active_fraction(info["experts"], info["top_k"], info["tokens"])
    return dict.fromkeys(info["weights"], frac)


def core_of(info: dict) -> Core:
    """The fused pattern's core. With K/V shared by a group of query heads (grouped-query, MLA's one
    latent head) the core is `kv_batch_heads` sequences of `group` query heads over one K/V head, so
    the tile model sees the grouping; `kv_group` (query heads per K/V head, from the absorbed
    repeat_kv Expand) is the fallback when the K tensor's heads are not known. Otherwise batch x heads
    are folded into `batch` with one head each."""
    kv_bh = info.get("kv_batch_heads")
    if kv_bh is None and int(info.get("kv_group", 1)) > 1:
        kv_bh = info["batch_heads"] / int(info["kv_group"])
    group = sympy.simplify(info["batch_heads"] / kv_bh) if kv_bh is not None else None
    if group is not None and group.is_integer and group != 1:
        batch, heads, kv_heads = kv_bh, group, sympy.Integer(1)
    else:
        batch, heads, kv_heads = info["batch_heads"], sympy.Integer(1), None
    return Core(
        batch=batch,
        heads=heads,
        kv_heads=kv_heads,
        seq_q=info["seq_q"],
        seq_new=info["seq_q"],
        past=info["seq_kv"] - info["seq_q"],
        dk=info["dk"],
        dv=info["dv"],
        causal=info["causal"],
        dtype=info["dtype"],
        window=info.get("window", -1),
    )


def _tensor(graph: Graph, name: str) -> Tensor:
    return graph.tensors.get(name) or Tensor(name, None, "undefined")
