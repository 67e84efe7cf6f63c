"""The registry of the torch-mlir frontend's aten op table: `@aten("name", ...)` registers a handler,
`lookup(key)` finds it. The families (`aten_ops`: math, `aten_ops_movement`, `aten_ops_spatial`) import
this module and register on import; `HANDLERS` is complete once mlir_reader.py, the one reader of the
table, has imported them, so no family module imports another and this one imports none."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from estimator.frontends.aten_call import Call

Handler = Callable[["Call"], None]
HANDLERS: dict[str, Handler] = {}


def aten(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for name in names:
            key = name if name.startswith(("aten.", "prims.", "prim.")) else f"aten.{name}"
            if key in HANDLERS:
                raise RuntimeError(f"aten handler for {key!r} registered twice")
            HANDLERS[key] = fn
        return fn

    return deco


def lookup(key: str) -> Handler | None:
    """The handler of ``aten.add.Tensor``: by full name, then by ``aten.add``, then without ``_copy``."""
    if key in HANDLERS:
        return HANDLERS[key]
    base = ".".join(key.split(".")[:2])
    if base in HANDLERS:
        return HANDLERS[base]
    if base.endswith("_copy"):
        return HANDLERS.get(base[: -len("_copy")])
    return None

