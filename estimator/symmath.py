"""Arithmetic that works the same on python numbers, numpy arrays and sympy expressions.

The pricing core (estimator/pricing/: the tile model, the plans, `price`) is written once against these
few functions and evaluated three ways: on numbers (one bound kernel), on numpy arrays of points (a
sweep's or a serving step's points, estimator/pricing/points.py; the calibration tables' measured
shapes, estimator/calibration/tables.py)
and on sympy expressions (a kernel whose dims are still free keeps `ceiling(M / tile_m)` in its
formula). The operations: `ceil`, `floor`, `ceil_div`, `floor_div`, `maximum` / `minimum` (the tile
model's: sympy numbers run as floats), `where`, `max_of` / `lift` (the composition's: a sympy input
stays sympy) and the tile choice, `argmin` over a menu's candidates with `pick` (one candidate on
numbers, each point's own on arrays).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import sympy


def simplified(e: Any) -> sympy.Basic:
    """sympy.simplify(e), remembered per expression (a pure function of it: the passes ask the same shape
    ratios of every layer, variant and TP of a search); a number is its own simplification."""
    e = sympy.sympify(e)
    return e if e.is_Number else _simplify(e)


@functools.lru_cache(maxsize=4096)
def _simplify(e: sympy.Basic) -> sympy.Basic:
    return sympy.simplify(e)


def is_sym(x: Any) -> bool:
    return isinstance(x, sympy.Basic) and not x.is_number


_PLAIN = (float, int, bool)  # python numbers: neither arrays nor sympy (exact types, checked first)


def _kind(*xs: Any) -> str:
    sym = False
    for x in xs:  # one pass, plain numbers first: this dispatch runs for every operation of the tile model
        if type(x) in _PLAIN:
            continue
        if isinstance(x, np.ndarray):
            return "np"
        if not sym and isinstance(x, sympy.Basic) and not x.is_number:
            sym = True
    return "sym" if sym else "num"


def num(x: Any) -> Any:
    """A sympy number as a float; anything else unchanged."""
    if type(x) in _PLAIN or type(x) is np.ndarray:
        return x
    if isinstance(x, sympy.Basic) and x.is_number:
        return int(x) if x.is_Integer else float(x)
    return x


def ceil(x: Any) -> Any:
    if type(x) is np.ndarray:
        return np.ceil(x)
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
    if any(type(x) is np.ndarray for x in xs):  # the arrays' case first (points: the hot one)
        xs = tuple(num(x) for x in xs)
        out = xs[0]
        for x in xs[1:]:
            out = np_fn(out, x)
        return out
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
# Within a flat block: obj -> canonical(obj), and id(mapping) -> (mapping, rename memo), see renamed().
_ALIKE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("estimator_alike", default=None)


@contextlib.contextmanager
def flat_symbolic(free_dims: int) -> Iterator[bool]:
    """Within this block, with more than SIMPLIFY_MAX_DIMS free dims, Max/Min/ceiling/floor over free
    symbols are built without sympy's simplification (sym_max) and symbolic comparisons answer
    "unknown" (estimator.pricing.price.provably_greater): pricing time stays linear in the graph. The block
    also remembers canonical forms and renamings (renamed()); they are dropped on leaving it."""
    on = free_dims > SIMPLIFY_MAX_DIMS
    token = _FLAT.set(on)
    alike = _ALIKE.set({} if on else None)
    try:
        yield on
    finally:
        _ALIKE.reset(alike)
        _FLAT.reset(token)


def flat() -> bool:
    """True inside flat_symbolic() over a graph with many free dims."""
    return _FLAT.get()


def rounded(e: sympy.Basic, digits: int) -> sympy.Basic:
    """`e.evalf(digits)` for printing; under flat() its numbers are rounded in place instead (evalf
    rebuilds every Max and so runs the pairwise simplification flat mode skipped)."""
    if not flat():
        return e.evalf(digits)
    return round_numbers(e, digits)


def round_numbers(e: sympy.Basic, digits: int) -> sympy.Basic:
    """`e` with its non-integer numbers rounded to `digits` in place, the tree rebuilt without evaluation:
    the same value at every point as `e.evalf(digits)`, without evalf re-running every Max's pairwise
    simplification (seconds on a MoE model's closed forms)."""
    numbers = {a: sympy.Float(a, digits) for a in e.atoms(sympy.Number) if not a.is_Integer}
    return _rebuild(e, numbers, {}, numbers=True)


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


def sym_sum(terms: Iterable[Any]) -> Any:
    """Sum of sympy expressions and numbers: sympy's Add, or, under flat(), nested sums flattened and the
    numbers folded into one, without sympy's collection of like terms and sorting (over thousands of
    kernels with dims of their own no two terms are alike, and sorting them cost more than pricing).
    NB: under flat() a term met twice stays twice (x + x, not 2*x): same value, longer form."""
    if not flat():
        return sympy.Add(*terms)
    args, number = [], sympy.Integer(0)
    for t in terms:
        t = sympy.sympify(t)
        for a in (t.args if isinstance(t, sympy.Add) else (t,)):
            if a.is_Number:
                number += a
            else:
                args.append(a)
    if number != 0 or not args:
        args.append(number)
    return args[0] if len(args) == 1 else sympy.Add._from_args(args)


def where(cond: Any, a: Any, b: Any) -> Any:
    """`a` where `cond` else `b`; `cond` must be decidable (numbers or arrays), never symbolic."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def max_of(*xs: Any) -> Any:
    """The composition's max, in its inputs' own type: numpy arrays elementwise, sympy (numbers included:
    a Timing of bound dims stays sympy) through sym_max, python numbers by max. Unlike `maximum` (the tile
    model's, which runs sympy numbers as floats for speed) it never turns a sympy number into a float."""
    if any(isinstance(x, np.ndarray) for x in xs):
        out = xs[0]
        for x in xs[1:]:
            out = np.maximum(out, x)
        return out
    if any(isinstance(x, sympy.Basic) for x in xs):
        return sym_max(*xs)
    return max(xs)


def lift(x: Any, like: Any) -> Any:
    """The number `x` in the number type of `like`: a sympy number beside a sympy expression, else as is
    (a python number broadcasts against arrays by itself)."""
    if isinstance(like, sympy.Basic) and not isinstance(x, (sympy.Basic, np.ndarray)):
        return sympy.sympify(x)
    return x


# The tile choice: the fastest candidate, times compared rounded to this many decimals of a second
# (1e-15 s: candidates equal up to floating-point noise tie), ties to the least t_compute (the least
# padded MMA work, as among memory-bound tiles), then to the first listed.
ROUND_DIGITS = 15


def argmin(choices: list) -> Any:
    """Index of the best of `choices` (objects with `time` and `t_compute`) by the tile choice's rule
    (ROUND_DIGITS): an int on numbers, on numpy arrays of points an int array (per point its own best;
    a running minimum, no candidates x points matrix is built). Free symbols are not decidable here:
    the caller chooses on a numeric copy (estimator/pricing/plan.py `chosen`)."""
    if not any(isinstance(c.time, np.ndarray) for c in choices):
        def key(i: int) -> tuple[float, float]:
            return (round(float(choices[i].time), ROUND_DIGITS), float(choices[i].t_compute))

        return min(range(len(choices)), key=key)
    n = max(np.size(c.time) for c in choices)
    return _scan(choices, n)


def argmin_of(choices: Iterable) -> tuple[list, Any]:
    """(the candidates, `argmin` of them) from an iterable consumed once. On arrays of points a candidate
    better nowhere at its turn (which argmin's running minimum can then never pick) is dropped as it
    comes, None in the list: a menu's ~200 candidates of a dozen arrays each are not all held at once
    (allocating their memory afresh for every kernel cost as much as pricing them)."""
    it = iter(choices)
    first = next(it, None)
    if first is None:
        return [], None
    if not (isinstance(first.time, np.ndarray) and first.time.ndim == 1 and first.time.size > 1):
        listed = [first, *it]  # numbers, or points of another shape: argmin over the whole list
        return listed, argmin(listed)
    kept = [first]
    return kept, _scan(itertools.chain((first,), it), first.time.size, kept)


def _scan(choices: Iterable, n: int, kept: list | None = None) -> np.ndarray:
    """argmin's running minimum over candidates at n points; `kept` (not None) gets every candidate after
    the first, or None for one better nowhere at its turn."""
    def arr(x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray) and x.shape == (n,) and x.dtype == np.float64:
            return x  # already one float per point (broadcast_to costs more than the math here)
        if np.size(x) not in (1, n):
            raise ValueError(f"a candidate at {np.size(x)} points among candidates at {n}")
        return np.broadcast_to(np.asarray(x, dtype=float), (n,))

    it = iter(choices)
    first = next(it)
    best = np.zeros(n, dtype=np.int64)
    best_rt = np.round(arr(first.time), ROUND_DIGITS)
    best_tc = arr(first.t_compute).copy()
    limit = _reach(best_rt)
    rt, better, tie = np.empty(n), np.empty(n, dtype=bool), np.empty(n, dtype=bool)
    for i, c in enumerate(it, start=1):
        if kept is not None:
            kept.append(None)
        time = arr(c.time)
        np.less_equal(time, limit, out=better)
        if not better.any():
            continue  # slower than the best everywhere, rounded or not (see _reach)
        np.round(time, ROUND_DIGITS, out=rt)
        tc = arr(c.t_compute)
        np.equal(rt, best_rt, out=tie)
        tie &= tc < best_tc
        np.less(rt, best_rt, out=better)
        better |= tie
        if not better.any():
            continue
        np.copyto(best_rt, rt, where=better)
        np.copyto(best_tc, tc, where=better)
        best[better] = i
        limit = _reach(best_rt)
        if kept is not None:
            kept[i] = c
    return best


def _reach(best_rt: np.ndarray) -> np.ndarray:
    """Per point, a time above every time that rounds (ROUND_DIGITS) to at most `best_rt`: a candidate
    slower than this at every point loses everywhere, and is skipped without rounding its times (the
    choice is the same). Rounding moves a time by at most half of 10**-ROUND_DIGITS, plus the relative
    error of its scaling (a few 1e-16); the margin here is 10**-ROUND_DIGITS and 1e-9 of the time."""
    return best_rt * (1 + 1e-9) + 10.0 ** -ROUND_DIGITS


class Picked:
    """The candidates `index` (an argmin over arrays of points) picks, seen as one candidate: each field
    read is gathered per point from the winners (few: a loop over them, not over the candidates)."""

    def __init__(self, choices: list, index: np.ndarray) -> None:
        self._choices, self._index = choices, index
        self._winners = [(int(w), index == w) for w in np.unique(index)]
        self._fields: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        hit = self._fields.get(name)
        if hit is None:
            hit = self._fields[name] = self._gather(name)
        return hit

    def _gather(self, name: str) -> np.ndarray:
        n = len(self._index)
        values = [getattr(self._choices[w], name) for w, _ in self._winners]
        if any(isinstance(v, str) for v in values):
            out = np.empty(n, dtype=object)
        else:
            out = np.empty(n, dtype=float)
        for v, (_, mask) in zip(values, self._winners, strict=True):
            out[mask] = v if np.ndim(v) == 0 else np.broadcast_to(v, (n,))[mask]
        return out


def pick(choices: list, index: Any) -> Any:
    """The candidate `argmin` chose: the one at an int index, a Picked one at an array of indices."""
    return Picked(choices, index) if isinstance(index, np.ndarray) else choices[index]


def numeric(x: Any) -> bool:
    """True when `x` holds no free symbols (a number or an array)."""
    return _kind(num(x)) != "sym"


def substitute(x: Any, values: dict) -> Any:
    """`x` with free symbols replaced by `values` (numbers through unchanged)."""
    if isinstance(x, sympy.Basic) and not x.is_number:
        return num(x.xreplace(values))
    return x


_CANON_SYMBOLS: dict[tuple, sympy.Symbol] = {}  # (position, assumptions) -> `_canon<position>`


def _canon_symbol(i: int, actual: sympy.Symbol) -> sympy.Symbol:
    """The i-th canonical symbol, with `actual`'s assumptions (made once per process)."""
    assumptions = getattr(actual, "_assumptions0", None)  # sympy's sorted tuple of them, where it keeps one
    if assumptions is None:
        assumptions = tuple(sorted(actual.assumptions0.items()))
    s = _CANON_SYMBOLS.get((i, assumptions))
    if s is None:
        s = _CANON_SYMBOLS[(i, assumptions)] = sympy.Symbol(f"_canon{i}", **actual.assumptions0)
    return s


def canonical(obj: Any) -> tuple[Any, dict]:
    """`obj` (nested tuples, lists, mappings, dataclasses of hashables and sympy expressions) as a hashable
    key with its free symbols renamed `_canon0`, `_canon1`... in first-seen order (same assumptions), and
    {canonical: actual symbol}. Inside a flat_symbolic() block an equal `obj` is walked once.

    Two kernels of a graph whose shape inference gave every tensor its own unknown dims are alike up to
    a renaming of those dims; keyed by their canonical form, one computation serves both (see renamed)."""
    block = _ALIKE.get()
    try:
        hit = block.get(("canonical", obj)) if block is not None else None
    except TypeError:  # an unhashable obj (a list, a dict): walked every time
        block = hit = None
    if hit is not None:
        return hit
    actual_to_canon: dict = {}

    def symbol(s: sympy.Symbol) -> sympy.Symbol:
        c = actual_to_canon.get(s)
        if c is None:
            c = actual_to_canon[s] = _canon_symbol(len(actual_to_canon), s)
        return c

    def walk(x: Any) -> Any:
        if isinstance(x, sympy.Basic):
            if x.is_Symbol:
                return symbol(x)
            if not x.args or x.is_number:
                return x
            for s in sorted(x.free_symbols, key=lambda s: s.name):
                symbol(s)
            return _rebuild(x, actual_to_canon, {})
        if isinstance(x, (str, int, float, type(None))):
            return x
        if isinstance(x, (tuple, list)):
            return tuple(walk(v) for v in x)
        if isinstance(x, Mapping):
            return ("{}", tuple(sorted(((str(k), walk(v)) for k, v in x.items()), key=lambda kv: kv[0])))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return (type(x).__name__, tuple(walk(getattr(x, f.name)) for f in dataclasses.fields(x)))
        return x

    key = walk(obj)
    out = key, {c: a for a, c in actual_to_canon.items()}
    if block is not None:
        block[("canonical", obj)] = out
    return out


def _memo_for(mapping: dict) -> dict:
    """The rename memo of `mapping` inside a flat block (shared by every rename with this mapping object,
    so a subtree two renamed values share is rebuilt once); a fresh one outside."""
    block = _ALIKE.get()
    if block is None:
        return {}
    entry = block.get(("memo", id(mapping)))
    if entry is None:
        entry = block[("memo", id(mapping))] = (mapping, {})  # holding `mapping`: its id stays its own
    return entry[1]


def renamed(cache: dict, obj: Any, make: Callable[[], Any], extra: Hashable = ()) -> Any:
    """`make()`, memoized in `cache` up to a renaming of the free symbols of `obj` (what `make` is a
    function of, with `extra`: a part of the key without symbols): a hit is the stored value with the
    symbols renamed to this call's. A value holding a symbol `obj` does not is not stored (it is not a
    function of the key), nor is a string (a message may name the tensors of this call).

    Inside a flat block, calls whose `obj` is equal (a kernel's Work, plan and Timing are all keyed by
    its node signature) share one canonical form and one renaming, both ways: the Timing built on a
    plan is stored sharing the stored plan's subtrees, and renamed back it reuses the plan's rebuilt
    ones."""
    if free_symbols(extra):
        obj, extra = (obj, extra), ()
    key, to_actual = canonical(obj)
    key = (extra, key)
    hit = cache.get(key)
    if hit is not None:
        return rename(hit, to_actual, _memo_for(to_actual))
    value = make()
    if not isinstance(value, str) and free_symbols(value) <= set(to_actual.values()):
        cache[key] = rename(value, _inverse(to_actual), _memo_for(_inverse(to_actual)))
    return value


def _inverse(to_actual: dict) -> dict:
    """{actual: canonical} for a mapping canonical() returned (one object per mapping inside a block)."""
    block = _ALIKE.get()
    if block is None:
        return {a: c for c, a in to_actual.items()}
    entry = block.get(("inverse", id(to_actual)))
    if entry is None:
        entry = block[("inverse", id(to_actual))] = (to_actual, {a: c for c, a in to_actual.items()})
    return entry[1]


def rename(x: Any, mapping: dict, memo: dict | None = None) -> Any:
    """`x` with symbols replaced per `mapping`: sympy expressions, and the values of mappings, tuples and
    frozen dataclasses (whose sympy fields are renamed); anything else unchanged. NB: the expressions are
    rebuilt as they are, never re-simplified (a renaming changes no value, and re-simplifying would cost
    what the renaming saves). `memo` (id of a subtree -> its rebuilt form) may be shared by calls with the
    same `mapping` whose inputs stay alive meanwhile: a subtree shared between them is rebuilt once."""
    memo = {} if memo is None else memo  # subtrees shared between fields are rebuilt once
    if isinstance(x, sympy.Basic):
        return _rebuild(x, mapping, memo)
    if isinstance(x, (dict, MappingProxyType)):
        out = {k: rename(v, mapping, memo) for k, v in x.items()}
        return MappingProxyType(out) if isinstance(x, MappingProxyType) else out
    if isinstance(x, tuple):
        return tuple(rename(v, mapping, memo) for v in x)
    if isinstance(x, (str, int, float, type(None))):
        return x
    if isinstance(x, Mapping):
        return {k: rename(v, mapping, memo) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: rename(getattr(x, f.name), mapping, memo)
                                         for f in dataclasses.fields(x) if f.init})
    return x


_ROUNDING = (sympy.ceiling, sympy.floor)


def _rebuild(e: sympy.Basic, mapping: dict, memo: dict, numbers: bool = False) -> sympy.Basic:
    """`e` with its symbols (and, with `numbers`, its number atoms) replaced per `mapping`, the tree
    rebuilt node by node without evaluation. `memo` is keyed by id, holding the subtree with its rebuilt
    form so that the id stays its own: hashing a subtree and comparing it structurally on a hit would
    cost more than rebuilding it."""
    args = e._args  # Basic's slot (the `args` property costs a call per node)
    if not args:
        return mapping.get(e, e) if (numbers or e.is_Symbol) else e
    done = memo.get(id(e))
    if done is not None:
        return done[1]
    new, changed = [], False
    for a in args:  # leaves inline: most arguments are symbols and numbers
        if a._args:
            b = _rebuild(a, mapping, memo, numbers)
        else:
            b = mapping.get(a, a) if (numbers or a.is_Symbol) else a
        changed = changed or b is not a
        new.append(b)
    if not changed:
        out = e
    elif isinstance(e, (sympy.Add, sympy.Mul)):
        out = type(e)._from_args(new, e.is_commutative)
    elif isinstance(e, (sympy.Max, sympy.Min)):  # their evaluate=False still sorts the arguments
        out = sympy.Basic.__new__(type(e), *new)
        out._argset = frozenset(new)
    elif type(e) in _ROUNDING:  # what Function.__new__ does unevaluated, minus its cache and nargs set
        out = sympy.Basic.__new__(type(e), *new)
        out.nargs = e.nargs
    else:
        try:
            out = e.func(*new, evaluate=False)
        except TypeError:  # a class without the keyword (ExprCondPair, Tuple...): nothing to evaluate
            out = e.func(*new)
    memo[id(e)] = (e, out)
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
