"""Benchmark the estimator itself: wall time and peak RSS of `estimate` on llama-3-8b and llama-3-70b
(prefill and decode), beside the floor of `onnx.load` + symbolic shape inference of the same file.

Each measurement runs in a fresh subprocess (imports included, as a user sees it); medians of --runs.
Targets (issue 2, 2-core machine): 8B <= 2 s, 70B <= 5 s, peak RSS <= 400 MB, <= 3x the floor.
Start-up (issue 11): `estimate --list-archs` <= 0.3 s and `estimate --model llama-3-8b` <= 1.0 s, whole
process; reported as wall time and as the process's CPU time (user + sys, from wait4: on a loaded
machine the wall time includes waiting for a core, the CPU time does not).

    python -m tools.bench_estimate [--runs 3] [--models llama-3-8b,llama-3-70b-decode] [--startup-only]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_MODELS = "llama-3-8b,llama-3-8b-decode,llama-3-70b,llama-3-70b-decode"

# The floor: what any estimator of this file must do before pricing anything, with the same inference
# the estimator runs (weights turned into shape-only inputs, then onnxruntime's symbolic inference).
FLOOR = """
import sys, onnx
from estimator.frontends.onnx_import import infer_shapes, split_weights
m = onnx.load(sys.argv[1], load_external_data=False)
infer_shapes(split_weights(m)[0])
"""


def measure(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
    # RUSAGE_CHILDREN's ru_maxrss is the max over all children so far (KB on Linux): run the biggest
    # last or read it per process; here each measurement is compared with the running max.
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(after, before) / 1024


def peak_rss_mb(cmd: list[str]) -> float:
    """Peak RSS of one run through /usr/bin/time-like wait4 accounting."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss / 1024


def cpu_and_wall(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + sys) of one subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"error: {' '.join(cmd)} failed: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def startup(runs: int) -> None:
    """The start-up targets, with this checkout's CLI (python -m estimator.cli)."""
    cli = [sys.executable, "-m", "estimator.cli"]
    print(f"{'command':<40}{'wall s':>9}{'cpu s':>8}{'target s':>10}")
    for argv, target in ((["--list-archs"], 0.3), (["--model", "llama-3-8b"], 1.0)):
        walls, cpus = zip(*(cpu_and_wall([*cli, *argv]) for _ in range(runs)), strict=True)
        print(f"{'estimate ' + ' '.join(argv):<40}{statistics.median(walls):>9.2f}"
              f"{statistics.median(cpus):>8.2f}{target:>10.1f}")
    print(f"(median of {runs} fresh processes each)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                    help="override a model's default dim (e.g. batch=64 for deepseek-v3-decode)")
    ap.add_argument("--module", action="store_true",
                    help="run `python -m estimator.cli` of this checkout instead of the installed `estimate`")
    ap.add_argument("--startup-only", action="store_true", help="only the start-up targets")
    ap.add_argument("--no-symbolic", action="store_true", help="skip the free-dims (--symbolic) run")
    args = ap.parse_args()

    startup(args.runs)
    if args.startup_only:
        return 0

    import models

    estimate_bin = os.path.join(os.path.dirname(sys.executable), "estimate")
    runner = [sys.executable, "-m", "estimator.cli"] if args.module else [estimate_bin]
    overrides = dict(item.split("=", 1) for item in args.dim)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            spec = models.MODELS[name]
            path = os.path.join(tmp, f"{name}.onnx")
            model = spec.build()
            with open(path, "wb") as f:
                f.write(model.SerializeToString())
            nodes = len(model.graph.node)
            bound = {**spec.default_dims, **overrides}
            dims = [a for k, v in bound.items() for a in ("--dim", f"{k}={v}")]
            est_cmd = [*runner, path, "--precision", "bf16", "--json", *dims]
            floor_cmd = [sys.executable, "-c", FLOOR, path]
            est = [measure(est_cmd)[0] for _ in range(args.runs)]
            floor = [measure(floor_cmd)[0] for _ in range(args.runs)]
            rss = peak_rss_mb(est_cmd)
            sym = float("nan") if args.no_symbolic else measure([*runner, path, "--symbolic"])[0]
            rows.append((name, nodes, statistics.median(est), statistics.median(floor), rss, sym))
    print(f"{'model':<22}{'nodes':>7}{'estimate s':>12}{'floor s':>9}{'ratio':>7}{'peak RSS MB':>13}"
          f"{'symbolic s':>12}")
    for name, nodes, est, floor, rss, sym in rows:
        print(f"{name:<22}{nodes:>7}{est:>12.2f}{floor:>9.2f}{est / floor:>7.2f}{rss:>13.0f}{sym:>12.2f}")
    print(f"(median of {args.runs} runs each; estimate = `estimate FILE --precision bf16 --json` with the "
          f"model's default dims; floor = onnx.load + symbolic shape inference, both in fresh processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
