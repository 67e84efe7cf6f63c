"""Open any supported profile: the format is told by the file's content, not its name.

| format | how it is recognised | reader |
|---|---|---|
| nsys-sqlite | `SQLite format 3` header | nsys_sqlite |
| ncu-rep | `NVR\\0` header | ncu_rep (needs the `nsight` extra) |
| torch-trace | JSON object with `traceEvents` (gzip or plain) | torch_trace |
| ort-json | JSON array of Node/Session events | ort_json |
| ncu-csv | CSV whose header has `"Kernel Name"` | ncu_csv |
| nsys-csv | CSV whose header has `Name` with `Total Time` or `Start` | nsys_csv |

Anything else (empty, truncated, another tool's file, nsys's column-aligned console text) is a
ProfileError saying why.

JSON is streamed (json_stream.py: only the events the readers use are kept) and a gzip file is inflated
chunk by chunk up to DECOMPRESSED_BYTES (estimator/input_limits.py), so a small file that inflates to
many GB is refused at the limit, in constant memory.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable

from estimator.input_limits import DECOMPRESSED_BYTES
from estimator.profile import json_stream, ncu_csv, ncu_rep, nsys_csv, nsys_sqlite, ort_json, torch_trace
from estimator.profile.record import Profile, ProfileError

SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_MAGIC = b"NVR\x00"
GZIP_MAGIC = b"\x1f\x8b"


def load(path: str) -> Profile:
    if not os.path.isfile(path):
        raise ProfileError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise ProfileError(f"{path}: empty file")
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(SQLITE_MAGIC):
        return nsys_sqlite.read(path)
    if head.startswith(NCU_MAGIC):
        return ncu_rep.read(path)
    if head.startswith(GZIP_MAGIC):
        with gzip.open(path, "rb") as f:
            return _json(path, _inflating(f, path))
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        with open(path, "rb") as f:
            return _json(path, f.read)
    return _text(path, text)


def _inflating(f: gzip.GzipFile, path: str) -> Callable[[int], bytes]:
    """`read(n)` of the inflated text, refused past DECOMPRESSED_BYTES (GzipFile.read(n) inflates at most
    n bytes, so memory stays one chunk)."""
    limit, total = DECOMPRESSED_BYTES.value(), 0

    def read(n: int) -> bytes:
        nonlocal total
        try:
            data = f.read(min(n, limit + 1 - total))
        except (OSError, EOFError, zlib.error) as exc:
            raise ProfileError(f"{path}: a damaged or truncated gzip file ({exc})") from None
        total += len(data)
        if total > limit:
            raise DECOMPRESSED_BYTES.refuse(path, "a gzip bomb?")
        return data

    return read


def keep_event(e: object) -> bool:
    """The events either JSON reader uses (torch_trace.CATEGORIES, ort_json.CATEGORIES)."""
    return isinstance(e, dict) and str(e.get("cat", "")).lower() in _CATEGORIES


_CATEGORIES = frozenset(c.lower() for c in (*torch_trace.CATEGORIES, *ort_json.CATEGORIES))


def _json(path: str, read: Callable[[int], bytes]) -> Profile:
    doc = json_stream.parse(read, path, keep_event)
    if torch_trace.looks_like(doc):
        return torch_trace.read_doc(path, doc)
    if ort_json.looks_like(doc):
        return ort_json.read_events(path, doc)
    raise ProfileError(
        f"{path}: JSON, but neither a PyTorch/Kineto trace (no traceEvents) nor an "
        f"onnxruntime profile (no Node/Session events)"
    )


def _text(path: str, head: str) -> Profile:
    lines = head.splitlines()[:60]
    if any(line.startswith('"') and '"Kernel Name"' in line for line in lines):
        return ncu_csv.read(path)
    if any(
        "," in line and "Name" in line and ("Total Time" in line or "Start" in line or "RangeId" in line)
        for line in lines
    ):
        return nsys_csv.read(path)
    if any(line.lstrip().startswith("--------") for line in lines) or "Executing '" in head:
        raise ProfileError(
            f"{path}: column-aligned nsys console output (names truncated); re-run "
            f"`nsys stats --format csv` or give the SQLite export"
        )
    raise ProfileError(
        f"{path}: not a profile this tool reads (Nsight Systems SQLite or stats CSV, "
        f"Nsight Compute .ncu-rep or CSV, onnxruntime or PyTorch profiler JSON)"
    )
