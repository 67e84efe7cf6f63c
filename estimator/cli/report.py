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
import json
import os
import sys

from estimator.cli.main import UsageError, load_graph, parse_dims, pipeline_of
from estimator.errors import UserError

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


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.recommend or args.report or args.trace or args.roofline_plot or args.breakdown_plot)


def _check(args: argparse.Namespace) -> None:
    if args.symbolic:
        raise UsageError("--recommend, --report and --trace need numbers; drop --symbolic and bind the dims")
    if args.compare_fusion:
        raise UsageError("--compare-fusion is its own mode; the report shows the fusion comparison already")
    if args.report and not args.report.lower().endswith((".html", ".htm")):
        raise UsageError(f"--report {args.report}: use a file name ending in .html")
    if args.trace and not args.trace.lower().endswith(".json"):
        raise UsageError(f"--trace {args.trace}: use a file name ending in .json")
    from estimator.study.plot import FORMATS

    for flag, path in (("--roofline-plot", args.roofline_plot), ("--breakdown-plot", args.breakdown_plot)):
        if path and not path.lower().endswith(FORMATS):
            raise UsageError(f"{flag} {path}: use a file name ending in {', '.join(FORMATS)}")
    if "," in args.arch:
        raise UsageError("--recommend/--report/--trace take one GPU in --arch (the recommendations compare "
                         "the others)")
    # the other modes never run once this one does: refuse their flags rather than ignore them
    if getattr(args, "validate", False):
        raise UsageError("--validate is its own mode; run it apart from --recommend/--report/--trace")
    for flag in ("crossover", "csv"):
        if getattr(args, flag, None):
            raise UsageError(f"--{flag} is the sweep mode's; run it apart from --recommend/--report/--trace")
    if getattr(args, "sweep", None) and not args.report:
        raise UsageError("--sweep goes with --report (its plot is a section of the page); for the sweep's "
                         "table run it without --recommend/--trace")
    if args.recommend_threshold < 0:
        raise UsageError(f"--recommend-threshold {args.recommend_threshold:g}: must be >= 0")


def requested(args: argparse.Namespace) -> bool:
    """Whether this mode's outputs are asked for (the flags checked); the serving mode asks too."""
    if not wanted(args):
        if args.recommend_threshold != 2.0 or args.recommend_only:
            raise UsageError("--recommend-threshold and --recommend-only need --recommend")
        return False
    _check(args)
    return True


def run(args: argparse.Namespace) -> int | None:
    if not requested(args):
        return None
    import hwdesc
    from estimator.report.table import to_json, to_table
    from estimator.truth.host import resolve_arch

    hw = hwdesc.load(resolve_arch(args.arch))
    graph, dims = load_graph(args, parse_dims(args.dim))
    ctx = context(args, graph, dims, hw)
    recs, found = recommendations(args, ctx)
    if args.json:
        print(json.dumps(add_json(to_json(ctx.base), recs, found), indent=1))
    else:
        print(to_table(ctx.base, args.top))
        if recs is not None:
            print(format_recommendations(recs, found, ctx.total_s, args.recommend_threshold / 100))
    write_outputs(args, ctx, recs, found)
    return 0


def context(args: argparse.Namespace, graph, dims, hw, framework: str | None = None, serve=None):
    """The recommenders' Context with its base estimated as the default mode does (the other modes that
    hand their graph over, --tp and --serve, pass the serving framework for the collectives' pricing and
    the Serving summary)."""
    from estimator.estimate import estimate
    from estimator.report.recommend import Context

    ctx = Context(graph, hw, None, precision=args.precision, dims=dims, pipeline=pipeline_of(args, hw.family),
                  tiling=not args.roofline, warm_inputs=args.warm_inputs, serve=serve, framework=framework)
    ctx.base = estimate(graph, hw, precision=args.precision, dims=dims, pipeline=ctx.pipeline,
                        strict=args.strict, verify_each=args.verify_each, roofline=not ctx.tiling,
                        warm_inputs=args.warm_inputs, framework=framework, after_pass=ctx.after_pass())
    return ctx


def recommendations(args: argparse.Namespace, ctx):
    """(shown, considered) under --recommend, else (None, None)."""
    from estimator.report.recommend import considered, shown

    if not args.recommend:
        return None, None
    only = [n.strip() for n in args.recommend_only.split(",") if n.strip()] if args.recommend_only else None
    found = considered(ctx, only)
    return shown(found, ctx.total_s, args.recommend_threshold / 100), found


def add_json(doc: dict, recs, found) -> dict:
    """`doc` with "recommendations" (the shown ones) and "whatifs" (every what-if) under --recommend."""
    if recs is not None:
        doc["recommendations"] = [r.to_json() for r in recs]
        doc["whatifs"] = [r.to_json() for r in found]
    return doc


def write_outputs(args: argparse.Namespace, ctx, recs, found, gpus: int = 1, title: str | None = None,
                  sweep: str | None = None) -> None:
    """--trace (one process per GPU of `gpus`), --roofline-plot, --breakdown-plot and --report."""
    result = ctx.base
    if args.trace:
        from estimator.report import trace

        trace.write(result, args.trace, gpus)
        print(f"trace written to {args.trace}", file=sys.stderr)
    from estimator.report import figures
    from estimator.study.plot import PlotError, save

    for path, make, what in ((args.roofline_plot, figures.roofline, "roofline"),
                             (args.breakdown_plot, figures.breakdown, "breakdown")):
        if path:
            try:
                save(make(result), path)
            except PlotError as exc:  # its message names --plot
                raise UserError(str(exc).replace("--plot", f"--{what}-plot", 1)) from None
            print(f"{what} written to {path}", file=sys.stderr)
    if args.report:
        write_report(args, ctx, recs, args.recommend_threshold / 100, found or (), title, sweep)


def title_of(args: argparse.Namespace) -> str:
    return (args.model_name or os.path.basename(args.model_path or "") or getattr(args, "torch", None)
            or "model")


def sweep_svg(args: argparse.Namespace, ctx) -> str | None:
    """The sweep plot of estimator/study/plot.py as inline SVG (roofline-priced, as `--sweep --plot`)."""
    if not getattr(args, "sweep", None):
        return None
    from estimator.estimate import estimate
    from estimator.report.figures import to_svg
    from estimator.study.plot import make_figure, save
    from estimator.study.sweep import Sweeper, grid, parse_sweeps

    sweeps = parse_sweeps(args.sweep)
    swept = {s.name for s in sweeps}
    unknown = swept - set(ctx.base.dims)
    if unknown:
        raise UsageError(f"--sweep {sorted(unknown)[0]}: the model has no such dim; its free dims: "
                         f"{', '.join(ctx.base.dims)}")
    bound = {k: v for k, v in ctx.dims.items() if k not in swept}
    def build(extra):
        return estimate(ctx.graph, ctx.hw, precision=ctx.precision, dims={**bound, **extra},
                        pipeline=ctx.pipeline, strict=args.strict, roofline=True)

    sweeper = Sweeper(build)
    pts = sweeper.evaluate(grid(sweeps))
    pts.dims = {s.name: pts.dims[s.name] for s in sweeps}
    if len(sweeps[0].values) < 2:
        raise UsageError("--report with --sweep needs at least two values in the first --sweep")
    fig = make_figure([(sweeper.compiled, pts)], sweeps[0].name, getattr(args, "plot_stack", None),
                      f"{title_of(args)} | precision {pts.precision}")
    if getattr(args, "plot", None):
        save(fig, args.plot)
    return to_svg(fig)


def write_report(args: argparse.Namespace, ctx, recs, threshold: float, found=(), title: str | None = None,
                 sweep: str | None = None, measured=None) -> None:
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
    page = html.render(ctx.base, title or f"{title_of(args)} on {ctx.hw.name}", recs, threshold, fusion,
                       sweep if sweep is not None else sweep_svg(args, ctx), serve, measured, found)
    try:
        with open(args.report, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise UserError(f"--report {args.report}: {exc.strerror or exc}") from None
    print(f"report written to {args.report}", file=sys.stderr)


def format_recommendations(recs, found, total_s: float, threshold: float) -> str:
    from estimator.report.table import show

    def metric(r) -> str:
        return "" if r.metric == "estimate_s" else f"{METRIC_NAMES.get(r.metric, r.metric)} "

    lines = ["", f"recommendations (what-ifs re-estimated; gain >= {100 * threshold:g}% of "
                 f"{show(total_s, 's')}):"]
    if not recs:
        lines.append("  none")
    for i, r in enumerate(recs, 1):
        flags = f"  [{' '.join(r.flags)}]" if r.flags else ""
        lines.append(f"{i:>3}. {r.action}: {metric(r)}-{show(r.gain_s, 's')} ({r.gain_pct:.1f}%) -> "
                     f"{show(r.estimate_s, 's')}{flags}")
        lines.append(f"     {r.reason}")
    hidden = [r for r in found if r not in recs]
    if hidden:
        rest = ", ".join(f"{r.action} {-r.gain_pct:+.1f}%" for r in hidden[:8])
        more = f" and {len(hidden) - 8} more" if len(hidden) > 8 else ""
        lines.append(f"also estimated, not shown (time change): {rest}{more}")
    return "\n".join(lines)
