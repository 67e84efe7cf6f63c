"""Element types of QuantizeLinear / DequantizeLinear outputs exactly as the ONNX spec says.

QuantizeLinear (opset 21+): y's type is the `output_dtype` attribute when set (non-zero), else the
zero point's type, else uint8. DequantizeLinear (opset 23+ `output_dtype`): the attribute when set,
else the scale's type. onnxruntime's symbolic shape inference (which the frontend runs first) reads
only the zero point / scale, so a `QuantizeLinear(output_dtype=FLOAT4E2M1)` came out uint8 and its
consumers were priced at the int8 rate; `patch` corrects its two handlers in place.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

UINT8 = onnx.TensorProto.UINT8


def _attr(node: onnx.NodeProto, name: str) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return 0


def quantize_output_type(node: onnx.NodeProto, input_type: Callable[[int], int | None]) -> int:
    """QuantizeLinear's y type; `input_type(i)` is input i's element type (None when absent)."""
    explicit = _attr(node, "output_dtype")
    if explicit:
        return explicit
    zero_point = input_type(2) if len(node.input) > 2 and node.input[2] else None
    return zero_point or UINT8


def dequantize_output_type(node: onnx.NodeProto, input_type: Callable[[int], int | None]) -> int | None:
    """DequantizeLinear's y type: `output_dtype` when set, else the scale's (None when unknown)."""
    return _attr(node, "output_dtype") or input_type(1)


def patch(ssi) -> None:
    """Wrap a SymbolicShapeInference's QuantizeLinear/DequantizeLinear handlers so the output's element
    type follows the rules above (the handlers' shapes are kept)."""
    rules = {"QuantizeLinear": quantize_output_type, "DequantizeLinear": dequantize_output_type}
    for op, rule in rules.items():
        original = ssi.dispatcher_.get(op)
        if original is None:
            continue
        ssi.dispatcher_[op] = _wrapped(ssi, original, rule)


def _wrapped(ssi, original, rule):
    def infer(node: onnx.NodeProto) -> None:
        original(node)

        def input_type(i: int) -> int | None:
            vi = ssi.known_vi_.get(node.input[i]) if i < len(node.input) else None
            return vi.type.tensor_type.elem_type if vi is not None else None

        elem = rule(node, input_type)
        vi = ssi.known_vi_.get(node.output[0])
        if elem and vi is not None:
            vi.type.tensor_type.elem_type = elem

    return infer
