"""Values of the pricing core computed when first read, not when built.

A kernel whose dims are free gets a symbolic plan and Timing (estimator/pricing/plan.py, price.py):
its chosen tile repriced in sympy, the limiter decided by sympy comparisons, the estimate a simplified
Max. A sweep reads none of that for a tile-planned kernel: it prices every point by the pricing core at
arrays (estimator/pricing/points.py) and keeps only the symbolic bound, FLOPs and bytes. Computing those
fields at the first read instead of at `estimate()` makes a sweep skip them (seconds on a 3-GPU sweep),
while every reader that does want them (a closed form, --symbolic, a kernel table, totals) gets exactly
the value the eager code built: the same function, called later.

- `Lazy(fn)`: a field's value, `fn()` at the first read (once);
- `deferred(cls, **fields)`: an instance of the frozen dataclass `cls` whose `Lazy` fields are computed
  on first access. It is a `cls` (isinstance, dataclasses.fields, replace (which returns a plain `cls`
  with every field computed), ==, repr and pickle all see the computed values);
- `LazyMapping(keys, fn)`: a Mapping whose keys are known up front and whose values are `fn()`'s (a
  dict), computed at the first value read: a sweep lists a Timing's term names without pricing them.

Every thunk runs with symmath's flat mode off, as the pricing that made it did: deferral is used only
outside flat_symbolic() blocks (where sympy simplifies), and a value forced later, inside another
estimate's flat block, must not take that block's other form.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from estimator import symmath as sm


class Lazy:
    """A value computed by `fn()` when first read (see `deferred`)."""

    __slots__ = ("_fn", "_done", "_value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn, self._done, self._value = fn, False, None

    def get(self) -> Any:
        if not self._done:
            with sm.flat_symbolic(0):  # the form the eager pricing built (module docstring)
                self._value = self._fn()
            self._done, self._fn = True, None
        return self._value


def once(fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn` run at most once: its result shared by the Lazy fields computed from it."""
    box = Lazy(fn)
    return box.get


_OFF = contextvars.ContextVar("estimator_deferred_off", default=False)


def enabled() -> bool:
    """Whether pricing may defer here: only with sympy's simplification on (not symmath.flat()), and
    not inside `off()`."""
    return not sm.flat() and not _OFF.get()


@contextlib.contextmanager
def off() -> Iterator[None]:
    """Within this block nothing is deferred: every value is computed as it is built (the tests compare
    the two; clear pricing/memo.py first, or its remembered plans and Timings come back deferred)."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


def _resolved(value: Any) -> Any:
    return value.get() if type(value) is Lazy else value


def _getter(name: str) -> property:
    def get(self: Any) -> Any:
        store = self.__dict__["_fields"]
        value = store[name]
        if type(value) is Lazy:
            value = store[name] = value.get()
        return value

    return property(get)


class _Deferred:
    """What every `deferred` class adds to its frozen dataclass (`_base`), field getters aside: the
    computed value wherever a whole instance is seen."""

    _base: type
    _names: tuple[str, ...]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # dataclasses.replace(x) calls type(x)(**fields): the result is a plain `_base`
        return cls._base(*args, **kwargs)

    def plain(self) -> Any:
        """This instance as a plain instance of its dataclass, every field computed."""
        return self._base(**{n: getattr(self, n) for n in self._names})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Deferred):
            other = other.plain()
        return self.plain() == other

    def __hash__(self) -> int:
        return hash(self.plain())

    def __repr__(self) -> str:
        return repr(self.plain())

    def __reduce_ex__(self, protocol: Any) -> Any:
        return _rebuilt, (self._base, {n: getattr(self, n) for n in self._names})


def _rebuilt(cls: type, fields: dict) -> Any:
    """A pickled `deferred` instance, unpickled: the plain dataclass instance."""
    return cls(**fields)


_CLASSES: dict[type, type] = {}


def _lazy_class(cls: type) -> type:
    """The subclass of the frozen dataclass `cls` whose fields are read through `Lazy` values."""
    sub = _CLASSES.get(cls)
    if sub is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        body: dict[str, Any] = {n: _getter(n) for n in names}
        body.update(_base=cls, _names=names,
                    __doc__=f"{cls.__name__} with fields computed when first read (pricing/deferred.py)")
        sub = _CLASSES[cls] = type(f"Deferred{cls.__name__}", (_Deferred, cls), body)
    return sub


def deferred(cls: type, **fields: Any) -> Any:
    """An instance of the frozen dataclass `cls` (every init field given) whose `Lazy` values are computed
    when first read; without any Lazy value, a plain `cls`."""
    if not any(type(v) is Lazy for v in fields.values()):
        return cls(**fields)
    sub = _lazy_class(cls)
    obj = object.__new__(sub)
    object.__setattr__(obj, "_fields", dict(fields))
    return obj


def is_pending(obj: Any, name: str) -> bool:
    """Whether field `name` of `obj` (a `deferred` instance) is not computed yet."""
    store = getattr(obj, "__dict__", {}).get("_fields")
    return store is not None and type(store.get(name)) is Lazy


class LazyMapping(Mapping):
    """A read-only mapping with known keys whose values come from `fn()` (a mapping of those keys),
    called at the first value read; or, with `per_key`, `fn(key)` per key."""

    __slots__ = ("_keys", "_fn", "_per_key", "_values")

    def __init__(self, keys: Iterable[str], fn: Callable, per_key: bool = False) -> None:
        self._keys = tuple(keys)
        self._fn, self._per_key = Lazy(fn) if not per_key else fn, per_key
        self._values: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._values:
            if self._per_key:
                self._values[key] = Lazy(lambda: self._fn(key)).get()
            else:
                got = self._fn.get()
                if tuple(got) != self._keys:
                    raise RuntimeError(f"deferred mapping: keys {tuple(got)}, announced {self._keys}")
                self._values.update(got)
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return dict, (dict(self),)


__all__ = ["Lazy", "LazyMapping", "deferred", "enabled", "is_pending", "off", "once"]
