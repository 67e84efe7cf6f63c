"""Reader of torch-mlir FX-importer output: one function's torch-dialect ops -> Nodes and Tensors.

Rules (mirroring the ONNX frontend, so the same model prices the same by either route):

- Tensors are named by their SSA value (``%12``, ``%arg0``). A shape comes from the value's
  ``!torch.vtensor<[...],dtype>`` type; a ``?`` dim takes its expression from the value's
  ``torch.bind_symbolic_shape`` (affine map over ``torch.symbolic_int`` symbols, kept by name), and
  is an ``unk__<tensor>_<i>`` symbol only when no binding exists (import without
  ``import_symbolic_shape_expressions=True``).
- ``torch.constant.*``, ``torch.prim.ListConstruct`` and int arithmetic on sizes (``aten.size.int``,
  ``aten.mul.int``...) are host values (Python ints, floats, sympy exprs): they become attributes of
  the Nodes that read them, never Nodes. A Python scalar fed to a tensor op becomes a host-constant
  0-d tensor, like the exporter's scalar Constants.
- ``torch.vtensor.literal``: at most HOST_CONST_MAX_NUMEL elements is a host constant, anything bigger a
  weight. A pure layout op (Transpose, Reshape, Squeeze, Unsqueeze, Identity) of a weight is folded
  into a new weight (the ONNX exporter stores ``linear``'s W^T, not W); nothing reads the folded one.
- Constness then propagates in op order as in the ONNX frontend: outputs of a node whose inputs are all
  host constants are host constants (ConstantOfShape and Range with no tensor input included); with a
  weight among them they are weight-derived.
- Every op with a tensor result becomes Node(s) through its `aten_registry.lookup` handler; an op without one
  (or one a handler cannot map) becomes a Node with op_type ``aten.foo.overload``, domain ``torch``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import sympy

from estimator.frontends import (  # noqa: F401  (aten_ops*: the handler families register on import)
    aten_ops,
    aten_ops_movement,
    aten_ops_spatial,
    aten_registry,
    unify_dims,
)
from estimator.frontends.aten_call import Call, PendingList, TRef, UnmappableError, generic, scalar_value
from estimator.frontends.onnx_import import HOST_CONST_MAX_NUMEL, FrontendError
from estimator.ir import Graph, Node, Shape, Tensor, dim

OPSET = 23  # the ONNX semantics the emitted Nodes follow (Attention, RMSNormalization are opset 23)
FOLDABLE = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Identity"})
HOST_GENERATORS = frozenset({"ConstantOfShape", "Range"})
INT_MAX = 2**63 - 1  # torch.export's "no upper bound"

_VTENSOR = re.compile(r"^!torch\.v?tensor(?:<(.*)>)?$")
_DTYPES = {
    "f64": "fp64", "f32": "fp32", "f16": "fp16", "bf16": "bf16", "f8E4M3FN": "fp8e4m3",
    "f8E4M3FNUZ": "fp8e4m3", "f8E5M2": "fp8e5m2", "f8E5M2FNUZ": "fp8e5m2", "f4E2M1FN": "fp4e2m1",
    "si64": "int64", "si32": "int32", "si16": "int16", "si8": "int8", "ui8": "uint8", "i1": "bool",
    "ui16": "uint16", "ui32": "uint32", "ui64": "uint64", "complex<f32>": "complex64",
    "complex<f64>": "complex128", "!torch.qint8": "int8", "!torch.quint8": "uint8", "!torch.qint32": "int32",
}


def parse_tensor_type(text: str) -> tuple[list[int | None] | None, str] | None:
    """(dims with None for '?', dtype) of a !torch.vtensor / !torch.tensor type; None otherwise."""
    m = _VTENSOR.match(text)
    if m is None:
        return None
    body = m.group(1)
    if body is None:
        return None, "undefined"
    if body.startswith("*"):
        return None, _DTYPES.get(body[2:], "undefined")
    dims_text, _, dtype = body.partition("],")
    dims = [None if d.strip() == "?" else int(d) for d in dims_text.lstrip("[").split(",") if d.strip()]
    return dims, _DTYPES.get(dtype.strip(), "undefined")


def affine_to_sympy(ir, expr, syms: list[sympy.Expr]) -> sympy.Expr:
    """A (semi-)affine expression over symbols s0, s1... as sympy."""
    if isinstance(expr, ir.AffineConstantExpr):
        return sympy.Integer(expr.value)
    if isinstance(expr, ir.AffineSymbolExpr):
        return syms[expr.position]
    if isinstance(expr, ir.AffineBinaryExpr):
        lhs, rhs = affine_to_sympy(ir, expr.lhs, syms), affine_to_sympy(ir, expr.rhs, syms)
        if isinstance(expr, ir.AffineAddExpr):
            return lhs + rhs
        if isinstance(expr, ir.AffineMulExpr):
            return lhs * rhs
        if isinstance(expr, ir.AffineFloorDivExpr):
            return sympy.floor(lhs / rhs)
        if isinstance(expr, ir.AffineCeilDivExpr):
            return sympy.ceiling(lhs / rhs)
        if isinstance(expr, ir.AffineModExpr):
            return sympy.Mod(lhs, rhs)
    raise FrontendError(f"unsupported shape expression {expr}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


class Reader:
    """State of one function's translation: host values, tensors, nodes, symbols."""

    def __init__(self, func, label: str) -> None:
        from torch_mlir import ir

        self.ir = ir
        self.label = label
        self.asm = ir.AsmState(func)
        self.values: dict[str, Any] = {}
        self.tensors: dict[str, Tensor] = {}
        self.nodes: list[Node] = []
        self.node_names: set[str] = set()
        self.produced: set[str] = set()
        self.symbols: dict[str, sympy.Symbol] = {}
        self.ranges: dict[str, tuple[int, int | None]] = {}
        self.bound: dict[str, Shape] = {}

    def name(self, value) -> str:
        return value.get_name(self.asm)

    # ---- symbols and shapes -------------------------------------------------------------------

    def collect_symbols(self, ops: list) -> None:
        """torch.symbolic_int symbols and every torch.bind_symbolic_shape binding, before the ops
        that use them are translated (a binding follows the op defining its value)."""
        for op in ops:
            if op.name == "torch.symbolic_int":
                sym_name = op.attributes["symbol_name"].value
                self.symbols[self.name(op.result)] = dim(sym_name)
                hi = op.attributes["max_val"].value
                self.ranges[sym_name] = (op.attributes["min_val"].value, None if hi >= INT_MAX else hi)
        for op in ops:
            if op.name == "torch.bind_symbolic_shape":
                syms = [self.symbols.get(self.name(v)) for v in list(op.operands)[1:]]
                if any(s is None for s in syms):
                    continue
                amap = op.attributes["shape_expressions"].value
                shape = tuple(affine_to_sympy(self.ir, e, syms) for e in amap.results)
                self.bound[self.name(op.operands[0])] = shape

    def make_tensor(self, name: str, type_text: str) -> Tensor | None:
        parsed = parse_tensor_type(type_text)
        if parsed is None:
            return None
        dims, dtype = parsed
        shape = None
        if dims is not None:
            bound = self.bound.get(name)
            if bound is not None and len(bound) == len(dims):
                shape = bound
            else:
                shape = tuple(sympy.Integer(d) if d is not None else dim(f"unk__{_safe(name)}_{i}")
                              for i, d in enumerate(dims))
        t = Tensor(name, shape, dtype)
        self.tensors[name] = t
        return t

    # ---- values ------------------------------------------------------------------------------

    def value(self, v) -> Any:
        name = self.name(v)
        if name in self.values:
            return self.values[name]
        return TRef(name) if name in self.tensors else None

    def new_name(self, base: str) -> str:
        name, i = base, 1
        while name in self.tensors or name in self.values:
            name, i = f"{base}.{i}", i + 1
        return name

    def add_node(self, node: Node) -> None:
        """Add a node, folding a layout op of a weight into a new weight (no node)."""
        src = self.tensors.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
        if (node.op_type in FOLDABLE and node.domain == "" and src is not None and src.is_weight
                and node.inputs[0] not in self.produced and len(node.outputs) == 1):
            out = self.tensors[node.outputs[0]]
            self.tensors[out.name] = replace(out, is_weight=True, is_const=True)
            return
        name, i = node.name, 1
        while name in self.node_names:
            name, i = f"{node.name}_{i}", i + 1
        self.node_names.add(name)
        self.nodes.append(replace(node, name=name) if name != node.name else node)
        self.produced.update(o for o in node.outputs if o)

    # ---- ops ---------------------------------------------------------------------------------

    def translate(self, op) -> None:
        kind = op.name
        if kind in ("torch.symbolic_int", "torch.bind_symbolic_shape"):
            return
        if kind.startswith("torch.constant."):
            self.values[self.name(op.result)] = _constant(op)
            return
        if kind == "torch.vtensor.literal":
            self._literal(op)
            return
        if kind in ("torch.prim.ListConstruct", "torch.prim.TupleConstruct"):
            self.values[self.name(op.result)] = [self.value(v) for v in op.operands]
            return
        if kind in ("torch.prim.ListUnpack", "torch.prim.TupleUnpack"):
            self._unpack(op)
            return
        results = [(self.name(r), str(r.type)) for r in op.results]
        for rname, rtype in results:
            self.make_tensor(rname, rtype)
        if not any(r in self.tensors for r, _ in results) and not any("vtensor" in t for _, t in results):
            self._scalar(op, [r for r, _ in results])
            return
        self._tensor_op(op)

    def _literal(self, op) -> None:
        name = self.name(op.result)
        t = self.make_tensor(name, str(op.result.type))
        if t is None or t.shape is None:
            raise FrontendError(f"{self.label}: literal {name} has type {op.result.type}")
        small = t.numel <= HOST_CONST_MAX_NUMEL
        self.tensors[name] = replace(t, is_weight=not small, is_const=True)

    def _unpack(self, op) -> None:
        src = self.value(op.operands[0])
        names = [self.name(r) for r in op.results]
        if isinstance(src, list):
            for n, item in zip(names, src, strict=False):
                self.values[n] = item
            return
        for r in op.results:
            self.make_tensor(self.name(r), str(r.type))
        if isinstance(src, PendingList):
            src.finish(names)

    def _scalar(self, op, results: list[str]) -> None:
        key = op.name.split(".", 1)[1] if op.name.startswith("torch.") else op.name
        args = [self.value(v) for v in op.operands]
        value = scalar_value(key, args, self)
        for r in results:
            self.values[r] = value if len(results) == 1 else None

    def _tensor_op(self, op) -> None:
        key = op.name.split(".", 1)[1] if op.name.startswith("torch.") else op.name
        if key == "operator" and "name" in op.attributes:  # an op torch-mlir has no definition for
            key = str(op.attributes["name"].value).removeprefix("torch.")
        call = Call(self, op, key)
        handler = aten_registry.lookup(key)
        if handler is not None:
            try:
                handler(call)
                return
            # An operand form the handler does not know (a dynamic dim where it needs an int, an
            # unexpected overload) leaves the op generic and uncosted rather than failing the import.
            except (UnmappableError, IndexError, KeyError, TypeError, ValueError):
                pass
        generic(call)

    # ---- the graph ---------------------------------------------------------------------------

    def mark_constness(self) -> None:
        """Propagate host-const / weight-derived flags in op order (as the ONNX frontend does)."""
        for node in self.nodes:
            ins = [self.tensors.get(t) for t in node.inputs if t]
            known = [t for t in ins if t is not None]
            all_const = len(known) == len(ins) and all(t.is_const for t in known)
            if node.op_type in HOST_GENERATORS and node.domain == "":
                host, weight = all_const and not any(t.is_weight for t in known), False
            else:
                all_const = all_const and bool(ins)
                host = all_const and not any(t.is_weight for t in known)
                weight = all_const and not host
            if host or weight:
                for out in node.outputs:
                    if out and out in self.tensors:
                        self.tensors[out] = replace(self.tensors[out], is_weight=weight, is_const=True)

    def graph(self, name: str, inputs: list[str], outputs: list[str]) -> Graph:
        used = {t for n in self.nodes for t in (*n.inputs, *n.outputs) if t} | set(inputs) | set(outputs)
        tensors = {k: v for k, v in self.tensors.items() if k in used}
        unified = unify_dims.unify(self.nodes, tensors, inputs)  # invented dims the ops prove equal
        tensors = unified.tensors
        declared = {}
        for i in inputs:
            for d in tensors[i].shape or ():
                declared.update({s.name: s for s in d.free_symbols if not s.name.startswith("unk__")})
        g = Graph(name, self.nodes, tensors, inputs, outputs, {"": OPSET}, declared)
        g.dim_merges, g.dim_conflicts = unified.merges, unified.conflicts
        # NB: Graph has no field for dim ranges; passes that rebuild the graph drop this attribute.
        g.dim_ranges = dict(self.ranges)
        return g


def _constant(op) -> Any:
    kind = op.name.rsplit(".", 1)[1]
    if kind == "none":
        return None
    attr = op.attributes["value"]
    if kind in ("int", "float", "bool", "str", "device"):
        return attr.value
    if kind == "number":  # an int or a float attribute
        return attr.value
    return None


def read_function(func, label: str) -> Graph:
    """Translate the function's ops in order; its arguments are the graph inputs, `func.return`'s
    operands the outputs."""
    reader = Reader(func, label)
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]  # Operation, not OpView: .name is the op name
    reader.collect_symbols(ops)
    inputs = []
    for arg in block.arguments:
        name = reader.name(arg)
        if reader.make_tensor(name, str(arg.type)) is not None:
            inputs.append(name)
        else:
            reader.values[name] = None
    outputs: list[str] = []
    for op in ops:
        if op.name == "func.return":
            outputs = [v.name for v in (reader.value(o) for o in op.operands) if isinstance(v, TRef)]
        else:
            reader.translate(op)
    reader.mark_constness()
    return reader.graph(func.attributes["sym_name"].value, inputs, outputs)
