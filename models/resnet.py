"""ResNet-50 as torchvision's resnet50 exports after optimization: BatchNorm folded into Conv biases.

NCHW input [batch, 3, 224, 224]; a 7x7 stem Conv + Relu + MaxPool; bottleneck blocks (1x1, 3x3, 1x1
with 4x expansion; stride on the 3x3, the "v1.5" layout torchvision uses) in stages of (3, 4, 6, 3);
a projection shortcut where the shape changes; GlobalAveragePool, Flatten, Gemm to the classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx

from models._builder import FLOAT, GraphBuilder


@dataclass(frozen=True)
class ResNetConfig:
    stage_blocks: tuple[int, ...]
    stage_widths: tuple[int, ...]
    expansion: int
    num_classes: int
    image_size: int
    weights: str  # default weights mode for this config


# torchvision.models.resnet50 (He et al. 2016, "Deep Residual Learning"), the same shapes as
# https://huggingface.co/microsoft/resnet-50/blob/main/config.json (depths, hidden_sizes).
RESNET50 = ResNetConfig(
    stage_blocks=(3, 4, 6, 3), stage_widths=(64, 128, 256, 512), expansion=4, num_classes=1000,
    image_size=224, weights="random",
)


def describe(cfg: ResNetConfig) -> str:
    layers = 3 * sum(cfg.stage_blocks) + 2  # three convs per bottleneck, plus the stem and the fc
    return (
        f"ResNet-{layers} CNN, stages {cfg.stage_blocks}, widths {cfg.stage_widths}, "
        f"{cfg.num_classes} classes, {cfg.image_size}x{cfg.image_size} input, {cfg.weights} weights"
    )


def build(name: str, cfg: ResNetConfig, weights: str | None = None) -> onnx.ModelProto:
    b = GraphBuilder(name, weights or cfg.weights)
    x = b.input("input", FLOAT, ["batch", 3, cfg.image_size, cfg.image_size])
    stem = cfg.stage_widths[0]
    x = b.op("Relu", _conv(b, x, "conv1", 3, stem, kernel=7, stride=2))
    x = b.op("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = stem
    for stage, (blocks, width) in enumerate(zip(cfg.stage_blocks, cfg.stage_widths, strict=True)):
        for block in range(blocks):
            # The first block of every stage but the first halves the resolution.
            stride = 2 if block == 0 and stage > 0 else 1
            with b.scope(f"layer{stage + 1}/layer{stage + 1}.{block}"):
                x = _bottleneck(b, x, f"layer{stage + 1}.{block}", channels, width, cfg.expansion, stride)
            channels = width * cfg.expansion
    x = b.op("Flatten", b.op("GlobalAveragePool", x), axis=1)
    with b.scope("fc"):
        # A Linear on a 2-D input exports as Gemm with the [out, in] weight and transB=1.
        weight = b.weight("fc.weight", [cfg.num_classes, channels], std=1.0 / math.sqrt(channels))
        bias = b.weight("fc.bias", [cfg.num_classes], init="zeros")
        logits = b.op("Gemm", x, weight, bias, transB=1)
    b.output(logits, "logits", FLOAT, ["batch", cfg.num_classes])
    return b.model(describe(cfg))


def _bottleneck(b: GraphBuilder, x: str, prefix: str, c_in: int, width: int, expansion: int, stride: int):
    c_out = width * expansion
    h = b.op("Relu", _conv(b, x, f"{prefix}.conv1", c_in, width, kernel=1))
    h = b.op("Relu", _conv(b, h, f"{prefix}.conv2", width, width, kernel=3, stride=stride))
    h = _conv(b, h, f"{prefix}.conv3", width, c_out, kernel=1)
    shortcut = x
    if stride != 1 or c_in != c_out:
        shortcut = _conv(b, x, f"{prefix}.downsample.0", c_in, c_out, kernel=1, stride=stride)
    return b.op("Relu", b.op("Add", h, shortcut))


def _conv(b: GraphBuilder, x: str, prefix: str, c_in: int, c_out: int, kernel: int, stride: int = 1) -> str:
    """Conv with the folded BatchNorm as its bias; He-normal weights keep random activations finite."""
    # torch names the node after the module's attribute path below the block: conv1, downsample/downsample.0
    scope = prefix.split(".", 2)[-1].replace("downsample.0", "downsample/downsample.0")
    with b.scope(scope):
        weight = b.weight(f"{prefix}.weight", [c_out, c_in, kernel, kernel],
                          std=math.sqrt(2.0 / (c_in * kernel * kernel)))
        bias = b.weight(f"{prefix}.bias", [c_out], init="zeros")
        pad = kernel // 2
        return b.op("Conv", x, weight, bias, kernel_shape=[kernel, kernel], strides=[stride, stride],
                    pads=[pad, pad, pad, pad])
