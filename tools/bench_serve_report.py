"""How long the serving report takes after the estimate (issue 15: the report for llama-3.1-70b with a sweep
and --serve in <= 3 s after the estimate).

    python -m tools.bench_serve_report [--model llama-3.1-70b] [--arch h100-sxm] \
        [--precision fp8] [--tp 4] [--serve isl=2048,osl=256,concurrency=32] [--sweep 1,2,4,8,16,32,64,128]

Phases, wall clock and this process's CPU time (one run each): the deployment (steps priced, layer
folded) and its serving point; the estimate (the full sharded decode step of the report's kernel table);
then the report after the estimate: the Pareto sweep on the --tp list (its SVG), the other fusion
strategies' estimates of the decode step (the fusion table), the page (figures + tables) and writing it.
No assertion: a speed target is reported, not tested.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def timed(label: str, fn, rows: list):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    rows.append((label, time.perf_counter() - t, time.process_time() - c))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--arch", default="h100-sxm")
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--tp", default="4")
    ap.add_argument("--serve", default="isl=2048,osl=256,concurrency=32")
    ap.add_argument("--sweep", default="1,2,4,8,16,32,64,128")
    a = ap.parse_args()
    from estimator.cli import report as report_mode
    from estimator.cli import serve_report
    from estimator.cli.main import build_parser
    from estimator.cli.options import from_args
    from estimator.serve.deploy import Deployment

    out = os.path.join(tempfile.mkdtemp(), "serve.html")
    opts = from_args(build_parser().parse_args([
        "--model", a.model, "--arch", a.arch, "--precision", a.precision, "--tp", a.tp, "--serve", a.serve,
        "--sweep", f"concurrency={a.sweep}", "--report", out]))
    tps, work, sweep = opts.parallel.tp, opts.serving.workload, opts.serving.concurrency
    rows: list = []
    dep = timed("deployment (steps priced)", lambda: Deployment.build(a.model, opts.steps_options(tps[0])),
                rows)
    result = timed("serving point", lambda: dep.serve(work), rows)
    ctx = timed("estimate (sharded decode step, full depth)",
                lambda: serve_report.context(opts, dep, work, result), rows)
    after = len(rows)
    svg = timed("report: Pareto sweep + SVG", lambda: serve_report.pareto_svg(opts, tps, work, sweep, dep),
                rows)
    from passes import STRATEGIES

    timed("report: fusion table (other strategies)",
          lambda: [ctx.rerun(pipeline=p) for n, p in STRATEGIES.items() if n != ctx.base.fusion], rows)
    timed("report: page + write", lambda: report_mode.write_report(opts, ctx, None, 0.02, (), "bench", svg),
          rows)
    for label, wall, cpu in rows:
        print(f"{label:<46} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    wall = sum(r[1] for r in rows[after:])
    cpu = sum(r[2] for r in rows[after:])
    print(f"{'report after the estimate':<46} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
