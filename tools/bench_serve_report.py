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
    from estimator.cli import serve as serve_mode
    from estimator.cli import serve_report
    from estimator.cli.main import build_parser
    from estimator.serve.deploy import Deployment
    from estimator.serve.whatif import Serving

    out = os.path.join(tempfile.mkdtemp(), "serve.html")
    args = build_parser().parse_args(["--model", a.model, "--arch", a.arch, "--precision", a.precision,
                                      "--tp", a.tp, "--serve", a.serve, "--sweep", f"concurrency={a.sweep}",
                                      "--report", out])
    args.report_wanted = report_mode.requested(args)
    tps = serve_mode._tps(args.tp)  # noqa: SLF001
    work = serve_mode._workload(args)  # noqa: SLF001
    sweep = serve_mode._concurrency_sweep(args)  # noqa: SLF001
    rows: list = []
    opts = serve_mode._options(args, tps[0])  # noqa: SLF001
    dep = timed("deployment (steps priced)", lambda: Deployment.build(a.model, opts), rows)
    result = timed("serving point", lambda: dep.serve(work), rows)

    def base():
        return report_mode.context(args, serve_report.decode_graph(args, dep),
                                   serve_report.decode_dims(work, result),
                                   opts.hw, framework=opts.framework.name if opts.framework.custom_allreduce
                                   else None, serve=Serving(a.model, opts, work, dep, result))

    ctx = timed("estimate (sharded decode step, full depth)", base, rows)
    after = len(rows)
    svg = timed("report: Pareto sweep + SVG", lambda: serve_report.pareto_svg(args, tps, work, sweep, dep),
                rows)
    from passes import STRATEGIES

    timed("report: fusion table (other strategies)",
          lambda: [ctx.rerun(pipeline=p) for n, p in STRATEGIES.items() if n != ctx.base.fusion], rows)
    timed("report: page + write", lambda: report_mode.write_report(args, ctx, None, 0.02, (), "bench", svg),
          rows)
    for label, wall, cpu in rows:
        print(f"{label:<46} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    wall = sum(r[1] for r in rows[after:])
    cpu = sum(r[2] for r in rows[after:])
    print(f"{'report after the estimate':<46} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
