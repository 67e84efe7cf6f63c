"""ONNX frontend: file -> shape-inferred ModelProto -> estimator IR Graph.

Weights are never read (``load_external_data=False``): a 70B model with external weights loads in the
memory of its graph. Every source op becomes a Node, unknown ops included; the frontend computes no costs.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Iterable

import numpy as np
import onnx
import sympy
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from estimator.dtypes import from_onnx
from estimator.frontends import quant_types, unify_dims
from estimator.frontends.errors import FrontendError
from estimator.frontends.validate_graph import validate_graph
from estimator.ir import DimParseError, Graph, Node, Tensor, dim, parse_dim

MIN_OPSET = 13
# An initializer or Constant this small (elements) is a host-side value (axes, shape vectors, scalars
# such as eps); anything bigger is a weight that lives in DRAM.
HOST_CONST_MAX_NUMEL = 16


def load_model(path: str) -> onnx.ModelProto:
    """Read an ONNX file without its external weight data; FrontendError on anything that is not one."""
    if not os.path.exists(path):
        raise FrontendError(f"no such file: {path}")
    if os.path.isdir(path):
        raise FrontendError(f"{path} is a directory, not an ONNX file")
    with open(path, "rb") as f:
        data = f.read()
    return parse_model(data, path)


def parse_model(data: bytes, label: str = "<bytes>") -> onnx.ModelProto:
    if not data:
        raise FrontendError(f"{label} is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as exc:
        raise FrontendError(f"{label} is not a valid ONNX protobuf ({exc}); truncated or not ONNX") from None
    except Exception as exc:  # protobuf's C++ backend raises RuntimeWarning/ValueError on some inputs
        raise FrontendError(f"{label} is not a valid ONNX protobuf ({type(exc).__name__})") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        raise FrontendError(f"{label} does not look like an ONNX model (no ir_version, graph or opset)")
    return model


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 0


def check_opset(model: onnx.ModelProto) -> None:
    opset = default_opset(model)
    newest = onnx.defs.onnx_opset_version()
    if opset and opset > newest:
        raise FrontendError(f"model uses opset {opset}; the installed onnx knows up to {newest} "
                            f"(upgrade onnx)")
    if opset and opset < MIN_OPSET:
        raise FrontendError(f"model uses opset {opset}; supported opsets are {MIN_OPSET}..{newest} "
                            f"(convert it with onnx.version_converter)")


def split_weights(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, onnx.TensorProto]]:
    """A light copy of `model` whose weight initializers (more than HOST_CONST_MAX_NUMEL elements) are
    graph inputs of the same shape and dtype, and those initializers' metadata (no data).

    Shape inference then never touches weight bytes: onnxruntime's symbolic inference would otherwise
    try to read an external weight file to propagate values through e.g. Mul(x, weight), and would copy
    hundreds of MB of inline weights into numpy."""
    g = model.graph
    light = onnx.ModelProto()
    for fld in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, fld, getattr(model, fld))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    lg = light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    weights: dict[str, onnx.TensorProto] = {}
    declared = {vi.name for vi in g.input}
    lg.input.extend(g.input)
    for init in g.initializer:
        if _numel(init.dims) <= HOST_CONST_MAX_NUMEL:
            lg.initializer.append(init)
            continue
        meta = onnx.TensorProto(name=init.name, data_type=init.data_type, dims=init.dims)
        weights[init.name] = meta
        if init.name not in declared:
            lg.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    return light, weights


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Symbolic shape inference through onnxruntime's SymbolicShapeInference (keeps `batch*seq`,
    `past_seq + seq`), falling back to onnx's own with data propagation when it fails (it dispatches on
    op name alone, so e.g. opset-23 Attention trips its com.microsoft handler)."""
    try:
        return _ort_symbolic(model)
    except Exception:  # noqa: BLE001 - any failure of the optional path falls back to onnx's inference
        pass
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:
        # onnx's strict failure on an inconsistent graph is bad input, not an internal error.
        raise FrontendError(f"shape inference failed: {str(exc).splitlines()[0]}") from None


@functools.lru_cache(maxsize=1)
def _ssi_class():
    """onnxruntime's SymbolicShapeInference, loaded from its file: importing it as
    `onnxruntime.tools.symbolic_shape_infer` runs the package's __init__, which imports torch whenever torch
    is installed (hundreds of MB and a second of start-up for a module that needs only onnx and numpy).
    Works the same with onnxruntime-gpu, which ships the same file."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("onnxruntime is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "tools", "symbolic_shape_infer.py")
    mod_spec = importlib.util.spec_from_file_location("_estimator_symbolic_shape_infer", path)
    if mod_spec is None or mod_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module.SymbolicShapeInference


def _ort_symbolic(model: onnx.ModelProto) -> onnx.ModelProto:
    from estimator.frontends import collective_shapes

    SymbolicShapeInference = _ssi_class()  # noqa: N806 - onnxruntime's class

    logging.getLogger("onnxruntime.tools.symbolic_shape_infer").setLevel(logging.ERROR)
    logging.getLogger("_estimator_symbolic_shape_infer").setLevel(logging.ERROR)
    # The public infer_shapes() writes a temp file into the CWD when inference is incomplete and then
    # raises; run its steps here instead and keep the partial result (onnx fills what it can after).
    ssi = SymbolicShapeInference(2**31 - 1, True, False, 0)
    collective_shapes.install(ssi)  # the com.microsoft collectives it does not know
    quant_types.patch(ssi)  # output_dtype of QuantizeLinear / DequantizeLinear
    ssi._preprocess(model)
    complete = False
    while ssi.run_:
        complete = ssi._infer_impl()
    ssi._update_output_from_vi()
    out = ssi.out_mp_
    if not complete:
        out = onnx.shape_inference.infer_shapes(out, data_prop=True)
    return out


# metadata key of a model whose value_info are the bundled builder's shapes (models/_shapes.py SHAPES_KEY)
BUILDER_SHAPES_KEY = "estimator.builder_shapes"


# ---- ModelProto -> Graph --------------------------------------------------------------------------

def _shape_of(tt: onnx.TypeProto.Tensor, tensor: str) -> tuple[sympy.Expr, ...] | None:
    if not tt.HasField("shape"):
        return None
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(sympy.Integer(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            try:
                dims.append(parse_dim(d.dim_param))
            except DimParseError as exc:
                raise FrontendError(f"tensor {tensor!r}: {exc}") from None
        else:
            # Neither a value nor a name: give it a bindable name rather than guess.
            dims.append(dim(f"unk__{_safe(tensor)}_{i}"))
    return tuple(dims)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _value_infos(graph: onnx.GraphProto) -> Iterable[onnx.ValueInfoProto]:
    yield from graph.input
    yield from graph.value_info
    yield from graph.output


def _attr_value(attr: onnx.AttributeProto):
    v = onnx.helper.get_attribute_value(attr)
    if isinstance(v, onnx.TensorProto):
        if v.data_location == onnx.TensorProto.EXTERNAL:
            return None  # NB: external tensor attributes are not read
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return tuple(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, onnx.GraphProto):
        return f"<subgraph {v.name} with {len(v.node)} nodes>"
    return v


def _numel(dims: Iterable[int]) -> int:
    return int(np.prod(list(dims), dtype=np.int64)) if dims else 1


def to_graph(model: onnx.ModelProto, weights: dict[str, onnx.TensorProto] | None = None,
             unify: bool = True) -> Graph:
    """Build the IR. Tensor constness: initializers and Constants with at most HOST_CONST_MAX_NUMEL
    elements, Shape/Size outputs, and anything computed only from those are host-side values; bigger
    initializers are weights, and values computed only from weights and host values are weight-derived
    (is_weight: persistent buffers read from DRAM). `unify`: merge the invented dims the ops prove equal
    (unify_dims.py; off only to study pricing over dims that stay apart)."""
    g = model.graph
    tensors: dict[str, Tensor] = {}
    for vi in _value_infos(g):
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            tensors[vi.name] = Tensor(vi.name, _shape_of(tt, vi.name), from_onnx(tt.elem_type))
    weights = weights or {}
    for init in (*g.initializer, *weights.values()):
        small = _numel(init.dims) <= HOST_CONST_MAX_NUMEL
        shape = tuple(sympy.Integer(d) for d in init.dims)
        tensors[init.name] = Tensor(init.name, shape, from_onnx(init.data_type), is_weight=not small,
                                    is_const=True, value=_small_value(init) if small else None)
    initializer_names = {i.name for i in g.initializer} | set(weights)
    inputs = [vi.name for vi in g.input if vi.name not in initializer_names]
    nodes = []
    used_names: set[str] = set()
    for i, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{i}"
        if name in used_names:
            name = f"{name}_{i}"
        used_names.add(name)
        attrs = {a.name: _attr_value(a) for a in n.attribute}
        nodes.append(Node(name, n.op_type, n.domain, tuple(n.input), tuple(n.output), attrs))
    _mark_constness(nodes, tensors)
    # invented dims the ops prove equal become one symbol
    unified = unify_dims.unify(nodes, tensors, inputs) if unify else unify_dims.Unified(tensors)
    tensors = unified.tensors
    declared = {}
    for name in inputs:
        t = tensors.get(name)  # sequence / optional inputs are not tensors
        for d in (t.shape if t is not None and t.shape else ()):
            for s in d.free_symbols:
                declared[s.name] = s
    opsets = {imp.domain or "": imp.version for imp in model.opset_import}
    graph = Graph(g.name or "model", nodes, tensors, inputs, [o.name for o in g.output], opsets, declared)
    graph.dim_merges, graph.dim_conflicts = unified.merges, unified.conflicts
    return graph


def _small_value(init: onnx.TensorProto) -> tuple | None:
    """The values of a small initializer (None when it lives outside the file)."""
    if init.data_location == onnx.TensorProto.EXTERNAL:
        return None
    try:
        return tuple(numpy_helper.to_array(init).reshape(-1).tolist())
    except Exception:  # noqa: BLE001 - an odd dtype: the value is only a hint for the fusion rules
        return None


def _mark_constness(nodes: list[Node], tensors: dict[str, Tensor]) -> None:
    """Propagate host-const / weight-derived flags in source order (ONNX requires topological order)."""
    for node in nodes:
        ins = [tensors.get(t) for t in node.inputs if t]
        if node.op_type == "Constant":
            value = node.attrs.get("value")
            small = value is None or getattr(value, "size", 1) <= HOST_CONST_MAX_NUMEL
            host, weight = small, not small
        elif node.op_type in ("Shape", "Size"):
            host, weight = True, False
        else:
            known = [t for t in ins if t is not None]
            all_const = bool(node.inputs) and len(known) == len(ins) and all(t.is_const for t in known)
            host = all_const and not any(t.is_weight for t in known)
            weight = all_const and not host
        if not (host or weight):
            continue
        for out in node.outputs:
            if not out:
                continue
            t = tensors.get(out) or Tensor(out, None, "undefined")
            tensors[out] = Tensor(t.name, t.shape, t.dtype, is_weight=weight, is_const=True)
            if node.op_type == "Constant" and t.shape is None and node.attrs.get("value") is not None:
                arr = node.attrs["value"]
                tensors[out] = Tensor(t.name, tuple(sympy.Integer(d) for d in arr.shape),
                                      t.dtype if t.dtype != "undefined" else from_onnx(
                                          onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)),
                                      is_weight=weight, is_const=True)


def import_model(model: onnx.ModelProto, builder_shapes: bool = True) -> Graph:
    """Opset check, structural checks (validate_graph.py: names, references, cycles, dtypes, onnx's node
    checker), symbolic shape inference (skipped when `builder_shapes` and the model carries the bundled
    builder's own, see builder_shaped) and IR construction for a loaded model; weights its metadata
    names in a stored format (MXFP4) get that dtype (stored_formats.py)."""
    from estimator.frontends import stored_formats

    check_opset(model)
    validate_graph(model)
    formats = stored_formats.read(model)
    light, weights = split_weights(model)
    shaped = light if builder_shapes and builder_shaped(model) else infer_shapes(light)
    return stored_formats.apply(to_graph(shaped, weights), formats)


def builder_shaped(model: onnx.ModelProto) -> bool:
    """Whether the model carries the bundled builder's own shapes (models/_shapes.py, marked with
    BUILDER_SHAPES_KEY) for every node output, so the external inference has nothing left to add: the
    builder derives each shape as it adds the node, equal to onnxruntime's (tests/test_builder_shapes.py).
    Any other model, or a marked one missing a shape, goes through infer_shapes."""
    if not any(p.key == BUILDER_SHAPES_KEY and p.value == "complete" for p in model.metadata_props):
        return False
    g = model.graph
    shaped = {vi.name for vi in (*g.value_info, *g.output)
              if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")}
    return all(out in shaped for node in g.node for out in node.output if out)


def import_file(path: str) -> Graph:
    """A model file: always through shape inference (a saved bundled model may have been edited since the
    builder shaped it, so its marker is not trusted)."""
    return import_model(load_model(path), builder_shapes=False)
