"""Ops that fit no larger family: gated activations, local normalizations, generators and random
numbers, sampling (RoiAlign, GridSample), scatter-like copies, Unique, Det and the two losses.

Counting rule, unless a function says otherwise: CUDA-core ops (`alu_unit(dtype)`, 1 per add, mul, FMA,
compare or select) and SFU ops (`(SFU, "fp32")`) per output element, as in elementwise.py. DRAM bytes:
every input read once and every output written once, except where a function says it reads less
(generators read no data: the `*Like` ops look only at their input's shape).
"""

from __future__ import annotations

import sympy

from estimator.cost.elementwise import MS, alu_sfu, checked_io_bytes, per_element_work
from estimator.cost.registry import (
    CUDA,
    FREE,
    ZERO,
    CostError,
    OpView,
    Work,
    register,
    traffic,
)
from estimator.dtypes import itemsize
from estimator.ir import Expr, Tensor

SWISH = (3, 2)  # x * sigmoid(alpha * x): alpha folds into the exp's scale (1), add (1), mul x (1); ex2, rcp
# Random numbers. NB: Philox4x32-10 (curand's default) makes 4 values from 10 rounds of ~6 integer ops.
PHILOX_OPS = 15
UNIFORM_OPS = PHILOX_OPS + 2  # + int-to-float convert, fma into [low, high)
NORMAL_OPS = (UNIFORM_OPS + 4, 2)  # Box-Muller per value: half of (log scale, 2pi mul, 2 sincos
#                                    range reductions, 2 muls, 2 fmas); half of (lg2, sqrt, sin, cos)
SOFTMAX_OPS = 5  # per element as reduction.softmax: max, sub, exp's scale, sum, normalise (+1 SFU ex2)


def _write_only(op: OpView, cuda_per_elem: int, sfu_per_elem: int = 0) -> Work:
    """A generator: numel(Y) x (cuda, sfu) ops; Y written, no data read."""
    y = op.output(0)
    return Work(alu_sfu(y.dtype, cuda_per_elem * y.numel, sfu_per_elem * y.numel), ZERO, traffic(y))


def _axis(op: OpView, rank: int, default: int) -> int:
    axis = op.attr("axis", default)
    if not -rank <= axis < max(rank, 1):
        raise CostError(f"{op.op_type}: axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _prod(dims: list[Expr]) -> Expr:
    return sympy.Mul(*dims) if dims else sympy.Integer(1)


# ---- activations ----------------------------------------------------------------------------------

@register("Swish")
def swish(op: OpView) -> Work:
    """x * sigmoid(alpha * x): 3 CUDA ops + 2 SFU (ex2, rcp) per element (alpha is a constant folded
    into the exp's log2e scale)."""
    return per_element_work(op, *SWISH, op.input(0).dtype)


@register("SwiGLU")
def swiglu(op: OpView) -> Work:
    """Swish(A) * B: Swish's 3 CUDA ops + 2 SFU, plus 1 mul, per output element; A, B read, Y written."""
    return per_element_work(op, SWISH[0] + 1, SWISH[1], op.input(0).dtype)


@register("SwiGLU", domain=MS)
def ms_swiglu(op: OpView) -> Work:
    """onnxruntime's fused SwiGLU (gate, up; activation_alpha), the target of its SwiGluFusion pass:
    as the ONNX SwiGLU, 4 CUDA ops + 2 SFU per output element. A single packed input (gate and up in
    one tensor, Y half its last dim) is priced the same way per output element."""
    return per_element_work(op, SWISH[0] + 1, SWISH[1], op.input(0).dtype)


@register("Hardmax")
def hardmax(op: OpView) -> Work:
    """A row max (1 compare-select per element) and the one-hot write (1 compare-select per element):
    2 CUDA ops per element along `axis` (opset 13: one axis; before, the 2-D coercion changes rows, not
    the count). X read, Y written."""
    x = op.input(0)
    _axis(op, len(x.shape), -1 if op.opset >= 13 else 1)
    return per_element_work(op, 2, 0, x.dtype)


# ---- normalizations -------------------------------------------------------------------------------

@register("LRN")
def lrn(op: OpView) -> Work:
    """Per element `size` CUDA fmas (the square-sum over the channel window), 1 fma (bias + alpha/size *
    sum), the pow(., -beta) as ex2(beta * lg2(.)) (1 mul + 2 SFU) and the multiply by x: size + 3 CUDA
    ops and 2 SFU. NB: a sliding-window kernel can reuse partial sums (~2 ops instead of size)."""
    size = op.attr("size")
    if not size:
        raise CostError("LRN: the size attribute is required")
    return per_element_work(op, int(size) + 3, 2, op.input(0).dtype)


@register("MeanVarianceNormalization")
def mean_variance_norm(op: OpView) -> Work:
    """(X - E[X]) / sqrt(E[(X - E[X])^2]) over `axes` (default [0, 2, 3]): per element 5 CUDA ops (sum,
    centred square-sum: sub + fma, normalise: sub + mul), per normalized group 1 rsqrt on the SFU.
    NB: bytes are those of a one-pass kernel; reducing over non-contiguous axes usually takes two."""
    x = op.input(0)
    rank = len(x.shape)
    axes = op.attr("axes") or (0, 2, 3)
    if any(not -rank <= a < rank for a in axes):
        raise CostError(f"MeanVarianceNormalization: axes {tuple(axes)} out of range for rank {rank}")
    groups = x.numel / _prod([x.shape[a % rank] for a in set(a % rank for a in axes)])
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, 5 * x.numel, groups), read, written)


# ---- generators and random numbers ----------------------------------------------------------------

@register("EyeLike")
def eye_like(op: OpView) -> Work:
    """1 compare-select per output element (is it on diagonal k?); Y written. The input supplies only a
    shape: its data is not read."""
    return _write_only(op, 1)


@register("RandomUniform", "RandomUniformLike")
def random_uniform(op: OpView) -> Work:
    """Philox random bits (15 CUDA ops per value, NB) + convert and scale (2): 17 CUDA ops per output
    element; Y written, no data read."""
    return _write_only(op, UNIFORM_OPS)


@register("RandomNormal", "RandomNormalLike")
def random_normal(op: OpView) -> Work:
    """A uniform value (17 CUDA ops) then Box-Muller, which turns two uniforms into two normals: per
    value 4 more CUDA ops and 2 SFU (half of lg2, sqrt, sin, cos); Y written, no data read."""
    return _write_only(op, *NORMAL_OPS)


@register("Bernoulli")
def bernoulli(op: OpView) -> Work:
    """A uniform value (17 CUDA ops) compared with p (1): 18 CUDA ops per element; the probabilities
    read, Y written."""
    return per_element_work(op, UNIFORM_OPS + 1, 0, op.input(0).dtype)


@register("Multinomial")
def multinomial(op: OpView) -> Work:
    """Per input [batch, classes] element: exp (1 CUDA + 1 SFU) and a running sum (1) for the CDF; per
    output [batch, sample_size] sample: a uniform value (17) and a binary search of the CDF (log2(classes)
    compares). Input read, samples written. NB: the reference implementation searches linearly."""
    x, y = op.input(0), op.output(0)
    if len(x.shape) != 2:
        raise CostError(f"Multinomial: input rank {len(x.shape)}, expected 2")
    search = sympy.Max(1, sympy.log(x.shape[1], 2))
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, 2 * x.numel + y.numel * (UNIFORM_OPS + search), x.numel), read, written)


# ---- views and copies -----------------------------------------------------------------------------

@register("BitCast")
def bitcast(op: OpView) -> Work:
    """Reinterprets the bits as a type of the same width, shape unchanged: a view, no kernel, 0 bytes."""
    return FREE


@register("CenterCropPad")
def center_crop_pad(op: OpView) -> Work:
    """A copy: per axis min(in, out) elements overlap; that block is read, Y written (a pad fills the
    rest with zeros, a crop skips the rest). The shape input is host-side."""
    x, y = op.input(0), op.output(0)
    if len(x.shape) != len(y.shape):
        raise CostError(f"CenterCropPad: input rank {len(x.shape)} != output rank {len(y.shape)}")
    overlap = _prod([sympy.Min(a, b) for a, b in zip(x.shape, y.shape, strict=True)])
    read = overlap * itemsize(x.dtype) if traffic(x) != 0 else ZERO
    return Work({}, read, traffic(y))


@register("Col2Im")
def col2im(op: OpView) -> Work:
    """Every column element is added into its image pixel: 1 CUDA op per input element. Input read,
    image written; image_shape and block_shape are host-side. NB: overlapping blocks accumulate with
    atomics or a gather-style pass; counted as one add each."""
    x = op.input(0)
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, x.numel), read, written)


@register("MaxUnpool")
def max_unpool(op: OpView) -> Work:
    """0 ops: X and its indices I read, the output written once (NB: the zero fill and the scatter of
    numel(X) values are counted as one write of the output)."""
    op.input(1)
    read, written = checked_io_bytes(op)
    return Work({}, read, written)


@register("TensorScatter")
def tensor_scatter(op: OpView) -> Work:
    """A KV-cache append: 0 ops; update (and write_indices) read, numel(update) elements written.
    NB: priced in place (past and present share one buffer, which the op is designed for); an
    out-of-place runtime also copies the whole cache."""
    past, update = op.input(0), op.input(1)
    op.output(0)
    read = traffic(update) + (traffic(op.input(2)) if op.has_input(2) else ZERO)
    return Work({}, read, update.numel * itemsize(past.dtype))


# ---- sampling -------------------------------------------------------------------------------------

def _sampled_read(x: Tensor, touched: Expr) -> Expr:
    """Bytes of X a sampler reads: at most the taps it touches, at most all of X."""
    full = traffic(x)
    return sympy.Min(full, touched * itemsize(x.dtype)) if full != 0 else ZERO


@register("RoiAlign")
def roi_align(op: OpView) -> Work:
    """Per output element sampling_ratio^2 bilinear samples of 4 taps, a multiply and an add per tap
    (8 CUDA ops per sample, as Resize); avg mode adds 1 scale per output element. Reads rois,
    batch_indices and the taps of X (at most all of X); Y written. sampling_ratio=0 (adaptive: ceil(roi
    size / output size) per ROI) depends on run-time ROI sizes and is not priced.
    NB: the per-sample coordinate and weight math, shared across channels, is not counted."""
    x, y = op.input(0), op.output(0)
    ratio = int(op.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise CostError("RoiAlign: adaptive sampling (sampling_ratio=0) depends on run-time ROI sizes")
    mode = op.attr("mode", "avg")
    samples = y.numel * ratio * ratio
    cuda = 8 * samples + (y.numel if mode == "avg" else 0)
    read = _sampled_read(x, 4 * samples) + traffic(op.input(1)) + traffic(op.input(2))
    return Work(alu_sfu(x.dtype, cuda), read, traffic(y))


_GRID_TAPS = {"linear": 2, "bilinear": 2, "nearest": 1, "cubic": 4, "bicubic": 4}
_GRID_COORD_OPS = {1: 2, 2: 4, 4: 16}  # per grid point per axis: unnormalize, floor/round, weights


@register("GridSample")
def grid_sample(op: OpView) -> Work:
    """Per output element over r spatial axes: linear 2^r taps, cubic 4^r taps, a multiply and an add
    each (as Resize); nearest is a gather (0 ops). Per grid point (shared by the C channels) per axis:
    2 ops (nearest: unnormalize, round), 4 (linear: unnormalize, floor, frac, 1 - frac), 16 (cubic:
    + 4 weights). Reads the grid and the taps of X (at most all of X); Y written.
    NB: padding_mode's clamps or reflections are not counted."""
    x, grid, y = op.input(0), op.input(1), op.output(0)
    mode = op.attr("mode", "linear" if op.opset >= 20 else "bilinear")
    taps = _GRID_TAPS.get(mode)
    r = len(x.shape) - 2
    if taps is None or r < 1:
        raise CostError(f"GridSample: mode {mode!r} on input rank {len(x.shape)} is not priced")
    points = grid.numel / r
    cuda = points * r * _GRID_COORD_OPS[taps] + (2 * taps**r * y.numel if taps > 1 else 0)
    read = _sampled_read(x, taps**r * y.numel) + traffic(grid)
    return Work(alu_sfu(x.dtype, cuda), read, traffic(y))


# ---- sorting and linear algebra -------------------------------------------------------------------

@register("Unique")
def unique(op: OpView) -> Work:
    """A sort: numel(X) x log2(n) compares on the CUDA cores (n: the elements, or the slices along
    `axis`), at least 1 per element. X read; Y and the optional indices, inverse_indices and counts
    written at the data-dependent sizes shape inference gave them. NB: GPU sorts are radix sorts (a few
    passes over the keys); the comparison count stands in for them."""
    x = op.input(0)
    axis = op.attr("axis")
    n = x.numel if axis is None else x.shape[_axis(op, len(x.shape), 0)]
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, x.numel * sympy.Max(1, sympy.log(n, 2))), read, written)


@register("Det")
def det(op: OpView) -> Work:
    """LU factorisation per [n, n] matrix: 2/3 n^3 FLOPs on the CUDA cores (unit (CUDA, fp32), fp64 for
    fp64; half types are upcast), plus n - 1 CUDA-core multiplies of the diagonal. X read, Y written."""
    x = op.input(0)
    if len(x.shape) < 2:
        raise CostError(f"Det: input rank {len(x.shape)} < 2")
    n = x.shape[-1]
    matrices = x.numel / (n * x.shape[-2])
    flops = {(CUDA, "fp64" if x.dtype == "fp64" else "fp32"): matrices * sympy.Rational(2, 3) * n**3}
    for unit, ops in alu_sfu(x.dtype, matrices * (n - 1)).items():
        flops[unit] = flops.get(unit, 0) + ops
    read, written = checked_io_bytes(op)
    return Work(flops, read, written)


# ---- losses ---------------------------------------------------------------------------------------

def _nll_ops(op: OpView, targets: Expr, weighted: bool) -> tuple[Expr, Expr]:
    """(CUDA, SFU) ops of the negative-log-likelihood gather over `targets` target elements: negate (1),
    ignore_index compare-select (1, if set), weight multiply (1), reduction sum (1) and, for a weighted
    mean, the weight sum (1); a mean divides once (1 rcp + 1 mul)."""
    reduction = op.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise CostError(f"{op.op_type}: unknown reduction {reduction!r}")
    per = 1 + int(op.attr("ignore_index") is not None) + int(weighted) + int(reduction != "none")
    per += int(reduction == "mean" and weighted)
    mean = int(reduction == "mean")
    return targets * per + mean, sympy.Integer(mean)


@register("NegativeLogLikelihoodLoss")
def nll_loss(op: OpView) -> Work:
    """Gathers input[n, target[n, d...], d...]: reads the target and one input element per target
    element (not the whole input), plus the weight vector; writes the loss. Ops as `_nll_ops`.
    NB: a weight read per target element hits L1/L2; the weight vector is counted once."""
    x, target, y = op.input(0), op.input(1), op.output(0)
    weighted = op.has_input(2)
    cuda, sfu = _nll_ops(op, target.numel, weighted)
    read = traffic(target) + target.numel * itemsize(x.dtype) + (traffic(op.input(2)) if weighted else ZERO)
    return Work(alu_sfu(x.dtype, cuda, sfu), read, traffic(y))


@register("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(op: OpView) -> Work:
    """LogSoftmax over the class axis 1 of scores [N, C, d...] (per element 5 CUDA ops + 1 SFU ex2, per
    row 1 SFU log + 1 CUDA scale, as reduction.softmax), then the `_nll_ops` gather over the N * d...
    labels. Scores, labels and weights read once; the loss and the optional log_prob written once."""
    scores, labels = op.input(0), op.input(1)
    if len(scores.shape) < 2:
        raise CostError(f"SoftmaxCrossEntropyLoss: scores rank {len(scores.shape)} < 2")
    rows = scores.numel / scores.shape[1]
    cuda, sfu = _nll_ops(op, labels.numel, op.has_input(2))
    cuda += SOFTMAX_OPS * scores.numel + rows
    sfu += scores.numel + rows
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(scores.dtype, cuda, sfu), read, written)
