"""Arithmetic that works the same on python numbers, numpy arrays and sympy expressions.

The tile model is written once against these few functions and evaluated three ways: on numbers (one
bound kernel), on numpy arrays (tools/calibrate.py prices thousands of measured shapes at once) and on
sympy expressions (a kernel whose dims are still free keeps `ceiling(M / tile_m)` in its formula).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy


def is_sym(x: Any) -> bool:
    return isinstance(x, sympy.Basic) and not x.is_number


def _kind(*xs: Any) -> str:
    if any(isinstance(x, np.ndarray) for x in xs):
        return "np"
    if any(isinstance(x, sympy.Basic) and not x.is_number for x in xs):
        return "sym"
    return "num"


def num(x: Any) -> Any:
    """A sympy number as a float; anything else unchanged."""
    if isinstance(x, sympy.Basic) and x.is_number:
        return int(x) if x.is_Integer else float(x)
    return x


def ceil(x: Any) -> Any:
    x = num(x)
    kind = _kind(x)
    if kind == "np":
        return np.ceil(x)
    if kind == "sym":
        return sympy.ceiling(x)
    return math.ceil(x - 1e-9 * abs(x))  # ceil(4096/128.0) must stay 32, not 33 through rounding


def floor(x: Any) -> Any:
    x = num(x)
    kind = _kind(x)
    if kind == "np":
        return np.floor(x)
    if kind == "sym":
        return sympy.floor(x)
    return math.floor(x + 1e-9 * abs(x))


def ceil_div(a: Any, b: Any) -> Any:
    return ceil(num(a) / num(b))


def _extreme(xs: tuple, np_fn, sym_fn, py_fn) -> Any:
    """Elementwise max/min over numbers, numpy arrays or sympy expressions alike."""
    xs = tuple(num(x) for x in xs)
    kind = _kind(*xs)
    if kind == "np":
        out = xs[0]
        for x in xs[1:]:
            out = np_fn(out, x)
        return out
    return sym_fn(*xs) if kind == "sym" else py_fn(xs)


def maximum(*xs: Any) -> Any:
    return _extreme(xs, np.maximum, sympy.Max, max)


def minimum(*xs: Any) -> Any:
    return _extreme(xs, np.minimum, sympy.Min, min)


def where(cond: Any, a: Any, b: Any) -> Any:
    """`a` where `cond` else `b`; `cond` must be decidable (numbers or arrays), never symbolic."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def numeric(x: Any) -> bool:
    """True when `x` holds no free symbols (a number or an array)."""
    return _kind(num(x)) != "sym"


def substitute(x: Any, values: dict) -> Any:
    """`x` with free symbols replaced by `values` (numbers through unchanged)."""
    if isinstance(x, sympy.Basic) and not x.is_number:
        return num(x.xreplace(values))
    return x
