"""Arithmetic that works the same on python numbers, numpy arrays and sympy expressions.

The tile model is written once against these few functions and evaluated three ways: on numbers (one
bound kernel), on numpy arrays (tools/calibrate.py prices thousands of measured shapes at once) and on
sympy expressions (a kernel whose dims are still free keeps `ceiling(M / tile_m)` in its formula).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
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
        return sympy.ceiling(x, evaluate=not flat())
    return math.ceil(x - 1e-9 * abs(x))  # ceil(4096/128.0) must stay 32, not 33 through rounding


def floor(x: Any) -> Any:
    x = num(x)
    kind = _kind(x)
    if kind == "np":
        return np.floor(x)
    if kind == "sym":
        return sympy.floor(x, evaluate=not flat())
    return math.floor(x + 1e-9 * abs(x))


def ceil_div(a: Any, b: Any) -> Any:
    return ceil(num(a) / num(b))


def floor_div(a: Any, b: Any) -> Any:
    """`a // b`: python's and numpy's own on numbers and arrays; on free symbols floor(a / b), built flat
    under flat()."""
    a, b = num(a), num(b)
    if _kind(a, b) == "sym":
        return sympy.floor(a / b, evaluate=not flat())
    return a // b


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
    return _extreme(xs, np.maximum, sym_max, max)


def minimum(*xs: Any) -> Any:
    return _extreme(xs, np.minimum, sym_min, min)


# sympy simplifies Max/Min by comparing their arguments pairwise (each comparison an assumptions query),
# and ceiling/floor by asking which terms are integers. Over a model's few named dims that is cheap: every
# layer asks the same questions and sympy's cache answers. Over a graph whose shape inference left each
# tensor its own unknown dims, no two questions are alike and pricing took minutes. Above this many free
# dims in the graph (named models have 1-4) the expressions are built flat: see flat_symbolic().
SIMPLIFY_MAX_DIMS = 8

_FLAT = contextvars.ContextVar("estimator_flat_symbolic", default=False)


@contextlib.contextmanager
def flat_symbolic(free_dims: int) -> Iterator[bool]:
    """Within this block, with more than SIMPLIFY_MAX_DIMS free dims, Max/Min/ceiling/floor over free
    symbols are built without sympy's simplification (sym_max) and symbolic comparisons answer
    "unknown" (estimator.price.provably_greater): pricing time stays linear in the graph."""
    token = _FLAT.set(free_dims > SIMPLIFY_MAX_DIMS)
    try:
        yield _FLAT.get()
    finally:
        _FLAT.reset(token)


def flat() -> bool:
    """True inside flat_symbolic() over a graph with many free dims."""
    return _FLAT.get()


def sym_max(*xs: Any) -> Any:
    """Max of sympy expressions and numbers: nested Max flattened, numbers folded into one, duplicates
    dropped, then sympy's own simplification, or, under flat(), an unevaluated Max of what is left (time
    linear in the arguments). NB: an unevaluated Max may keep an argument sympy would have dropped as
    provably smaller; it has the same value at every point (substituting numbers evaluates it), only its
    printed form is longer."""
    return _lattice(sympy.Max, max, xs)


def sym_min(*xs: Any) -> Any:
    """Min of sympy expressions and numbers; see sym_max."""
    return _lattice(sympy.Min, min, xs)


def _lattice(op, fold, xs: tuple) -> Any:
    if not flat():
        return op(*xs)
    args: dict[Any, None] = {}  # ordered and deduplicated
    numbers = []
    for x in xs:
        x = sympy.sympify(x)
        for a in (x.args if isinstance(x, op) else (x,)):
            if a.is_number:
                numbers.append(a)
            else:
                args[a] = None
    if numbers:
        args[fold(numbers) if len(numbers) > 1 else numbers[0]] = None
    if len(args) == 1:
        return next(iter(args))
    return op(*args, evaluate=False)


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
