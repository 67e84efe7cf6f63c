"""The one JSON writer of every mode: strict JSON (RFC 8259) only.

`json.dumps` writes NaN and Infinity by default, which no strict parser reads. Here a figure without a
finite value (a deployment that does not fit, a ratio over zero) is written as null, numpy scalars and
arrays as numbers and lists, and json.dumps runs with allow_nan=False, so nothing non-standard can get
through. NB: where a figure has no value the writer's own field says why (e.g. `fits: false`).
"""

from __future__ import annotations

import json
import math
from typing import Any


def clean(obj: Any) -> Any:
    """`obj` with every non-finite float replaced by None and numpy values made plain Python."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    tolist = getattr(obj, "tolist", None)  # numpy scalars and arrays
    if callable(tolist):
        return clean(tolist())
    if hasattr(obj, "__float__"):  # sympy numbers and the like
        return clean(float(obj))
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps of clean(obj), strict: never NaN or Infinity."""
    return json.dumps(clean(obj), allow_nan=False, **kwargs)


def dump(obj: Any, fp, **kwargs: Any) -> None:
    fp.write(dumps(obj, **kwargs))
