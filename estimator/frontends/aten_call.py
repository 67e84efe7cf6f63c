"""The operand view aten handlers see (`Call`), the generic fallback Node, and host-value evaluation.

A handler reads operands through `Call` (tensor names, Python scalars, int lists), creates helper
tensors (`temp`, `scalar`) and emits Nodes (`emit`); `alias` makes a result another tensor's name.
Host (non-tensor) ops such as ``aten.size.int`` and ``aten.mul.int`` are evaluated by `scalar_value`
to Python / sympy values so that dims and lists reach the handlers as numbers or expressions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import sympy

from estimator.ir import Node, Tensor


class UnmappableError(Exception):
    """A handler cannot express this op; the reader falls back to a generic ``aten.*`` Node."""


@dataclass(frozen=True)
class TRef:
    """A tensor operand, by its tensor name (distinguishes tensors from host string values)."""

    name: str


@dataclass(frozen=True)
class PendingList:
    """A ``!torch.list<vtensor>`` result (split, unbind...): its elements get names only at the
    ``torch.prim.ListUnpack`` that reads it, which calls `finish` with them."""

    finish: Callable[[list[str]], None]


class Call:
    """One op being translated: its operand values, result names and node emission."""

    def __init__(self, reader, op, key: str) -> None:
        self.r = reader
        self.key = key
        self.args: list[Any] = [reader.value(v) for v in op.operands]
        self.results = [reader.name(v) for v in op.results]
        short = key.split(".")[1] if key.count(".") >= 1 else key
        tag = (self.results[0] if self.results else "").lstrip("%").replace("#", "_")
        self.node_name = f"{short}_{tag}" if tag else short

    # ---- operands ----------------------------------------------------------------------------

    def arg(self, i: int, default: Any = None) -> Any:
        return self.args[i] if i < len(self.args) and self.args[i] is not None else default

    def is_tensor(self, i: int) -> bool:
        return isinstance(self.arg(i), TRef)

    def t(self, i: int) -> str:
        """Tensor operand i (UnmappableError if it is not a tensor)."""
        a = self.arg(i)
        if not isinstance(a, TRef):
            raise UnmappableError(f"{self.key}: operand {i} is not a tensor")
        return a.name

    def opt(self, i: int) -> str:
        """Optional tensor operand i: its name, or "" when it is None."""
        return self.t(i) if self.arg(i) is not None else ""

    def tensor_list(self, i: int) -> list[str]:
        items = self.arg(i, [])
        return [x.name for x in items if isinstance(x, TRef)] if isinstance(items, list) else []

    def operand(self, i: int, dtype: str | None = None) -> str:
        """Tensor operand i, or its Python scalar as a host-constant 0-d tensor of `dtype` (default:
        the dtype of the op's first tensor operand)."""
        if self.is_tensor(i):
            return self.t(i)
        value = self.arg(i)
        if value is None:
            return ""
        return self.scalar(value, dtype or self.first_dtype())

    def first_dtype(self) -> str:
        for a in self.args:
            if isinstance(a, TRef):
                return self.tensor(a.name).dtype
        return self.tensor(self.out()).dtype if self.results else "fp32"

    def int(self, i: int, default: int | None = None) -> int:
        v = self.arg(i, default)
        try:
            return int(v)
        except (TypeError, ValueError):
            raise UnmappableError(f"{self.key}: operand {i} is not a static int") from None

    def ints(self, i: int) -> list[int]:
        v = self.arg(i, [])
        return [self.int_value(x) for x in (v if isinstance(v, list) else [v])]

    def int_value(self, x: Any) -> int:
        try:
            return int(x)
        except (TypeError, ValueError):
            raise UnmappableError(f"{self.key}: {x!r} is not a static int") from None

    # ---- tensors -----------------------------------------------------------------------------

    def tensor(self, name: str) -> Tensor:
        return self.r.tensors[name]

    def shape(self, name: str) -> tuple:
        s = self.tensor(name).shape
        if s is None:
            raise UnmappableError(f"{self.key}: {name} has no shape")
        return s

    def rank(self, name: str) -> int:
        return len(self.shape(name))

    def axis(self, value: Any, name: str) -> int:
        """A dim operand normalised to [0, rank)."""
        rank = max(self.rank(name), 1)
        return self.int_value(value) % rank

    def out(self, i: int = 0) -> str:
        return self.results[i]

    def temp(self, like: str, tag: str, shape: tuple | None = None, dtype: str | None = None) -> str:
        """A new intermediate tensor shaped like `like` (or `shape`)."""
        base = self.tensor(like)
        name = self.r.new_name(f"{self.out()}.{tag}")
        self.r.tensors[name] = Tensor(name, base.shape if shape is None else shape, dtype or base.dtype)
        return name

    def scalar(self, value: Any, dtype: str) -> str:
        """A host-constant 0-d tensor holding a Python scalar."""
        name = self.r.new_name(f"{self.out() if self.results else '%c'}.scalar")
        self.r.tensors[name] = Tensor(name, (), dtype, is_const=True)
        return name

    def fill_unknown_dims(self, name: str, dims: list, skip: int | None = None) -> None:
        """Replace the invented (unk__) dims of tensor `name` by `dims` at the same positions (but
        `skip`); ranks must agree."""
        t = self.tensor(name)
        if t.shape is None or len(t.shape) != len(dims):
            return
        shape = tuple(d if i == skip or not str(d).startswith("unk__") else dims[i]
                      for i, d in enumerate(t.shape))
        self.r.tensors[name] = replace(t, shape=shape)

    def alias(self, i: int, name: str) -> None:
        self.r.values[self.results[i]] = TRef(name)

    def emit(self, op_type: str, inputs: list[str], outputs: list[str], tag: str = "",
             domain: str = "", **attrs: Any) -> None:
        attrs = {k: _plain(v) for k, v in attrs.items() if v is not None}
        name = f"{self.node_name}/{tag}" if tag else self.node_name
        self.r.add_node(Node(name, op_type, domain, tuple(inputs), tuple(outputs), attrs))

    def pending_list(self, finish: Callable[[list[str]], None]) -> None:
        self.r.values[self.out()] = PendingList(finish)


def _plain(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    if isinstance(v, sympy.Integer):
        return int(v)
    return v



def generic(call: Call) -> None:
    """An op with no mapping: a Node named after it (domain torch), listed as uncosted."""
    inputs = []
    for a in call.args:
        if isinstance(a, TRef):
            inputs.append(a.name)
        elif isinstance(a, list):
            inputs.extend(x.name for x in a if isinstance(x, TRef))
    outputs = [r for r in call.results if r in call.r.tensors]
    if not outputs and call.results:
        def finish(names: list[str]) -> None:
            call.emit(call.key, inputs, names, domain="torch")

        call.pending_list(finish)
        return
    call.emit(call.key, inputs, outputs, domain="torch")



# ---- host values --------------------------------------------------------------------------------

_INT_OPS: dict[str, Callable[..., Any]] = {
    "mul": operator.mul, "add": operator.add, "sub": operator.sub,
    "floordiv": lambda a, b: sympy.floor(sympy.sympify(a) / b),
    "div": operator.truediv, "neg": operator.neg, "remainder": sympy.Mod,
}


def scalar_value(key: str, args: list[Any], reader) -> Any:
    """The host value of a non-tensor op (sizes, int arithmetic, list indexing); None when unknown."""
    parts = key.split(".")
    base = parts[1] if len(parts) > 1 else key
    try:
        if base in ("size", "sym_size") and len(args) == 2:
            shape = reader.tensors[args[0].name].shape
            return shape[int(args[1])] if shape is not None else None
        if base == "dim":
            return len(reader.tensors[args[0].name].shape)
        if base == "numel":
            return reader.tensors[args[0].name].numel
        if base in ("Int", "Float", "Bool") and not hasattr(args[0], "name"):
            return {"Int": int, "Float": float, "Bool": bool}[base](args[0])
        if base == "__getitem__":
            return args[0][int(args[1])]
        if base == "len":
            return len(args[0])
        if base in _INT_OPS and all(a is not None and not hasattr(a, "name") for a in args):
            return _INT_OPS[base](*args)
    except (TypeError, ValueError, IndexError, KeyError, AttributeError):
        return None
    return None
