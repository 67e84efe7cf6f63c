"""`nsys stats --format csv` reports: `cuda_gpu_kern_sum` (one row per kernel name: instances and total
time) and `cuda_gpu_trace` (one row per kernel launch, memcpy and memset).

The header is located by its column names (stdout may carry `Generating SQLite file ...` lines before
it); the time unit is read from the column suffix (`(ns)`, `(us)`, `(ms)`, `(s)`: `--timeunit`). The
older `gpukernsum` spelling (`Average`, `Minimum`, ...) is accepted. Rows are streamed, at most RECORDS
(estimator/input_limits.py). A summary row becomes one record of
`instances` launches with their summed time: it has no timestamps, streams or launch shapes.
"""

from __future__ import annotations

import csv
import math
import re

from estimator.input_limits import Counter
from estimator.profile import names
from estimator.profile.record import GpuInfo, MeasuredKernel, Profile, ProfileError

TIME_UNITS = {"ns": 1e9, "us": 1e6, "ms": 1e3, "s": 1.0}  # units per second
SUMMARY = ("Total Time", "Instances", "Name")
TRACE = ("Start", "Duration", "Name")


def _base(column: str) -> tuple[str, float]:
    """('Total Time', 1e9) for 'Total Time (ns)': the name and units per second."""
    m = re.fullmatch(r"\s*(.*?)\s*\((ns|us|ms|s)\)\s*", column)
    return (m.group(1), TIME_UNITS[m.group(2)]) if m else (column.strip(), 1.0)


def _rows(path: str):
    """(row index, row) of the file, streamed; ProfileError for what is not CSV text, LimitError past
    RECORDS rows."""
    counter = Counter(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for i, row in enumerate(csv.reader(f)):
                counter.add()
                yield i, row
    except UnicodeDecodeError:
        raise ProfileError(f"{path}: not a text CSV file") from None
    except csv.Error as exc:  # a NUL byte, a field past csv's field size limit
        raise ProfileError(f"{path}: not a readable CSV file ({exc})") from None


def _header(path: str):
    """The rows after the header, the header's index and the header."""
    rows = _rows(path)
    for i, row in rows:
        if "Name" in row or "RangeId" in row:
            return rows, i, row
    raise ProfileError(f"{path}: no nsys stats CSV header (a line with a Name column) in the file")


def _number(text: str, path: str, line: int) -> float:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ProfileError(f"{path}: line {line + 1}: {text[:40]!r} is not a number")
    return value


def read(path: str) -> Profile:
    rows, at, head = _header(path)
    header = [_base(c)[0] for c in head]
    scale = {_base(c)[0]: _base(c)[1] for c in head}
    col = {c: i for i, c in enumerate(header)}
    if "RangeId" in col or "NameTree" in col:
        raise ProfileError(
            f"{path}: an nsys NVTX range trace (nvtx_pushpop_trace) holds ranges, not "
            f"kernels: export cuda_gpu_trace or cuda_gpu_kern_sum, or the SQLite file"
        )
    if all(c in col for c in SUMMARY):
        return _summary(path, rows, at, col, scale)
    if all(c in col for c in TRACE):
        return _trace(path, rows, at, col, scale)
    raise ProfileError(
        f"{path}: an nsys stats CSV needs the columns {', '.join(SUMMARY)} "
        f"(cuda_gpu_kern_sum) or {', '.join(TRACE)} (cuda_gpu_trace); it has "
        f"{', '.join(header)}"
    )


def _summary(path, rows, at, col, scale) -> Profile:
    kernels, width = [], max(col.values()) + 1
    for i, row in rows:
        if len(row) < width:
            if any(c.strip() for c in row):
                raise ProfileError(f"{path}: line {i + 1} has {len(row)} of {width} columns (truncated?)")
            continue
        name = row[col["Name"]]
        total = _number(row[col["Total Time"]], path, i) / scale["Total Time"]
        kernels.append(
            MeasuredKernel(
                name,
                names.normalise(name),
                names.kind_of(name),
                total,
                instances=int(_number(row[col["Instances"]], path, i)),
            )
        )
    if not kernels:
        raise ProfileError(f"{path}: the kernel summary has a header but no rows")
    return Profile(
        path,
        "nsys-csv",
        kernels,
        None,
        [
            "a kernel summary (cuda_gpu_kern_sum): no per-launch timestamps, streams or launch "
            "shapes, so no timeline; the GPU comes from --arch"
        ],
        summary=True,
    )


def _trace(path, rows, at, col, scale) -> Profile:
    kernels, gpu, skipped, width = [], None, 0, max(col.values()) + 1
    grid = [c for c in ("GrdX", "GrdY", "GrdZ") if c in col]
    block = [c for c in ("BlkX", "BlkY", "BlkZ") if c in col]
    for i, row in rows:
        if len(row) < width:
            if any(c.strip() for c in row):
                raise ProfileError(f"{path}: line {i + 1} has {len(row)} of {width} columns (truncated?)")
            continue
        if len(grid) == 3 and not row[col["GrdX"]].strip():
            skipped += 1  # a memcpy or memset
            continue
        name = row[col["Name"]]
        device, dev_index = _device(row[col["Device"]]) if "Device" in col else (None, None)
        if device and gpu is None:
            gpu = GpuInfo(device)
        kernels.append(
            MeasuredKernel(
                name,
                names.normalise(name),
                names.kind_of(name),
                _number(row[col["Duration"]], path, i) / scale["Duration"],
                start_s=_number(row[col["Start"]], path, i) / scale["Start"],
                stream=int(_number(row[col["Strm"]], path, i)) if "Strm" in col else None,
                device=dev_index,
                grid=tuple(int(_number(row[col[c]], path, i)) for c in grid) if len(grid) == 3 else None,
                block=tuple(int(_number(row[col[c]], path, i)) for c in block) if len(block) == 3 else None,
            )
        )
    if not kernels:
        raise ProfileError(f"{path}: the GPU trace has no kernel rows")
    warnings = [f"{skipped} memcpy/memset rows left out"] if skipped else []
    return Profile(path, "nsys-csv", kernels, gpu, warnings, timeline=True)


def _device(text: str) -> tuple[str | None, int | None]:
    """'NVIDIA H100 80GB HBM3 (0)' -> ('NVIDIA H100 80GB HBM3', 0)."""
    m = re.fullmatch(r"\s*(.*?)\s*\(([0-9]{1,9})\)\s*", text)
    if m:
        return m.group(1), int(m.group(2))
    return (text.strip() or None), None
