"""Work of a fused kernel: its members' operations, and DRAM traffic only for the tensors that cross
its boundary (each boundary input read once, each boundary output written once).

NB: a boundary input is counted whole. A member that reads only part of a tensor (Gather, Slice) may
read less; the fusion rules therefore only absorb such ops where another member reads the whole tensor
anyway (rotary) or the tensor is small.

An attention group (attrs["attention"]) replaces the work of its score path (QK^T, scale, mask, softmax,
PV) by the flash-attention core of estimator/cost/attention.py: the same 4*d FLOPs per score, but with
causal tile skipping when the mask was recognized as causal, and no S x S tensor in DRAM.

A MoE group (attrs["moe"], passes/fuse_moe.py) reads its expert weights at the active experts' share.
Expert weights in a block-scaled stored format (MXFP4, estimator/dtypes.STORED_FORMATS) make it a
weight-only grouped GEMM (W4A16 on Hopper, vLLM's for gpt-oss): the bytes are the stored ones (values +
scales), the MMA runs at the activations' dtype (the members' MatMul sees the gathered, dequantized
operand), and each weight tile read is dequantized once per M tile of DEQUANT_TILE_M routed rows:
DEQUANTIZE_OPS CUDA-core ops per element (see `moe_dequant_ops`).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from estimator.cost.attention import Core, attention_core
from estimator.cost.moe import active_fraction
from estimator.cost.quant import DEQUANTIZE_OPS
from estimator.cost.registry import Work, alu_unit, traffic
from estimator.dtypes import STORED_FORMATS, DtypeError
from estimator.ir import Graph, Node, Tensor

# Routed rows per M tile of a weight-only grouped GEMM, each of which dequantizes the weight tiles it
# reads. NB: an assumption, not a fit: the middle of the 16-128 row tiles vLLM's fused-MoE kernels
# (Marlin MoE, triton matmul_ogs) choose on Hopper; at decode an expert's rows fit in one tile anyway.
DEQUANT_TILE_M = 64
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
    dequant = moe_dequant_ops(graph, node.attrs.get("moe"))
    if dequant != 0:
        flops[alu_unit("fp32")] = flops.get(alu_unit("fp32"), 0) + dequant
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


def moe_dequant_ops(graph: Graph, info: dict | None) -> sympy.Expr:
    """CUDA-core ops a weight-only grouped GEMM spends dequantizing its stored-format expert weights:
    DEQUANTIZE_OPS per element read (the active experts' share), once per M tile of each active
    expert's routed rows, m_tiles = Max(1, pairs / (active experts * DEQUANT_TILE_M)). 0 for float
    weights. NB: routed rows spread evenly over the active experts (skew makes a few experts' tiles
    more); the same uniform-routing expectation as `active_fraction`."""
    if not info:
        return sympy.Integer(0)
    stored = [graph.tensors[w] for w in info["weights"]
              if w in graph.tensors and graph.tensors[w].dtype in STORED_FORMATS]
    if not stored:
        return sympy.Integer(0)
    experts = sympy.sympify(info["experts"])
    if info.get("top_k") is None:  # routing unknown: every expert, one tile each
        frac, m_tiles = sympy.Integer(1), sympy.Integer(1)
    else:
        frac = active_fraction(experts, info["top_k"], info["tokens"])
        m_tiles = sympy.Max(1, info["tokens"] * info["top_k"] / (frac * experts * DEQUANT_TILE_M))
    return sympy.Add(*(DEQUANTIZE_OPS * w.numel for w in stored)) * frac * m_tiles


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
