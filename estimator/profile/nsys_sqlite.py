"""Nsight Systems SQLite exports (`nsys export --type sqlite`, schema 2.x and 3.x).

- kernels: CUPTI_ACTIVITY_KIND_KERNEL, names through StringIds (demangledName);
- launches: CUPTI_ACTIVITY_KIND_RUNTIME joined on correlationId *and* the process
  (`globalTid >> 24 == globalPid >> 24`: correlation ids repeat across processes);
- NVTX: a kernel belongs to the innermost push/pop or start/end range open on its launching thread when
  the launch call started (what `nsys nvtx_gpu_proj_trace` does);
- the GPU: TARGET_INFO_GPU (name, compute capability, SMs, memoryBandwidth in B/s, clockRate in Hz).

Columns are selected by name; tables are created lazily by nsys, so a missing RUNTIME, NVTX or GPU table
means no such events (a warning says what is then missing), while a missing metadata or kernel table, or
a kernel table without the needed columns, refuses the file.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections import defaultdict

from estimator.errors import UserError
from estimator.input_limits import RECORDS, Counter
from estimator.profile import names
from estimator.profile.record import GpuInfo, MeasuredKernel, Profile, ProfileError

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 3.x, 2.x
SCHEMA_MAJORS = ("2", "3")
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
NEEDED = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName")
NVTX_RANGES = (59, 60)  # ENUM_NSYS_EVENT_TYPE: PushPop, StartEnd


def _connect(path: str) -> tuple[sqlite3.Connection, set[str]]:
    # Read-only and immutable (no journal, no lock, no write of any kind); extensions are never enabled.
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True)
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    except sqlite3.Error as exc:
        raise ProfileError(f"{path}: not a readable SQLite file, damaged or truncated ({exc})") from None
    return db, tables


def _schema(db: sqlite3.Connection, tables: set[str], path: str) -> str:
    meta = next((t for t in META_TABLES if t in tables), None)
    if meta is None:
        raise ProfileError(
            f"{path}: an SQLite file but not an Nsight Systems export (no {' or '.join(META_TABLES)} table)"
        )
    rows = dict(db.execute(f"select name, value from {meta}"))
    version = str(rows.get("EXPORT_SCHEMA_VERSION", ""))
    if version.split(".")[0] not in SCHEMA_MAJORS:
        raise ProfileError(
            f"{path}: Nsight Systems export schema {version or 'unknown'!r} is not one this "
            f"reader knows (majors {', '.join(SCHEMA_MAJORS)})"
        )
    return version


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"pragma table_info({table})")}


def _gpus(db: sqlite3.Connection, tables: set[str]) -> dict[int, GpuInfo]:
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = _columns(db, "TARGET_INFO_GPU")
    want = [
        "id",
        "name",
        "computeMajor",
        "computeMinor",
        "smCount",
        "memoryBandwidth",
        "clockRate",
        "l2CacheSize",
        "totalMemory",
    ]
    sel = ", ".join(c if c in cols else "NULL" for c in want)
    out = {}
    for i, name, major, minor, sms, bw, clock, l2, mem in db.execute(f"select {sel} from TARGET_INFO_GPU"):
        out[int(i)] = GpuInfo(
            name or "", f"{major}.{minor}" if major is not None else None, sms, bw, clock, l2, mem
        )
    return out


def _nvtx(db: sqlite3.Connection, tables: set[str], path: str) -> dict[int, list[tuple[int, int, str]]]:
    """Per thread (globalTid), its NVTX ranges (start, end, text) sorted by start."""
    if "NVTX_EVENTS" not in tables:
        return {}
    cols = _columns(db, "NVTX_EVENTS")
    text = "coalesce(n.text, s.value)" if "textId" in cols else "n.text"
    join = "left join StringIds s on s.id = n.textId" if "textId" in cols else ""
    ranges: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    sql = (
        f"select n.globalTid, n.start, n.end, {text} from NVTX_EVENTS n {join} "
        f"where n.eventType in ({', '.join(map(str, NVTX_RANGES))}) and n.end is not null"
    )
    counter = Counter(f"{path}: NVTX_EVENTS")
    for tid, start, end, label in db.execute(sql):
        counter.add()
        ranges[tid].append((start, end, label or ""))
    for rs in ranges.values():
        rs.sort(key=lambda r: (r[0], -r[1]))  # an outer range before the inner one that starts with it
    return ranges


def attribute(ranges: list[tuple[int, int, str]], times: list[int]) -> list[str | None]:
    """For each time, the innermost range holding it (ranges sorted by start, outer first on ties): one
    sweep with a stack of open ranges. NB: exact for nested ranges (push/pop); overlapping start/end
    ranges that do not nest get the most recently opened one still open."""
    order = sorted(range(len(times)), key=times.__getitem__)
    out: list[str | None] = [None] * len(times)
    stack: list[tuple[int, int, str]] = []
    i = 0
    for q in order:
        t = times[q]
        while i < len(ranges) and ranges[i][0] <= t:
            while stack and stack[-1][1] < ranges[i][0]:
                stack.pop()
            stack.append(ranges[i])
            i += 1
        while stack and stack[-1][1] < t:
            stack.pop()
        out[q] = stack[-1][2] if stack else None
    return out


def _nodes(nvtx: dict[int, list[tuple[int, int, str]]], rows: list[tuple]) -> list[str | None]:
    """Each kernel row's NVTX range: by its launch call's thread (column 6) and start (column 5)."""
    out: list[str | None] = [None] * len(rows)
    if not nvtx:
        return out
    by_tid: dict[int, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row[5] is not None and row[6] in nvtx:
            by_tid[row[6]].append(i)
    for tid, idx in by_tid.items():
        for i, label in zip(idx, attribute(nvtx[tid], [rows[i][5] for i in idx]), strict=True):
            out[i] = label
    return out


def read(path: str) -> Profile:
    db, tables = _connect(path)
    try:
        return _read(db, tables, path)
    except sqlite3.Error as exc:  # a truncated file opens but fails on the first page it misses
        raise ProfileError(f"{path}: the SQLite export is damaged or truncated ({exc})") from None
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, UserError):
            raise
        # the right tables and columns holding the wrong types (a text start time, a NULL end)
        raise ProfileError(f"{path}: the export's tables hold values of the wrong type "
                           f"({type(exc).__name__}: {exc})") from None
    finally:
        db.close()


def _read(db: sqlite3.Connection, tables: set[str], path: str) -> Profile:
    version = _schema(db, tables, path)
    if KERNEL not in tables:
        raise ProfileError(
            f"{path}: the export has no {KERNEL} table: no CUDA kernel was captured "
            f"(was `nsys profile --trace cuda` on?)"
        )
    cols = _columns(db, KERNEL)
    missing = [c for c in NEEDED if c not in cols]
    if missing:
        raise ProfileError(f"{path}: unknown schema {version}: {KERNEL} lacks {', '.join(missing)}")
    warnings: list[str] = []
    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME" in tables
    launch = "r.start, r.tid" if runtime else "NULL, NULL"
    # One launch per (process, correlation): the outermost call (a runtime call and the driver call it
    # makes share the correlation id; schema 2.x records both).
    launch_join = (
        "left join (select correlationId as cid, globalTid >> 24 as pid, min(start) as start, "
        "min(globalTid) as tid from CUPTI_ACTIVITY_KIND_RUNTIME group by cid, pid) r "
        "on r.cid = k.correlationId and r.pid = (k.globalPid >> 24)"
        if runtime
        else ""
    )
    opt = [
        c if c in cols else "NULL"
        for c in (
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
        )
    ]
    sql = (
        f"select k.start, k.end, k.deviceId, k.streamId, s.value, {launch}, "
        f"{', '.join('k.' + c if c != 'NULL' else c for c in opt)} "
        f"from {KERNEL} k join StringIds s on s.id = k.demangledName {launch_join} order by k.start"
    )
    most = RECORDS.value()
    rows = db.execute(sql).fetchmany(most + 1)
    if len(rows) > most:
        raise RECORDS.refuse(f"{path}: {KERNEL}")
    nodes = _nodes(_nvtx(db, tables, path), rows)
    kernels = []
    unlaunched = 0
    for row, node in zip(rows, nodes, strict=True):
        start, end, dev, stream, name, lstart, _tid, gx, gy, gz, bx, by, bz, regs, ssm, dsm = row
        if lstart is None:
            unlaunched += 1
        kernels.append(
            MeasuredKernel(
                name,
                names.normalise(name),
                names.kind_of(name),
                (end - start) / 1e9,
                start_s=start / 1e9,
                launch_s=lstart / 1e9 if lstart is not None else None,
                stream=stream,
                device=dev,
                grid=(gx, gy, gz) if gx is not None else None,
                block=(bx, by, bz) if bx is not None else None,
                registers=regs,
                shared_bytes=(ssm or 0) + (dsm or 0) if ssm is not None else None,
                node=node,
            )
        )
    if not kernels:
        raise ProfileError(f"{path}: the export's {KERNEL} table is empty: no kernel ran in the capture")
    if not runtime:
        warnings.append("no CUPTI_ACTIVITY_KIND_RUNTIME table: no launch latencies, no NVTX attribution")
    elif unlaunched:
        warnings.append(
            f"{unlaunched} of {len(kernels)} kernels have no runtime launch record (a trimmed "
            f"capture?): launch latency and NVTX attribution use the rest"
        )
    gpus = _gpus(db, tables)
    used = sorted({k.device for k in kernels})
    gpu = next((gpus[d] for d in used if d in gpus), None)
    if gpu is None:
        warnings.append("no TARGET_INFO_GPU row for the kernels' device: the GPU comes from --arch")
    elif len({gpus[d].name for d in used if d in gpus}) > 1:
        warnings.append(f"kernels ran on GPUs of different models; peaks are those of {gpu.name}")
    return Profile(path, "nsys-sqlite", kernels, gpu, warnings, timeline=True)
