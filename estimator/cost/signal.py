"""Signal processing: DFT, STFT, the window generators, MelWeightMatrix, and the scans CumSum/CumProd.

Counting rule. A Fourier transform of length N is priced as a radix-2 FFT, 5 * N * log2(N) real
operations for complex input (the classic Cooley-Tukey count) and half that for real input, on
`alu_unit(dtype)`. Generators (windows, the mel matrix) cost a few CUDA-core ops and SFU cosines per
output element and read nothing but host scalars. Scans are 1 CUDA-core op per element.
DRAM bytes: every input read once and every output written once (`io_bytes`); host scalars (sizes,
frame steps, axes) travel as kernel arguments.

NB: 5 N log2 N counts adds and muls separately; FMA fusion and radix-4/8 kernels (cuFFT) issue ~25%
fewer instructions, and a length that is not a power of two takes a Bluestein or mixed-radix path that
costs more. NB: a one-sided (real-to-complex) output of b bins is taken to come from N = 2 * (b - 1)
samples; an odd N is one more.
"""

from __future__ import annotations

import sympy

from estimator.cost.elementwise import alu_sfu, checked_io_bytes
from estimator.cost.registry import CostError, OpView, Work, register
from estimator.ir import Expr, Tensor

FFT_OPS = 5  # real ops per point per radix-2 stage of a complex FFT

# Window generators: (CUDA ops, SFU ops) per output element.
_WINDOW: dict[str, tuple[int, int]] = {
    "HannWindow": (4, 1),  # 0.5 - 0.5 * cos(2 pi n / N): scale n, cos range reduction (2), fma
    "HammingWindow": (4, 1),  # a0 - a1 * cos(2 pi n / N): same shape as Hann
    "BlackmanWindow": (7, 2),  # a0 - a1 cos(x) + a2 cos(2x): scale n, 2 range reductions (4), 2 fmas
}
MEL_OPS = 4  # per (bin, mel) weight: two slopes (2 fmas with precomputed reciprocals), min, max with 0


def fft_ops(n: Expr, transforms: Expr, complex_input: bool) -> Expr:
    """Real ops of `transforms` FFTs of length n: 5 n log2 n each, half for real input."""
    per = FFT_OPS * n * sympy.log(n, 2)
    return transforms * (per if complex_input else per / 2)


def _complex(t: Tensor, op_type: str) -> bool:
    """ONNX signals carry a trailing [1] (real) or [2] (complex) dim."""
    last = t.shape[-1] if t.shape else None
    if last not in (1, 2):
        raise CostError(f"{op_type}: the last dim of {t.name!r} must be 1 (real) or 2 (complex), got {last}")
    return last == 2


def _dft_axis(op: OpView, x: Tensor, y: Tensor) -> int:
    """The transform axis: an attribute before opset 20, an input from 20 (default -2). A run-time axis
    input is found where X and Y differ; if they do not, it cannot be seen and the node is uncosted."""
    rank = len(x.shape)
    if op.opset < 20:
        axis = op.attr("axis", 1)
    elif not op.has_input(2):
        axis = -2
    else:
        differ = [a for a in range(rank - 1) if sympy.expand(x.shape[a] - y.shape[a]) != 0]
        if len(differ) != 1:
            raise CostError("DFT: the axis is a run-time input and the shapes do not reveal it")
        axis = differ[0]
    if not -rank <= axis < rank or axis % rank == rank - 1:  # the last dim holds the real/imag parts
        raise CostError(f"DFT: axis {axis} out of range for rank {rank}")
    return axis % rank


def _fft_length(given: bool, r2c: bool, x_len: Expr, y_len: Expr) -> Expr:
    """N along the transform axis. A one-sided forward transform (real to complex) has N input samples,
    or, with a length input (the signal padded or truncated to it), 2 * (bins - 1); every other
    transform writes N values along the axis (a one-sided inverse writes the full real signal)."""
    if not r2c:
        return y_len
    return 2 * (y_len - 1) if given else x_len


@register("DFT")
def dft(op: OpView) -> Work:
    """FFTs of length N along the axis, one per position of the other dims (numel(X) / X's last dim /
    X's axis length of them): 5 N log2 N CUDA ops each, half when the input or the output is real
    (last dim 1). Bytes: X read, Y written."""
    x, y = op.input(0), op.output(0)
    if len(x.shape) < 2 or len(y.shape) != len(x.shape):
        raise CostError(f"DFT: input rank {len(x.shape)} / output rank {len(y.shape)}")
    real = not _complex(x, "DFT") or not _complex(y, "DFT")
    axis = _dft_axis(op, x, y)
    r2c = bool(op.attr("onesided", 0)) and not op.attr("inverse", 0)
    n = _fft_length(op.has_input(1), r2c, x.shape[axis], y.shape[axis])
    transforms = x.numel / x.shape[-1] / x.shape[axis]
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, fft_ops(n, transforms, not real)), read, written)


@register("STFT")
def stft(op: OpView) -> Work:
    """Per (batch, frame) one FFT of length frame_length (5 N log2 N CUDA ops, half for a real signal)
    plus 1 CUDA op per sample for the window multiply (2 for complex) when a window is given. N is the
    window's length, else from the output's bins (one-sided: 2 * (bins - 1)), else the signal length.
    Bytes: signal and window read once, output [batch, frames, bins, 2] written.

    NB: overlapping frames re-read the signal; those re-reads hit L2."""
    signal, y = op.input(0), op.output(0)
    if len(signal.shape) != 3 or len(y.shape) != 4:
        raise CostError("STFT: signal must be [batch, length, 1|2] and output [batch, frames, bins, 2]")
    cplx = _complex(signal, "STFT")
    if op.has_input(2):
        n = op.input(2).shape[0]
    elif op.has_input(3):
        n = _fft_length(True, bool(op.attr("onesided", 1)), signal.shape[1], y.shape[2])
    else:
        n = signal.shape[1]
    transforms = y.shape[0] * y.shape[1]
    ops = fft_ops(n, transforms, cplx)
    if op.has_input(2):
        ops += transforms * n * (2 if cplx else 1)
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(signal.dtype, ops), read, written)


@register(*sorted(_WINDOW))
def window(op: OpView) -> Work:
    """numel(Y) x the (CUDA, SFU) counts of `_WINDOW`, in the output's dtype. Writes Y; the size input
    is a host scalar."""
    y = op.output(0)
    cuda, sfu = _WINDOW[op.op_type]
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(y.dtype, cuda * y.numel, sfu * y.numel), read, written)


@register("MelWeightMatrix")
def mel_weight_matrix(op: OpView) -> Work:
    """4 CUDA ops per (bin, mel) weight of the [dft_length/2 + 1, num_mel_bins] output; writes it.
    NB: the num_mel_bins + 2 mel-to-hertz conversions (an exp each) are not counted."""
    y = op.output(0)
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(y.dtype, MEL_OPS * y.numel), read, written)


@register("CumSum", "CumProd")
def cumulative(op: OpView) -> Work:
    """1 CUDA op (add or mul) per element; X read, Y written; the axis input is a host scalar.
    NB: a work-efficient parallel scan (Blelloch) issues ~2 ops per element; the sequential count is
    used, and exclusive/reverse change nothing."""
    x = op.input(0)
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(x.dtype, x.numel), read, written)
