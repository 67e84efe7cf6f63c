"""How long the report takes after the estimate (issue 15's target: <= 3 s for llama-3-70b with a sweep).

    python -m tools.bench_report [--model llama-3-70b] [--arch h100-sxm] \
        [--sweep seq=512:32768:x2] [--recommend]

Times in seconds, wall clock and this process's CPU time (the best of --repeat runs):
the base estimate; then each part of the report: the other fusion strategies' estimates (the fusion
table), the sweep (build, evaluation and its SVG), the page itself (figures + tables) and writing it;
and, apart, the trace and the recommendations (--recommend: every what-if is a full estimate).
Prints one line per figure and the total "report after the estimate". No assertion: a speed target is
reported, not tested (tests never depend on wall-clock time).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def best(fn, repeat: int):
    """((wall s, CPU s) of the fastest run, its result). The process's CPU time is what the wall clock
    would read on an idle machine (the work is single-threaded), so both are printed."""
    times, out = [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append((time.perf_counter() - t, time.process_time() - c))
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3-70b")
    ap.add_argument("--arch", default="h100-sxm")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--sweep", default="seq=512:32768:x2")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--recommend", action="store_true", help="time the recommendations too (slow)")
    a = ap.parse_args()

    import hwdesc
    import models
    from estimator.cli.main import build_parser
    from estimator.cli.options import from_args
    from estimator.cli.report import sweep_svg
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.report import html, trace
    from estimator.report.recommend import Context, considered
    from passes import STRATEGIES, pipeline_for

    spec = models.MODELS[a.model]
    graph = import_model(spec.build())
    hw = hwdesc.load(a.arch)
    dims = dict(spec.default_dims)
    pipeline = pipeline_for("tensorrt")
    def context():
        """A Context as the CLI makes one: the base estimate keeps the graph after each of its passes."""
        ctx = Context(graph, hw, None, precision=a.precision, dims=dims, pipeline=pipeline)
        ctx.base = estimate(graph, hw, precision=a.precision, dims=dims, pipeline=pipeline,
                            after_pass=ctx.after_pass())
        return ctx

    t_est, ctx0 = best(context, a.repeat)
    base = ctx0.base

    def fusion():
        ctx = Context(graph, hw, base, precision=a.precision, dims=dims, pipeline=pipeline,
                      _after=dict(ctx0._after))  # a fresh memo, the base's pass prefixes
        return {n: base if n == "tensorrt" else ctx.rerun(pipeline=p) for n, p in STRATEGIES.items()}

    t_fusion, results = best(fusion, a.repeat)
    opts = from_args(build_parser().parse_args(["--model", a.model, "--sweep", a.sweep]))
    t_sweep, svg = best(lambda: sweep_svg(opts, ctx0), a.repeat)
    title = f"{a.model} on {a.arch}"
    t_render, page = best(lambda: html.render(base, title, [], 0.02, results, svg), a.repeat)
    out = tempfile.mkdtemp()

    def write():
        with open(os.path.join(out, "r.html"), "w", encoding="utf-8") as f:
            f.write(page)

    t_write, _ = best(write, a.repeat)
    t_trace, _ = best(lambda: trace.write(base, os.path.join(out, "t.json")), a.repeat)
    after = tuple(sum(x) for x in zip(t_fusion, t_sweep, t_render, t_write, strict=True))
    print(f"{a.model} on {a.arch}, {a.precision}, {len(base.kernels)} kernels, sweep {a.sweep} "
          f"(best of {a.repeat})")
    print(f"  {'':<32}{'wall s':>8}{'CPU s':>8}")
    for label, t in (("base estimate", t_est), ("fusion table (4 estimates)", t_fusion),
                     ("sweep (build + evaluate + SVG)", t_sweep), ("page (figures + tables)", t_render),
                     ("write", t_write), ("report after the estimate", after), ("trace", t_trace)):
        print(f"  {label:<32}{t[0]:8.3f}{t[1]:8.3f}")
    print(f"  page size {len(page) / 1e6:.2f} MB; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    if a.recommend:
        t_rec, recs = best(lambda: considered(ctx0), 1)
        print(f"  {'recommendations (' + str(len(recs)) + ' what-ifs)':<32}{t_rec[0]:8.3f}{t_rec[1]:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
