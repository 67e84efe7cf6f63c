"""aten convolutions, pooling and resampling -> Conv / ConvTranspose / MaxPool / AveragePool /
Global*Pool / Resize / DepthToSpace, with the attributes estimator/cost/conv.py reads (kernel_shape,
strides, symmetric pads or auto_pad, dilations, group, ceil_mode). Registered on import (mlir_reader.py
imports the families)."""

from __future__ import annotations

from estimator.frontends.aten_call import Call, UnmappableError
from estimator.frontends.aten_registry import aten

# ---- convolution and pooling ---------------------------------------------------------------------

def _per_dim(values: list[int], n: int, default: int) -> list[int]:
    if not values:
        return [default] * n
    return values * n if len(values) == 1 else values


def _conv_attrs(c: Call, w: str, stride: int, padding: int, dilation: int, groups: int) -> dict:
    n = c.rank(w) - 2
    attrs = {"kernel_shape": [c.int_value(k) for k in c.shape(w)[2:]],
             "strides": _per_dim(c.ints(stride), n, 1), "dilations": _per_dim(c.ints(dilation), n, 1),
             "group": c.int(groups, 1)}
    pad = c.arg(padding)
    if isinstance(pad, str):
        attrs["auto_pad"] = "SAME_UPPER" if pad == "same" else "VALID"
    else:
        pads = _per_dim(c.ints(padding), n, 0)
        attrs["pads"] = pads + pads
    return attrs


@aten("convolution", "_convolution")
def convolution(c: Call) -> None:
    """(x, w, b, stride, padding, dilation, transposed, output_padding, groups) -> Conv or
    ConvTranspose with kernel_shape, strides, pads (symmetric), dilations, group."""
    attrs = _conv_attrs(c, c.t(1), 3, 4, 5, 8)
    if c.arg(6):
        n = c.rank(c.t(1)) - 2
        c.emit("ConvTranspose", [c.t(0), c.t(1), c.opt(2)], [c.out()], **attrs,
               output_padding=_per_dim(c.ints(7), n, 0))
        return
    c.emit("Conv", [c.t(0), c.t(1), c.opt(2)], [c.out()], **attrs)


@aten("conv1d", "conv2d", "conv3d")
def conv_nd(c: Call) -> None:
    """(x, w, b, stride, padding, dilation, groups); padding may be "same" / "valid"."""
    c.emit("Conv", [c.t(0), c.t(1), c.opt(2)], [c.out()], **_conv_attrs(c, c.t(1), 3, 4, 5, 6))


@aten("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def conv_transpose_nd(c: Call) -> None:
    """(x, w, b, stride, padding, output_padding, groups, dilation) -> ConvTranspose."""
    n = c.rank(c.t(1)) - 2
    attrs = _conv_attrs(c, c.t(1), 3, 4, 7, 6)
    c.emit("ConvTranspose", [c.t(0), c.t(1), c.opt(2)], [c.out()], **attrs,
           output_padding=_per_dim(c.ints(5), n, 0))


@aten("max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices")
def max_pool(c: Call) -> None:
    """(x, kernel, stride, padding, dilation, ceil_mode); stride [] means the kernel."""
    kernel = c.ints(1)
    n = c.rank(c.t(0)) - 2
    kernel = _per_dim(kernel, n, 1)
    pads = _per_dim(c.ints(3), n, 0)
    outs = [c.out(i) if c.out(i) in c.r.tensors else "" for i in range(len(c.results))]
    c.emit("MaxPool", [c.t(0)], outs, kernel_shape=kernel, strides=_per_dim(c.ints(2), n, 0) if c.ints(2)
           else kernel, pads=pads + pads, dilations=_per_dim(c.ints(4), n, 1), ceil_mode=int(bool(c.arg(5))))


@aten("avg_pool1d", "avg_pool2d", "avg_pool3d")
def avg_pool(c: Call) -> None:
    """(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)."""
    n = c.rank(c.t(0)) - 2
    kernel = _per_dim(c.ints(1), n, 1)
    pads = _per_dim(c.ints(3), n, 0)
    c.emit("AveragePool", [c.t(0)], [c.out()], kernel_shape=kernel,
           strides=_per_dim(c.ints(2), n, 1) if c.ints(2) else kernel, pads=pads + pads,
           ceil_mode=int(bool(c.arg(4))))


@aten("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
      "adaptive_max_pool2d")
def adaptive_pool(c: Call) -> None:
    """Only the global form (output size all 1) maps: GlobalAveragePool / GlobalMaxPool."""
    if any(v != 1 for v in c.ints(1)):
        raise UnmappableError("adaptive pooling to an output larger than 1")
    op_type = "GlobalMaxPool" if "max" in c.key else "GlobalAveragePool"
    c.emit(op_type, [c.t(0)], [c.out()])


@aten("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_bilinear2d",
      "upsample_linear1d", "upsample_trilinear3d", "upsample_bicubic2d")
def upsample(c: Call) -> None:
    mode = "nearest" if "nearest" in c.key else "cubic" if "bicubic" in c.key else "linear"
    c.emit("Resize", [c.t(0)], [c.out()], mode=mode)


@aten("pixel_shuffle")
def pixel_shuffle(c: Call) -> None:
    c.emit("DepthToSpace", [c.t(0)], [c.out()], blocksize=c.int(1))


@aten("pixel_unshuffle")
def pixel_unshuffle(c: Call) -> None:
    c.emit("SpaceToDepth", [c.t(0)], [c.out()], blocksize=c.int(1))
