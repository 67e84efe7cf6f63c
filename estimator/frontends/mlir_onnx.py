"""torch-mlir ONNX-importer output (``torch.operator "onnx.X"`` ops) -> ONNX model -> the ONNX frontend.

torch-mlir's ONNX importer keeps every ONNX node as ``torch.operator "onnx.<op_type>"`` with its
attributes as ``torch.onnx.<name>``, initializers and Constants as ``onnx.Constant`` ops, omitted
optional inputs as ``torch.constant.none``. Rebuilding the ONNX graph from those and running the ONNX
frontend (symbolic shape inference included) prices the model exactly as the original ONNX file.

Rules: tensors are named after their SSA values; constants of at most HOST_CONST_MAX_NUMEL elements
keep their values (shape inference needs Reshape's shape, Slice's starts...), read from the module's
``dialect_resources`` blobs or inline ``dense<...>`` attributes; bigger ones keep only dims and dtype
(weights are never read). The importer writes dynamic dims as ``?`` and drops their ONNX names, so
input dims are renamed by position: ``arg<i>_dim<j>`` for dim j of the i-th function argument (e.g.
llama-tiny's ``input_ids`` [batch, seq] becomes [arg0_dim0, arg0_dim1]). NB: a non-default ONNX domain
is not kept by the importer either; every op is read in the default domain.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

from estimator.frontends.onnx_import import HOST_CONST_MAX_NUMEL, FrontendError, import_model
from estimator.ir import Graph

_ELEM = {
    "f64": onnx.TensorProto.DOUBLE, "f32": onnx.TensorProto.FLOAT, "f16": onnx.TensorProto.FLOAT16,
    "bf16": onnx.TensorProto.BFLOAT16, "si64": onnx.TensorProto.INT64, "si32": onnx.TensorProto.INT32,
    "si16": onnx.TensorProto.INT16, "si8": onnx.TensorProto.INT8, "ui8": onnx.TensorProto.UINT8,
    "i1": onnx.TensorProto.BOOL, "ui16": onnx.TensorProto.UINT16, "ui32": onnx.TensorProto.UINT32,
    "ui64": onnx.TensorProto.UINT64, "f8E4M3FN": onnx.TensorProto.FLOAT8E4M3FN,
    "f8E5M2": onnx.TensorProto.FLOAT8E5M2,
}
_RESOURCE = re.compile(r"^\s*([\w.\-]+|\"[^\"]*\"): \"0x([0-9A-Fa-f]*)\",?\s*$", re.MULTILINE)
_BLOB_LIMIT = HOST_CONST_MAX_NUMEL * 8 + 16  # bytes: the largest host constant is 16 int64/fp64 values


def is_onnx_op(op) -> bool:
    return "name" in op.attributes and str(op.attributes["name"].value).startswith("onnx.")


def _vtensor(text: str) -> tuple[list[int | None] | None, int] | None:
    from estimator.frontends.mlir_reader import parse_tensor_type

    parsed = parse_tensor_type(text)
    if parsed is None:
        return None
    m = re.match(r"^!torch\.v?tensor<.*\],(.+)>$", text)
    elem = _ELEM.get(m.group(1).strip(), onnx.TensorProto.UNDEFINED) if m else onnx.TensorProto.UNDEFINED
    return parsed[0], elem


def _blobs(module) -> dict[str, bytes]:
    """Small dialect_resources blobs by name (the 4-byte alignment header stripped)."""
    text = module.operation.get_asm(large_resource_limit=_BLOB_LIMIT)
    start = text.rfind("{-#")
    blobs = {}
    for m in _RESOURCE.finditer(text[start:] if start >= 0 else ""):
        blobs[m.group(1).strip('"')] = bytes.fromhex(m.group(2))[4:]
    return blobs


def _const_array(attr, dims: list[int], elem: int, blobs: dict[str, bytes]) -> np.ndarray | None:
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    m = re.match(r"^dense_resource<([^>]+)>", str(attr))
    if m:
        data = blobs.get(m.group(1).strip('"'))
        return None if data is None else np.frombuffer(data, dtype=dtype).reshape(dims)
    try:
        arr = np.array(attr)
    except Exception:  # noqa: BLE001 - an attribute kind numpy cannot read: value unknown
        return None
    return np.broadcast_to(arr.astype(dtype), dims).copy() if arr.size in (1, int(np.prod(dims))) else None


def _attr_value(attr, blobs: dict[str, bytes]):
    """A torch.onnx.* attribute as the Python value onnx.helper.make_attribute takes."""
    from torch_mlir import ir

    if isinstance(attr, ir.BoolAttr):
        return int(attr.value)
    if isinstance(attr, (ir.IntegerAttr, ir.FloatAttr)):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [_attr_value(a, blobs) for a in attr]
    text = str(attr)
    m = re.search(r":\s*tensor<((?:\d+x)*)(\w+)>\s*$", text)
    if m:
        dims = [int(d) for d in m.group(1).split("x") if d]
        elem = _ELEM.get(m.group(2), onnx.TensorProto.FLOAT)
        arr = _const_array(attr, dims, elem, blobs)
        if arr is not None:
            return numpy_helper.from_array(arr)
    return None


class _Builder:
    def __init__(self, module, func, label: str) -> None:
        from torch_mlir import ir

        self.asm = ir.AsmState(func)
        self.label = label
        self.blobs = _blobs(module)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.none: set[str] = set()

    def name(self, value) -> str:
        return "t" + value.get_name(self.asm).lstrip("%").replace("#", "_")

    def constant(self, op) -> None:
        out = op.result
        vt = _vtensor(str(out.type))
        if vt is None or vt[0] is None or any(d is None for d in vt[0]):
            raise FrontendError(f"{self.label}: constant with type {out.type}")
        dims, elem = vt
        arr = None
        if int(np.prod(dims)) <= HOST_CONST_MAX_NUMEL and "torch.onnx.value" in op.attributes:
            arr = _const_array(op.attributes["torch.onnx.value"], dims, elem, self.blobs)
        if arr is not None:
            self.inits.append(numpy_helper.from_array(arr, self.name(out)))
        else:  # dims and dtype only: the ONNX frontend never reads weight bytes
            self.inits.append(onnx.TensorProto(name=self.name(out), data_type=elem, dims=dims))

    def node(self, op, i: int) -> None:
        op_type = str(op.attributes["name"].value).split(".", 1)[1]
        inputs = ["" if self.name(v) in self.none else self.name(v) for v in op.operands]
        attrs = {}
        for a in op.attributes:
            if a.startswith("torch.onnx."):
                value = _attr_value(op.attributes[a], self.blobs)
                if value is not None and value != []:
                    attrs[a[len("torch.onnx."):]] = value
        outputs = [self.name(r) for r in op.results]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=f"{op_type}_{i}", **attrs))


def _value_info(name: str, type_text: str, arg: int | None) -> onnx.ValueInfoProto:
    vt = _vtensor(type_text)
    if vt is None:
        raise FrontendError(f"value {name} has type {type_text}, not a tensor")
    dims, elem = vt
    shape = None if dims is None else [d if d is not None else f"arg{arg}_dim{j}" if arg is not None else None
                                       for j, d in enumerate(dims)]
    return helper.make_tensor_value_info(name, elem, shape)


def to_onnx(module, func, label: str) -> onnx.ModelProto:
    """The ONNX model the importer read (up to tensor names and the dims' names)."""
    b = _Builder(module, func, label)
    block = func.regions[0].blocks[0]
    inputs = [_value_info(b.name(a), str(a.type), i) for i, a in enumerate(block.arguments)]
    outputs: list[onnx.ValueInfoProto] = []
    for i, op in enumerate(o.operation for o in block.operations):
        if op.name == "torch.constant.none":
            b.none.add(b.name(op.result))
        elif op.name == "torch.operator" and str(op.attributes["name"].value) == "onnx.Constant":
            b.constant(op)
        elif op.name == "torch.operator":
            b.node(op, i)
        elif op.name == "func.return":
            outputs = [_value_info(b.name(v), str(v.type), None) for v in op.operands]
        else:
            raise FrontendError(f"{label}: unexpected op {op.name} in ONNX-importer output")
    graph = helper.make_graph(b.nodes, str(func.attributes["sym_name"].value), inputs, outputs, b.inits)
    return helper.make_model(graph, opset_imports=_opsets(func), ir_version=9)


def _opsets(func) -> list[onnx.OperatorSetIdProto]:
    attrs = func.attributes
    version = attrs["torch.onnx_meta.opset_version"].value if "torch.onnx_meta.opset_version" in attrs else 18
    return [helper.make_opsetid("", int(version))]


def import_function(module, func, label: str) -> Graph:
    return import_model(to_onnx(module, func, label))
