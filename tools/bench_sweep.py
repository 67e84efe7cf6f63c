"""Benchmark sweeps: build time (import, estimate() with the swept dim free, lambdify) and evaluation
time of a many-point sweep (median of --runs), per GPU.

Targets: a 10,000-point sweep of llama-3-8b evaluates in <= 0.2 s after the build on the roofline
estimate (issue 6, `--roofline`), and in <= 0.5 s through the tile model (issue 12, the default: every
point priced as --dim prices it, estimator/pricing/points.py).

    python -m tools.bench_sweep [--model llama-3-8b] [--dim seq] [--points 10000] [--runs 7]
                                [--arch h100-sxm,b200] [--precision bf16] [--roofline]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--dim", default=None, help="the swept dim (default: seq, or past_seq for decode)")
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--arch", default="h100-sxm,b200")
    ap.add_argument("--precision", default=None)
    ap.add_argument("--roofline", action="store_true", help="the roofline estimate, not the tile model")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import numpy as np

    import hwdesc
    import models
    from estimator.cli.options import pipeline_of
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.study.sweep import Compiled, Sweeper, to_csv

    t_imports = time.perf_counter() - t0
    spec = models.MODELS[args.model]
    swept = args.dim or ("past_seq" if "past_seq" in spec.default_dims else "seq")
    fixed = {k: v for k, v in spec.default_dims.items() if k != swept}
    # Step 16 keeps every point above 1 (a dim of 1 gets its own build, see estimator.study.sweep.Sweeper).
    values = np.arange(1, args.points + 1) * 16
    pipeline = pipeline_of(None, None)  # the CLI's default: --fusion tensorrt
    tiling = not args.roofline
    target = 0.2 if args.roofline else 0.5

    t0 = time.perf_counter()
    graph = import_model(spec.build())
    t_import = time.perf_counter() - t0
    print(f"{args.model}: sweep {swept} over {len(values):,} points ({values[0]}..{values[-1]}), "
          f"fixed {fixed}, pipeline {pipeline!r}, precision {args.precision or 'graph'}")
    print(f"python imports {t_imports:.2f} s; ONNX build + import {t_import:.2f} s (once for all GPUs)")
    print(f"{'arch':<10}{'estimate s':>12}{'lambdify s':>12}{'groups':>8}{'eval median s':>15}"
          f"{'eval min s':>12}{'eval cpu s':>12}{'csv s':>8}")
    worst = 0.0
    for arch in args.arch.split(","):
        hw = hwdesc.load(arch)
        t0 = time.perf_counter()
        result = estimate(graph, hw, precision=args.precision, dims=fixed, pipeline=pipeline,
                          roofline=not tiling)
        t_est = time.perf_counter() - t0
        t0 = time.perf_counter()
        compiled = Compiled(result)
        t_lam = time.perf_counter() - t0
        sweeper = Sweeper(lambda extra, hw=hw: estimate(graph, hw, precision=args.precision,
                                                        dims={**fixed, **extra}, pipeline=pipeline,
                                                        roofline=not tiling))
        sweeper.compiled, sweeper.result = compiled, result  # reuse the build just timed
        times, cpu = [], []
        for _ in range(args.runs):
            t0, c0 = time.perf_counter(), time.process_time()
            pts = sweeper.evaluate({swept: values})
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        t0 = time.perf_counter()
        to_csv([pts])
        t_csv = time.perf_counter() - t0
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"{arch:<10}{t_est:>12.2f}{t_lam:>12.2f}{len(compiled.groups):>8}{med:>15.4f}{min(times):>12.4f}"
              f"{statistics.median(cpu):>12.4f}{t_csv:>8.2f}")
    print("(eval cpu s: this process's CPU time, what wall time is on a quiet machine)")
    print(f"(evaluation = Sweeper.evaluate: totals, per-limiter, per-kind and per-scope arrays; median of "
          f"{args.runs} runs; {'roofline' if args.roofline else 'tile model'}; target <= {target} s: "
          f"{'met' if worst <= target else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
