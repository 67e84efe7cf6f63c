"""onnxruntime as a ground-truth runner: sessions, wall-clock timing and per-node profiles.

Shared by `--validate` (estimator/truth/validate.py) and the host calibration
(estimator/truth/host_bench.py), so both measure through the same runtime with the same thread settings.

Per-node times come from onnxruntime's profiler (SessionOptions.enable_profiling): its JSON trace has one
"Node" event per executed node and run, named "<node name>_kernel_time", with `args.op_name`. NB: with
the CUDA or TensorRT providers these events time the host side of each node (kernel launches are
asynchronous), so per-node GPU times need a CUPTI-enabled build; end-to-end times are real either way.
"""

from __future__ import annotations

import bisect
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator.errors import UserError
from estimator.truth.providers import EXECUTION_PROVIDERS

KERNEL_SUFFIX = "_kernel_time"


class OrtError(UserError):
    """onnxruntime is missing, lacks the asked-for provider, or cannot load or run the model."""


def ort():
    try:
        import onnxruntime
    except ImportError:
        raise OrtError("onnxruntime is not installed; pip install onnxruntime (or onnxruntime-gpu)") from None
    return onnxruntime


def providers(ep: str) -> list[str]:
    """The provider list for `--ep`; OrtError when this onnxruntime build lacks the first one."""
    if ep not in EXECUTION_PROVIDERS:
        raise OrtError(f"--ep {ep}: unknown execution provider; choose from {', '.join(EXECUTION_PROVIDERS)}")
    wanted = EXECUTION_PROVIDERS[ep]
    have = ort().get_available_providers()
    if wanted[0] not in have:
        raise OrtError(f"--ep {ep}: this onnxruntime has no {wanted[0]} (available: {', '.join(have)}); "
                       f"install onnxruntime-gpu on a machine with an NVIDIA GPU")
    return [p for p in wanted if p in have]


def opt_level(name: str):
    """An onnxruntime GraphOptimizationLevel by its short name: disable_all, basic, extended, all."""
    levels = ort().GraphOptimizationLevel
    table = {"disable_all": levels.ORT_DISABLE_ALL, "basic": levels.ORT_ENABLE_BASIC,
             "extended": levels.ORT_ENABLE_EXTENDED, "all": levels.ORT_ENABLE_ALL}
    return table[name]


def session(model: bytes | str | os.PathLike[str], ep: str = "cpu", level: str = "disable_all",
            profile_prefix: str | None = None, optimized_path: str | None = None,
            threads: int = 0) -> Any:
    """An InferenceSession on serialized model bytes or a file path.

    `threads` = 0 keeps onnxruntime's default intra-op pool (one thread per physical core): validation
    and host calibration both use it, so the descriptor describes the runtime that is measured.
    """
    rt = ort()
    so = rt.SessionOptions()
    so.graph_optimization_level = opt_level(level)
    so.intra_op_num_threads = threads
    so.log_severity_level = 3  # errors only: warnings about unused initializers are noise here
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_path is not None:
        so.optimized_model_filepath = optimized_path
    source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else model
    try:
        return rt.InferenceSession(source, so, providers=providers(ep))
    except OrtError:
        raise
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/NotImplemented types
        raise OrtError(f"onnxruntime cannot load the model: {_first_line(exc)}") from None


def run_once(sess: Any, feeds: Mapping[str, Any]) -> None:
    try:
        sess.run(None, dict(feeds))
    except Exception as exc:
        raise OrtError(f"onnxruntime failed to run the model: {_first_line(exc)}") from None


def time_runs(sess: Any, feeds: Mapping[str, Any], runs: int, warmup: int = 1,
              clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Wall-clock seconds of `runs` calls of session.run after `warmup` untimed ones."""
    for _ in range(warmup):
        run_once(sess, feeds)
    times = []
    for _ in range(runs):
        start = clock()
        run_once(sess, feeds)
        times.append(clock() - start)
    return times


@dataclass(frozen=True)
class NodeTime:
    name: str  # the node's name in the graph onnxruntime executed
    op: str
    seconds: float  # median over the profiled runs


@dataclass(frozen=True)
class Profile:
    """Per-node kernel seconds of each profiled run, nodes in execution order."""

    ops: Mapping[str, str]  # node name -> op type (insertion order = first execution order)
    runs: tuple[Mapping[str, float], ...]

    def medians(self) -> list[NodeTime]:
        """Each node's median over the runs (a run where it did not execute is not counted)."""
        return [NodeTime(n, op, statistics.median(r[n] for r in self.runs if n in r))
                for n, op in self.ops.items()]


def profile_nodes(model: bytes | str | os.PathLike[str], feeds: Mapping[str, Any], runs: int,
                  ep: str = "cpu", level: str = "disable_all", warmup: int = 1,
                  optimized_path: str | None = None, threads: int = 0) -> Profile:
    """Per-node kernel times: a profiling session runs `warmup` + `runs` times; the warm-up runs are
    left out of the profile."""
    with tempfile.TemporaryDirectory(prefix="estimate-profile-") as tmp:
        sess = session(model, ep, level, profile_prefix=str(Path(tmp) / "ort"), optimized_path=optimized_path,
                       threads=threads)
        for _ in range(warmup + runs):
            run_once(sess, feeds)
        trace = Path(sess.end_profiling())
        events = json.loads(trace.read_text())
    return parse_profile(events, skip_runs=warmup)


def parse_profile(events: list[dict[str, Any]], skip_runs: int = 0) -> Profile:
    """Node times per run of a profiler trace, skipping the first `skip_runs` runs.

    Runs are the trace's "model_run" session events; a node event belongs to the run whose span holds
    its start. Without run events the whole trace counts as one run.
    """
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "Session" and e.get("name") == "model_run")
    if not spans:
        spans = [(float("-inf"), float("inf"))]
        skip_runs = 0
    starts = [start for start, _ in spans]
    ops: dict[str, str] = {}
    runs: list[dict[str, float]] = [defaultdict(float) for _ in spans]
    for e in sorted((e for e in events if e.get("cat") == "Node"), key=lambda e: e["ts"]):
        name = e.get("name", "")
        if not name.endswith(KERNEL_SUFFIX):
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < skip_runs or e["ts"] > spans[i][1]:
            continue
        node = name[: -len(KERNEL_SUFFIX)]
        ops.setdefault(node, e.get("args", {}).get("op_name", "?"))
        runs[i][node] += e["dur"] * 1e-6  # the trace counts microseconds
    return Profile(ops, tuple(dict(r) for r in runs[skip_runs:]))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
