"""Reductions (ReduceX, ArgMax/ArgMin) and normalizations (Softmax, LayerNorm and its relatives).

Counting rule: CUDA-core ops per input element plus a few ops per output element or per normalized row
(the rsqrt, log or reciprocal a row needs once), on `alu_unit(dtype)` and `(SFU, "fp32")` as in
elementwise.py. DRAM bytes: each input read once and each output written once, the ideal single-pass
kernel that keeps a row on chip (NB: two-pass kernels re-read rows that outgrow shared memory; those
re-reads usually hit L2).
"""

from __future__ import annotations

import sympy

from estimator.cost.elementwise import MS, alu_sfu, checked_io_bytes
from estimator.cost.registry import CostError, OpView, Work, register, traffic
from estimator.ir import Expr

# (CUDA ops per input element, SFU per input element, CUDA ops per output element, SFU per output element)
_REDUCE: dict[str, tuple[int, int, int, int]] = {
    "ReduceSum": (1, 0, 0, 0),  # add
    "ReduceMean": (1, 0, 1, 0),  # add; scale by 1/n
    "ReduceMax": (1, 0, 0, 0), "ReduceMin": (1, 0, 0, 0),  # max / min
    "ReduceProd": (1, 0, 0, 0),  # mul
    "ReduceL1": (2, 0, 0, 0),  # abs, add
    "ReduceL2": (1, 0, 0, 1),  # fma x*x + acc; sqrt
    "ReduceSumSquare": (1, 0, 0, 0),  # fma x*x + acc
    "ReduceLogSum": (1, 0, 1, 1),  # add; lg2 and its scale
    "ReduceLogSumExp": (4, 1, 2, 1),  # max, sub max, exp (1 + 1), add; log (1 + 1), add max back
    # NB: ArgMax/ArgMin compare and select a (value, index) pair; counted as 1 op.
    "ArgMax": (1, 0, 0, 0), "ArgMin": (1, 0, 0, 0),
}

# Per-element CUDA ops of the normalizations, composed below.
_LN_OPS = 6  # sum (1), centred square-sum (sub + fma: 2), normalise (sub + mul: 2), scale (1)
_RMS_OPS = 3  # square-sum (fma: 1), normalise (mul: 1), scale (1)
_SHIFT_OPS = 1  # add bias (beta) after scaling
_SOFTMAX_OPS = 5  # max, sub max, exp's scale (with 1 SFU ex2), sum, mul by 1/sum (or sub log-sum)


def _axis(op: OpView, rank: int, default: int) -> int:
    axis = op.attr("axis", default)
    if not -rank <= axis < max(rank, 1):
        raise CostError(f"{op.op_type}: axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _prod(dims: tuple[Expr, ...]) -> Expr:
    return sympy.Mul(*dims) if dims else sympy.Integer(1)


def _norm_work(op: OpView, rows: Expr, cuda_per_elem: int, sfu_per_row: int = 1,
               cuda_per_row: int = 0, sfu_per_elem: int = 0) -> Work:
    """Ops for a normalization over input 0: numel(X) x (`cuda_per_elem`, `sfu_per_elem`) plus, per
    normalized row, `cuda_per_row` CUDA ops and `sfu_per_row` SFU ops. Bytes: every present input and
    output once."""
    x = op.input(0)
    read, written = checked_io_bytes(op)
    flops = alu_sfu(x.dtype, x.numel * cuda_per_elem + rows * cuda_per_row,
                    x.numel * sfu_per_elem + rows * sfu_per_row)
    return Work(flops, read, written)


@register(*sorted(_REDUCE))
def reduce(op: OpView) -> Work:
    """Per input element and per output element the (CUDA, SFU) counts of `_REDUCE`. The reduced axes
    (attribute before opset 18, a run-time input from 18) are not needed: numel(X) and numel(Y) carry
    them. Bytes: X read, Y written; the axes input is a host-side int list and is not counted."""
    x, y = op.input(0), op.output(0)
    cin, sin, cout, sout = _REDUCE[op.op_type]
    flops = alu_sfu(x.dtype, x.numel * cin + y.numel * cout, x.numel * sin + y.numel * sout)
    return Work(flops, traffic(x), traffic(y))


@register("Softmax", "LogSoftmax")
def softmax(op: OpView) -> Work:
    """Per element 5 CUDA ops (max, sub, exp's scale, sum, normalise) + 1 SFU (ex2); per row 1 SFU (the
    1/sum reciprocal, or LogSoftmax's log) and for LogSoftmax 1 CUDA op (the log's scale). From opset 13
    a row is one `axis`; before, the input is coerced to 2-D at `axis` (default 1) and a row is
    everything from `axis` on.

    NB: bytes are the ideal one-pass online softmax: X read once, Y written once."""
    x = op.input(0)
    shape = x.shape
    if op.opset >= 13:
        axis = _axis(op, len(shape), -1)
        rows = x.numel / shape[axis] if shape else sympy.Integer(1)
    else:
        rows = _prod(shape[:_axis(op, len(shape), 1)])
    log = op.op_type == "LogSoftmax"
    return _norm_work(op, rows, _SOFTMAX_OPS, sfu_per_row=1, cuda_per_row=int(log), sfu_per_elem=1)


@register("LayerNormalization")
def layer_norm(op: OpView) -> Work:
    """Normalise over dims [axis:] (default -1): per element 6 CUDA ops (sum, centred square-sum,
    normalise, scale) + 1 when bias B is present; per row 1 rsqrt on the SFU.

    NB: per-row scalar work (1/n scaling, + epsilon) is not counted. Bytes: X, Scale, B read; Y and the
    optional Mean / InvStdDev outputs written."""
    x = op.input(0)
    rows = _prod(x.shape[:_axis(op, len(x.shape), -1)])
    return _norm_work(op, rows, _LN_OPS + _SHIFT_OPS * op.has_input(2))


@register("RMSNormalization")
@register("SimplifiedLayerNormalization")
@register("SimplifiedLayerNormalization", domain=MS)
def rms_norm(op: OpView) -> Work:
    """RMS norm over dims [axis:] (default -1): per element 3 CUDA ops (square-sum, normalise, scale);
    per row 1 rsqrt on the SFU. onnxruntime registers SimplifiedLayerNormalization in the default
    domain as well as in com.microsoft. Bytes: X, scale read; Y (and inv_std_var if present) written."""
    x = op.input(0)
    rows = _prod(x.shape[:_axis(op, len(x.shape), -1)])
    return _norm_work(op, rows, _RMS_OPS)


def _skip_norm(op: OpView, norm_ops: int, bias_index: int) -> Work:
    """input + skip (+ bias) then a last-axis norm: 1 add for skip, 1 for bias when present."""
    x = op.input(0)
    op.input(1)  # skip is required
    rows = _prod(x.shape[:-1])
    return _norm_work(op, rows, 1 + int(op.has_input(bias_index)) + norm_ops)


@register("SkipLayerNormalization", domain=MS)
def skip_layer_norm(op: OpView) -> Work:
    """LayerNorm over the last axis of input + skip (+ bias): per element 1 add (skip) + 1 (bias, input
    4, if present) + 6 LayerNorm ops + 1 (beta, input 3, if present); per row 1 rsqrt on the SFU.
    Bytes: input, skip, gamma, beta, bias read; output and the optional mean, inv_std_var and
    input_skip_bias_sum outputs written."""
    return _skip_norm(op, _LN_OPS + _SHIFT_OPS * op.has_input(3), bias_index=4)


@register("SkipSimplifiedLayerNormalization", domain=MS)
def skip_simplified_layer_norm(op: OpView) -> Work:
    """RMS norm over the last axis of input + skip (+ bias, input 3): per element 1 add (skip) + 1
    (bias, if present) + 3 RMS-norm ops; per row 1 rsqrt on the SFU. Bytes as SkipLayerNormalization."""
    return _skip_norm(op, _RMS_OPS, bias_index=3)


@register("BatchNormalization")
def batch_norm(op: OpView) -> Work:
    """Inference form y = x * a + b with per-channel a = scale / sqrt(var + eps), b = B - mean * a:
    2 CUDA ops (one multiply-add) per element. NB: the per-channel folding (C rsqrts) is not counted.
    Bytes: X, scale, B, mean, var read; Y written. Training mode (running-stat outputs) is not priced."""
    if op.attr("training_mode", 0) or any(t is not None for t in op.outputs[1:]):
        raise CostError("BatchNormalization: training mode (running statistics outputs) is not priced")
    x = op.input(0)
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, 2 * x.numel), read, written)


@register("InstanceNormalization")
def instance_norm(op: OpView) -> Work:
    """Normalise each (n, c) over the spatial dims: per element 7 CUDA ops (LayerNorm's 6 + shift);
    1 rsqrt per (n, c) on the SFU. Bytes: X, scale, B read; Y written."""
    x = op.input(0)
    if len(x.shape) < 2:
        raise CostError(f"InstanceNormalization: input rank {len(x.shape)} < 2")
    return _norm_work(op, x.shape[0] * x.shape[1], _LN_OPS + _SHIFT_OPS)


@register("GroupNormalization")
def group_norm(op: OpView) -> Work:
    """Normalise each (n, group) over its channels and spatial dims: per element 7 CUDA ops (LayerNorm's
    6 + shift); 1 rsqrt per (n, group) on the SFU. Bytes: X, scale, bias read; Y written."""
    x = op.input(0)
    groups = op.attr("num_groups")
    if groups is None or len(x.shape) < 2:
        raise CostError("GroupNormalization: needs num_groups and an input of rank >= 2")
    return _norm_work(op, x.shape[0] * groups, _LN_OPS + _SHIFT_OPS)


@register("LpNormalization")
def lp_norm(op: OpView) -> Work:
    """x / ||x||_p along `axis` (default -1). p=2: per element fma (square-sum) + mul, per row sqrt and
    rcp on the SFU. p=1: per element abs, add, mul; per row rcp."""
    x = op.input(0)
    p = op.attr("p", 2)
    if p not in (1, 2):
        raise CostError(f"LpNormalization: p={p} (only 1 and 2 are defined)")
    axis = _axis(op, len(x.shape), -1)
    rows = x.numel / x.shape[axis] if x.shape else sympy.Integer(1)
    return _norm_work(op, rows, 2 if p == 2 else 3, sfu_per_row=2 if p == 2 else 1)
