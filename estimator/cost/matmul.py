"""Contractions: MatMul, Gemm, and onnxruntime's FusedMatMul.

Counting rule for every function here: a multiply-add is 2 FLOPs, so an [M,K]x[K,N] product is 2*M*N*K;
batch dims multiply in through the output's element count. Bias, alpha and beta are ignored (NB: they
add M*N FLOPs, noise next to 2*M*N*K). DRAM bytes: each operand read once and the output written once
(the minimum a single kernel can move; re-reads past L2 are the tiling model's business).
"""

from __future__ import annotations

import sympy

from estimator.cost.registry import OpView, Work, io_bytes, matmul_unit, register


def contraction_dim(op: OpView) -> sympy.Expr:
    """K of a MatMul-like op: the last dim of A (A 1-D: its only dim)."""
    a = op.input(0)
    return a.shape[-1]


def matmul_work(op: OpView, k: sympy.Expr, dtype: str) -> Work:
    out = op.output(0)
    read, written = io_bytes(op)
    return Work({matmul_unit(dtype): 2 * out.numel * k}, read, written)


@register("MatMul")
def matmul(op: OpView) -> Work:
    """numpy matmul semantics with broadcasting batch dims: flops = 2 * numel(Y) * K."""
    return matmul_work(op, contraction_dim(op), op.input(0).dtype)


@register("FusedMatMul", domain="com.microsoft")
def fused_matmul(op: OpView) -> Work:
    """MatMul with optional transposes of A/B and a scale alpha: flops = 2 * numel(Y) * K
    (K from A's last dim, or its second-to-last when transA); alpha ignored."""
    a = op.input(0)
    k = a.shape[-2] if op.attr("transA", 0) and len(a.shape) >= 2 else a.shape[-1]
    return matmul_work(op, k, a.dtype)


@register("Gemm")
def gemm(op: OpView) -> Work:
    """Y = alpha * A' B' + beta * C with A' = A^T when transA: flops = 2 * M * N * K."""
    a = op.input(0)
    k = a.shape[0] if op.attr("transA", 0) else a.shape[1]
    return matmul_work(op, k, a.dtype)
