"""The `estimate` CLI mode for findings and reports: --recommend, --report FILE.html, --trace FILE.json,
--roofline-plot FILE, --breakdown-plot FILE.

    estimate --model llama-3-8b --arch h100-sxm --precision bf16 --recommend
    estimate --model llama-3-70b --precision bf16 --report out.html --sweep seq=512:32768:x2 --recommend
    estimate --model llama-3-8b --trace out.json      # open in https://ui.perfetto.dev (offline copy works)

The estimate is made as the default mode makes it (same flags, tile-level unless --roofline), then:
--recommend re-estimates what-ifs (estimator/report/recommend.py) and prints them after the table (in
--json: "recommendations", the shown ones, and "whatifs", every what-if estimated); --report writes the
self-contained HTML page (estimator/report/html.py; with --sweep it carries the sweep plot, with
--recommend the recommendations); --trace writes the Chrome trace (estimator/report/trace.py);
--roofline-plot / --breakdown-plot write those figures (estimator/report/figures.py, the
report's own) as PNG/SVG/PDF. Every dim must be bound (--dim, or a bundled
model's defaults).

With --tp N (alone or with one --serve point) the serving mode (estimator/cli/serve.py) hands its sharded
graph over through context() / recommendations() / write_outputs(): the base is then one GPU's sharded
step (with --serve, the decode step at the served batch and mean context), `Context.serve` the Serving
what-ifs (estimator/serve/whatif.py) for the serving recommenders, the report carries the serving
summary (estimator/report/serving.py) and the trace one process per GPU.
"""

from __future__ import annotations

import argparse
import sys

from estimator import jsonout
from estimator.cli.load import load_graph
from estimator.cli.options import Options, UsageError
from estimator.errors import UserError
from estimator.version import stamped

# the metric of a serving or measured recommendation, as the text output names it
METRIC_NAMES = {"tpot_s": "TPOT", "ttft_s": "TTFT", "s_per_token_per_gpu": "GPU-s per token",
                "measured_s": "measured"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("findings and reports")
    g.add_argument("--recommend", action="store_true",
                   help="re-estimate what-ifs (fusion, precision, GPU, kernel shapes) and rank them by gain")
    g.add_argument("--recommend-only", metavar="NAMES",
                   help="run only these recommenders (comma list: fusion, precision, gpu, kv-cache, "
                        "tile-quantization, split-kv, fusion-kernels, profile; with --serve also "
                        "cuda-graphs, serve-throughput, serve-latency)")
    g.add_argument("--recommend-threshold", type=float, default=2.0, metavar="PCT",
                   help="hide recommendations saving less than PCT%% of the total estimate (default 2)")
    g.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")
    g.add_argument("--trace", metavar="FILE.json",
                   help="write the estimated timeline as a Chrome/Perfetto trace")
    g.add_argument("--roofline-plot", metavar="FILE", help="write the roofline figure (.png, .svg, .pdf)")
    g.add_argument("--breakdown-plot", metavar="FILE",
                   help="write the time breakdown by kind and limiter (.png, .svg, .pdf)")


def _check(opts: Options) -> None:
    r = opts.reports
    if opts.output.symbolic:
        raise UsageError("--recommend, --report and --trace need numbers; drop --symbolic and bind the dims")
    if opts.fusion.compare:
        raise UsageError("--compare-fusion is its own mode; the report shows the fusion comparison already")
    if r.report and not r.report.lower().endswith((".html", ".htm")):
        raise UsageError(f"--report {r.report}: use a file name ending in .html")
    if r.trace and not r.trace.lower().endswith(".json"):
        raise UsageError(f"--trace {r.trace}: use a file name ending in .json")
    from estimator.study.plot import FORMATS

    for flag, path in (("--roofline-plot", r.roofline_plot), ("--breakdown-plot", r.breakdown_plot)):
        if path and not path.lower().endswith(FORMATS):
            raise UsageError(f"{flag} {path}: use a file name ending in {', '.join(FORMATS)}")
    if len(opts.gpus) > 1:
        raise UsageError("--recommend/--report/--trace take one GPU in --arch (the recommendations compare "
                         "the others)")
    # the other modes never run once this one does: refuse their flags rather than ignore them
    if opts.validation.validate:
        raise UsageError("--validate is its own mode; run it apart from --recommend/--report/--trace")
    for flag, value in (("crossover", opts.study.crossover), ("csv", opts.study.csv)):
        if value:
            raise UsageError(f"--{flag} is the sweep mode's; run it apart from --recommend/--report/--trace")
    if (opts.study.sweeps or opts.serving.concurrency) and not r.report:
        raise UsageError("--sweep goes with --report (its plot is a section of the page); for the sweep's "
                         "table run it without --recommend/--trace")
    if r.recommend_threshold < 0:
        raise UsageError(f"--recommend-threshold {r.recommend_threshold:g}: must be >= 0")


def requested(opts: Options) -> bool:
    """Whether this mode's outputs are asked for (the flags checked); the serving mode asks too."""
    if not opts.reports.wanted:
        if opts.reports.recommend_threshold != 2.0 or opts.reports.recommend_only is not None:
            raise UsageError("--recommend-threshold and --recommend-only need --recommend")
        return False
    _check(opts)
    return True


def run(opts: Options) -> int | None:
    if not requested(opts):
        return None
    from estimator.report.table import to_json, to_table

    graph, dims = load_graph(opts.model, opts.dims, defaults=not opts.output.symbolic)
    check_bound(opts, graph, dims)
    ctx = context(opts, graph, dims, opts.hw)
    recs, found = recommendations(opts, ctx)
    from estimator.serve.memory import result_fit

    fit = result_fit(ctx.base, opts.serving.framework)  # the default mode's does-not-fit finding
    if opts.output.json:
        doc = add_json(to_json(ctx.base), recs, found)
        if fit is not None:
            doc["memory_fit"] = fit.to_json()
        print(jsonout.dumps(stamped(doc), indent=1))
    else:
        print(to_table(ctx.base, opts.output.top))
        if fit is not None and not fit.fits:
            print(fit.text())
        if recs is not None:
            print(format_recommendations(recs, found, ctx.total_s, opts.reports.threshold))
    write_outputs(opts, ctx, recs, found)
    return 0


def check_bound(opts: Options, graph, dims) -> None:
    """The outputs that price numbers (--report, --trace, --roofline-plot, --breakdown-plot, --recommend)
    refuse a graph with free dims before anything is estimated."""
    r = opts.reports
    free = sorted({s.name for s in graph.free_symbols()} - set(dims))
    asked = [flag for flag, value in (("--report", r.report), ("--trace", r.trace),
                                      ("--roofline-plot", r.roofline_plot),
                                      ("--breakdown-plot", r.breakdown_plot), ("--recommend", r.recommend))
             if value]
    if free and asked:
        raise UsageError(f"{asked[0]} needs numbers: bind every free dim with --dim NAME=VALUE (free: "
                         f"{', '.join(free)})")


def context(opts: Options, graph, dims, hw, framework: str | None = None, serve=None):
    """The recommenders' Context with its base estimated as the default mode does (the other modes that
    hand their graph over, --tp and --serve, pass the serving framework for the collectives' pricing and
    the Serving summary)."""
    from dataclasses import replace

    from estimator.estimate import estimate
    from estimator.report.recommend import Context

    pricing = replace(opts.gpu.pricing, framework=framework)
    ctx = Context(graph, hw, None, precision=pricing.precision, dims=dims, pipeline=pricing.pipeline,
                  tiling=not pricing.roofline, warm_inputs=pricing.warm_inputs, serve=serve,
                  framework=framework)
    ctx.base = estimate(graph, hw, pricing, dims=dims, after_pass=ctx.after_pass())
    return ctx


def recommendations(opts: Options, ctx):
    """(shown, considered) under --recommend, else (None, None)."""
    from estimator.report.recommend import considered, shown

    if not opts.reports.recommend:
        return None, None
    only = list(opts.reports.recommend_only) if opts.reports.recommend_only is not None else None
    found = considered(ctx, only)
    return shown(found, ctx.total_s, opts.reports.threshold), found


def add_json(doc: dict, recs, found) -> dict:
    """`doc` with "recommendations" (the shown ones) and "whatifs" (every what-if) under --recommend."""
    if recs is not None:
        doc["recommendations"] = [r.to_json() for r in recs]
        doc["whatifs"] = [r.to_json() for r in found]
    return doc


def write_outputs(opts: Options, ctx, recs, found, gpus: int = 1, title: str | None = None,
                  sweep: str | None = None, step: str | None = None) -> None:
    """--trace (one process per GPU of `gpus`), --roofline-plot, --breakdown-plot and --report (`step`:
    what the priced kernels are, the heading of the page's summary)."""
    r = opts.reports
    result = ctx.base
    if r.trace:
        from estimator.report import trace

        trace.write(result, r.trace, gpus)
        print(f"trace written to {r.trace}", file=sys.stderr)
    from estimator.report import figures
    from estimator.study.plot import PlotError, save

    for path, make, what in ((r.roofline_plot, figures.roofline, "roofline"),
                             (r.breakdown_plot, figures.breakdown, "breakdown")):
        if path:
            try:
                save(make(result), path)
            except PlotError as exc:  # its message names --plot
                raise UserError(str(exc).replace("--plot", f"--{what}-plot", 1)) from None
            print(f"{what} written to {path}", file=sys.stderr)
    if r.report:
        write_report(opts, ctx, recs, r.threshold, found or (), title, sweep, step=step)


def sweep_svg(opts: Options, ctx) -> str | None:
    """The sweep plot of estimator/study/plot.py as inline SVG (roofline-priced, as the report's sweep
    section has always been)."""
    if not opts.study.sweeps:
        return None
    from estimator.estimate import estimate
    from estimator.report.figures import to_svg
    from estimator.study.plot import make_figure, save
    from estimator.study.sweep import Sweeper, grid, parse_sweeps

    sweeps = parse_sweeps(list(opts.study.sweeps))
    swept = {s.name for s in sweeps}
    unknown = swept - set(ctx.base.dims)
    if unknown:
        raise UsageError(f"--sweep {sorted(unknown)[0]}: the model has no such dim; its free dims: "
                         f"{', '.join(ctx.base.dims)}")
    bound = {k: v for k, v in ctx.dims.items() if k not in swept}
    def build(extra):
        return estimate(ctx.graph, ctx.hw, precision=ctx.precision, dims={**bound, **extra},
                        pipeline=ctx.pipeline, strict=opts.pricing.strict, roofline=True)

    sweeper = Sweeper(build)
    pts = sweeper.evaluate(grid(sweeps))
    pts.dims = {s.name: pts.dims[s.name] for s in sweeps}
    if len(sweeps[0].values) < 2:
        raise UsageError("--report with --sweep needs at least two values in the first --sweep")
    fig = make_figure([(sweeper.compiled, pts)], sweeps[0].name, opts.study.plot_stack,
                      f"{opts.model.title} | precision {pts.precision}")
    if opts.study.plot:
        save(fig, opts.study.plot)
    return to_svg(fig)


def write_report(opts: Options, ctx, recs, threshold: float, found=(), title: str | None = None,
                 sweep: str | None = None, measured=None, step: str | None = None) -> None:
    """The HTML page. `sweep`: a sweep plot as SVG (else the --sweep of the model's dims, if any);
    `measured`: kernel name -> measured seconds per call (a joined profile)."""
    from estimator.report import html
    from passes import STRATEGIES

    fusion = {name: (ctx.base if name == ctx.base.fusion else ctx.rerun(pipeline=p))
              for name, p in STRATEGIES.items()}
    serve = None
    if ctx.serve is not None:
        from estimator.report.serving import summary

        serve = summary(ctx.serve)
    page = html.render(ctx.base, title or f"{opts.model.title} on {ctx.hw.name}", recs, threshold, fusion,
                       sweep if sweep is not None else sweep_svg(opts, ctx), serve, measured, found, step)
    path = opts.reports.report
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise UserError(f"--report {path}: {exc.strerror or exc}") from None
    print(f"report written to {path}", file=sys.stderr)


def format_recommendations(recs, found, total_s: float, threshold: float) -> str:
    from estimator.report.recommendation import action_key, distinct_actions
    from estimator.report.table import show

    def metric(r) -> str:
        return "" if r.metric == "estimate_s" else f"{METRIC_NAMES.get(r.metric, r.metric)} "

    lines = ["", f"recommendations (what-ifs re-estimated; gain >= {100 * threshold:g}% of "
                 f"{show(total_s, 's')}):"]
    if not recs:
        lines.append("  none")
    # one line per what-if, with the other metrics it was estimated by (shown or not) on the same line
    shown = distinct_actions(list(recs) + [r for r in found if r not in recs and
                                           action_key(r) in {action_key(x) for x in recs}])
    for i, (r, same) in enumerate(shown, 1):
        flags = f"  [{' '.join(r.flags)}]" if r.flags else ""
        also = "".join(f"; also {metric(o)}-{show(o.gain_s, 's')} ({o.gain_pct:.1f}%)" for o in same)
        lines.append(f"{i:>3}. {r.action}: {metric(r)}-{show(r.gain_s, 's')} ({r.gain_pct:.1f}%) -> "
                     f"{show(r.estimate_s, 's')}{also}{flags}")
        lines.append(f"     {r.reason}")
    listed = {action_key(r) for r, _ in shown}
    hidden = []
    for r in found:  # the what-ifs not listed above, each once
        if r not in recs and action_key(r) not in listed:
            listed.add(action_key(r))
            hidden.append(r)
    if hidden:
        rest = ", ".join(f"{r.action} {-r.gain_pct:+.1f}%" for r in hidden[:8])
        more = f" and {len(hidden) - 8} more" if len(hidden) > 8 else ""
        lines.append(f"also estimated, not shown (time change): {rest}{more}")
    return "\n".join(lines)
