import dataclasses

import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError, OpView
from estimator.ir import Tensor, dim


def unshaped(view: OpView) -> OpView:
    """The same op with its outputs' shapes dropped, as when shape inference gave up."""
    outs = tuple(None if t is None else Tensor(t.name, None, t.dtype) for t in view.outputs)
    return dataclasses.replace(view, outputs=outs)


def resnet_stem(with_output_shape: bool = True) -> OpView:
    # ResNet-50's first conv: 7x7 stride 2 pad 3, 3 -> 64 channels on [1, 3, 224, 224]
    view = op("Conv", [([1, 3, 224, 224], "fp16"), ([64, 3, 7, 7], "fp16")], [([1, 64, 112, 112], "fp16")],
              attrs={"strides": (2, 2), "pads": (3, 3, 3, 3), "kernel_shape": (7, 7)}, weights=[1])
    return view if with_output_shape else unshaped(view)


def test_conv_resnet50_stem():
    w = cost(resnet_stem())
    assert w.flops == {("tensor", "fp16"): 236_027_904}  # 2 * 64 * 112 * 112 * 3 * 49
    assert w.flops[("tensor", "fp16")] == 2 * 64 * 112 * 112 * 3 * 49
    assert w.bytes_read == 2 * (3 * 224 * 224 + 64 * 3 * 7 * 7)  # X and W once, 2 bytes each
    assert w.bytes_written == 2 * 64 * 112 * 112


def test_conv_output_shape_computed_when_inference_gave_up():
    # floor((224 + 3 + 3 - 1 * (7 - 1) - 1) / 2) + 1 = floor(223 / 2) + 1 = 112
    assert cost(resnet_stem(with_output_shape=False)) == cost(resnet_stem())


def test_conv_fp32_bias_runs_on_cuda_cores():
    w = cost(op("Conv", [([1, 3, 224, 224], "fp32"), ([64, 3, 7, 7], "fp32"), ([64], "fp32")],
                [([1, 64, 112, 112], "fp32")], attrs={"strides": (2, 2), "pads": (3, 3, 3, 3)},
                weights=[1, 2]))
    assert w.flops == {("cuda", "fp32"): 2 * 64 * 112 * 112 * 3 * 49}  # bias adds ignored
    assert w.bytes_read == 4 * (3 * 224 * 224 + 64 * 3 * 7 * 7 + 64)


def test_grouped_and_depthwise_conv():
    # ResNeXt 32x4d block: 128 channels in 32 groups of 4, 3x3 pad 1 on 56x56
    w = cost(op("Conv", [([1, 128, 56, 56], "fp16"), ([128, 4, 3, 3], "fp16")], [([1, 128, 56, 56], "fp16")],
                attrs={"group": 32, "pads": (1, 1, 1, 1)}, weights=[1]))
    assert w.flops == {("tensor", "fp16"): 2 * 128 * 56 * 56 * 4 * 9}  # C_in/group = 4 per output
    # MobileNet depthwise 3x3 stride 2: group = C = 32, W = [32, 1, 3, 3]; output computed from attrs:
    # floor((112 + 2 - 2 - 1) / 2) + 1 = 56
    w = cost(unshaped(op("Conv", [([1, 32, 112, 112], "fp16"), ([32, 1, 3, 3], "fp16")],
                         [([1, 32, 56, 56], "fp16")],
                         attrs={"group": 32, "pads": (1, 1, 1, 1), "strides": (2, 2)}, weights=[1])))
    assert w.flops == {("tensor", "fp16"): 2 * 32 * 56 * 56 * 1 * 9}
    assert w.bytes_written == 2 * 32 * 56 * 56


def test_dilated_conv():
    # DeepLab-style 3x3 dilation 2 without padding: out = 64 - 2 * (3 - 1) = 60
    w = cost(unshaped(op("Conv", [([1, 64, 64, 64], "fp16"), ([64, 64, 3, 3], "fp16")],
                         [([1, 64, 60, 60], "fp16")], attrs={"dilations": (2, 2)}, weights=[1])))
    assert w.flops == {("tensor", "fp16"): 2 * 64 * 60 * 60 * 64 * 9}
    assert w.bytes_written == 2 * 64 * 60 * 60


def test_conv_1d_whisper_stem():
    # Whisper's second conv: [1, 384, 3000] -> [1, 384, 1500], kernel 3 stride 2 pad 1
    w = cost(op("Conv", [([1, 384, 3000], "fp16"), ([384, 384, 3], "fp16"), ([384], "fp16")],
                [([1, 384, 1500], "fp16")], attrs={"strides": (2,), "pads": (1, 1)}, weights=[1, 2]))
    assert w.flops == {("tensor", "fp16"): 2 * 384 * 1500 * 384 * 3}
    assert w.bytes_read == 2 * (384 * 3000 + 384 * 384 * 3 + 384)


def test_conv_3d_symbolic_batch():
    # R(2+1)D-style stem: kernel 3x7x7, strides 1x2x2, pads 1,3,3 on [batch, 3, 16, 112, 112]
    w = cost(unshaped(op("Conv", [(["batch", 3, 16, 112, 112], "bf16"), ([64, 3, 3, 7, 7], "bf16")],
                         [(["batch", 64, 16, 56, 56], "bf16")],
                         attrs={"strides": (1, 2, 2), "pads": (1, 3, 3, 1, 3, 3)}, weights=[1])))
    b = dim("batch")
    assert sympy.expand(w.flops[("tensor", "bf16")] - 2 * b * 64 * 16 * 56 * 56 * 3 * 3 * 49) == 0
    assert sympy.expand(w.bytes_written - 2 * b * 64 * 16 * 56 * 56) == 0


def test_conv_transpose_upsample():
    # DCGAN/U-Net 4x4 stride 2 pad 1: 256 -> 128 channels, 32x32 -> 2 * (32 - 1) + 4 - 2 = 64
    view = op("ConvTranspose", [([1, 256, 32, 32], "fp16"), ([256, 128, 4, 4], "fp16")],
              [([1, 128, 64, 64], "fp16")], attrs={"strides": (2, 2), "pads": (1, 1, 1, 1)}, weights=[1])
    w = cost(view)
    assert w.flops == {("tensor", "fp16"): 2 * 256 * 32 * 32 * 128 * 16}  # per input pixel, C_out/group * k
    assert w.bytes_read == 2 * (256 * 32 * 32 + 256 * 128 * 16)
    assert w.bytes_written == 2 * 128 * 64 * 64
    assert cost(unshaped(view)) == w


def test_conv_transpose_grouped_output_shape_attr():
    # group 2: W = [C_in=64, C_out/group=16, 2, 2] -> C_out = 32; output_shape given explicitly
    w = cost(unshaped(op("ConvTranspose", [([1, 64, 10, 10], "fp16"), ([64, 16, 2, 2], "fp16")],
                         [([1, 32, 20, 20], "fp16")],
                         attrs={"group": 2, "strides": (2, 2), "output_shape": (20, 20)}, weights=[1])))
    assert w.flops == {("tensor", "fp16"): 2 * 64 * 10 * 10 * 16 * 4}
    assert w.bytes_written == 2 * 32 * 20 * 20


def test_integer_convs():
    # ConvInteger: uint8 x, int8 w, scalar zero points -> int32 y
    ins = [([1, 64, 56, 56], "uint8"), ([64, 64, 3, 3], "int8"), ([], "uint8"), ([], "int8")]
    w = cost(op("ConvInteger", ins, [([1, 64, 56, 56], "int32")], attrs={"pads": (1, 1, 1, 1)},
                weights=[1, 2, 3]))
    assert w.flops == {("tensor", "int8"): 2 * 64 * 56 * 56 * 64 * 9}
    assert w.bytes_read == 64 * 56 * 56 + 64 * 64 * 9 + 1 + 1
    assert w.bytes_written == 4 * 64 * 56 * 56
    # QLinearConv: x, x_scale, x_zp, w, w_scale (per channel), w_zp, y_scale, y_zp, int32 bias
    ins = [([1, 64, 56, 56], "uint8"), ([], "fp32"), ([], "uint8"), ([64, 64, 3, 3], "int8"), ([64], "fp32"),
           ([64], "int8"), ([], "fp32"), ([], "uint8"), ([64], "int32")]
    w = cost(op("QLinearConv", ins, [([1, 64, 56, 56], "uint8")], attrs={"pads": (1, 1, 1, 1)},
                weights=[1, 2, 3, 4, 5, 6, 7, 8]))
    assert w.flops == {("tensor", "int8"): 2 * 64 * 56 * 56 * 64 * 9,
                       ("alu", "fp32"): 3 * 64 * 56 * 56}  # requantize epilogue per output
    assert w.bytes_read == (64 * 56 * 56 + 4 + 1 + 64 * 64 * 9 + 4 * 64 + 64 + 4 + 1 + 4 * 64)
    assert w.bytes_written == 64 * 56 * 56


def test_maxpool_with_indices_and_computed_shape():
    # ResNet's 3x3 stride 2 pad 1 max pool: 112 -> floor((112 + 2 - 2 - 1) / 2) + 1 = 56
    outs = [([1, 64, 56, 56], "fp16"), ([1, 64, 56, 56], "int64")]  # Y and Indices
    view = op("MaxPool", [([1, 64, 112, 112], "fp16")], outs,
              attrs={"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)})
    w = cost(view)
    assert w.flops == {("alu", "fp32"): 64 * 56 * 56 * 9}  # one max per window tap
    assert w.bytes_read == 2 * 64 * 112 * 112
    assert w.bytes_written == 2 * 64 * 56 * 56 + 8 * 64 * 56 * 56  # Y and int64 Indices
    assert cost(unshaped(view)) == w


def test_average_pool_ceil_mode_and_lp_pool():
    # 5x5 -> kernel 2 stride 2, ceil_mode: ceil((5 - 1 - 1) / 2) + 1 = 3
    w = cost(unshaped(op("AveragePool", [([1, 8, 5, 5], "fp32")], [([1, 8, 3, 3], "fp32")],
                         attrs={"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": 1})))
    assert w.flops == {("alu", "fp32"): 8 * 3 * 3 * 4}
    assert w.bytes_written == 4 * 8 * 3 * 3
    w = cost(op("LpPool", [([1, 8, 4, 4], "fp32")], [([1, 8, 2, 2], "fp32")],
                attrs={"kernel_shape": (2, 2), "strides": (2, 2), "p": 2}))
    assert w.flops == {("alu", "fp32"): 2 * 8 * 2 * 2 * 4, ("sfu", "fp32"): 8 * 2 * 2}  # x*x + add; sqrt


def test_global_pools():
    # ResNet-50 head: [batch, 2048, 7, 7] -> [batch, 2048, 1, 1]
    w = cost(unshaped(op("GlobalAveragePool", [(["batch", 2048, 7, 7], "fp16")],
                         [(["batch", 2048, 1, 1], "fp16")])))
    b = dim("batch")
    assert sympy.expand(w.flops[("alu", "fp32")] - b * 2048 * 49) == 0  # one add per input element
    assert sympy.expand(w.bytes_read - 2 * b * 2048 * 49) == 0
    assert sympy.expand(w.bytes_written - 2 * b * 2048) == 0
    w = cost(op("GlobalLpPool", [([1, 16, 4, 4], "fp32")], [([1, 16, 1, 1], "fp32")]))
    assert w.flops == {("alu", "fp32"): 2 * 16 * 16, ("sfu", "fp32"): 16}


def test_resize_modes():
    ins = [([1, 3, 32, 32], "fp16"), None, ([4], "fp32")]  # X, no roi, constant scales
    outs = [([1, 3, 64, 64], "fp16")]
    nearest = cost(op("Resize", ins, outs, attrs={"mode": "nearest"}, consts=[2]))
    assert nearest.flops == {}  # a pure gather
    assert nearest.bytes_read == 2 * 3 * 32 * 32  # the constant scales travel as a kernel argument
    assert nearest.bytes_written == 2 * 3 * 64 * 64
    linear = cost(op("Resize", ins, outs, attrs={"mode": "linear"}, consts=[2]))
    assert linear.flops == {("alu", "fp32"): 2 * 2**2 * 3 * 64 * 64}  # bilinear: 4 taps, mul + add each
    cubic = cost(op("Resize", ins, outs, attrs={"mode": "cubic"}, consts=[2]))
    assert cubic.flops == {("alu", "fp32"): 2 * 4**2 * 3 * 64 * 64}  # bicubic: 16 taps
    assert cubic.bytes_read == nearest.bytes_read


def test_cost_errors():
    with pytest.raises(CostError, match="kernel_shape"):
        cost(op("MaxPool", [([1, 64, 112, 112], "fp16")], [([1, 64, 56, 56], "fp16")]))
    with pytest.raises(CostError, match="no shape"):  # Resize's output size is a value, not a shape
        cost(unshaped(op("Resize", [([1, 3, 32, 32], "fp16")], [([1, 3, 64, 64], "fp16")])))
