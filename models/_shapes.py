"""Shapes the GraphBuilder knows as it adds each node, written into the model as value_info.

The builder starts from what it declares (graph inputs with named dims, initializers) and applies each
op's shape rule as the node is added, the way onnxruntime's SymbolicShapeInference does: dims are sympy
expressions of the input dims (`batch`, `seq`, `past_seq + 1`), and small int64 tensors (Shape outputs,
constants) carry their values so Reshape / Range / Slice / Expand / Unsqueeze targets resolve. When every
node output is shaped, the builder writes them all and marks the model (SHAPES_KEY); the importer then
skips the external inference (estimator/frontends/onnx_import.py). tests/test_builder_shapes.py checks
the result equals onnxruntime's inferred shapes tensor by tensor.

NB: only the ops the bundled families use are known; any other op (or a case a rule does not cover,
e.g. a Slice over a symbolic dim) leaves its outputs unshaped, and the model then goes through the
external inference as before.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import onnx
import sympy
from onnx import TensorProto, helper

# metadata key set when every node output has the builder's value_info (read by onnx_import)
SHAPES_KEY = "estimator.builder_shapes"
VALUE_MAX_NUMEL = 16  # int64 tensors up to this size carry their values (shape vectors, axes)
INT64_MAX = int(np.iinfo(np.int64).max)

# outputs of the inputs' broadcast shape and the first input's type (LayerNormalization: scale and bias
# broadcast over x)
BROADCAST = {"Pow", "Sqrt", "Reciprocal", "Neg", "Sigmoid", "Softmax", "Erf", "Tanh", "Relu", "Cos", "Sin",
             "Add", "Sub", "Mul", "Div", "LayerNormalization"}
COMPARE = {"GreaterOrEqual", "Greater", "Less", "LessOrEqual", "Equal", "And", "Or"}


@dataclass(frozen=True)
class Known:
    elem_type: int
    shape: tuple[sympy.Expr, ...]
    value: tuple[sympy.Expr, ...] | None = None  # flattened, for small int64 tensors


class UnshapedError(Exception):
    """A rule does not cover this node: its outputs stay unshaped."""


@functools.lru_cache(maxsize=1024)
def dim_expr(d: int | str) -> sympy.Expr:
    """A declared dim as the importer reads it back (positive-integer symbols, estimator/ir.py dim)."""
    if isinstance(d, int):
        return sympy.Integer(d)
    if not re.fullmatch(r"[A-Za-z_]\w*|[\w\s+*]+", d):
        raise ValueError(f"dim {d!r}: only names, sums and products are read")  # e.g. min(past_seq, 128)
    names = {n: sympy.Symbol(n, integer=True, positive=True) for n in re.findall(r"[A-Za-z_]\w*", d)}
    return names[d] if d in names else sympy.sympify(d, locals=names)


@functools.lru_cache(maxsize=1024)
def _dim_text(d: sympy.Expr) -> str:
    return str(d)


def known_array(array: np.ndarray) -> Known:
    value = None
    if array.dtype == np.int64 and array.size <= VALUE_MAX_NUMEL:
        value = tuple(sympy.Integer(int(v)) for v in array.reshape(-1))
    shape = tuple(sympy.Integer(d) for d in array.shape)
    return Known(helper.np_dtype_to_tensor_dtype(array.dtype), shape, value)


def _broadcast(*shapes: tuple[sympy.Expr, ...]) -> tuple[sympy.Expr, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {sympy.Integer(1)}
        if len(dims) > 1:
            raise UnshapedError(f"cannot broadcast {dims}")
        out.append(dims.pop() if dims else sympy.Integer(1))
    return tuple(out)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _values(k: Known) -> tuple[sympy.Expr, ...]:
    if k.value is None:
        raise UnshapedError("needs a value")
    return k.value


def _ints(k: Known) -> list[int]:
    vals = _values(k)
    if not all(v.is_Integer for v in vals):
        raise UnshapedError("needs integer values")
    return [int(v) for v in vals]


def _numel(shape) -> sympy.Expr:
    return sympy.Mul(*shape) if shape else sympy.Integer(1)


def _elementwise(op: str, ins: list[Known]) -> Known:
    shape = _broadcast(*(k.shape for k in ins))
    value = None
    if op in ("Add", "Sub", "Mul") and all(k.value is not None for k in ins) and _numel(shape) == 1:
        a, b = ins[0].value[0], ins[1].value[0]
        value = ((a + b) if op == "Add" else (a - b) if op == "Sub" else (a * b),)
    return Known(ins[0].elem_type, shape, value)


def _reshape(x: Known, target: list[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    out = [x.shape[i] if t == 0 else t for i, t in enumerate(target)]
    if sympy.Integer(-1) in out:
        i = out.index(sympy.Integer(-1))
        rest = _numel([d for j, d in enumerate(out) if j != i])
        out[i] = _numel(x.shape) / rest  # sympy cancels common factors of the two products itself
        if out[i].is_integer is not True:  # e.g. seq/2: not a dim the rules can name
            raise UnshapedError(f"Reshape -1 is {out[i]}")
    return tuple(out)


def _slice(x: Known, starts, ends, axes) -> tuple[sympy.Expr, ...]:
    shape = list(x.shape)
    for s, e, a in zip(starts, ends, axes, strict=True):
        a = _axis(a, len(shape))
        d = shape[a]
        if not d.is_Integer:
            raise UnshapedError("Slice over a symbolic dim")
        shape[a] = sympy.Integer(len(range(*slice(s, e).indices(int(d)))))
    return tuple(shape)


def _range(start: Known, limit: Known, delta: Known) -> Known:
    (s,), (lim,), (d,) = _values(start), _values(limit), _values(delta)
    n = sympy.ceiling((lim - s) / d)
    if n.has(sympy.ceiling):  # only lengths sympy reduces to a sum or product of dims
        raise UnshapedError(f"Range length {n}")
    return Known(start.elem_type, (sympy.Max(n, 0) if n.is_Integer else n,), None)


def infer(node: onnx.NodeProto, ins: list[Known]) -> list[Known]:  # noqa: C901 - one branch per op
    """The outputs of `node` from its inputs' Known (raises UnshapedError outside the rules)."""
    op, attrs = node.op_type, {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if len(node.output) != 1 or node.domain not in ("", "ai.onnx"):
        raise UnshapedError(op)
    x = ins[0]
    if op in BROADCAST:
        return [_elementwise(op, ins)]
    if op in COMPARE:
        return [Known(TensorProto.BOOL, _broadcast(*(k.shape for k in ins)))]
    if op == "Where":
        return [Known(ins[1].elem_type, _broadcast(*(k.shape for k in ins)))]
    if op == "Cast":
        return [Known(attrs["to"], x.shape, x.value)]
    if op == "Shape":
        dims = x.shape[slice(attrs.get("start", 0), attrs.get("end"))]
        return [Known(TensorProto.INT64, (sympy.Integer(len(dims)),), tuple(dims))]
    if op == "Squeeze" and len(ins) == 1:
        if any(not d.is_Integer for d in x.shape):
            raise UnshapedError("Squeeze of symbolic dims")
        return [Known(x.elem_type, tuple(d for d in x.shape if d != 1), x.value)]
    if op == "Unsqueeze":
        rank = len(x.shape) + len(_values(ins[1]))
        axes = sorted(_axis(a, rank) for a in _ints(ins[1]))
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, sympy.Integer(1))
        return [Known(x.elem_type, tuple(shape), x.value)]
    if op == "Gather":
        a = _axis(attrs.get("axis", 0), len(x.shape))
        return [Known(x.elem_type, x.shape[:a] + ins[1].shape + x.shape[a + 1:])]
    if op == "Range":
        return [_range(*ins)]
    if op == "ReduceMean" and attrs.get("keepdims", 1) == 1 and len(ins) == 2:
        axes = {_axis(a, len(x.shape)) for a in _ints(ins[1])}
        kept = tuple(sympy.Integer(1) if i in axes else d for i, d in enumerate(x.shape))
        return [Known(x.elem_type, kept)]
    if op == "MatMul" and len(x.shape) >= 2 and len(ins[1].shape) >= 2:
        batch = _broadcast(x.shape[:-2], ins[1].shape[:-2])
        if x.shape[-1] != ins[1].shape[-2]:
            raise UnshapedError("MatMul inner dims differ")
        return [Known(x.elem_type, (*batch, x.shape[-2], ins[1].shape[-1]))]
    if op == "Reshape" and not attrs.get("allowzero", 0):
        return [Known(x.elem_type, _reshape(x, list(_values(ins[1]))))]
    if op == "Transpose":
        return [Known(x.elem_type, tuple(x.shape[p] for p in attrs["perm"]))]
    if op == "Slice" and len(ins) == 4:
        return [Known(x.elem_type, _slice(x, _ints(ins[1]), _ints(ins[2]), _ints(ins[3])))]
    if op == "Concat":
        a = _axis(attrs["axis"], len(x.shape))
        shape = list(x.shape)
        shape[a] = sympy.Add(*(k.shape[a] for k in ins))
        value = sum((k.value for k in ins), ()) if all(k.value is not None for k in ins) else None
        return [Known(x.elem_type, tuple(shape), value)]
    if op == "Expand":
        return [Known(x.elem_type, _broadcast(x.shape, tuple(_values(ins[1]))))]
    raise UnshapedError(op)


def value_info(name: str, k: Known) -> onnx.ValueInfoProto:
    """`k` as a value_info: integer dims as dim_value, symbolic ones as their expression's text."""
    vi = onnx.ValueInfoProto(name=name)
    tt = vi.type.tensor_type
    tt.elem_type = k.elem_type
    tt.shape.SetInParent()
    for d in k.shape:
        entry = tt.shape.dim.add()
        if d.is_Integer:
            entry.dim_value = int(d)
        else:
            entry.dim_param = _dim_text(d)
    return vi
