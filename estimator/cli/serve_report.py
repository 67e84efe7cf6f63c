"""--recommend / --report / --trace on one `--serve` point (estimator/cli/serve.py hands it over here):
the recommenders' Context whose base is the decode step of the serving table (the Deployment's own
decode step: one GPU's sharded graph at the served batch and mean context, its collectives priced as the
framework runs them, estimator/serve/deploy.py) and whose `serve` is the Serving what-ifs
(estimator/serve/whatif.py); the outputs written as estimator/cli/report.py writes them, the trace with
one process per GPU of the group and, with a `--sweep concurrency=...`, the Pareto plot as the page's
sweep section."""

from __future__ import annotations

from dataclasses import replace

from estimator.cli import report as report_mode
from estimator.cli.options import Options
from estimator.errors import UserError


def write_outputs(opts: Options, rep, recs, found, work, result, pareto: str | None = None) -> None:
    """--trace / --report / the figures of the served point (nothing when `rep` is None); `pareto`: the
    sweep's Pareto plot as SVG, the page's sweep section."""
    if rep is None:
        return
    title = (f"serving {opts.model.name} on {rep.serve.tp} x {rep.hw.name}: isl {work.isl}, osl {work.osl}, "
             f"concurrency {work.concurrency}")
    step = (f"decode step at batch {result.decode.batch}, past_seq {work.isl + work.osl // 2} (one GPU of "
            f"{rep.serve.tp})")
    report_mode.write_outputs(opts, rep, recs, found, gpus=rep.serve.tp, title=title, sweep=pareto, step=step)


def context(opts: Options, dep, work, result):
    """The recommenders' Context for --serve: its base the decode step of the table below the summary
    (Deployment.decode_step, priced once), its `serve` the Serving what-ifs."""
    from estimator.report.recommend import Context
    from estimator.serve.deploy import decode_dims
    from estimator.serve.whatif import Serving

    if not dep.memory.fits(work.isl, work.osl):
        raise UserError(f"{opts.model.name} does not fit on {dep.opts.tp} x {dep.opts.hw.name}: "
                        "--recommend/--report/--trace need a deployment that fits (run --memory for the "
                        "smallest TP that does)")
    p = dep.step_pricing
    serving = Serving(opts.model.name, dep.opts, work, dep, result)
    ctx = Context(dep.step_graph, dep.opts.hw, None, precision=p.precision, dims=decode_dims(work, result),
                  pipeline=p.pipeline, tiling=not p.roofline, serve=serving, framework=p.framework)
    ctx.base = dep.decode_step(work, result, after_pass=ctx.after_pass(), strict=opts.pricing.strict,
                               verify_each=opts.pricing.verify_each)
    return ctx


def pareto_svg(opts: Options, tps: tuple[int, ...], work, concurrencies: tuple[int, ...], point) -> str:
    """The TP x concurrency sweep's Pareto plot as SVG, for the report's sweep section (the point's
    Deployment serves its own TP's row; the others are built as serve/sweep.py builds them)."""
    from estimator.report.figures import to_svg
    from estimator.serve.deploy import Deployment
    from estimator.serve.summary import pareto_figure

    rows = []
    for tp in tps:
        dep = point if tp == point.opts.tp else Deployment.build(opts.model.name, opts.steps_options(tp))
        rows.extend((tp, r) for r in dep.serve_many([replace(work, concurrency=c) for c in concurrencies]))
    title = f"{opts.model.name} on {opts.gpu.arch}, isl {work.isl}, osl {work.osl}"
    return to_svg(pareto_figure(rows, title))
