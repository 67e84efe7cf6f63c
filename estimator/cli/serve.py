"""The `estimate` CLI mode for deployments: --tp, --pp, --memory, --serve, --framework, --kv-precision.

    estimate --model llama-3.1-70b --arch h100-sxm --precision fp8 --tp 4 \\
             --serve isl=2048,osl=256,concurrency=32
    estimate --model llama-3.1-8b --memory --serve isl=1024,osl=512,concurrency=8
    estimate --model llama-3.1-70b --precision fp8 --tp 1,2,4,8 --serve isl=1024,osl=1024,concurrency=8 \\
             --sweep concurrency=1,2,4,8,16,32,64,128 --plot pareto.png
    estimate model.onnx --tp 2 --explain          (one GPU's sharded graph, its kernel table)

--tp alone prices one GPU's sharded graph (passes/shard_tp.py) like a plain run; --serve / --memory
need a bundled decoder (its prefill and decode graphs), see estimator/serve/. --recommend, --report and
--trace (estimator/cli/report.py) work on --tp alone and on one --serve point (not on a sweep).
"""

from __future__ import annotations

import argparse
import json

from estimator.cli.main import UsageError, load_graph, parse_dims, pipeline_of

FRAMEWORKS = ("trtllm", "vllm", "sglang")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("deployment (multi-GPU, memory, serving)")
    g.add_argument(
        "--tp", metavar="N[,N...]", help="tensor-parallel size (a comma list with --serve --sweep)"
    )
    g.add_argument("--pp", type=int, metavar="N", help="pipeline-parallel stages (layers split across GPUs)")
    g.add_argument("--memory", action="store_true", help="print the per-GPU memory breakdown and KV capacity")
    g.add_argument(
        "--serve", metavar="isl=I,osl=O,concurrency=C[,rounds=R]",
        help="TTFT, TPOT, throughput of a workload (rounds=R: the mean of an R-round benchmark run)"
    )
    g.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default=None,
        help="serving framework whose defaults apply (default trtllm); estimator/serve/frameworks.yaml",
    )
    g.add_argument("--kv-precision", metavar="P", help="KV cache precision (e.g. fp8; default: --precision)")
    g.add_argument(
        "--batching",
        choices=("inflight", "static"),
        default="inflight",
        help="in-flight (continuous) batching with chunked prefill, or static batches",
    )


def _tps(text: str | None) -> list[int]:
    if text is None:
        return [1]
    try:
        tps = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"--tp {text!r}: expected an integer or a comma list of integers") from None
    if not tps or any(t < 1 for t in tps):
        raise UsageError(f"--tp {text!r}: tensor-parallel sizes must be positive integers")
    return tps


def run(args: argparse.Namespace) -> int | None:
    if not (args.tp or args.pp or args.memory or args.serve or args.kv_precision or args.framework):
        return None
    tps = _tps(args.tp)
    from estimator.cli import report as report_mode

    args.report_wanted = report_mode.requested(args)  # --recommend/--report/--trace on this mode's step
    if args.pp is not None and args.pp < 1:
        raise UsageError(f"--pp {args.pp}: the number of stages must be a positive integer")
    if args.serve or args.memory:
        return _deploy(args, tps)
    if args.kv_precision or args.framework:
        raise UsageError("--kv-precision and --framework need --serve or --memory")
    if len(tps) > 1:
        raise UsageError("a comma list in --tp needs --serve with --sweep concurrency=...")
    return _sharded_table(args, tps[0])


def _sharded_table(args: argparse.Namespace, tp: int) -> int:
    """One GPU's graph under --tp (and --pp), priced and printed like a plain run."""
    import hwdesc
    from estimator.estimate import estimate
    from estimator.report import fusion as fusion_report
    from estimator.report.table import to_json, to_table
    from estimator.truth.host import resolve_arch
    from passes.shard_tp import shard_tp

    hw = hwdesc.load(resolve_arch(args.arch))
    graph, dims = load_graph(args, parse_dims(args.dim))
    sharded = shard_tp(graph, tp)
    if args.report_wanted and args.pp and args.pp > 1:
        raise UsageError("--recommend/--report/--trace with --pp are not supported yet; use --tp alone")
    from estimator.cli.hf import ep_decisions

    decisions = [*sharded.decisions, *ep_decisions(sharded.graph)]  # --expert-parallel's all-to-all
    stages = None
    if args.pp and args.pp > 1:
        from passes.split_pp import split_pp

        stages = split_pp(sharded.graph, args.pp)
        sharded_graph = stages.graph
    else:
        sharded_graph = sharded.graph
    ctx = recs = found = None
    if args.report_wanted:
        from estimator.cli import report as report_mode

        ctx = report_mode.context(args, sharded_graph, dims, hw, framework="trtllm")
        result = ctx.base
        recs, found = report_mode.recommendations(args, ctx)
    else:
        result = estimate(
            sharded_graph,
            hw,
            precision=args.precision,
            dims=dims,
            pipeline=pipeline_of(args, hw.family),
            strict=args.strict,
            roofline=args.roofline,
            framework="trtllm",
        )
    if args.json:
        out = to_json(result)
        out["parallel"] = {"tp": tp, "pp": args.pp or 1, "ep": getattr(args, "expert_parallel", None) or 1,
                           "decisions": decisions}
        if stages is not None:
            out["pipeline_stages"] = stages.report(result)
        if ctx is not None:
            report_mode.add_json(out, recs, found)
        print(json.dumps(out, indent=1))
    else:
        print(to_table(result, args.top))
        if stages is not None:
            print(stages.report_text(result))
        if recs is not None:
            threshold = args.recommend_threshold / 100
            print(report_mode.format_recommendations(recs, found, ctx.total_s, threshold))
    if ctx is not None:
        report_mode.write_outputs(args, ctx, recs, found, gpus=tp)
    if args.explain:
        print(fusion_report.explain(result))
        print(f"sharding decisions (--tp {tp}):")
        print("\n".join(f"  {d}" for d in decisions) or "  none (tp 1)")
    return 0


def _options(args: argparse.Namespace, tp: int):
    import hwdesc
    from estimator.serve.frameworks import framework
    from estimator.serve.steps import Options
    from estimator.truth.host import resolve_arch

    hw = hwdesc.load(resolve_arch(args.arch))
    return Options(
        hw,
        tp,
        args.precision,
        args.kv_precision,
        pipeline_of(args, hw.family),
        framework(args.framework or "trtllm"),
        tiling=not args.roofline,
    )


def _workload(args: argparse.Namespace):
    from estimator.serve.serving import Workload, parse_workload

    if args.serve:
        return parse_workload(args.serve, args.batching)
    return Workload(2048, 256, 1, args.batching)  # --memory alone: a default request shape


def _deploy(args: argparse.Namespace, tps: list[int]) -> int:
    from estimator.serve.deploy import Deployment

    if not args.model_name:
        raise UsageError(
            "--serve and --memory need a bundled decoder model (--model NAME, see --list-models)"
        )
    if args.pp and args.pp > 1:
        raise UsageError("--pp with --serve or --memory is not supported yet; use --pp with a kernel table")
    if args.report_wanted and not args.serve:
        raise UsageError("--recommend/--report/--trace with --memory need --serve isl=I,osl=O,concurrency=C")
    work = _workload(args)
    sweep = _concurrency_sweep(args)
    if sweep is not None and not args.report_wanted:
        return _sweep(args, tps, work, sweep)
    if sweep is not None and not args.report:
        raise UsageError("--sweep concurrency=... goes with --report (its Pareto plot is a section of the "
                         "page); --recommend/--trace alone take one --serve point")
    if len(tps) > 1 and sweep is None:
        raise UsageError("a comma list in --tp needs --sweep concurrency=...")
    tp = tps[0]  # with a sweep in the report: the --serve point on the first --tp
    opts = _options(args, tp)
    dep = Deployment.build(args.model_name, opts)
    result = dep.serve(work) if args.serve else None
    if sweep is not None:
        from estimator.cli.serve_report import pareto_svg

        args.pareto_svg = pareto_svg(args, tps, work, sweep, dep)
    return _print_point(args, dep, work, result)


def _print_point(args, dep, work, result) -> int:
    from estimator.serve.deploy import smallest_fitting_tp
    from estimator.serve.summary import memory_text, serve_text

    mem, tp = dep.memory, dep.opts.tp
    fits = mem.fits(work.isl, work.osl)
    finding = None
    if not fits:
        better = smallest_fitting_tp(args.model_name, dep.opts, work)
        finding = (
            f"{args.model_name} does not fit on {tp} x {dep.opts.hw.name} at {args.precision or 'graph'} "
            f"precision: {mem.non_kv_bytes / 1e9:.1f} GB per GPU before any KV cache; "
            + (f"the smallest TP that fits is {better}" if better else "no TP up to the NVLink domain fits")
        )
    from estimator.cli import serve_report

    rep = serve_report.context(args, dep, work, result) if args.report_wanted else None
    recs, found = (None, None)
    if rep is not None:
        from estimator.cli import report as report_mode

        recs, found = report_mode.recommendations(args, rep)
        table = rep.base
    else:
        table = _decode_table(args, dep, work, result) if result is not None and fits else None
    if args.json:
        from estimator.report.table import to_json

        out = to_json(table) if table is not None else {"arch": dep.opts.hw.name, "precision": args.precision}
        out["memory"] = {
            **mem.to_json(),
            "fits": fits,
            "kv_capacity_tokens": mem.kv_capacity_tokens,
            "largest_batch": mem.largest_batch(work.isl + work.osl),
            "longest_context": mem.longest_context(work.concurrency),
            "activations_peak_kernel": mem.activations_peak_kernel,
        }
        if finding:
            out["memory"]["finding"] = finding
        if result is not None:
            out["serve"] = result.to_json()
        out["parallel"] = {"tp": tp, "pp": 1, "decisions": list(dep.steps.decisions)}
        if rep is not None:
            report_mode.add_json(out, recs, found)
        print(json.dumps(out, indent=1, default=float))
        serve_report.write_outputs(args, rep, recs, found, work, result)
        return 0
    title = (
        f"serving {args.model_name} on {tp} x {dep.opts.hw.name} (tp {tp}), precision "
        f"{args.precision or 'graph'}, KV {args.kv_precision or args.precision or 'graph'}, "
        f"{dep.framework.display_name}"
    )
    if result is not None:
        print(serve_text(result, title))
        print()
    print(memory_text(mem, work.isl, work.osl, work.concurrency, work.isl + work.osl))
    if finding:
        print(f"finding: {finding}")
    if table is not None:
        from estimator.report.table import to_table

        print()
        print(
            f"decode step at batch {result.decode.batch}, past_seq {work.isl + work.osl // 2} "
            f"(one GPU of {tp}):"
        )
        print(to_table(table, args.top))
    if recs is not None:
        print(report_mode.format_recommendations(recs, found, rep.total_s, args.recommend_threshold / 100))
    if args.explain:
        print(f"sharding decisions (--tp {tp}):")
        print("\n".join(f"  {d}" for d in dep.steps.decisions) or "  none (tp 1)")
    serve_report.write_outputs(args, rep, recs, found, work, result)
    return 0


def _decode_table(args, dep, work, result):
    """The full (unfolded) sharded decode step at the served batch and mean context, for the table."""
    from estimator.cli import serve_report
    from estimator.estimate import estimate

    fw = dep.framework
    return estimate(
        serve_report.decode_graph(args, dep),
        dep.opts.hw,
        precision=args.precision,
        dims=serve_report.decode_dims(work, result),
        pipeline=dep.opts.pipeline,
        roofline=not dep.opts.tiling,
        framework=fw.name if fw.custom_allreduce else None,
    )


def _concurrency_sweep(args) -> list[int] | None:
    specs = [s for s in args.sweep if s.startswith("concurrency=")]
    if not specs:
        if args.sweep:
            raise UsageError("with --serve, sweep the concurrency: --sweep concurrency=1,2,4,...")
        return None
    if not args.serve:
        raise UsageError("--sweep concurrency=... needs --serve isl=I,osl=O,concurrency=C")
    try:
        values = [int(v) for v in specs[0].partition("=")[2].split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--sweep {specs[0]!r}: expected concurrency=1,2,4,...") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--sweep {specs[0]!r}: concurrencies must be positive integers")
    args.sweep = [s for s in args.sweep if s not in specs]
    return values


def _sweep(args, tps: list[int], work, concurrencies: list[int]) -> int:
    from dataclasses import replace

    from estimator.serve.summary import plot_pareto, sweep_text
    from estimator.serve.sweep import sweep_deployments

    if args.plot:
        from estimator.study.plot import check_path

        check_path(args.plot)
    rows = sweep_deployments(
        args.model_name,
        [_options(args, tp) for tp in tps],
        [replace(work, concurrency=c) for c in concurrencies],
    )
    if args.json:
        print(json.dumps({"sweep": [{"tp": tp, **r.to_json()} for tp, r in rows]}, indent=1, default=float))
    else:
        print(sweep_text(rows))
    if args.plot:
        plot_pareto(rows, args.plot, f"{args.model_name} on {args.arch}, isl {work.isl}, osl {work.osl}")
        if not args.json:
            print(f"wrote {args.plot}")
    return 0
