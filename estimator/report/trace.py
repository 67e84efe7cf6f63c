"""The estimated execution as a Chrome trace (JSON Object Format), for Perfetto or chrome://tracing, to
open beside a measured Nsight Systems timeline.

One process per GPU (pid = GPU index) and one thread per stream: tid 0 the compute stream, tid 1 the
collectives (kernels of kind "communication": with --tp N, alone or with --serve, the CLI passes gpus=N
and every GPU runs the same sharded step).
Kernels are complete events (`"ph": "X"`) laid end to end in topological order, each `dur` its estimate,
so the slices of one GPU sum to the total estimate; `args` hold the bound, estimate, limiter, op, FLOPs,
DRAM bytes and tile. NB: the estimator sums kernel times (one stream, no overlap), so a collective's
slice starts when the previous kernel ends, as on an eager single-stream run. Metadata events (`"ph":
"M"`: process and thread names) carry ts = dur = 0 so that every event has ph, ts, dur, pid and tid.
Times are microseconds (the format's unit), as floats.
"""

from __future__ import annotations

from typing import Any

import sympy

from estimator import jsonout
from estimator.errors import UserError
from estimator.estimate import Result
from estimator.version import stamped

COMMUNICATION_KINDS = frozenset({"communication", "collective"})
STREAMS = {0: "stream 0 (compute)", 1: "collectives"}


class TraceError(UserError):
    pass


def _s(expr) -> float:
    e = sympy.sympify(expr)
    if not e.is_number:
        raise TraceError("--trace needs numbers: bind every free dim with --dim NAME=VALUE")
    return float(e)


def _meta(name: str, pid: int, tid: int, value: str | int) -> dict[str, Any]:
    """A metadata event; the Chrome trace format's `*_sort_index` events carry `sort_index`, the
    others `name`."""
    key = "sort_index" if name.endswith("_sort_index") else "name"
    return {"name": name, "ph": "M", "ts": 0, "dur": 0, "pid": pid, "tid": tid, "args": {key: value}}


def kernel_args(p) -> dict[str, Any]:
    from estimator.report.table import jsonable

    w, t = p.kernel.work, p.timing
    tile = p.kernel.tile
    return {"op": p.kernel.op, "kind": p.kernel.kind, "limiter": t.limiter, "estimate_s": _s(t.estimate_s),
            "bound_s": _s(t.bound_s), "flops": jsonable(w.total_flops), "dram_bytes": jsonable(w.dram_bytes),
            "tile": None if tile is None else tile.tile, "nodes": len(p.kernel.nodes)}


def to_trace(result: Result, gpus: int = 1) -> dict[str, Any]:
    """The trace object; `gpus` > 1 repeats the kernel sequence on one process per GPU (a tensor-
    parallel graph runs the same sharded kernels on every rank)."""
    if gpus < 1:
        raise TraceError(f"--trace: {gpus} GPUs; need at least one")
    events: list[dict[str, Any]] = []
    for gpu in range(gpus):
        name = f"GPU {gpu}: {result.hw.display_name} ({result.hw.name})"
        events.append(_meta("process_name", gpu, 0, name))
        events.append(_meta("process_sort_index", gpu, 0, gpu))
        used = {1 if p.kernel.kind in COMMUNICATION_KINDS else 0 for p in result.kernels} or {0}
        for tid in sorted(used):
            events.append(_meta("thread_name", gpu, tid, STREAMS[tid]))
        ts = 0.0
        for p in result.kernels:
            dur = _s(p.timing.estimate_s) * 1e6
            tid = 1 if p.kernel.kind in COMMUNICATION_KINDS else 0
            events.append({"name": p.kernel.name, "cat": p.kernel.kind, "ph": "X", "ts": ts, "dur": dur,
                           "pid": gpu, "tid": tid, "args": kernel_args(p)})
            ts += dur
    t = result.totals
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"producer": "gpu-inference-estimator (estimated, not measured)", **stamped({}),
                          "arch": result.hw.name, "precision": result.precision, "dims": result.dims,
                          "fusion": result.fusion, "estimate_s": _s(t["estimate_s"]),
                          "bound_s": _s(t["bound_s"])}}


def write(result: Result, path: str, gpus: int = 1) -> None:
    doc = to_trace(result, gpus)
    try:
        with open(path, "w", encoding="utf-8") as f:
            jsonout.dump(doc, f, separators=(",", ":"))
    except OSError as exc:
        raise TraceError(f"--trace {path}: {exc.strerror or exc}") from None
