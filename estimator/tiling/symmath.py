"""Arithmetic that works the same on python numbers, numpy arrays and sympy expressions.

The tile model is written once against these few functions and evaluated three ways: on numbers (one
bound kernel), on numpy arrays (tools/calibrate.py prices thousands of measured shapes at once) and on
sympy expressions (a kernel whose dims are still free keeps `ceiling(M / tile_m)` in its formula).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
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
# dims in the graph (named models have 1-3: batch, seq, past_seq) the expressions are built flat: see
# flat_symbolic().
SIMPLIFY_MAX_DIMS = 4

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


def rounded(e: sympy.Basic, digits: int) -> sympy.Basic:
    """`e.evalf(digits)` for printing; under flat() its numbers are rounded in place instead (evalf
    rebuilds every Max and so runs the pairwise simplification flat mode skipped)."""
    if not flat():
        return e.evalf(digits)
    numbers = {a: sympy.Float(a, digits) for a in e.atoms(sympy.Number) if not a.is_Integer}
    return _rebuild(e, numbers, {})


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


def canonical(obj: Any) -> tuple[Any, dict]:
    """`obj` (nested tuples, lists, mappings, dataclasses of hashables and sympy expressions) as a hashable
    key with its free symbols renamed `_canon0`, `_canon1`... in first-seen order (same assumptions), and
    {canonical: actual symbol}.

    Two kernels of a graph whose shape inference gave every tensor its own unknown dims are alike up to
    a renaming of those dims; keyed by their canonical form, one computation serves both (see renamed)."""
    actual_to_canon: dict = {}

    def walk(x: Any) -> Any:
        if isinstance(x, (tuple, list)):
            return tuple(walk(v) for v in x)
        if isinstance(x, Mapping):
            return ("{}", tuple(sorted(((str(k), walk(v)) for k, v in x.items()), key=lambda kv: kv[0])))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return (type(x).__name__, tuple(walk(getattr(x, f.name)) for f in dataclasses.fields(x)))
        if isinstance(x, sympy.Basic) and not x.is_number:
            for s in sorted(x.free_symbols, key=lambda s: s.name):
                if s not in actual_to_canon:
                    actual_to_canon[s] = sympy.Symbol(f"_canon{len(actual_to_canon)}", **s.assumptions0)
            return _rebuild(x, actual_to_canon, {})
        return x

    key = walk(obj)
    return key, {c: a for a, c in actual_to_canon.items()}


def renamed(cache: dict, obj: Any, make: Callable[[], Any]) -> Any:
    """`make()`, memoized in `cache` up to a renaming of the free symbols of `obj` (what `make` is a
    function of): a hit is the stored value with the symbols renamed to this call's. A value holding a
    symbol `obj` does not is not stored (it is not a function of the key), nor is a string (a message
    may name the tensors of this call)."""
    key, to_actual = canonical(obj)
    hit = cache.get(key)
    if hit is not None:
        return rename(hit, to_actual)
    value = make()
    if not isinstance(value, str) and free_symbols(value) <= set(to_actual.values()):
        cache[key] = rename(value, {a: c for c, a in to_actual.items()})
    return value


def rename(x: Any, mapping: dict, memo: dict | None = None) -> Any:
    """`x` with symbols replaced per `mapping`: sympy expressions, and the values of mappings, tuples and
    frozen dataclasses (whose sympy fields are renamed); anything else unchanged. NB: the expressions are
    rebuilt as they are, never re-simplified (a renaming changes no value, and re-simplifying would cost
    what the renaming saves)."""
    memo = {} if memo is None else memo  # subtrees shared between fields are rebuilt once
    if isinstance(x, sympy.Basic):
        return x if x.is_number else _rebuild(x, mapping, memo)
    if isinstance(x, Mapping):
        out = {k: rename(v, mapping, memo) for k, v in x.items()}
        return MappingProxyType(out) if isinstance(x, MappingProxyType) else out
    if isinstance(x, tuple):
        return tuple(rename(v, mapping, memo) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: rename(getattr(x, f.name), mapping, memo)
                                         for f in dataclasses.fields(x) if f.init})
    return x


def _rebuild(e: sympy.Basic, mapping: dict, memo: dict) -> sympy.Basic:
    """`e` with its symbols replaced, the tree rebuilt node by node without evaluation."""
    if e in mapping:
        return mapping[e]
    if not e.args:
        return e
    done = memo.get(e)
    if done is not None:
        return done
    args = tuple(_rebuild(a, mapping, memo) for a in e.args)
    if args == e.args:
        out = e
    elif isinstance(e, (sympy.Add, sympy.Mul)):
        out = type(e)._from_args(args, e.is_commutative)
    elif isinstance(e, (sympy.Max, sympy.Min)):  # their evaluate=False still sorts the arguments
        out = sympy.Basic.__new__(type(e), *args)
        out._argset = frozenset(args)
    else:
        try:
            out = e.func(*args, evaluate=False)
        except TypeError:  # a class without the keyword (ExprCondPair, Tuple...): nothing to evaluate
            out = e.func(*args)
    memo[e] = out
    return out


def free_symbols(x: Any) -> set:
    """Free symbols of `x` as rename() walks it."""
    if isinstance(x, sympy.Basic):
        return set(x.free_symbols)
    if isinstance(x, Mapping):
        x = tuple(x.values())
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = tuple(getattr(x, f.name) for f in dataclasses.fields(x))
    if isinstance(x, (tuple, list)):
        return set().union(*(free_symbols(v) for v in x)) if x else set()
    return set()
