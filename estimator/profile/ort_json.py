"""onnxruntime profiler JSON (SessionOptions.enable_profiling): a top-level array of Chrome-trace "X"
events with `ts` and `dur` in microseconds.

- `cat: "Node"` events named `<node>_kernel_time` time each node's Compute() on the host (args
  `op_name` = op type, `provider`): with the CPU provider that is the op's time; with CUDA it is launch
  time, not GPU time.
- `cat: "Kernel"` events (only in CUPTI-enabled builds) are the GPU kernels; onnxruntime puts each node's
  kernels right after that node's event and overwrites their `ts`, so they are attributed by array order
  and only `dur` is GPU time (no timeline).
- `cat: "Session"` `model_run` events are the runs: each node event belongs to the run whose span holds
  it, and `run_wall_s` are their durations.

With Kernel events the kernels are the records; without them the node events are (host records).
"""

from __future__ import annotations

import bisect

from estimator.errors import UserError
from estimator.ops import kind_of as op_kind
from estimator.profile import json_stream, names
from estimator.profile.record import MeasuredKernel, Profile, ProfileError

KERNEL_SUFFIX = "_kernel_time"  # as estimator.truth.ort_runner.KERNEL_SUFFIX
# estimator op kinds (estimator.ops.kind_of) -> measured kinds (names.KINDS)
OP_KINDS = {
    "matmul": "gemm",
    "conv": "gemm",
    "attention": "attention",
    "norm": "norm",
    "reduction": "reduction",
    "pool": "reduction",
    "movement": "copy",
    "view": "copy",
    "elementwise": "elementwise",
    "rotary": "elementwise",
    "quant": "elementwise",
}


# The event categories this reader uses (load.py keeps only these while it streams the profile).
CATEGORIES = ("Node", "Kernel", "Session")
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)


def looks_like(doc: object) -> bool:
    return isinstance(doc, list) and any(
        isinstance(e, dict) and e.get("cat") in ("Node", "Session") for e in doc[:50]
    )


def _runs(events: list[dict]) -> list[tuple[float, float]]:
    return sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )


def read_events(path: str, events: list) -> Profile:
    if not looks_like(events):
        raise ProfileError(f"{path}: a JSON array but not an onnxruntime profile (no Node or Session events)")
    try:
        return _read(path, events)
    except UserError:  # already one line (a limit included)
        raise
    except MALFORMED as exc:
        raise ProfileError(
            f"{path}: malformed onnxruntime profile event ({type(exc).__name__}: {exc})"
        ) from None


def _read(path: str, events: list[dict]) -> Profile:
    spans = _runs(events)
    starts = [s for s, _ in spans]

    def run_of(ts: float) -> int | None:
        if not spans:
            return 0
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts <= spans[i][1] else None

    nodes, gpu_kernels, providers = [], [], set()
    owner: tuple[str, str, int] | None = None
    for e in events:  # array order: a node's Kernel events follow it
        cat, name = e.get("cat"), e.get("name", "")
        if cat == "Node" and name.endswith(KERNEL_SUFFIX):
            args = e.get("args", {})
            run = run_of(e["ts"])
            node, op = name[: -len(KERNEL_SUFFIX)], args.get("op_name", "?")
            providers.add(args.get("provider", "?"))
            owner = (node, op, run) if run is not None else None
            if owner is not None:
                nodes.append(
                    MeasuredKernel(
                        node,
                        node,
                        OP_KINDS.get(op_kind(op), "other"),
                        e["dur"] * 1e-6,  # as ort_runner.parse_profile: the same floats, to the last bit
                        node=node,
                        op=op,
                        run=run,
                    )
                )
        elif cat == "Kernel" and owner is not None:
            args = e.get("args", {})
            grid = tuple(int(args[f"grid_{a}"]) for a in "xyz") if "grid_x" in args else None
            block = tuple(int(args[f"block_{a}"]) for a in "xyz") if "block_x" in args else None
            gpu_kernels.append(
                MeasuredKernel(
                    name,
                    names.normalise(name),
                    names.kind_of(name),
                    e["dur"] / 1e6,
                    stream=_int(args.get("stream")),
                    grid=grid,
                    block=block,
                    node=owner[0],
                    op=owner[1],
                    run=owner[2],
                )
            )
    if not nodes:
        raise ProfileError(f"{path}: the onnxruntime profile has no node events (`<node>_kernel_time`)")
    host = not gpu_kernels
    warnings = []
    if host and providers - {"CPUExecutionProvider"}:
        warnings.append(
            f"providers {', '.join(sorted(providers))} without CUPTI Kernel events: node times "
            f"are host-side launch times, not GPU times (a build with --enable_cuda_profiling "
            f"records the kernels)"
        )
    if not spans:
        warnings.append("no model_run events: the whole profile counts as one run")
    return Profile(
        path,
        "ort-json",
        gpu_kernels or nodes,
        None,
        warnings,
        host=host,
        runs=max(len(spans), 1),
        run_wall_s=[(b - a) / 1e6 for a, b in spans],
        providers=sorted(providers),
    )


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read(path: str) -> Profile:
    with open(path, "rb") as f:
        events = json_stream.parse(f.read, path, lambda e: isinstance(e, dict) and e.get("cat") in CATEGORIES)
    if not isinstance(events, list):
        raise ProfileError(f"{path}: an onnxruntime profile is a JSON array of events")
    return read_events(path, events)
