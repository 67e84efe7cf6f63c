"""What any reader of a user's file will take in: sizes, counts and depths, each raised by an environment
variable that the refusal names.

Files come from other people and other machines (a colleague's nsys export, a cubin from a build farm), so
every reader stops at a limit before it can take the machine's memory or time:

| limit | default | environment variable | what it bounds |
|---|---|---|---|
| input bytes | 512 MiB | ESTIMATOR_MAX_INPUT_BYTES | a file read whole (cubin, fatbin, PTX, MLIR, .ncu-rep) |
| config bytes | 8 MiB | ESTIMATOR_MAX_CONFIG_BYTES | config.json |
| YAML bytes | 1 MiB | ESTIMATOR_MAX_YAML_BYTES | a hardware YAML (hwdesc/loader.py) |
| decompressed bytes | 1 GiB | ESTIMATOR_MAX_DECOMPRESSED_BYTES | what a gzip trace inflates to |
| gzip ratio | 200 | ESTIMATOR_MAX_GZIP_RATIO | inflated / compressed bytes, past the first 64 MiB |
| records | 5,000,000 | ESTIMATOR_MAX_RECORDS | events, rows, kernels, metric rows kept |
| JSON depth | 64 | ESTIMATOR_MAX_JSON_DEPTH | nesting of a JSON value (at most 500) |
| nesting | 256 | ESTIMATOR_MAX_NESTING | brackets of MLIR text (its C++ parser recurses) |
| JSON value bytes | 64 MiB | ESTIMATOR_MAX_JSON_VALUE_BYTES | one element of a streamed JSON array |
| tool seconds | 120 | ESTIMATOR_TOOL_TIMEOUT_S | one cuobjdump / nvdisasm / ptxas / nvcc run |
| tool output bytes | 256 MiB | ESTIMATOR_MAX_TOOL_OUTPUT_BYTES | what one such run prints |

A refusal is a LimitError (a UserError: one `error:` line, exit 2) that says which limit and how to raise
it. hwdesc/loader.py reads its two (YAML bytes, nesting) itself: hwdesc imports nothing of estimator.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from estimator.errors import UserError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
# CPython's json decoder recurses once per level and stops at the interpreter's recursion limit (1000 by
# default), so a depth above this cannot be honoured: the variable is capped here.
JSON_DEPTH_CAP = 500


@dataclass(frozen=True)
class Limit:
    env: str
    default: int
    unit: str  # "bytes", "records", "levels", "s"
    what: str  # "input file size", ...
    cap: int | None = None

    def value(self) -> int:
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        try:
            n = int(text.replace("_", ""))
        except ValueError:
            raise UserError(f"{self.env}={text!r}: not a whole number of {self.unit}") from None
        if n <= 0:
            raise UserError(f"{self.env}={text!r}: must be > 0 {self.unit}")
        return min(n, self.cap) if self.cap else n

    def refuse(self, label: str, seen: str | None = None) -> LimitError:
        """The error for `label` past this limit; `seen` says how far it got ("2.1 GiB")."""
        n = self.value()
        shown = _bytes(n) if self.unit == "bytes" else f"{n:,}x" if self.unit == "x" else f"{n:,} {self.unit}"
        over = f" ({seen})" if seen else ""
        raise_hint = f"set {self.env} to raise it" if self.cap is None or n < self.cap else \
            f"{self.env} is at its cap"
        return LimitError(f"{label}: {self.what} over the limit of {shown}{over}; {raise_hint}")


class LimitError(UserError):
    """A file past one of the limits above."""


INPUT_BYTES = Limit("ESTIMATOR_MAX_INPUT_BYTES", 512 * MIB, "bytes", "file size")
CONFIG_BYTES = Limit("ESTIMATOR_MAX_CONFIG_BYTES", 8 * MIB, "bytes", "file size")
DECOMPRESSED_BYTES = Limit("ESTIMATOR_MAX_DECOMPRESSED_BYTES", GIB, "bytes", "decompressed size")
GZIP_RATIO = Limit("ESTIMATOR_MAX_GZIP_RATIO", 200, "x", "compression ratio")
GZIP_RATIO_AFTER = 64 * MIB  # a small file may inflate 1000x (a header, a run of zeros); a trace does not
RECORDS = Limit("ESTIMATOR_MAX_RECORDS", 5_000_000, "records", "number of records (events, rows, kernels)")
JSON_DEPTH = Limit("ESTIMATOR_MAX_JSON_DEPTH", 64, "levels", "JSON nesting depth", cap=JSON_DEPTH_CAP)
NESTING = Limit("ESTIMATOR_MAX_NESTING", 256, "levels", "bracket nesting depth")
JSON_VALUE_BYTES = Limit("ESTIMATOR_MAX_JSON_VALUE_BYTES", 64 * MIB, "bytes", "size of one JSON value")
TOOL_SECONDS = Limit("ESTIMATOR_TOOL_TIMEOUT_S", 120, "s", "run time")
TOOL_OUTPUT_BYTES = Limit("ESTIMATOR_MAX_TOOL_OUTPUT_BYTES", 256 * MIB, "bytes", "output size")
ALL = (INPUT_BYTES, CONFIG_BYTES, DECOMPRESSED_BYTES, GZIP_RATIO, RECORDS, JSON_DEPTH, NESTING,
       JSON_VALUE_BYTES, TOOL_SECONDS, TOOL_OUTPUT_BYTES)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


def check_size(path: str, limit: Limit = INPUT_BYTES) -> int:
    """The size of the file at `path`; LimitError when it is over `limit`."""
    size = os.path.getsize(path)
    if size > limit.value():
        raise limit.refuse(path, f"{_bytes(size)} on disk")
    return size


def read_bytes(path: str, limit: Limit = INPUT_BYTES) -> bytes:
    """The whole file, refused before reading when it is over `limit` (and checked again while reading:
    a file can grow between the two)."""
    check_size(path, limit)
    n = limit.value()
    with open(path, "rb") as f:
        data = f.read(n + 1)
    if len(data) > n:
        raise limit.refuse(path)
    return data


class Counter:
    """Counts records as a reader takes them in; LimitError past RECORDS."""

    def __init__(self, label: str) -> None:
        self.label, self.n, self.max = label, 0, RECORDS.value()

    def add(self, k: int = 1) -> None:
        self.n += k
        if self.n > self.max:
            raise RECORDS.refuse(self.label)


def depth_of(value: object, stop: int) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), counted without recursion, up to `stop`."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            items = v.values()
        elif isinstance(v, list):
            items = v
        else:
            continue
        deepest = max(deepest, d)
        if deepest > stop:
            return deepest
        todo.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return deepest


def check_depth(value: object, label: str) -> None:
    limit = JSON_DEPTH.value()
    if depth_of(value, limit) > limit:
        raise JSON_DEPTH.refuse(label)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str | bytes, label: str) -> object:
    """json.loads for a whole small file (config.json): no NaN / Infinity, depth at most JSON_DEPTH.
    json.JSONDecodeError passes through for the caller's own message."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise JSON_DEPTH.refuse(label) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        raise json.JSONDecodeError(str(exc), "", 0) from None
    check_depth(value, label)
    return value
