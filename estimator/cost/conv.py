"""Convolutions, pooling and Resize.

Counting rule for convolutions: a multiply-add is 2 FLOPs, run as an implicit GEMM on `matmul_unit`
(tensor cores; fp32 on CUDA cores); bias ignored (NB: M adds per output pixel, noise next to the
reduction). Integer convolutions run on the int8 tensor path, key (TENSOR, "int8"). DRAM bytes: every
input (X, W, B, scales, zero points) read once and every output written once; im2col re-reads are the
tiling model's business. Where shape inference left an output unshaped, its spatial dims are computed
from the attributes (the ONNX output-size formulas) rather than priced as a silent zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import sympy

from estimator.cost.quant import INT8_TENSOR, REQUANT_OPS
from estimator.cost.registry import (
    SFU,
    CostError,
    OpView,
    Work,
    alu_unit,
    io_bytes,
    matmul_unit,
    read_bytes,
    register,
    traffic,
)
from estimator.ir import Expr, Shape, Tensor

# ---- attribute and shape helpers ------------------------------------------------------------------

def _ints(op: OpView, name: str, n: int, default: int) -> tuple[int, ...]:
    value = op.attr(name)
    if value is None or len(value) == 0:
        return (default,) * n
    if len(value) != n:
        raise CostError(f"{op.op_type}: attribute {name} has {len(value)} entries, expected {n}")
    return tuple(int(v) for v in value)


def _auto_pad(op: OpView) -> str:
    value = op.attr("auto_pad", "NOTSET")
    return value.decode() if isinstance(value, bytes) else str(value)


def _window_out(op: OpView, spatial: Shape, kernel: Sequence[Expr], ceil_mode: bool = False) -> Shape:
    """Output spatial dims of a sliding window (Conv, pools): floor((x + pads - d*(k-1) - 1) / s) + 1,
    ceil(x / s) under SAME_*; ceil instead of floor under ceil_mode. NB: ONNX's ceil_mode rule that
    drops a last window starting in the end padding is ignored."""
    n = len(spatial)
    strides, dilations = _ints(op, "strides", n, 1), _ints(op, "dilations", n, 1)
    pads, auto = _ints(op, "pads", 2 * n, 0), _auto_pad(op)
    rounding = sympy.ceiling if ceil_mode else sympy.floor
    out = []
    for i, (x, k) in enumerate(zip(spatial, kernel, strict=True)):
        s = sympy.Integer(strides[i])
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(sympy.ceiling(x / s))
            continue
        pad = 0 if auto == "VALID" else pads[i] + pads[i + n]
        out.append(rounding((x + pad - dilations[i] * (k - 1) - 1) / s) + 1)
    return tuple(out)


def _transpose_out(op: OpView, spatial: Shape, kernel: Sequence[Expr]) -> Shape:
    """ConvTranspose output dims: `output_shape` if given, x*s under SAME_*, else
    s*(x-1) + output_padding + d*(k-1) + 1 - pads."""
    n = len(spatial)
    explicit = op.attr("output_shape")
    if explicit is not None and len(explicit) > 0:
        return tuple(sympy.Integer(v) for v in explicit[-n:])
    strides, dilations = _ints(op, "strides", n, 1), _ints(op, "dilations", n, 1)
    pads, extra, auto = _ints(op, "pads", 2 * n, 0), _ints(op, "output_padding", n, 0), _auto_pad(op)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return tuple(x * s for x, s in zip(spatial, strides, strict=True))
    if auto == "VALID":
        pads = (0,) * (2 * n)
    return tuple(strides[i] * (x - 1) + extra[i] + dilations[i] * (k - 1) + 1 - pads[i] - pads[i + n]
                 for i, (x, k) in enumerate(zip(spatial, kernel, strict=True)))


def _shaped_output(op: OpView, shape_fn: Callable[[], Shape]) -> Tensor:
    """Output 0, its shape computed by `shape_fn` when shape inference left it unshaped."""
    y = op.outputs[0] if op.outputs else None
    if y is None:
        raise CostError(f"{op.op_type}: output 0 is missing")
    return y if y.shape is not None else replace(y, shape=tuple(shape_fn()))


def _bytes(op: OpView, y: Tensor) -> tuple[Expr, Expr]:
    """Every input read once; `y` and the other outputs (same dims as y when unshaped) written once."""
    read = read_bytes(op)
    others = (t if t is None or t.shape is not None else replace(t, shape=y.shape) for t in op.outputs[1:])
    return read, traffic(y) + sympy.Add(*(traffic(t) for t in others))


def _prod(xs: Sequence[Expr]) -> Expr:
    return sympy.Mul(*xs) if xs else sympy.Integer(1)


# ---- convolutions ---------------------------------------------------------------------------------

def _conv_macs(op: OpView, x_i: int, w_i: int) -> tuple[Tensor, Expr]:
    """(Y, multiply-adds) of a forward conv: numel(Y) * (C_in/group) * prod(kernel), the kernel and
    C_in/group read off W = [C_out, C_in/group, *kernel]."""
    x, w = op.input(x_i), op.input(w_i)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise CostError(f"{op.op_type}: X {x.shape} and W {w.shape} are not an N-D conv pair")
    kernel = w.shape[2:]
    y = _shaped_output(op, lambda: (x.shape[0], w.shape[0], *_window_out(op, x.shape[2:], kernel)))
    return y, y.numel * w.shape[1] * _prod(kernel)


@register("Conv")
def conv(op: OpView) -> Work:
    """flops = 2 * N * C_out * prod(out spatial) * (C_in/group) * prod(kernel) on matmul_unit(X);
    bias ignored. NB: depthwise/grouped convs get no tensor-core discount even though they rarely
    reach the tensor-core peak; their low arithmetic intensity leaves them memory-bound anyway."""
    y, macs = _conv_macs(op, 0, 1)
    return Work({matmul_unit(op.input(0).dtype): 2 * macs}, *_bytes(op, y))


@register("ConvTranspose")
def conv_transpose(op: OpView) -> Work:
    """Each input pixel scatters a kernel: flops = 2 * N * C_in * prod(in spatial) * (C_out/group)
    * prod(kernel), with W = [C_in, C_out/group, *kernel]; on matmul_unit(X). The overlap-add of the
    scattered tiles is part of the GEMM's accumulate."""
    x, w = op.input(0), op.input(1)
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise CostError(f"ConvTranspose: X {x.shape} and W {w.shape} are not an N-D conv pair")
    group = int(op.attr("group", 1))
    kernel = w.shape[2:]
    y = _shaped_output(op, lambda: (x.shape[0], w.shape[1] * group, *_transpose_out(op, x.shape[2:], kernel)))
    macs = x.numel * w.shape[1] * _prod(kernel)
    return Work({matmul_unit(x.dtype): 2 * macs}, *_bytes(op, y))


@register("ConvInteger")
def conv_integer(op: OpView) -> Work:
    """int8/uint8 conv accumulating into int32: flops = 2 * numel(Y) * (C_in/group) * prod(kernel)
    on (TENSOR, "int8"). Zero points are read with the inputs; their subtraction folds into the GEMM."""
    y, macs = _conv_macs(op, 0, 1)
    return Work({INT8_TENSOR: 2 * macs}, *_bytes(op, y))


@register("QLinearConv")
def qlinear_conv(op: OpView) -> Work:
    """Quantized conv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): the int8 GEMM
    (2 * numel(Y) * (C_in/group) * prod(kernel) on (TENSOR, "int8")) plus a requantize epilogue of
    ~3 CUDA ops per output (scale, add zero point, round-and-clamp); scales and zero points read once."""
    y, macs = _conv_macs(op, 0, 3)
    return Work({INT8_TENSOR: 2 * macs, alu_unit("fp32"): REQUANT_OPS * y.numel}, *_bytes(op, y))


# ---- pooling --------------------------------------------------------------------------------------

def _pool(op: OpView) -> tuple[Tensor, Tensor, Expr]:
    """(X, Y, window size) of a windowed pool; `kernel_shape` is required."""
    x = op.input(0)
    kernel = op.attr("kernel_shape")
    if not kernel:
        raise CostError(f"{op.op_type}: attribute kernel_shape is required")
    kernel = tuple(sympy.Integer(k) for k in kernel)
    if len(kernel) != len(x.shape) - 2:
        raise CostError(f"{op.op_type}: kernel_shape {kernel} does not fit X {x.shape}")
    ceil_mode = bool(op.attr("ceil_mode", 0))
    y = _shaped_output(op, lambda: (*x.shape[:2], *_window_out(op, x.shape[2:], kernel, ceil_mode)))
    return x, y, _prod(kernel)


@register("MaxPool", "AveragePool")
def window_pool(op: OpView) -> Work:
    """prod(kernel) CUDA ops per output element (a max or an add per window tap; AveragePool's final
    divide ignored). Reads X once, writes Y (and MaxPool's optional int64 Indices). NB: overlapping
    windows re-read X from cache, not DRAM."""
    x, y, window = _pool(op)
    return Work({alu_unit(x.dtype): y.numel * window}, *_bytes(op, y))


@register("LpPool")
def lp_pool(op: OpView) -> Work:
    """Per window tap |x|^p and an add: 2 CUDA ops (NB: exact for p = 2, a pow for other p is dearer);
    one SFU root per output element. Reads X once, writes Y."""
    x, y, window = _pool(op)
    return Work({alu_unit(x.dtype): 2 * y.numel * window, (SFU, "fp32"): y.numel}, *_bytes(op, y))


def _global_out(op: OpView) -> Tensor:
    x = op.input(0)
    return _shaped_output(op, lambda: (*x.shape[:2], *(sympy.Integer(1),) * (len(x.shape) - 2)))


@register("GlobalAveragePool", "GlobalMaxPool")
def global_pool(op: OpView) -> Work:
    """1 CUDA op (add or max) per input element; reads X once, writes [N, C, 1, ...]."""
    x, y = op.input(0), _global_out(op)
    return Work({alu_unit(x.dtype): x.numel}, *_bytes(op, y))


@register("GlobalLpPool")
def global_lp_pool(op: OpView) -> Work:
    """2 CUDA ops per input element (|x|^p, add) and one SFU root per output element."""
    x, y = op.input(0), _global_out(op)
    return Work({alu_unit(x.dtype): 2 * x.numel, (SFU, "fp32"): y.numel}, *_bytes(op, y))


# ---- Resize ---------------------------------------------------------------------------------------

def _resized_axes(x: Tensor, y: Tensor, axes: Sequence[int] | None) -> int:
    """How many of `axes` (all when None) change size; an axis not provably unchanged counts."""
    rank = len(x.shape)
    candidates = range(rank) if not axes else (a % rank for a in axes)
    return sum(1 for a in candidates if sympy.expand(x.shape[a] - y.shape[a]) != 0)


@register("Resize")
def resize(op: OpView) -> Work:
    """Per output element, over r resized axes: nearest 0 ops (a gather); linear 2^r taps, cubic 4^r
    taps, each tap a multiply and an add (2 * taps CUDA ops). Reads X once, writes Y; Y's shape must
    be known (scales/sizes are values, not shapes). NB: the source-coordinate and weight math is per
    row/column and ignored; antialias widens the filter when downscaling and is ignored; upsampling
    re-reads X from cache, not DRAM."""
    x, y = op.input(0), op.output(0)
    mode = op.attr("mode", "nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    taps_per_axis = {"nearest": 0, "linear": 2, "cubic": 4}.get(mode)
    if taps_per_axis is None:
        raise CostError(f"Resize: unknown mode {mode!r}")
    read, written = io_bytes(op)
    if taps_per_axis == 0:
        return Work({}, read, written)
    taps = taps_per_axis ** _resized_axes(x, y, op.attr("axes"))
    return Work({alu_unit(x.dtype): 2 * taps * y.numel}, read, written)
