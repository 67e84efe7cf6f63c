"""Builds OpViews by hand for cost-function tests: the reader sees every shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

import estimator.cost  # noqa: F401  (registers every cost function)
from estimator.cost.registry import OpView, Work, lookup
from estimator.ir import Node, Tensor, parse_dim

Spec = tuple[Sequence[Any], str] | None  # (shape, dtype); shape items are ints or dim strings


def tensor(name: str, spec: Spec, weight: bool = False, const: bool = False) -> Tensor | None:
    if spec is None:
        return None
    shape, dtype = spec
    dims = tuple(parse_dim(d) if isinstance(d, str) else sympy.Integer(d) for d in shape)
    return Tensor(name, dims, dtype, is_weight=weight, is_const=const or weight)


def op(op_type: str, inputs: Sequence[Spec], outputs: Sequence[Spec], attrs: dict | None = None,
       domain: str = "", opset: int = 23, weights: Sequence[int] = (), consts: Sequence[int] = ()) -> OpView:
    """An OpView with inputs x0, x1, ... (indices in `weights` are initializers, in `consts` host
    constants) and outputs y0, y1, ..."""
    ins = tuple(tensor(f"x{i}", s, weight=i in weights, const=i in consts) for i, s in enumerate(inputs))
    outs = tuple(tensor(f"y{i}", s) for i, s in enumerate(outputs))
    node = Node("n", op_type, domain, tuple(t.name if t else "" for t in ins),
                tuple(t.name if t else "" for t in outs), attrs or {})
    return OpView(node, ins, outs, opset)


def cost(view: OpView) -> Work:
    fn = lookup(view.op_type, view.node.domain)
    assert fn is not None, f"no cost function for {view.op_type}"
    return fn(view)
