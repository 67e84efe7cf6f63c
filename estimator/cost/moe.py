"""Mixture of experts: how many experts a step reads, and onnxruntime's com.microsoft MoE / QMoE ops.

A serving engine runs a MoE layer as a router GEMM, a top-k, a token permutation, one grouped GEMM
per expert projection and an un-permutation with the weighted combine. The grouped GEMM reads each
*active* expert's weights once, however many tokens it serves; its FLOPs are those of the routed
(token, expert) pairs only.

Expected active experts when T tokens each pick k of E experts uniformly at random (an expert is idle
when none of the T tokens picks it, probability (1 - k/E)^T):

    active(E, k, T) = E * (1 - (1 - k/E)^T)

NB: real routing is skewed (popular experts, correlated tokens), which makes fewer experts active
than this: it is an upper estimate of the weight bytes for a given T (and exact at T = 1: k experts).
"""

from __future__ import annotations

import sympy

from estimator.cost.registry import (
    CostError,
    OpView,
    Work,
    alu_unit,
    as_int,
    matmul_unit,
    register,
    traffic,
)
from estimator.ir import Expr

MS = "com.microsoft"
SWIGLU_ALU_OPS = 4  # per gated element: sigmoid's mul/add pair folded, x * sig, * up, alpha scale
SWIGLU_SFU_OPS = 1  # the exp of the sigmoid


def expected_active_experts(experts, top_k, tokens) -> Expr:
    """E * (1 - (1 - k/E)^T): see the module docstring (uniform routing; skewed routing reads fewer)."""
    e, k, t = (sympy.sympify(v) for v in (experts, top_k, tokens))
    if e == k:
        return e
    idle = 1 - k / e
    if idle.is_number:  # a float: (3/4)**256 as an exact rational would be a 100-digit fraction
        idle = sympy.Float(idle)
    return e * (1 - idle ** t)


def active_fraction(experts, top_k, tokens) -> Expr:
    """Share of the expert weights a step reads: expected active experts / E."""
    e = sympy.sympify(experts)
    return expected_active_experts(e, top_k, tokens) / e


def _expert_weights(op: OpView, indices: tuple[int, ...]) -> list:
    return [op.inputs[i] for i in indices if op.has_input(i)]


def _moe_work(op: OpView, quantized: bool) -> Work:
    """Shared by MoE and QMoE. Inputs: input [T, H] (or [B, S, H]), router_probs [T, E], fc1 weights
    [E, ...] (+ bias), fc2 weights (+ bias), optional fc3 weights (+ bias) for the gated form; QMoE
    also has per-expert scales after each weight. FLOPs: 2 * T * k * (fc1 + fc2 + fc3 inner products)
    on matmul_unit; the gate (SwiGLU, or activation) as CUDA/SFU ops. Bytes: input, router probs and
    biases/scales read once, each expert weight at `active_fraction` of its size, output written once.
    NB: QMoE's dequantization is folded into the GEMM (no extra bytes)."""
    x, probs = op.input(0), op.input(1)
    hidden = x.shape[-1]
    tokens = x.numel / hidden
    experts = probs.shape[-1]
    k = as_int(op.attr("k", 1), "MoE attribute k")
    # fc1, fc2, fc3 weight input positions (QMoE interleaves a scales input after each weight)
    weight_is = (2, 5, 8) if quantized else (2, 4, 6)
    weights = _expert_weights(op, weight_is)
    if len(weights) < 2:
        raise CostError(f"{op.op_type}: needs fc1 and fc2 expert weights")
    frac = active_fraction(experts, k, tokens)
    bits = int(op.attr("expert_weight_bits", 8)) if quantized else None
    macs_per_pair = sympy.Integer(0)
    weight_read = sympy.Integer(0)
    for w in weights:
        per_expert = w.numel / w.shape[0]
        if quantized:  # packed: a byte holds 8 / bits values
            per_expert = per_expert * 8 // bits
        macs_per_pair += per_expert
        weight_read += traffic(w) * frac
    pairs = tokens * k
    # intermediate width: fc2's per-expert elements / hidden
    inter = (weights[1].numel / weights[1].shape[0]) * (8 // bits if quantized else 1) / hidden
    dtype = x.dtype
    flops = {matmul_unit(dtype): 2 * pairs * macs_per_pair,
             alu_unit(dtype): SWIGLU_ALU_OPS * pairs * inter + 2 * pairs * hidden,  # gate; weighted sum
             ("sfu", "fp32"): SWIGLU_SFU_OPS * pairs * inter}
    others = [t for i, t in enumerate(op.inputs) if t is not None and i not in weight_is]
    read = weight_read + sympy.Add(*(traffic(t) for t in others))
    written = sympy.Add(*(traffic(t) for t in op.outputs if t is not None))
    return Work(flops, read, written)


@register("MoE", domain=MS)
def ms_moe(op: OpView) -> Work:
    """com.microsoft MoE: see `_moe_work` (grouped GEMMs reading each active expert once)."""
    return _moe_work(op, quantized=False)


@register("QMoE", domain=MS)
def ms_qmoe(op: OpView) -> Work:
    """com.microsoft QMoE (int4/int8 expert weights, expert_weight_bits): see `_moe_work`."""
    return _moe_work(op, quantized=True)
