"""Microbenchmarks of this host through onnxruntime's CPU provider: the figures of a CPU descriptor.

Every rate is the estimator's own count divided by a measured time: each benchmark graph is priced with
the cost registry, so the "SFU ops" of a Sigmoid are the 2 its cost function charges, and the
descriptor's peaks are in the units `price()` divides by. Kernel times come from onnxruntime's profiler
(the node's own time, without the ~5 us of a session.run call around it).

Two numbers per rate:
- the **peak**, for the bound: the best rate seen, single-threaded times the CPUs or with the default
  thread pool, whichever is higher, times PEAK_HEADROOM. A single thread is the measurement other
  processes on a shared host disturb least (a parallel run needs every core free at once; on a busy
  2-core host that halved the measured FLOP/s), and the best of several short runs likewise. The
  headroom is there because a bound must not be beaten: the best measured rate is a lower estimate of
  the machine's peak (MLAS MatMuls reach ~90% of the FMA units' peak, and 2-thread runs came out up to
  1% above twice the best single-thread run), so a kernel of another shape may run a few percent faster.
- the **achievable** rate, for the estimate: the same best rate per size or op, the median over them:
  what a kernel of ordinary shape gets when the host is not shared (compare it with the fastest run of
  a model). Single-threaded x CPUs counts here too: on an idle 2-core host the pooled MatMul rate came
  out at 100-101% of it, and on a busy one the pooled runs alone gave 41-56% of the idle rate.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from estimator.cost.registry import CUDA, SFU, Work
from estimator.frontends.onnx_import import import_model
from estimator.kernel import lower
from estimator.truth import ort_runner

FLOAT = TensorProto.FLOAT
# Ops the cost registry charges SFU work for that transformers run; the SFU peak is the fastest of them
# per SFU op charged, the achievable rate their median.
TRANSCENDENTAL = ("Exp", "Tanh", "Sigmoid", "Erf", "Sqrt", "Reciprocal", "Div")
PEAK_HEADROOM = 1.1


@dataclass(frozen=True)
class Settings:
    """Sizes and repeats. QUICK (tests) takes a few seconds; FULL (the default) about ten on 2 cores."""

    matmul_sizes: tuple[int, ...]
    cache_numels: tuple[int, ...]  # elementwise sizes whose three tensors stay in the last-level cache
    dram_numel_min: int  # elementwise size of the DRAM test (at least 2x the last-level cache per tensor)
    transcendental_numel: int
    chain_numels: tuple[int, ...]  # Add sizes of the chains that fit the per-op overhead and rate
    chain_length: int
    runs: int
    class_sizes: tuple[tuple[int, int], ...] = ((64, 64), (256, 256))  # (tokens, width) of the class fits
    class_layers: int = 2  # blocks per calibration network (estimator/truth/host_classes.py)


QUICK = Settings((256, 512), (256 * 1024, 1 << 20), 8 << 20, 256 * 1024, (4096, 65536, 262144), 24, 5)
FULL = Settings((512, 1024), (256 * 1024, 512 * 1024, 1 << 20), 16 << 20, 1 << 20,
                (4096, 16384, 65536, 262144), 48, 15,
                ((64, 64), (256, 64), (64, 256), (256, 256), (128, 768)), 3)


@dataclass(frozen=True)
class Rate:
    peak: float  # best rate seen (single thread x CPUs, or pooled) x PEAK_HEADROOM
    achievable: float  # the same best rate, median over the benchmark's cases (sizes or ops)
    detail: str  # what was run, for the descriptor's `source`


@dataclass(frozen=True)
class HostFigures:
    cpus: int
    fp32_flops: Rate  # MatMul FLOP/s
    cache_bytes_per_s: Rate  # elementwise streaming with the tensors in the last-level cache
    dram_bytes_per_s: Rate  # elementwise streaming with tensors several times the last-level cache
    sfu_ops_per_s: Rate  # transcendental ops (as the cost registry counts them) per second
    chain_bytes_per_s: float  # elementwise streaming rate of ops run back to back (in cache)
    op_overhead_s: float  # per-op wall time beyond the bytes, from the same chains
    llc_bytes: int


Case = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]]):
    graph = helper.make_graph(nodes, "bench",
                              [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs.items()],
                              [helper.make_tensor_value_info(n, FLOAT, s) for n, s in outputs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def _work(model: onnx.ModelProto) -> Work:
    total = Work()
    for k in lower(import_model(model)).kernels:
        total = total + k.work
    return total


def _kernel_times(case: Case, runs: int, threads: int) -> list[float]:
    """Profiled seconds of the case's single node, one per run (after one warm-up)."""
    model, feeds = case
    profile = ort_runner.profile_nodes(model.SerializeToString(), feeds, runs=runs, warmup=1, threads=threads)
    return [sum(run.values()) for run in profile.runs]


def _rate(cases: Sequence[Case], amount: Callable[[Work], float], runs: int, detail: str,
          single_thread_peak: bool = True) -> Rate:
    """Each case's rate is its best run, single-threaded x CPUs or with the default pool, whichever is
    higher (DRAM: pooled only, memory bandwidth does not scale with cores). Peak: the best case x
    PEAK_HEADROOM; achievable: the median case."""
    n = cpus()
    rates = []
    for case in cases:
        work = amount(_work(case[0]))
        best = work / min(_kernel_times(case, runs, threads=0))
        if single_thread_peak:
            best = max(best, n * work / min(_kernel_times(case, runs, threads=1)))
        rates.append(best)
    return Rate(max(rates) * PEAK_HEADROOM, statistics.median(rates), detail)


def _single_op(op: str, numel: int, arity: int, rng: np.random.Generator) -> Case:
    names = ["a", "b", "c"][:arity]
    model = _model([helper.make_node(op, names, ["y"], name=op.lower())], {n: [numel] for n in names},
                   {"y": [numel]})
    # Positive inputs keep Sqrt, Reciprocal and Div on their ordinary (non-NaN, non-inf) path.
    return model, {n: rng.uniform(0.5, 2.0, numel).astype(np.float32) for n in names}


def matmul_rate(s: Settings, rng: np.random.Generator) -> Rate:
    cases = []
    for n in s.matmul_sizes:
        model = _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                       {"a": [n, n], "b": [n, n]}, {"y": [n, n]})
        a = rng.standard_normal((n, n), dtype=np.float32)
        cases.append((model, {"a": a, "b": a}))
    sizes = ", ".join(f"{n}^3" for n in s.matmul_sizes)
    return _rate(cases, lambda w: float(w.flops[(CUDA, "fp32")]), s.runs, f"fp32 MatMul {sizes}")


def stream_rate(numels: Sequence[int], runs: int, rng: np.random.Generator, in_cache: bool) -> Rate:
    cases = [_single_op("Add", n, 2, rng) for n in numels]
    sizes = ", ".join(f"{3 * 4 * n / 2**20:.0f} MiB" for n in numels)
    where = "in the last-level cache" if in_cache else "beyond the last-level cache"
    return _rate(cases, lambda w: float(w.dram_bytes), runs, f"elementwise Add moving {sizes} ({where})",
                 single_thread_peak=in_cache)


def sfu_rate(s: Settings, rng: np.random.Generator) -> Rate:
    cases = [_single_op(op, s.transcendental_numel, 2 if op == "Div" else 1, rng) for op in TRANSCENDENTAL]
    return _rate(cases, lambda w: float(w.flops[(SFU, "fp32")]), s.runs,
                 f"{', '.join(TRANSCENDENTAL)} on {s.transcendental_numel} fp32 elements (in cache), SFU ops "
                 f"as the cost registry counts them")


def _chain_per_op(numel: int, length: int, runs: int, rng: np.random.Generator) -> tuple[float, float]:
    """(bytes the cost registry counts per op, best wall seconds per op) of a chain of `length` Adds of
    `numel` fp32 elements: ops run back to back as in a model, each reading its predecessor's output."""
    nodes, prev = [], "x"
    for i in range(length):
        out = "y" if i == length - 1 else f"t{i}"
        nodes.append(helper.make_node("Add", [prev, "b"], [out], name=f"add{i}"))
        prev = out
    model = _model(nodes, {"x": [numel], "b": [numel]}, {"y": [numel]})
    feeds = {n: rng.standard_normal(numel).astype(np.float32) for n in ("x", "b")}
    sess = ort_runner.session(model.SerializeToString())
    # The best run is the least disturbed; the ~5 us of the session.run call is spread over the chain.
    wall = min(ort_runner.time_runs(sess, feeds, runs=runs, warmup=3))
    return float(_work(model).dram_bytes) / length, wall / length


def chain_fit(s: Settings, rng: np.random.Generator) -> tuple[float, float]:
    """(op_overhead_s, bytes/s) from chains of Adds at several sizes that stay in the cache, run back to
    back as a model runs its ops: per-op wall time = overhead + bytes / rate, fitted by least squares on
    relative error. The overhead is what every op costs the runtime beyond its bytes (executor
    bookkeeping, thread-pool dispatch): additive, not a floor.

    NB: per-op time is not linear in bytes on this runtime: onnxruntime splits an op over its threads
    only above a cost threshold, so mid-size ops (64K elements) stream at about half the rate of 256K ones.
    The fit is one straight line through the activation sizes of the models it prices (16 KB - 1 MB per
    tensor); per size it is off by up to ~30%. A noisy fit falls back to the biggest chain's average."""
    points = [_chain_per_op(n, s.chain_length, max(s.runs, 10), rng) for n in s.chain_numels]
    nbytes, seconds = np.array(points).T
    per_byte, overhead = np.polyfit(nbytes, seconds, 1, w=1 / seconds)
    if per_byte <= 0 or overhead <= 0:
        return float(seconds[0]), float(nbytes[-1] / seconds[-1])
    return float(overhead), float(1 / per_byte)


def last_level_cache_bytes() -> int:
    for key in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(key)
        except (ValueError, OSError):
            continue
        if size and size > 0:
            return int(size)
    return 32 << 20  # unknown: assume a server part's 32 MiB


def measure(s: Settings = FULL, seed: int = 0) -> HostFigures:
    rng = np.random.default_rng(seed)
    llc = last_level_cache_bytes()
    dram_numel = max(s.dram_numel_min, 2 * llc // 4)  # each of the Add's three tensors 2x the cache
    overhead, chain_rate = chain_fit(s, rng)
    return HostFigures(
        cpus=cpus(),
        fp32_flops=matmul_rate(s, rng),
        cache_bytes_per_s=stream_rate(s.cache_numels, s.runs, rng, in_cache=True),
        dram_bytes_per_s=stream_rate((dram_numel,), max(3, s.runs // 3), rng, in_cache=False),
        sfu_ops_per_s=sfu_rate(s, rng),
        chain_bytes_per_s=chain_rate,
        op_overhead_s=overhead,
        llc_bytes=llc,
    )
