"""--recommend / --report / --trace on one `--serve` point (estimator/cli/serve.py hands it over here):
the recommenders' Context whose base is the decode step of the serving table (one GPU's sharded graph at
the served batch and mean context, its collectives priced as the framework runs them) and whose `serve`
is the Serving what-ifs (estimator/serve/whatif.py); the outputs written as estimator/cli/report.py
writes them, the trace with one process per GPU of the group and, with a `--sweep concurrency=...`, the
Pareto plot as the page's sweep section."""

from __future__ import annotations


def write_outputs(args, rep, recs, found, work, result) -> None:
    """--trace / --report / the figures of the served point (nothing when `rep` is None)."""
    if rep is None:
        return
    from estimator.cli import report as report_mode

    title = (f"serving {args.model_name} on {rep.serve.tp} x {rep.hw.name}: decode step at batch "
             f"{result.decode.batch}, past_seq {work.isl + work.osl // 2} (one GPU of {rep.serve.tp})")
    report_mode.write_outputs(args, rep, recs, found, gpus=rep.serve.tp, title=title,
                              sweep=getattr(args, "pareto_svg", None))


def context(args, dep, work, result):
    """The recommenders' Context for --serve: its base the decode step of the table below the summary
    (one GPU's sharded graph at the served batch and mean context), its `serve` the Serving what-ifs."""
    from estimator.cli import report as report_mode
    from estimator.errors import UserError
    from estimator.serve.whatif import Serving

    if not dep.memory.fits(work.isl, work.osl):
        raise UserError(f"{args.model_name} does not fit on {dep.opts.tp} x {dep.opts.hw.name}: "
                        "--recommend/--report/--trace need a deployment that fits (run --memory for the "
                        "smallest TP that does)")
    fw = dep.framework
    serving = Serving(args.model_name, dep.opts, work, dep, result)
    return report_mode.context(args, decode_graph(args, dep), decode_dims(work, result), dep.opts.hw,
                               framework=fw.name if fw.custom_allreduce else None, serve=serving)


def decode_graph(args, dep):
    """One GPU's sharded decode graph of the bundled model (dims free)."""
    import models
    from estimator.frontends.onnx_import import import_model
    from passes.shard_tp import shard_tp

    name = args.model_name.removesuffix("-decode") + "-decode"
    return shard_tp(import_model(models.build(name)), dep.opts.tp).graph


def decode_dims(work, result) -> dict[str, int]:
    """The served decode batch (padded to its CUDA graph) and the mean context isl + osl / 2."""
    return {"batch": result.decode.batch, "past_seq": work.isl + work.osl // 2}


def pareto_svg(args, tps: list[int], work, concurrencies: list[int], point) -> str:
    """The TP x concurrency sweep's Pareto plot as SVG, for the report's sweep section (the point's
    Deployment serves its own TP's row; the others are built as serve/sweep.py builds them)."""
    from dataclasses import replace

    from estimator.cli import serve as serve_mode
    from estimator.report.figures import to_svg
    from estimator.serve.deploy import Deployment
    from estimator.serve.summary import pareto_figure

    rows = []
    for tp in tps:
        opts = serve_mode._options(args, tp)  # noqa: SLF001  (the serving mode's own Options)
        dep = point if tp == point.opts.tp else Deployment.build(args.model_name, opts)
        rows.extend((tp, r) for r in dep.serve_many([replace(work, concurrency=c) for c in concurrencies]))
    return to_svg(pareto_figure(rows, f"{args.model_name} on {args.arch}, isl {work.isl}, osl {work.osl}"))
