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
        tiling=not args.roofline and not profile.host,
    )
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        raise ProfileUsageError(f"the join needs every dim bound; free: {free} (give --dim NAME=VALUE)")
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
    print(json.dumps(report.to_json(a, args.top), indent=1) if args.json else report.to_table(a, args.top))
    return 0
