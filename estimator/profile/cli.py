"""`estimate profile FILE [--model M.onnx|NAME] [--dim N=V ...] [--arch A] [--fusion S] [--json] [--top N]`

Reads a measured profile (any format of estimator/profile/load.py), prices every kernel against the
GPU's peaks (the GPU the profile names, else --arch) and, with --model, joins it to the estimate of that
model at the bound dims and prints measured vs bound vs estimate through validate_report (the report of
`--validate`).
"""

from __future__ import annotations

import argparse
import json

from estimator.errors import UserError


class ProfileUsageError(UserError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise ProfileUsageError(f"estimate profile: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="estimate profile", description="Measured GPU profile vs peaks and vs the estimate.")
    p.add_argument(
        "file",
        metavar="FILE",
        help="nsys .sqlite or stats CSV, ncu .ncu-rep or CSV, onnxruntime "
        "profile JSON, PyTorch profiler trace (.json or .json.gz)",
    )
    p.add_argument(
        "--model",
        metavar="M.onnx|NAME",
        help="join to the estimate of this ONNX file or bundled model (see estimate --list-models)",
    )
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE", help="bind a free dim")
    p.add_argument(
        "--arch",
        help="GPU for the peaks and the estimate when the profile does not name one (or to override it)",
    )
    p.add_argument("--fusion", default="none", help="fusion strategy of the estimate (default none)")
    p.add_argument("--roofline", action="store_true", help="roofline estimate (no tile plans)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--top", type=int, default=15, metavar="N", help="kernels in the tables (default 15)")
    p.add_argument("--recommend", action="store_true",
                   help="with --model: list kernels far from their estimate or their peak, with the counter")
    p.add_argument("--recommend-threshold", type=float, default=2.0, metavar="PCT",
                   help="hide findings saving less than PCT%% of the measured time (default 2)")
    p.add_argument("--report", metavar="FILE.html",
                   help="with --model: the HTML report, measured marks on its roofline")
    return p


def _model(spec: str, dims: dict[str, int]):
    """(onnx proto with the frontend's node names, IR graph, dims to bind) for a path or a bundled name."""
    import models
    from estimator.frontends.onnx_import import check_opset, import_model, load_model
    from estimator.truth.validate import name_nodes

    if spec in models.MODELS:
        m = models.MODELS[spec]
        proto = m.build()
        dims = {**m.default_dims, **dims}
    elif spec.endswith(".onnx"):
        proto = load_model(spec)
        check_opset(proto)
    else:
        raise ProfileUsageError(
            f"--model {spec!r}: neither an .onnx file nor a bundled model "
            f"({', '.join(sorted(models.MODELS))})"
        )
    name_nodes(proto)
    return proto, import_model(proto), dims


def _estimate(args, profile, arch: str | None):
    import hwdesc
    from estimator.cli.main import parse_dims
    from estimator.estimate import estimate
    from estimator.profile.gpu import resolve
    from passes import STRATEGIES, pipeline_for

    if args.fusion not in STRATEGIES:
        raise ProfileUsageError(f"--fusion {args.fusion}: choose from {', '.join(STRATEGIES)}")
    proto, graph, dims = _model(args.model, parse_dims(args.dim))
    hw = resolve(profile.gpu, arch)[0] if not profile.host else (hwdesc.load(arch) if arch else None)
    if hw is None:
        raise ProfileUsageError(
            "the profile names no GPU with a bundled descriptor: give --arch for the "
            "estimate" + (" (host for this machine's CPU)" if profile.host else "")
        )
    result = estimate(
        graph,
        hw,
        dims=dims,
        pipeline=pipeline_for(args.fusion, hw.family),
        roofline=not (not args.roofline and not profile.host),
    )
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        raise ProfileUsageError(f"the join needs every dim bound; free: {free} (give --dim NAME=VALUE)")
    args.joined_model = (graph, dims)  # for the recommenders' Context (--recommend, --report)
    return result, proto


def run(argv: list[str]) -> int:
    from estimator.profile import report
    from estimator.profile.analysis import analyse
    from estimator.profile.load import load

    args = build_parser().parse_args(argv)
    if args.top < 1:
        raise ProfileUsageError("--top must be at least 1")
    if args.dim and not args.model:
        raise ProfileUsageError("--dim binds the dims of --model; give --model too")
    arch = None
    if args.arch:
        from estimator.truth.host import (
            resolve_arch,  # "host": this machine's descriptor (imports onnxruntime)
        )

        arch = resolve_arch(args.arch)
    profile = load(args.file)
    result = proto = None
    if args.model:
        result, proto = _estimate(args, profile, arch)
    a = analyse(profile, arch, result, proto)
    recs = found = None
    if args.recommend or args.report:
        recs, found, measured_s = _findings(args, a, result)
    if args.json:
        doc = report.to_json(a, args.top)
        if args.recommend:
            doc["recommendations"] = [r.to_json() for r in recs]
            doc["whatifs"] = [r.to_json() for r in found]
        print(json.dumps(doc, indent=1))
    else:
        print(report.to_table(a, args.top))
        if args.recommend:
            from estimator.cli.report import format_recommendations

            print(format_recommendations(recs, found, measured_s, args.recommend_threshold / 100))
    return 0


def _findings(args, a, result):
    """(shown, considered, measured seconds of the joined kernels) of the "profile" recommender on the
    joined kernels; writes --report."""
    from estimator.report import measured
    from estimator.report.recommend import Context, considered, shown
    from passes import pipeline_for

    if result is None:
        raise ProfileUsageError("--recommend and --report compare with an estimate: give --model too")
    if args.recommend_threshold < 0:
        raise ProfileUsageError(f"--recommend-threshold {args.recommend_threshold:g}: must be >= 0")
    graph, dims = args.joined_model
    ctx = Context(graph, result.hw, result, dims=dims, pipeline=pipeline_for(args.fusion),
                  tiling=result.tiling, profile=measured.by_kernel(a, result))
    found = considered(ctx, ["profile"])
    threshold = args.recommend_threshold / 100
    recs = shown(found, ctx.total_s, threshold)
    if args.report:
        if not args.report.lower().endswith((".html", ".htm")):
            raise ProfileUsageError(f"--report {args.report}: use a file name ending in .html")
        title = f"{args.model} on {result.hw.name}, measured: {args.file}"
        measured.write_html(args.report, ctx, title, recs if args.recommend else None, threshold, found,
                            ctx.profile)
        import sys

        print(f"report written to {args.report}", file=sys.stderr)
    return recs, found, sum(m["measured_s"] for m in ctx.profile.values())
