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
"""

from __future__ import annotations

import gzip
import json
import os
import zlib

from estimator.profile import ncu_csv, ncu_rep, nsys_csv, nsys_sqlite, ort_json, torch_trace
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
        try:
            with gzip.open(path, "rb") as f:
                data = f.read()
        except (OSError, EOFError, zlib.error) as exc:
            raise ProfileError(f"{path}: a damaged or truncated gzip file ({exc})") from None
        return _json(path, data)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        with open(path, "rb") as f:
            return _json(path, f.read())
    return _text(path, text)


def _json(path: str, data: bytes) -> Profile:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProfileError(f"{path}: not valid JSON, truncated? ({exc})") from None
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
