"""What the tile model needs to know about a kernel: its GEMM (M, N, K, batch, operand sizes) or its
attention core, read off the kernel's nodes and the graph's tensor shapes.

GEMM-like: MatMul, FusedMatMul, Gemm, MatMulInteger, QLinearMatMul, and convolutions as implicit GEMM
(M = batch x output pixels, N = output channels per group, K = input channels per group x kernel
window, one GEMM per group); a fused kernel whose members hold exactly one of these is that GEMM plus
its epilogue (the epilogue's extra traffic is in the kernel's Work). A 2-D right operand (a weight) folds
the left operand's batch dims into M, as libraries do.
Attention: the opset-23 Attention op, com.microsoft MultiHeadAttention / GroupQueryAttention, and a
fused attention group (fuse-attention's attrs["attention"]).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import sympy

from estimator.cost.attention import Core, core_of_op
from estimator.cost.registry import CostError, OpView
from estimator.dtypes import itemsize
from estimator.fused import core_of
from estimator.ir import Graph, Node, Tensor
from estimator.kernel import op_view

MATMULS = frozenset({"MatMul", "FusedMatMul", "Gemm", "MatMulInteger", "QLinearMatMul"})
CONVS = frozenset({"Conv", "ConvInteger", "QLinearConv"})
_B_INDEX = {"QLinearMatMul": 3, "QLinearConv": 3}  # inputs: a, a_scale, a_zp, b, ...


@dataclass(frozen=True)
class GemmSpec:
    """A GEMM read off a kernel: C[batch, M, N] = A[batch, M, K] . B[batch, K, N]."""

    node: Node
    batch: Any
    m: Any
    n: Any
    k: Any
    a: Tensor
    b: Tensor
    c: Tensor
    scale_block: int = 0  # K elements per scale of a block-quantized operand (0: per-tensor or none)

    @property
    def a_bytes(self) -> float:
        return float(itemsize(self.a.dtype))

    @property
    def b_bytes(self) -> float:
        return float(itemsize(self.b.dtype))

    @property
    def c_bytes(self) -> float:
        return float(itemsize(self.c.dtype))


def _prod(xs) -> Any:
    return sympy.Mul(*xs) if xs else sympy.Integer(1)


def gemm_of_node(graph: Graph, node: Node) -> GemmSpec | None:
    """The GEMM of one MatMul-like or convolution node, or None (unshaped, unsupported layout)."""
    try:
        view = op_view(graph, node)
        if node.op_type in MATMULS:
            return _matmul(view)
        if node.op_type in CONVS:
            return _conv(view)
    except (CostError, IndexError, TypeError, ValueError):
        return None
    return None


def _matmul(op: OpView) -> GemmSpec | None:
    a, b, y = op.input(0), op.input(_B_INDEX.get(op.op_type, 1)), op.output(0)
    if len(a.shape) < 1 or len(b.shape) < 1 or len(y.shape) < 1:
        return None
    if op.op_type == "Gemm":
        trans_a = bool(op.attr("transA", 0))
        k = a.shape[0] if trans_a else a.shape[1]
        return GemmSpec(op.node, sympy.Integer(1), y.shape[0], y.shape[1], k, a, b, y)
    trans_a = op.op_type == "FusedMatMul" and bool(op.attr("transA", 0)) and len(a.shape) >= 2
    k = a.shape[-2] if trans_a else a.shape[-1]
    n = y.shape[-1] if len(b.shape) >= 2 else sympy.Integer(1)
    if len(b.shape) <= 2:  # a weight-like right operand: every left row is one GEMM row
        m = _prod(y.shape[:-1]) if len(b.shape) == 2 else _prod(y.shape)
        return GemmSpec(op.node, sympy.Integer(1), m, n, k, a, b, y)
    m = y.shape[-2] if len(a.shape) >= 2 else sympy.Integer(1)
    return GemmSpec(op.node, _prod(y.shape[:-2]), m, n, k, a, b, y)


def _conv(op: OpView) -> GemmSpec | None:
    x, w, y = op.input(0), op.input(_B_INDEX.get(op.op_type, 1)), op.output(0)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape) or len(y.shape) != len(x.shape):
        return None
    group = int(op.attr("group", 1) or 1)
    m = y.shape[0] * _prod(y.shape[2:])
    n = y.shape[1] / group
    k = w.shape[1] * _prod(w.shape[2:])
    return GemmSpec(op.node, sympy.Integer(group), m, n, k, x, w, y)


def gemm_of_kernel(graph: Graph, kernel) -> GemmSpec | None:
    """The kernel's GEMM: its node's, or the one GEMM member of a fused GEMM + epilogue kernel."""
    if kernel.kind not in ("matmul", "conv"):
        return None
    gemms = [n for n in kernel.nodes if n.op_type in MATMULS | CONVS]
    if len(gemms) != 1:
        return None  # NB: two GEMMs in one kernel (rare) are priced by the streaming model
    spec = gemm_of_node(graph, gemms[0])
    if spec is None:
        return spec
    block = scale_block(graph, spec.node)
    out = graph.tensors.get(graph.node(kernel.name).outputs[0]) if graph.node(kernel.name).outputs else None
    if len(kernel.nodes) == 1 or out is None or out.shape is None:
        out = spec.c
    return replace(spec, c=out, scale_block=block) if (block or out is not spec.c) else spec


def kernel_scale_block(graph: Graph, kernel) -> int:
    """scale_block of a GEMM kernel's GEMM node (0 for any other kernel)."""
    if kernel.kind not in ("matmul", "conv"):
        return 0
    gemms = [n for n in kernel.nodes if n.op_type in MATMULS | CONVS]
    return scale_block(graph, gemms[0]) if len(gemms) == 1 else 0


def scale_block(graph: Graph, gemm: Node) -> int:
    """K elements per scale when an operand of `gemm` comes out of a block-wise QuantizeLinear (its
    `block_size`, e.g. 1 x 128 activation scales): the library then runs a block-scaled GEMM, which
    applies the scales inside its K loop. 0 for per-tensor / per-channel scales or none."""
    for name in gemm.inputs[:2]:
        src = graph.producer.get(name)
        node = graph.node(src) if src is not None else None
        if node is not None and node.op_type == "QuantizeLinear":
            block = int(node.attrs.get("block_size", 0) or 0)
            if block > 0:
                return block
    return 0


def attention_of_kernel(graph: Graph, kernel) -> tuple[Core, float, float] | None:
    """(core, bytes per Q element, bytes per K/V element) of an attention kernel, or None."""
    node = graph.node(kernel.name)
    info = node.attrs.get("attention") if node.body else None
    try:
        if info is not None:  # Q, K and V of a fused pattern share the math dtype
            core = core_of(info)
            kv = core.dtype
            if core.kv_heads == 1 and sympy.sympify(core.dk - core.dv).is_positive:
                kv = info.get("kv_dtype", kv)  # a latent (MLA) cache: its own (pricing/mla.py)
            return core, float(itemsize(core.dtype)), float(itemsize(kv))
        if node.body or kernel.kind != "attention":
            return None
        view = op_view(graph, node)
        core = core_of_op(view)
        if core is None:
            return None
        q = view.input(0)
        kv = view.inputs[1] if len(view.inputs) > 1 and view.inputs[1] is not None else q
        return core, float(itemsize(q.dtype)), float(itemsize(kv.dtype))
    except (CostError, IndexError, TypeError, ValueError, KeyError):
        return None
