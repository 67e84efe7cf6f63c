"""`estimate profile FILE [--model M.onnx|NAME] [--dim N=V ...] [--arch A] [--fusion S] [--json] [--top N]`

Reads a measured profile (any format of estimator/profile/load.py), prices every kernel against the
GPU's peaks (the GPU the profile names, else --arch) and, with --model, joins it to the estimate of that
model at the bound dims and prints measured vs bound vs estimate through validate_report (the report of
`--validate`). The command line is read once into a frozen ProfileOptions; the readers, the analysis and
the join live in estimator/profile/.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from estimator import jsonout
from estimator.cli.options import parse_dims
from estimator.errors import UserError
from estimator.version import stamped


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
    p.add_argument("--wide", action="store_true",
                   help="every table column whole (default: tables fit the terminal's width, COLUMNS)")
    p.add_argument("--top", type=int, default=15, metavar="N", help="kernels in the tables (default 15)")
    p.add_argument("--recommend", action="store_true",
                   help="with --model: list kernels far from their estimate or their peak, with the counter")
    p.add_argument("--recommend-threshold", type=float, default=2.0, metavar="PCT",
                   help="hide findings saving less than PCT%% of the measured time (default 2)")
    p.add_argument("--report", metavar="FILE.html",
                   help="with --model: the HTML report, measured marks on its roofline")
    p.add_argument("--force-join", action="store_true",
                   help="with --model: join even when the profile scores below the match threshold "
                        "(estimator/profile/join.py)")
    return p


@dataclass(frozen=True)
class ProfileOptions:
    """`estimate profile`'s command line: the profile FILE, the model to join (--model, --dim), the GPU
    (--arch, resolved: the descriptor path or SKU), the estimate's fusion and pricing, the outputs."""

    file: str
    model: str | None = None
    dims: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    arch: str | None = None
    fusion: str = "none"
    roofline: bool = False
    json: bool = False
    top: int = 15
    recommend: bool = False
    recommend_threshold: float = 2.0
    report: str | None = None
    force_join: bool = False


def from_args(a: argparse.Namespace) -> ProfileOptions:
    if a.top < 1:
        raise ProfileUsageError("--top must be at least 1")
    if a.dim and not a.model:
        raise ProfileUsageError("--dim binds the dims of --model; give --model too")
    if (a.recommend or a.report) and not a.model:
        raise ProfileUsageError("--recommend and --report compare with an estimate: give --model too")
    if a.report:  # checked before the profile is read and the model estimated (as the main mode does)
        from estimator.cli.options import check_writable

        if not a.report.lower().endswith((".html", ".htm")):
            raise ProfileUsageError(f"--report {a.report}: use a file name ending in .html")
        check_writable("--report", a.report)
    arch = None
    if a.arch:
        from estimator.truth.host import (
            resolve_arch,  # "host": this machine's descriptor (imports onnxruntime)
        )

        arch = resolve_arch(a.arch)
    return ProfileOptions(a.file, a.model, MappingProxyType(parse_dims(a.dim)), arch, a.fusion, a.roofline,
                          a.json, a.top, a.recommend, a.recommend_threshold, a.report, a.force_join)


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


def _estimate(opts: ProfileOptions, profile):
    """(the estimate of --model on the profile's GPU, the onnx proto, the IR graph, the dims bound)."""
    import hwdesc
    from estimator.estimate import estimate
    from estimator.profile.gpu import resolve
    from passes import STRATEGIES, pipeline_for

    if opts.fusion not in STRATEGIES:
        raise ProfileUsageError(f"--fusion {opts.fusion}: choose from {', '.join(STRATEGIES)}")
    proto, graph, dims = _model(opts.model, dict(opts.dims))
    arch = opts.arch
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
        pipeline=pipeline_for(opts.fusion, hw.family),
        roofline=opts.roofline or profile.host,
    )
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        raise ProfileUsageError(f"the join needs every dim bound; free: {free} (give --dim NAME=VALUE)")
    return result, proto, graph, dims


def run(argv: list[str]) -> int:
    import contextlib

    from estimator.textfit import fitted

    args = build_parser().parse_args(argv)
    with fitted(None) if args.wide else contextlib.nullcontext():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from estimator.profile import report
    from estimator.profile.analysis import analyse
    from estimator.profile.load import load

    opts = from_args(args)
    profile = load(opts.file)
    result = proto = joined = None
    if opts.model:
        result, proto, graph, dims = _estimate(opts, profile)
        joined = (graph, dims)  # for the recommenders' Context (--recommend, --report)
    a = analyse(profile, opts.arch, result, proto)
    if a.joined is not None and not opts.force_join:
        _check_match(a.joined, opts.model)
    recs = found = None
    if opts.recommend or opts.report:
        recs, found, measured_s = _findings(opts, a, result, joined)
    if opts.json:
        doc = report.to_json(a, opts.top)
        if opts.recommend:
            doc["recommendations"] = [r.to_json() for r in recs]
            doc["whatifs"] = [r.to_json() for r in found]
        print(jsonout.dumps(stamped(doc), indent=1))
    else:
        print(report.to_table(a, opts.top))
        if opts.recommend:
            from estimator.cli.report import format_recommendations

            print(format_recommendations(recs, found, measured_s, opts.recommend_threshold / 100))
    return 0


def _check_match(joined, model: str) -> None:
    """Refuse a join whose match score is below the threshold (estimator/profile/join.py)."""
    from estimator.profile.join import MATCH_THRESHOLD

    m = joined.match
    if m.score < MATCH_THRESHOLD:
        raise ProfileUsageError(
            f"the profile does not look like a run of {model}: match score {m.score:.2f} < {MATCH_THRESHOLD} "
            f"(coverage {m.coverage:.2f} x order {m.order:.2f} x kinds {m.kinds:.2f}; {m.detail}); "
            f"check --model and --dim, or give --force-join to join anyway"
        )


def _findings(opts: ProfileOptions, a, result, joined):
    """(shown, considered, measured seconds of the joined kernels) of the "profile" recommender on the
    joined kernels; writes --report."""
    from estimator.report import measured
    from estimator.report.recommend import Context, considered, shown
    from passes import pipeline_for

    assert result is not None  # from_args refused --recommend / --report without --model
    if opts.recommend_threshold < 0:
        raise ProfileUsageError(f"--recommend-threshold {opts.recommend_threshold:g}: must be >= 0")
    graph, dims = joined
    ctx = Context(graph, result.hw, result, dims=dims, pipeline=pipeline_for(opts.fusion),
                  tiling=result.tiling, profile=measured.by_kernel(a, result))
    found = considered(ctx, ["profile"])
    threshold = opts.recommend_threshold / 100
    recs = shown(found, ctx.total_s, threshold)
    if opts.report:
        title = f"{opts.model} on {result.hw.name}, measured: {opts.file}"
        measured.write_html(opts.report, ctx, title, recs if opts.recommend else None, threshold, found,
                            ctx.profile)
        print(f"report written to {opts.report}", file=sys.stderr)
    return recs, found, sum(m["measured_s"] for m in ctx.profile.values())
