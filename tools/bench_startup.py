#!/usr/bin/env python3
"""Benchmark the start-up of `estimate` (issue 23's targets, whole process): wall and CPU time of fresh
processes of one or more source trees, medians of --runs, with the load average beside them.

Targets (2-core machine): `estimate --model llama-3-8b --arch b200 --json` <= 1.0 s, `estimate
--list-archs` <= 0.3 s. The 10,000-point sweep target is tools/bench_sweep.py's.

    python -m tools.bench_startup [--runs 5] [--tree PATH ...] [--cold] [--compile] [--only model|list-archs]

Each run is `python -m estimator.cli ...` in the tree (cwd and PYTHONPATH), the runs of the trees
interleaved so that a change of the machine's load falls on all of them. CPU time is the process's user
+ sys time (wait4): on a loaded machine the wall time includes waiting for a core, the CPU time does not.
A bundled model's graph comes from the graph cache (estimator/frontends/bundled.py) once a run has
written it (a warm-up run comes first); `--cold` gives every run an empty cache folder (the first run
after an edit or an upgrade). `--compile` writes each tree's bytecode first (python -m compileall): with
PYTHONDONTWRITEBYTECODE set and no __pycache__, every run compiles the project's modules again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS: list[tuple[list[str], float]] = [
    (["--model", "llama-3-8b", "--arch", "b200", "--json"], 1.0),
    (["--list-archs"], 0.3),
]


def run_once(tree: Path, argv: list[str], cache: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + sys) of one fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": cache}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "estimator.cli", *argv], cwd=tree, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"error: {' '.join(argv)} in {tree} failed: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", type=Path, action="append", help="source tree (repeatable; default: this one)")
    ap.add_argument("--cold", action="store_true", help="an empty graph cache for every run")
    ap.add_argument("--compile", action="store_true", help="write each tree's bytecode first")
    ap.add_argument("--only", choices=("model", "list-archs"), help="one of the two commands")
    args = ap.parse_args()
    commands = [c for c in COMMANDS if args.only is None or (args.only == "model") == (c[0][0] == "--model")]
    trees = [t.resolve() for t in args.tree or [ROOT]]
    if args.compile:
        for tree in trees:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            subprocess.run([sys.executable, "-m", "compileall", "-q", "estimator", "models", "passes",
                            "hwdesc"], cwd=tree, check=True, env=env)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for argv, target in commands:
            caches = {tree: f"{tmp}/{i}" for i, tree in enumerate(trees)}
            for tree in trees:
                run_once(tree, argv, caches[tree])  # warm-up: the OS file cache, and the graph cache
            times: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in trees}
            for r in range(args.runs):
                for tree in trees:
                    cache = f"{tmp}/cold-{r}-{len(rows)}" if args.cold else caches[tree]
                    times[tree].append(run_once(tree, argv, cache))
            for tree in trees:
                walls, cpus = zip(*times[tree], strict=True)
                rows.append((" ".join(argv), tree, statistics.median(walls), statistics.median(cpus), target))
    load1 = os.getloadavg()
    print(f"{'command':<50}{'tree':<28}{'wall s':>8}{'cpu s':>8}{'target s':>10}")
    for argv, tree, wall, cpu, target in rows:
        print(f"{'estimate ' + argv:<50}{str(tree)[-27:]:<28}{wall:>8.2f}{cpu:>8.2f}{target:>10.1f}")
    cold = ", each with an empty graph cache" if args.cold else ""
    print(f"(median of {args.runs} fresh processes each{cold}; "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after, on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
