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
chunk by chunk up to DECOMPRESSED_BYTES and GZIP_RATIO (estimator/input_limits.py), so a small file that
inflates to many GB is refused at the limit, in constant memory.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable

from estimator.input_limits import DECOMPRESSED_BYTES, GZIP_RATIO, GZIP_RATIO_AFTER
from estimator.profile import json_stream, ncu_csv, ncu_rep, nsys_csv, nsys_sqlite, ort_json, torch_trace
from estimator.profile.record import Profile, ProfileError

SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_MAGIC = b"NVR\x00"
GZIP_MAGIC = b"\x1f\x8b"
COMPRESSED_CHUNK = 1 << 20


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
        with open(path, "rb") as f:
            return _json(path, _Inflating(f, path).read)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        with open(path, "rb") as f:
            return _json(path, f.read)
    return _text(path, text)


class _Inflating:
    """`read(n)` of a gzip file's inflated text (every member of it, as gzip does), refused past
    DECOMPRESSED_BYTES. zlib inflates at most n bytes per call, so memory stays one chunk however far
    the file inflates; it is zlib alone (not GzipFile, which costs twice the CPU) so that a bomb is
    refused in about a second."""

    def __init__(self, f, path: str) -> None:
        self.f, self.path = f, path
        self.limit, self.total, self.read_in = DECOMPRESSED_BYTES.value(), 0, 0
        self.ratio = GZIP_RATIO.value()
        self.inflater, self.pending, self.fresh, self.done = zlib.decompressobj(31), b"", True, False

    def _damaged(self, why: str) -> ProfileError:
        return ProfileError(f"{self.path}: a damaged or truncated gzip file ({why})")

    def read(self, n: int) -> bytes:
        while not self.done:
            if len(self.pending) < 2:  # need input (and, between members, a whole magic number)
                more = self.f.read(COMPRESSED_CHUNK)
                if not more:
                    if self.pending.strip(b"\0") or not self.fresh:
                        raise self._damaged("it ends inside a gzip member")
                    self.done = True
                    break
                self.pending += more
                self.read_in += len(more)
                continue
            if self.fresh and not self.pending.startswith(GZIP_MAGIC):
                if self.pending.strip(b"\0"):
                    raise self._damaged("data after the last gzip member that is not gzip")
                self.pending = b""  # zero padding after the last member, as gzip allows
                continue
            try:
                out = self.inflater.decompress(self.pending, min(n, self.limit + 1 - self.total))
            except zlib.error as exc:
                raise self._damaged(str(exc)) from None
            self.fresh = False
            if self.inflater.eof:  # the member ended: the next one (if any) starts in unused_data
                self.pending, self.fresh = self.inflater.unused_data, True
                self.inflater = zlib.decompressobj(31)
            else:
                self.pending = self.inflater.unconsumed_tail
            if out:
                self.total += len(out)
                if self.total > self.limit:
                    raise DECOMPRESSED_BYTES.refuse(self.path, "a gzip bomb?")
                used = self.read_in - len(self.pending)
                if self.total > GZIP_RATIO_AFTER and self.total > self.ratio * max(used, 1):
                    raise GZIP_RATIO.refuse(self.path, f"{self.total // max(used, 1):,}x: a gzip bomb?")
                return out
        return b""


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
