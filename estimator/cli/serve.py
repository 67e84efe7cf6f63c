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

from estimator import jsonout
from estimator.cli import report as report_mode
from estimator.cli import serve_report
from estimator.cli.load import load_graph
from estimator.cli.options import Options, UsageError
from estimator.version import stamped

FRAMEWORKS = ("trtllm", "vllm", "sglang")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("deployment (multi-GPU, memory, serving)")
    g.add_argument(
        "--tp", metavar="N[,N...]", help="tensor-parallel size (a comma list with --serve --sweep)"
    )
    g.add_argument("--pp", type=int, metavar="N", help="pipeline-parallel stages (layers split across GPUs)")
    g.add_argument("--attention-dp", dest="attention_dp", type=int, metavar="N",
                   help="attention data parallelism: N attention replicas, each with its own batch and KV "
                        "cache, the MoE layers shared (GPUs = tp x attention-dp x pp)")
    g.add_argument("--moe-tp", dest="moe_tp", type=int, metavar="N",
                   help="MoE tensor parallelism (moe-tp x expert-parallel = tp x attention-dp)")
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


def run(opts: Options) -> int | None:
    if not (opts.parallel.asked or opts.serving.asked):
        return None
    tps = opts.parallel.tp or (1,)
    reports = report_mode.requested(opts)  # --recommend/--report/--trace on this mode's step
    if opts.parallel.pp is not None and opts.parallel.pp < 1:
        raise UsageError(f"--pp {opts.parallel.pp}: the number of stages must be a positive integer")
    if len(opts.gpus) > 1:
        if opts.serving.workload and not reports and opts.serving.concurrency is None and len(tps) == 1:
            return _side_by_side(opts, tps[0])
        raise UsageError("a comma list of GPUs in --arch goes with one --serve point (no --sweep, "
                         "--recommend, --report or --trace; one --tp), or the sweep mode")
    if opts.serving.workload or opts.serving.memory:
        return _deploy(opts, tps, reports)
    if opts.serving.kv_precision or opts.serving.framework:
        raise UsageError("--kv-precision and --framework need --serve or --memory")
    if len(tps) > 1:
        raise UsageError("a comma list in --tp needs --serve with --sweep concurrency=...")
    return _sharded_table(opts, tps[0], reports)


def _sharded_table(opts: Options, tp: int, reports: bool) -> int:
    """One GPU's graph under --tp (and --pp), priced and printed like a plain run."""
    from dataclasses import replace

    from estimator.cli.hf import ep_decisions
    from estimator.estimate import estimate
    from estimator.report import fusion as fusion_report
    from estimator.report.table import to_json, to_table
    from passes.shard_tp import shard_tp

    hw, pp = opts.hw, opts.parallel.pp
    graph, dims = load_graph(opts.model, opts.dims, defaults=not opts.output.symbolic)
    sharded = shard_tp(graph, tp)
    if reports and pp and pp > 1:
        raise UsageError("--recommend/--report/--trace with --pp are not supported yet; use --tp alone")
    decisions = [*sharded.decisions, *ep_decisions(sharded.graph)]  # --expert-parallel's all-to-all
    stages = None
    if pp and pp > 1:
        from passes.split_pp import split_pp

        stages = split_pp(sharded.graph, pp)
        sharded_graph = stages.graph
    else:
        sharded_graph = sharded.graph
    ctx = recs = found = None
    if reports:
        ctx = report_mode.context(opts, sharded_graph, dims, hw, framework="trtllm")
        result = ctx.base
        recs, found = report_mode.recommendations(opts, ctx)
    else:
        # NB: the plain --tp table has always been priced without --warm-inputs and --verify-each
        pricing = replace(opts.gpu.pricing, framework="trtllm", warm_inputs=False, verify_each=False)
        result = estimate(sharded_graph, hw, pricing, dims=dims)
    if opts.output.json:
        out = to_json(result)
        out["parallel"] = {**opts.parallel.at(tp).to_json(), "decisions": decisions}
        if stages is not None:
            out["pipeline_stages"] = stages.report(result)
        if ctx is not None:
            report_mode.add_json(out, recs, found)
        print(jsonout.dumps(stamped(out), indent=1))
    else:
        print(to_table(result, opts.output.top))
        if stages is not None:
            print(stages.report_text(result))
        if recs is not None:
            print(report_mode.format_recommendations(recs, found, ctx.total_s, opts.reports.threshold))
    if ctx is not None:
        report_mode.write_outputs(opts, ctx, recs, found, gpus=tp)
    if opts.fusion.explain:
        print(fusion_report.explain(result))
        print(f"sharding decisions (--tp {tp}):")
        print("\n".join(f"  {d}" for d in decisions) or "  none (tp 1)")
    return 0


def _deploy(opts: Options, tps: tuple[int, ...], reports: bool) -> int:
    from estimator.serve.deploy import Deployment
    from estimator.serve.serving import Workload

    s = opts.serving
    if not opts.model.name:
        raise UsageError(
            "--serve and --memory need a bundled decoder model (--model NAME, see --list-models)"
        )
    if opts.parallel.pp and opts.parallel.pp > 1:
        raise UsageError("--pp with --serve or --memory is not supported yet; use --pp with a kernel table")
    if reports and not s.workload:
        raise UsageError("--recommend/--report/--trace with --memory need --serve isl=I,osl=O,concurrency=C")
    work = s.workload or Workload(2048, 256, 1, s.batching)  # --memory alone: a default request shape
    sweep = s.concurrency
    if sweep is not None and not reports:
        return _sweep(opts, tps, work, sweep)
    if sweep is not None and not opts.reports.report:
        raise UsageError("--sweep concurrency=... goes with --report (its Pareto plot is a section of the "
                         "page); --recommend/--trace alone take one --serve point")
    if len(tps) > 1 and sweep is None:
        raise UsageError("a comma list in --tp needs --sweep concurrency=...")
    tp = tps[0]  # with a sweep in the report: the --serve point on the first --tp
    dep = Deployment.build(opts.model.name, opts.steps_options(tp))
    result = dep.serve(work) if s.workload else None
    pareto = serve_report.pareto_svg(opts, tps, work, sweep, dep) if sweep is not None else None
    return _print_point(opts, dep, work, result, reports, pareto)


def _print_point(opts: Options, dep, work, result, reports: bool, pareto: str | None) -> int:
    from estimator.serve.deploy import smallest_fitting_tp
    from estimator.serve.summary import memory_text, serve_text

    name, precision = opts.model.name, dep.opts.precision
    mem, tp, par = dep.memory, dep.opts.tp, dep.parallel
    fits = mem.fits(work.isl, work.osl)
    finding = smallest = None
    if not fits:
        better = smallest_fitting_tp(name, dep.opts, work)
        smallest = {"tp": better} if better else {}
        finding = (
            f"{name} does not fit on {par.gpus} x {dep.opts.hw.name} ({par.label()}) at "
            f"{precision or 'graph'} precision: {mem.weights_bytes / 1e9:.1f} GB of weights, "
            f"{mem.non_kv_bytes / 1e9:.1f} GB per GPU before any KV cache, "
            f"on {mem.device_bytes / 1e9:.1f} GB; "
            + (f"smallest fit: --tp {better}" if better else "smallest fit: none up to the NVLink domain")
        )
        if result is not None:
            result.smallest_fit = smallest
    rep = serve_report.context(opts, dep, work, result) if reports else None
    recs, found = (None, None)
    if rep is not None:
        recs, found = report_mode.recommendations(opts, rep)
        table = rep.base
    else:  # the decode step the serving figures describe (the same Deployment.decode_step as the report)
        table = (dep.decode_step(work, result, strict=opts.pricing.strict)
                 if result is not None and fits else None)
    if opts.output.json:
        from estimator.report.table import to_json

        out = to_json(table) if table is not None else {"arch": dep.opts.hw.name, "precision": precision}
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
            out["memory"]["smallest_fit"] = smallest
        if result is not None:
            out["serve"] = result.to_json()
        out["parallel"] = {**par.to_json(), "decisions": list(dep.steps.decisions)}
        if rep is not None:
            report_mode.add_json(out, recs, found)
        print(jsonout.dumps(stamped(out), indent=1))
        serve_report.write_outputs(opts, rep, recs, found, work, result, pareto)
        return 0
    from estimator.precision import DEPLOYED

    kv = opts.serving.kv_precision or (DEPLOYED[precision][1] if precision in DEPLOYED else precision)
    title = (
        f"serving {name} on {par.gpus} x {dep.opts.hw.name} ({par.label()}), precision "
        f"{precision or 'graph'}, KV {kv or 'graph'}, "
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
            f"(one GPU of {par.gpus}):"
        )
        print(to_table(table, opts.output.top))
        from estimator.report.table import collectives_text

        print()
        print("\n".join(collectives_text(table)))
    if recs is not None:
        print(report_mode.format_recommendations(recs, found, rep.total_s, opts.reports.threshold))
    if opts.fusion.explain:
        print(f"sharding decisions (--tp {tp}):")
        print("\n".join(f"  {d}" for d in dep.steps.decisions) or "  none (tp 1)")
    serve_report.write_outputs(opts, rep, recs, found, work, result, pareto)
    return 0


def _side_by_side(opts: Options, tp: int) -> int:
    """`--serve` on every GPU of a comma list in --arch: the same model, workload, deployment and
    framework, one column a GPU (each at its precision: --precision, else the checkpoint's where the GPU
    runs it)."""
    from estimator.serve.deploy import Deployment

    if not opts.model.name:
        raise UsageError("--serve needs a bundled decoder model (--model NAME, see --list-models)")
    work = opts.serving.workload
    cols = []
    for gpu in opts.gpus:
        dep = Deployment.build(opts.model.name, opts.steps_options(tp, gpu))
        cols.append((gpu, dep, dep.serve(work)))
    if opts.output.json:
        out = {"arch": [g.arch for g, _, _ in cols], "serve_by_arch": {}}
        for gpu, dep, r in cols:
            fits = dep.memory.fits(work.isl, work.osl)
            item = {"precision": dep.opts.precision or "graph", "parallel": dep.parallel.to_json(),
                    "memory": {**dep.memory.to_json(), "fits": fits}}
            item["serve"] = r.to_json()
            out["serve_by_arch"][gpu.arch] = item
        print(jsonout.dumps(stamped(out), indent=1))
        return 0
    print(f"serving {opts.model.name} ({cols[0][1].parallel.label()}), isl {work.isl}, osl {work.osl}, "
          f"concurrency {work.concurrency}, {cols[0][1].framework.display_name}")
    print(side_by_side_text(cols, work))
    return 0




def side_by_side_text(cols, work) -> str:
    """One row a figure, one column a GPU."""
    def ms(x):
        return "-" if x != x else f"{x * 1e3:,.2f} ms"

    rows = [("GPU", [f"{d.parallel.gpus} x {g.arch}" for g, d, _ in cols]),
            ("precision", [d.opts.precision or "graph" for _, d, _ in cols]),
            ("fits", ["yes" if r.fits else "NO" for _, _, r in cols]),
            ("TTFT", [ms(r.ttft_s) for _, _, r in cols]),
            ("TPOT", [ms(r.tpot_s) for _, _, r in cols]),
            ("E2E", ["-" if r.e2e_s != r.e2e_s else f"{r.e2e_s:,.2f} s" for _, _, r in cols]),
            ("tokens/s", [f"{r.tokens_per_s:,.0f}" for _, _, r in cols]),
            ("tokens/s/GPU", [f"{r.tokens_per_s_per_gpu:,.0f}" for _, _, r in cols]),
            ("tokens/s/user", [f"{r.tokens_per_s_per_user:,.1f}" for _, _, r in cols]),
            ("admitted", [str(r.admitted) for _, _, r in cols]),
            ("decode step", [ms(r.decode.step_s) if r.decode else "-" for _, _, r in cols]),
            ("prefill step", [ms(r.prefill.step_s) if r.prefill else "-" for _, _, r in cols]),
            ("weights/GPU", [f"{d.memory.weights_bytes / 1e9:,.1f} GB" for _, d, _ in cols]),
            ("KV capacity", [f"{d.memory.kv_capacity_tokens:,} tokens" for _, d, _ in cols])]
    width = max(12, *(len(c) for _, vals in rows for c in vals))
    return "\n".join(f"  {name:<14}" + "".join(f"{v:>{width + 2}}" for v in vals) for name, vals in rows)


def _sweep(opts: Options, tps: tuple[int, ...], work, concurrencies: tuple[int, ...]) -> int:
    from dataclasses import replace

    from estimator.serve.summary import plot_pareto, sweep_text
    from estimator.serve.sweep import sweep_deployments

    plot = opts.study.plot
    if plot:
        from estimator.study.plot import check_path

        check_path(plot)
    rows = sweep_deployments(
        opts.model.name,
        [opts.steps_options(tp) for tp in tps],
        [replace(work, concurrency=c) for c in concurrencies],
    )
    if opts.output.json:
        print(jsonout.dumps(stamped({"sweep": [{"tp": tp, **r.to_json()} for tp, r in rows]}), indent=1))
    else:
        print(sweep_text(rows))
    if plot:
        name = opts.model.name
        plot_pareto(rows, plot, f"{name} on {opts.gpu.arch}, isl {work.isl}, osl {work.osl}")
        if not opts.output.json:
            print(f"wrote {plot}")
    return 0
