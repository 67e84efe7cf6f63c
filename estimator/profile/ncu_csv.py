"""Nsight Compute CSV exports: the details page (`ncu --csv [--page details]`, long: one row per launch
and metric) and the raw page (`ncu --csv --page raw`, wide: one row per launch, a units row second).

Columns are found by header name, never position. Section metrics are listed by label on the details
page (`Duration`, `L2 Hit Rate`); LABELS maps each label to its metric name (the table in
shared/reference/profiles.md 1.4) so every reader hands the same counter names to peaks.py. Values are
converted to base units (UNITS): ns, byte, byte/s, hz; `n/a` (not collectable on this chip) is left out.
Lines that do not start with `"` (a live run's `==PROF==` lines) are skipped. Rows are streamed, at most
RECORDS (estimator/input_limits.py).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from types import MappingProxyType

from estimator.errors import UserError
from estimator.input_limits import Counter
from estimator.profile import names
from estimator.profile.record import GpuInfo, MeasuredKernel, Profile, ProfileError

IDENTITY = ("ID", "Kernel Name")
DETAILS = ("Metric Name", "Metric Unit", "Metric Value")

# (section label, metric label) or metric label alone -> metric name, as Nsight Compute stores them.
LABELS: dict[str, str] = {
    "Duration": "gpu__time_duration.sum",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "L1/TEX Cache Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "L2 Cache Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "SM Active Cycles": "sm__cycles_active.avg",
    "SM Frequency": "gpc__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "L1/TEX Hit Rate": "l1tex__t_sector_hit_rate.pct",
    "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
    "Registers Per Thread": "launch__registers_per_thread",
    "Waves Per SM": "launch__waves_per_multiprocessor",
    "Mem Busy": "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    "Max Bandwidth": "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
    "Mem Pipes Busy": "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
}
# "Memory Throughput" means two things: a % in SpeedOfLight, bytes/s in MemoryWorkloadAnalysis.
MEMORY_THROUGHPUT = {
    "%": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "byte/s": "dram__bytes.sum.per_second",
}
# unit (as printed, lower case) -> (base unit, factor)
UNITS: dict[str, tuple[str, float]] = {
    "nsecond": ("ns", 1.0),
    "ns": ("ns", 1.0),
    "usecond": ("ns", 1e3),
    "us": ("ns", 1e3),
    "msecond": ("ns", 1e6),
    "ms": ("ns", 1e6),
    "second": ("ns", 1e9),
    "s": ("ns", 1e9),
    "byte": ("byte", 1.0),
    "kbyte": ("byte", 1e3),
    "mbyte": ("byte", 1e6),
    "gbyte": ("byte", 1e9),
    "tbyte": ("byte", 1e12),
    "byte/s": ("byte/s", 1.0),
    "byte/second": ("byte/s", 1.0),
    "kbyte/s": ("byte/s", 1e3),
    "mbyte/s": ("byte/s", 1e6),
    "gbyte/s": ("byte/s", 1e9),
    "tbyte/s": ("byte/s", 1e12),
    "hz": ("hz", 1.0),
    "khz": ("hz", 1e3),
    "mhz": ("hz", 1e6),
    "ghz": ("hz", 1e9),
    "cycle/nsecond": ("hz", 1e9),
    "cycle/usecond": ("hz", 1e6),
}


def _value(text: str | None, unit: str | None) -> tuple[float, str] | None:
    text = (text or "").replace(",", "").strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        v = float(text)
    except ValueError:
        return None  # a string metric (cache config, scheduling policy)
    if not math.isfinite(v):
        return None
    base, factor = UNITS.get((unit or "").strip().lower(), ((unit or "").strip(), 1.0))
    return v * factor, base


def _dim3(text: str | None) -> tuple[int, int, int] | None:
    nums = re.findall(r"[0-9]+", text or "")
    ok = len(nums) == 3 and all(len(n) <= 18 for n in nums)
    return (int(nums[0]), int(nums[1]), int(nums[2])) if ok else None


def _int(text: str | None) -> int | None:
    text = (text or "").replace(",", "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def _rows(path: str):
    """The CSV rows of the quoted lines, streamed; ProfileError for what is not CSV text, LimitError past
    RECORDS rows."""
    counter = Counter(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.reader(line for line in f if line.startswith('"')):
                counter.add()
                yield row
    except UnicodeDecodeError:
        raise ProfileError(f"{path}: not a text CSV file") from None
    except csv.Error as exc:  # a NUL byte, a field past csv's field size limit
        raise ProfileError(f"{path}: not a readable CSV file ({exc})") from None


def _check(path: str, header: list[str], wanted: tuple[str, ...], page: str) -> None:
    missing = [c for c in wanted if c not in header]
    if missing:
        raise ProfileError(
            f"{path}: an ncu {page} CSV needs the column(s) {', '.join(missing)}; the header "
            f"has {', '.join(header[:8])}..."
        )


def _kernel(
    path: str, ident: dict[str, str], counters: dict[str, float], warnings: list[str]
) -> MeasuredKernel:
    name = ident["Kernel Name"]
    duration = counters.get("gpu__time_duration.sum")
    if duration is None:
        warnings.append(
            f"launch {ident['ID']} ({names.normalise(name)}): no gpu__time_duration.sum "
            f"(Duration); its time counts as 0"
        )
    return MeasuredKernel(
        name,
        names.normalise(name),
        names.kind_of(name),
        (duration or 0.0) / 1e9,
        stream=_int(ident.get("Stream")),
        device=_int(ident.get("Device")),
        grid=_dim3(ident.get("Grid Size")),
        block=_dim3(ident.get("Block Size")),
        registers=int(counters["launch__registers_per_thread"])
        if "launch__registers_per_thread" in counters
        else None,
        counters=MappingProxyType(counters),
    )


def _gpu(idents: list[dict[str, str]]) -> GpuInfo | None:
    cc = next((i["CC"] for i in idents if i.get("CC")), None)
    return GpuInfo("", cc) if cc else None


def read(path: str) -> Profile:
    rows = _rows(path)
    header = next(rows, None)
    if header is None:
        raise ProfileError(f"{path}: no CSV rows (an ncu CSV starts with a quoted header line)")
    _check(path, header, IDENTITY, "CSV")
    try:
        return _details(path, header, rows) if "Metric Name" in header else _raw(path, header, rows)
    except UserError:  # already one line (a limit included)
        raise
    except (KeyError, IndexError, ValueError, OverflowError) as exc:  # e.g. ID after the metric columns
        raise ProfileError(f"{path}: malformed ncu CSV ({type(exc).__name__}: {exc})") from None


def _details(path: str, header: list[str], rows: Iterator[list[str]]) -> Profile:
    _check(path, header, DETAILS, "details-page")
    col = {c: i for i, c in enumerate(header)}
    launches: dict[str, tuple[dict[str, str], dict[str, float]]] = {}
    ident_cols = header[: col["Metric Name"]]
    for row in rows:
        row = row + [""] * (len(header) - len(row))  # metric rows end after the value
        ident = {c: row[col[c]] for c in ident_cols}
        _, counters = launches.setdefault(ident["ID"], (ident, {}))
        metric, unit = row[col["Metric Name"]], row[col["Metric Unit"]]
        parsed = _value(row[col["Metric Value"]], unit)
        if not metric or parsed is None:
            continue  # a rule row, or n/a
        value, base = parsed
        key = (
            metric
            if "__" in metric
            else (MEMORY_THROUGHPUT.get(base) if metric == "Memory Throughput" else LABELS.get(metric))
        )
        if key:
            counters.setdefault(key, value)
    warnings: list[str] = []
    kernels = [_kernel(path, i, c, warnings) for i, c in launches.values()]
    if not kernels:
        raise ProfileError(f"{path}: the ncu CSV has a header but no launches")
    return Profile(path, "ncu-csv", kernels, _gpu([i for i, _ in launches.values()]), warnings)


def _raw(path: str, header: list[str], rows: Iterator[list[str]]) -> Profile:
    units = next(rows, None)
    if units is None:
        raise ProfileError(f"{path}: the ncu raw-page CSV has no units row and no launches")
    first_metric = next((i for i, c in enumerate(header) if "__" in c), None)
    if first_metric is None:
        raise ProfileError(
            f"{path}: neither an ncu details page (no 'Metric Name' column) nor a raw page "
            f"(no metric columns such as gpu__time_duration.sum)"
        )
    launches = rows
    warnings: list[str] = []
    kernels = []
    idents = []
    for row in launches:
        row = row + [""] * (len(header) - len(row))
        ident = dict(zip(header[:first_metric], row[:first_metric], strict=True))
        counters = {}
        for name, unit, text in zip(
            header[first_metric:], units[first_metric:], row[first_metric:], strict=False
        ):
            parsed = _value(text, unit)
            if parsed is not None:
                counters[name] = parsed[0]
        idents.append(ident)
        kernels.append(_kernel(path, ident, counters, warnings))
    if not kernels:
        raise ProfileError(f"{path}: the ncu raw-page CSV has a units row but no launches")
    return Profile(path, "ncu-csv", kernels, _gpu(idents), warnings)
