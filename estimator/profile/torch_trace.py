"""PyTorch profiler (Kineto) Chrome traces: `{"traceEvents": [...], "deviceProperties": [...]}`, often
gzipped (`.pt.trace.json.gz`).

- `cat: "kernel"` events are GPU kernels: `pid` = device, `tid` = stream, `ts`/`dur` in microseconds, args
  with grid, block, registers, shared memory and `correlation`; the `cuda_runtime` event with the same
  correlation is the launch call (launch_s).
- `cat: "cuda_profiler_range"` events (CUPTI range profiling) carry counter values in their args (SASS
  instruction counts such as `smsp__sass_thread_inst_executed_op_ffma_pred_on.sum`); a trace with them
  and no kernel events gives one record per range, without a timeline (ranges are replayed).
- `deviceProperties` names the GPU (name, computeMajor/Minor, numSms).
NB: Kineto's "est. achieved occupancy %" is computed from the launch shape, not measured: not a counter.
"""

from __future__ import annotations

from types import MappingProxyType

from estimator.errors import UserError
from estimator.profile import names
from estimator.profile.record import GpuInfo, MeasuredKernel, Profile, ProfileError

# The event categories this reader uses (load.py keeps only these while it streams the trace).
CATEGORIES = ("kernel", "cuda_runtime", "cuda_profiler_range")
# What a malformed event raises in _read (a field of the wrong type, a missing key, an inf to int).
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)


def looks_like(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)


def _gpu(doc: dict, device: int | None) -> GpuInfo | None:
    props = [p for p in doc.get("deviceProperties") or [] if isinstance(p, dict)]
    p = next((p for p in props if p.get("id") == device), props[0] if props else None)
    if p is None:
        return None
    cc = f"{p['computeMajor']}.{p['computeMinor']}" if "computeMajor" in p else None
    return GpuInfo(p.get("name", ""), cc, p.get("numSms"))


def _dim3(v) -> tuple[int, int, int] | None:
    return tuple(int(x) for x in v) if isinstance(v, list) and len(v) == 3 else None  # type: ignore[return-value]


def read_doc(path: str, doc: dict) -> Profile:
    try:
        return _read(path, doc)
    except UserError:  # already one line (a limit included)
        raise
    except MALFORMED as exc:
        raise ProfileError(f"{path}: malformed Kineto trace event ({type(exc).__name__}: {exc})") from None


def _read(path: str, doc: dict) -> Profile:
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    launches = {
        e["args"]["correlation"]: e["ts"] / 1e6
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    kernels = []
    for e in events:
        if str(e.get("cat", "")).lower() != "kernel" or e.get("ph") != "X":
            continue
        a, name = e.get("args", {}), e["name"]
        kernels.append(
            MeasuredKernel(
                name,
                names.normalise(name),
                names.kind_of(name),
                float(e["dur"]) / 1e6,
                start_s=float(e["ts"]) / 1e6,
                launch_s=launches.get(a.get("correlation")),
                stream=a.get("stream", e.get("tid")),
                device=a.get("device", e.get("pid")),
                grid=_dim3(a.get("grid")),
                block=_dim3(a.get("block")),
                registers=a.get("registers per thread"),
                shared_bytes=a.get("shared memory"),
            )
        )
    warnings = []
    timeline = bool(kernels)
    if not kernels:
        for e in events:
            if e.get("cat") == "cuda_profiler_range" and e.get("ph") == "X":
                counters = {k: float(v) for k, v in e.get("args", {}).items() if isinstance(v, (int, float))}
                name = e["name"]
                kernels.append(
                    MeasuredKernel(
                        name,
                        names.normalise(name),
                        names.kind_of(name),
                        float(e["dur"]) / 1e6,
                        counters=MappingProxyType(counters),
                    )
                )
        if kernels:
            warnings.append(
                "CUPTI range-profiler trace: one record per profiled range (replayed, so no "
                "timeline), durations are those of the ranges"
            )
    if not kernels:
        raise ProfileError(
            f"{path}: the PyTorch trace has no kernel events (was the profiler's CUDA activity on?)"
        )
    return Profile(path, "torch-trace", kernels, _gpu(doc, kernels[0].device), warnings, timeline=timeline)
