"""Shape inference for the collective ops onnxruntime's symbolic shape inference does not know.

`install(ssi)` adds handlers to a SymbolicShapeInference instance (estimator/frontends/onnx_import.py), so
the tensors after a com.microsoft AllReduce / AllGather / ReduceScatter / AllToAll (or an estimator Send)
keep their shapes, as the ops define them (the `group_size` ranks' buffers):
- AllReduce, AllToAll, Send: the input's shape;
- AllGather: the input's with dimension `axis` (default 0) times group_size;
- ReduceScatter: the input's with dimension `axis` (default 0) divided by group_size.
A node without a usable group_size keeps an unknown output shape here; its cost function reports it.
"""

from __future__ import annotations

import sympy
from onnx import helper

PASS_ON = ("AllReduce", "AllToAll", "Send")
SCALED = ("AllGather", "ReduceScatter")


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _scaled(ssi, node) -> None:
    group = _attr(node, "group_size")
    shape = list(ssi._get_sympy_shape(node, 0))
    if not isinstance(group, int) or group < 1 or not shape:
        return
    axis = _attr(node, "axis", 0) % len(shape)
    shape[axis] = shape[axis] * group if node.op_type == "AllGather" else sympy.floor(shape[axis] / group)
    ssi._update_computed_dims(shape)
    vi = ssi.known_vi_[node.output[0]]
    elem = ssi.known_vi_[node.input[0]].type.tensor_type.elem_type
    # onnxruntime keeps a literal dim as a Python int (no `is_number`): it must stay a dim_value, or its
    # text ("7168") becomes a symbol no other tensor's 7168 merges with (its inference then stops)
    dims = [int(d) if isinstance(d, int) or getattr(d, "is_number", False) else str(d) for d in shape]
    vi.CopyFrom(helper.make_tensor_value_info(node.output[0], elem, dims))


def install(ssi) -> None:
    """Register the collectives' handlers on `ssi` (keyed by op type, as onnxruntime dispatches)."""
    for op in PASS_ON:
        ssi.dispatcher_.setdefault(op, lambda node: node.output and ssi._pass_on_shape_and_type(node))
    for op in SCALED:
        ssi.dispatcher_.setdefault(op, lambda node: _scaled(ssi, node))
