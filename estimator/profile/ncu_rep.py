"""Nsight Compute reports (`.ncu-rep`) through NVIDIA's `ncu_report` module (the `ncu-report` wheel,
extra `nsight`; it opens reports without a GPU).

Every action (kernel launch) of every range becomes one MeasuredKernel with all of its numeric metrics
as counters (base units: ns, byte, byte/s, hz, %). An action whose duration is NaN (a replay that
collected nothing) is left out with a warning. The GPU comes from the `device__attribute_*` metrics;
its DRAM peak is `dram__bytes.sum.peak_sustained` (bytes/cycle) x `dram__cycles_elapsed.avg.per_second`.
A report is at most INPUT_BYTES, its actions at most RECORDS (estimator/input_limits.py).

The module is NVIDIA's native code, and on a damaged report it can abort the process (a protobuf CHECK
failure: SIGABRT, no exception) or print log lines on stderr. So `read` runs it in a forked child (within
TOOL_SECONDS, its stderr dropped) that sends the Profile back pickled: a crash is one error line.
The parent imports the module, but never hands it a file. NB: POSIX only (os.fork), as the ncu-report
wheel is (x86_64 Linux).
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import select
import signal
import time
from types import MappingProxyType

from estimator.errors import UserError
from estimator.input_limits import TOOL_SECONDS, Counter, check_size
from estimator.profile import names
from estimator.profile.record import GpuInfo, MeasuredKernel, Profile, ProfileError

DURATION = "gpu__time_duration.sum"


INSTALL_HINT = ("reading a .ncu-rep needs NVIDIA's ncu_report module: pip install "
                "'gpu-inference-estimator[nsight]' (the ncu-report wheel), or export it with "
                "`ncu --import FILE --csv --page details`")


def _module():
    try:
        import ncu_report
    except ImportError:
        raise ProfileError(INSTALL_HINT) from None
    return ncu_report


def _numbers(action) -> dict[str, float]:
    out = {}
    for n in action.metric_names():
        if n.startswith("breakdown:"):
            continue
        v = action.metric_by_name(n).value()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and (n == DURATION or math.isfinite(v)):
            out[n] = float(v)  # NaN / inf (not collected, a 0/0 rate) stay out; a NaN duration is reported
    return out


def _dim3(c: dict[str, float], prefix: str) -> tuple[int, int, int] | None:
    keys = [f"launch__{prefix}_dim_{a}" for a in "xyz"]
    return tuple(int(c[k]) for k in keys) if all(k in c for k in keys) else None  # type: ignore[return-value]


def _gpu(action, c: dict[str, float]) -> GpuInfo:
    name = action.metric_by_name("device__attribute_display_name")
    major, minor = (
        c.get("device__attribute_compute_capability_major"),
        c.get("device__attribute_compute_capability_minor"),
    )
    peak = c.get("dram__bytes.sum.peak_sustained", 0.0) * c.get("dram__cycles_elapsed.avg.per_second", 0.0)
    clock = c.get("device__attribute_clock_rate")  # kHz
    return GpuInfo(
        name.value() if name is not None else "",
        f"{int(major)}.{int(minor)}" if major is not None and minor is not None else None,
        int(c["device__attribute_multiprocessor_count"])
        if "device__attribute_multiprocessor_count" in c
        else None,
        peak if peak > 0 else None,
        clock * 1e3 if clock else None,
        c.get("device__attribute_l2_cache_size"),
    )


def read(path: str) -> Profile:
    """The report's Profile, read in a forked child (see the module's docstring)."""
    _module()  # imported here (harmless: it is a damaged report's parse that aborts), so no child imports it
    check_size(path)  # the module reads the whole report into memory
    status, payload, how = _in_child(lambda: read_here(path), TOOL_SECONDS.value())
    if status == "ok":
        payload.kernels = [dataclasses.replace(k, counters=MappingProxyType(k.counters))
                           for k in payload.kernels]
        return payload
    if status == "refused":
        raise ProfileError(payload)
    if status == "internal":
        raise RuntimeError(f"reading {path} in a child process: {payload}")
    if status == "timeout":
        raise TOOL_SECONDS.refuse(f"{path}: reading the report")
    raise ProfileError(f"{path}: Nsight Compute's report reader failed on this file ({how}): a damaged "
                       f"or truncated report")


LAST_CHILD: dict[str, float] = {}  # the last child's CPU s and peak RSS (tools/fuzz_readers.py reports them)


def _in_child(work, timeout_s: float) -> tuple[str, object, str]:
    """(status, payload, how it ended) of `work()` run in a forked child: "ok" and its pickled result,
    "refused" and a UserError's one line, "internal" and an exception's repr, "timeout", or "crashed"
    (a signal or an exit without an answer). The child's stderr goes to /dev/null (the library's log)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer on the pipe, never return into the caller's code
        try:
            os.close(r)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            try:
                answer: tuple = ("ok", work())
            except UserError as exc:
                answer = ("refused", " ".join(str(exc).split()))
            except BaseException as exc:  # noqa: B036 (the parent reports it as an internal error)
                answer = ("internal", repr(exc)[:500])
            with os.fdopen(w, "wb") as out:
                out.write(pickle.dumps(answer))
        finally:
            os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout_s
    with os.fdopen(r, "rb") as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout", None, ""
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, code, usage = os.wait4(pid, 0)
    LAST_CHILD.update(cpu_s=usage.ru_utime + usage.ru_stime, peak_rss_bytes=usage.ru_maxrss * 1024)
    if os.WIFSIGNALED(code):
        return "crashed", None, f"signal {signal.Signals(os.WTERMSIG(code)).name}"
    if not chunks:
        return "crashed", None, f"exit {os.WEXITSTATUS(code)} without an answer"
    status, payload = pickle.loads(b"".join(chunks))  # our own child's bytes, not the file's
    return status, payload, ""


def read_here(path: str, shown: str | None = None) -> Profile:
    """The report's Profile, read in this process (the child of `read`); `shown`: the path as the
    messages show it. Counters come back as dicts (a mappingproxy does not pickle)."""
    shown = shown or path
    profile = _load(path, shown)
    profile.path = shown
    profile.kernels = [dataclasses.replace(k, counters=dict(k.counters)) for k in profile.kernels]
    return profile


def _load(path: str, shown: str) -> Profile:
    rep = _module()
    try:
        ctx = rep.load_report(path)
    except Exception as exc:  # the module raises its own types for unreadable files
        raise ProfileError(f"{shown}: Nsight Compute cannot read this report ({exc})") from None
    try:
        return _read(shown, ctx)
    except UserError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError, RuntimeError) as exc:
        raise ProfileError(f"{shown}: Nsight Compute reads this report, but its contents are malformed "
                           f"({type(exc).__name__}: {exc})") from None


def _read(path: str, ctx) -> Profile:
    counter = Counter(path)
    if ctx.num_ranges() == 0:
        raise ProfileError(f"{path}: the .ncu-rep holds no ranges (truncated, or not a finished report)")
    kernels, warnings, gpu = [], [], None
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for j in range(rng.num_actions()):
            counter.add()
            action = rng.action_by_idx(j)
            full = action.name(action.NameBase_DEMANGLED)
            c = _numbers(action)
            duration = c.get(DURATION, math.nan)
            if math.isnan(duration):
                warnings.append(
                    f"action {j} ({action.name(action.NameBase_FUNCTION)}): no measured "
                    f"duration ({DURATION} is NaN or absent: a replay that collected nothing); "
                    f"left out"
                )
                continue
            gpu = gpu or _gpu(action, c)
            smem = sum(c.get(f"launch__shared_mem_per_block_{k}", 0.0) for k in ("static", "dynamic"))
            kernels.append(
                MeasuredKernel(
                    full,
                    names.normalise(full),
                    names.kind_of(full),
                    duration / 1e9,
                    stream=int(c["launch__stream_id"]) if "launch__stream_id" in c else None,
                    device=int(c["launch__device_id"]) if "launch__device_id" in c else None,
                    grid=_dim3(c, "grid"),
                    block=_dim3(c, "block"),
                    registers=int(c["launch__registers_per_thread"])
                    if "launch__registers_per_thread" in c
                    else None,
                    shared_bytes=int(smem),
                    counters=MappingProxyType(c),
                )
            )
    if not kernels:
        raise ProfileError(f"{path}: no kernel in the report has a measured duration")
    return Profile(path, "ncu-rep", kernels, gpu, warnings)
