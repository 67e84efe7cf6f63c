"""misc.py and signal.py: one test per op group, numbers written out by hand."""

import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError, lookup
from estimator.ir import dim

ALU32, ALU64, SFU = ("alu", "fp32"), ("alu", "fp64"), ("sfu", "fp32")
MS = "com.microsoft"
SCALAR_I64 = ([], "int64")


def log2(n):
    return sympy.log(n, 2)


def same(a, b):
    return sympy.simplify(a - b) == 0


# ---- signal.py ------------------------------------------------------------------------------------

def test_dft_opset19_real_and_complex():
    # [1, 10, 10, 1] real input, axis attribute 1: 10 transforms of N=10, half cost for real input
    w = cost(op("DFT", [([1, 10, 10, 1], "fp32")], [([1, 10, 10, 2], "fp32")], attrs={"axis": 1}, opset=19))
    assert same(w.flops[ALU32], 10 * 5 * 10 * log2(10) / 2)
    assert (w.bytes_read, w.bytes_written) == (4 * 100, 4 * 200)
    w = cost(op("DFT", [([4, 64, 2], "fp32")], [([4, 64, 2], "fp32")], attrs={"axis": 1}, opset=19))
    assert same(w.flops[ALU32], 4 * 5 * 64 * 6)  # complex, N=64: 5 N log2 N per transform


def test_dft_opset20_default_axis_and_onesided():
    # axis input omitted -> -2; one-sided forward: N = 16 input samples, 9 bins out
    w = cost(op("DFT", [([8, 16, 1], "fp32")], [([8, 9, 2], "fp32")], attrs={"onesided": 1}, opset=20))
    assert same(w.flops[ALU32], 8 * 5 * 16 * 4 / 2)
    # one-sided inverse (complex to real): N is the output's 16, half cost
    w = cost(op("DFT", [([8, 9, 2], "fp32")], [([8, 16, 1], "fp32")], attrs={"onesided": 1, "inverse": 1},
                opset=20))
    assert same(w.flops[ALU32], 8 * 5 * 16 * 4 / 2)


def test_dft_runtime_axis_found_from_shapes_or_refused():
    # dft_length given (N = 32 along axis 1 of the output); the axis input is run-time
    w = cost(op("DFT", [([2, 20, 5, 2], "fp32"), SCALAR_I64, SCALAR_I64], [([2, 32, 5, 2], "fp32")],
                opset=20, consts=[1, 2]))
    assert same(w.flops[ALU32], 2 * 5 * 5 * 32 * 5)  # 10 transforms of N=32, complex
    with pytest.raises(CostError):  # same shapes: the axis cannot be seen
        cost(op("DFT", [([2, 20, 5, 2], "fp32"), None, SCALAR_I64], [([2, 20, 5, 2], "fp32")], opset=20))


def test_stft_with_window_symbolic_batch():
    # signal [batch, 1024, 1], frame_step, window [256]; output [batch, 13, 129, 2]
    w = cost(op("STFT", [(["batch", 1024, 1], "fp32"), SCALAR_I64, ([256], "fp32")],
                [(["batch", 13, 129, 2], "fp32")], opset=17, consts=[1]))
    b = dim("batch")
    frames = b * 13
    # per frame: a real FFT of N=256 (5 N log2 N / 2) + 256 window multiplies
    assert same(w.flops[ALU32], frames * (5 * 256 * 8 / 2 + 256))
    assert same(w.bytes_read, 4 * (b * 1024 + 256))
    assert same(w.bytes_written, 4 * b * 13 * 129 * 2)


def test_windows_mel_and_scans():
    size = ([], "int64")
    w = cost(op("HannWindow", [size], [([400], "fp32")], consts=[0]))
    assert w.flops == {ALU32: 4 * 400, SFU: 400}  # scale, range reduction (2), fma; cos
    assert (w.bytes_read, w.bytes_written) == (0, 4 * 400)  # the size is a host scalar
    assert cost(op("BlackmanWindow", [size], [([400], "fp32")], consts=[0])).flops == {ALU32: 7 * 400,
                                                                                        SFU: 2 * 400}
    w = cost(op("MelWeightMatrix", [size] * 5, [([257, 80], "fp32")], consts=[0, 1, 2, 3, 4]))
    assert w.flops == {ALU32: 4 * 257 * 80}
    x = ([4, 1000], "fp64")
    w = cost(op("CumSum", [x, ([], "int32")], [x], consts=[1]))
    assert w.flops == {ALU64: 4000}  # one add per element
    assert (w.bytes_read, w.bytes_written) == (8 * 4000, 8 * 4000)
    assert cost(op("CumProd", [x, ([], "int32")], [x], consts=[1])).flops == {ALU64: 4000}


# ---- misc.py: activations and normalizations ------------------------------------------------------

def test_swish_and_swiglu():
    x = ([16, 1024], "bf16")
    n = 16 * 1024
    assert cost(op("Swish", [x], [x])).flops == {ALU32: 3 * n, SFU: 2 * n}  # x * sigmoid(alpha x)
    w = cost(op("SwiGLU", [x, x], [x], opset=28))
    assert w.flops == {ALU32: 4 * n, SFU: 2 * n}  # Swish + mul by B
    assert (w.bytes_read, w.bytes_written) == (2 * 2 * n, 2 * n)
    assert cost(op("SwiGLU", [x, x], [x], domain=MS)).flops == {ALU32: 4 * n, SFU: 2 * n}
    assert lookup("SwiGLU", MS) is not None


def test_hardmax_lrn_mvn():
    x = ([2, 8, 5, 5], "fp32")
    n = 2 * 8 * 5 * 5
    assert cost(op("Hardmax", [x], [x])).flops == {ALU32: 2 * n}  # row max + one-hot write
    w = cost(op("LRN", [x], [x], attrs={"size": 5}))
    assert w.flops == {ALU32: (5 + 3) * n, SFU: 2 * n}  # window fmas, bias fma, pow mul, * x; lg2, ex2
    w = cost(op("MeanVarianceNormalization", [x], [x]))  # default axes [0, 2, 3]: one group per channel
    assert w.flops == {ALU32: 5 * n, SFU: 8}
    w = cost(op("MeanVarianceNormalization", [x], [x], attrs={"axes": (2, 3)}))
    assert w.flops == {ALU32: 5 * n, SFU: 2 * 8}


# ---- misc.py: generators, random numbers, views and copies ----------------------------------------

def test_generators_write_only():
    like = ([32, 32], "int32")
    w = cost(op("EyeLike", [like], [([32, 32], "fp32")]))
    assert w.flops == {ALU32: 1024}
    assert (w.bytes_read, w.bytes_written) == (0, 4 * 1024)  # the input gives only a shape
    w = cost(op("RandomUniformLike", [like], [([32, 32], "fp32")]))
    assert w.flops == {ALU32: 17 * 1024}  # Philox (15) + convert and scale (2)
    w = cost(op("RandomNormal", [], [(["batch", 64], "fp16")], attrs={"shape": (4, 64)}))
    assert same(w.flops[ALU32], (17 + 4) * dim("batch") * 64)  # uniform + Box-Muller
    assert same(w.flops[SFU], 2 * dim("batch") * 64)
    w = cost(op("Bernoulli", [([100], "fp32")], [([100], "fp32")]))
    assert w.flops == {ALU32: 18 * 100}  # uniform + compare
    assert (w.bytes_read, w.bytes_written) == (400, 400)
    w = cost(op("Multinomial", [([4, 8], "fp32")], [([4, 10], "int32")]))
    # CDF: exp + running sum per input; per each of the 40 samples a uniform (17) and log2(8) compares
    assert w.flops == {ALU32: 2 * 32 + 40 * (17 + 3), SFU: 32}


def test_bitcast_free_and_copies():
    w = cost(op("BitCast", [([3, 4], "fp32")], [([3, 4], "int32")], attrs={"to": 6}))
    assert (w.flops, w.dram_bytes) == ({}, 0)
    # crop 20 -> 16 on axis 0, pad 8 -> 10 on axis 1: the overlap is [16, 8, 3]
    w = cost(op("CenterCropPad", [([20, 8, 3], "fp32"), ([3], "int64")], [([16, 10, 3], "fp32")], consts=[1]))
    assert (w.bytes_read, w.bytes_written) == (4 * 16 * 8 * 3, 4 * 16 * 10 * 3)
    w = cost(op("Col2Im", [([1, 5, 25], "fp32"), ([2], "int64"), ([2], "int64")], [([1, 5, 5, 5], "fp32")],
                consts=[1, 2]))
    assert w.flops == {ALU32: 125}  # one add per column element
    w = cost(op("MaxUnpool", [([1, 1, 2, 2], "fp32"), ([1, 1, 2, 2], "int64")], [([1, 1, 4, 4], "fp32")]))
    assert (w.flops, w.bytes_read, w.bytes_written) == ({}, 4 * 4 + 8 * 4, 4 * 16)
    # a KV-cache append of 1 token into [batch, 8, 4096, 128]: only the update moves
    w = cost(op("TensorScatter", [(["batch", 8, 4096, 128], "bf16"), (["batch", 8, 1, 128], "bf16"),
                                  (["batch"], "int64")], [(["batch", 8, 4096, 128], "bf16")]))
    b = dim("batch")
    assert same(w.bytes_read, 2 * b * 8 * 128 + 8 * b)
    assert same(w.bytes_written, 2 * b * 8 * 128)


# ---- misc.py: sampling, sorting, linear algebra, losses ------------------------------------------

def test_roi_align_and_grid_sample():
    x = ([1, 256, 64, 64], "fp32")
    y = ([100, 256, 7, 7], "fp32")
    w = cost(op("RoiAlign", [x, ([100, 4], "fp32"), ([100], "int64")], [y], attrs={"sampling_ratio": 2}))
    out = 100 * 256 * 7 * 7
    assert w.flops == {ALU32: 8 * out * 4 + out}  # 2x2 samples of 4 taps (mul + add), avg scale
    assert w.bytes_read == 4 * 256 * 64 * 64 + 4 * 400 + 8 * 100  # all of X (fewer than the taps)
    # GridSample bilinear: X [1, 3, 64, 64], grid [1, 16, 16, 2], Y [1, 3, 16, 16]
    ins, out = [([1, 3, 64, 64], "fp32"), ([1, 16, 16, 2], "fp32")], [([1, 3, 16, 16], "fp32")]
    w = cost(op("GridSample", ins, out, attrs={"mode": "linear"}))
    assert w.flops == {ALU32: 256 * 2 * 4 + 2 * 4 * 768}  # per grid point 4 ops per axis; 4 taps x 2
    assert w.bytes_read == 4 * 4 * 768 + 4 * 512  # 4 taps per output (< all 49152 B of X), grid
    # nearest: a gather, only the per-grid-point coordinate math (2 ops per axis)
    w = cost(op("GridSample", ins, out, attrs={"mode": "nearest"}))
    assert w.flops == {ALU32: 256 * 2 * 2}


def test_unique_det_losses():
    w = cost(op("Unique", [([1024], "int64")], [([100], "int64"), None, None, None]))
    assert w.flops == {ALU32: 1024 * 10}  # n log2 n compares, n = 1024
    w = cost(op("Det", [([8, 4, 4], "fp32")], [([8], "fp32")]))
    assert w.flops == {("cuda", "fp32"): 8 * sympy.Rational(2, 3) * 64, ALU32: 8 * 3}  # LU + diagonal
    # NLL, mean with weights: per target negate, weight mul, sum, weight sum; one rcp + mul
    w = cost(op("NegativeLogLikelihoodLoss", [([32, 1000], "fp32"), ([32], "int64"), ([1000], "fp32")],
                [([], "fp32")], weights=[2]))
    assert w.flops == {ALU32: 32 * 4 + 1, SFU: 1}
    assert w.bytes_read == 8 * 32 + 4 * 32 + 4 * 1000  # targets, the gathered inputs, the weights
    # SoftmaxCrossEntropyLoss, sum: log-softmax over 1000 classes for 32 rows, then the NLL gather
    w = cost(op("SoftmaxCrossEntropyLoss", [([32, 1000], "fp32"), ([32], "int64")], [([], "fp32")],
                attrs={"reduction": "sum"}))
    n = 32 * 1000
    assert w.flops == {ALU32: 5 * n + 32 + 32 * 2, SFU: n + 32}


def test_misc_unpriceable_raise_cost_error():
    x = ([1, 256, 64, 64], "fp32")
    with pytest.raises(CostError):  # adaptive sampling depends on run-time ROI sizes
        cost(op("RoiAlign", [x, ([100, 4], "fp32"), ([100], "int64")], [([100, 256, 7, 7], "fp32")]))
    with pytest.raises(CostError):
        cost(op("LRN", [x], [x]))  # size is required
    with pytest.raises(CostError):
        cost(op("NegativeLogLikelihoodLoss", [([4, 3], "fp32"), ([4], "int64")], [([], "fp32")],
                attrs={"reduction": "max"}))
    with pytest.raises(CostError):
        cost(op("Hardmax", [x], [None]))  # output missing
