"""CLI mode: `estimate MODEL --validate [--ep cpu|cuda|tensorrt] [--runs N]` and `--calibrate-host PATH`.

--validate runs the model in onnxruntime at the bound dims and prints measured vs bound vs estimate
(estimator/validate.py); --calibrate-host measures this machine into a hwdesc YAML (estimator/host.py),
which `--arch host` uses from the user's cache.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from estimator.truth.providers import EXECUTION_PROVIDERS

if TYPE_CHECKING:
    import onnx


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("validation against onnxruntime")
    g.add_argument("--validate", action="store_true",
                   help="run the model in onnxruntime at the bound dims; print measured vs bound vs estimate")
    g.add_argument("--ep", default="cpu", choices=list(EXECUTION_PROVIDERS),
                   help="onnxruntime execution provider for --validate (default cpu; cuda and tensorrt "
                        "need onnxruntime-gpu)")
    g.add_argument("--runs", type=int, default=10, metavar="N", help="timed runs for --validate (default 10)")
    g.add_argument("--calibrate-host", metavar="PATH",
                   help="measure this machine through onnxruntime and write its descriptor YAML to PATH "
                        "(--arch host measures into the user cache on first use)")


def run(args: argparse.Namespace) -> int | None:
    if args.calibrate_host:
        from estimator.truth import host

        path = host.calibrate(args.calibrate_host)
        print(f"wrote {path}; use it with --arch {path}")
        if not args.validate:
            return 0
    if not args.validate:
        return None
    return _validate(args)


def _validate(args: argparse.Namespace) -> int:
    import hwdesc
    from estimator.cli.main import UsageError, parse_dims
    from estimator.estimate import estimate
    from estimator.report import validation as validate_report
    from estimator.truth.host import resolve_arch
    from estimator.truth.validate import JOIN_PLANS, validate
    from passes import pipeline_for

    if args.runs < 1:
        raise UsageError(f"--runs {args.runs}: need at least one timed run")
    if args.symbolic:
        raise UsageError("--validate runs the model at bound dims; it cannot be --symbolic")
    if args.precision:
        raise UsageError("--validate runs the graph's own dtypes; drop --precision")
    fusion = args.fusion or "none"  # not the CLI's tensorrt default: onnxruntime runs unfused or its own way
    if args.pipeline is not None or fusion not in JOIN_PLANS:
        raise UsageError(f"--validate compares with onnxruntime, which runs a graph unfused or fused its "
                         f"own way: use --fusion {' or --fusion '.join(JOIN_PLANS)} (not --pipeline)")
    dims = parse_dims(args.dim)
    hw = hwdesc.load(resolve_arch(args.arch))
    model, source, dims = load_model(args, dims)
    from estimator.frontends.onnx_import import import_model

    # a file's shapes are always inferred (it may have been edited): only a built model skips it
    graph = import_model(model, builder_shapes=not args.model_path)
    result = estimate(graph, hw, dims=dims, pipeline=pipeline_for(fusion, hw.family), strict=args.strict,
                      roofline=True)
    v = validate(result, model, source, ep=args.ep, runs=args.runs, fusion=fusion)
    if args.json:
        print(json.dumps(validate_report.to_json(v), indent=1))
    else:
        print(validate_report.to_table(v, args.top))
    return 0


def load_model(args: argparse.Namespace, dims: dict[str, int]) -> tuple[onnx.ModelProto, bytes | str, dict]:
    """(proto with node names as the frontend gives them, what onnxruntime loads, dims to bind) for MODEL
    or --model NAME. Like cli.load_graph, but onnxruntime needs the weights too."""
    import onnx

    from estimator.cli.main import UsageError
    from estimator.frontends.onnx_import import check_opset
    from estimator.frontends.onnx_import import load_model as read_model
    from estimator.truth.validate import ValidateError, name_nodes

    if args.model_path and args.model_name:
        raise UsageError("give either MODEL or --model NAME, not both")
    if args.model_name:
        import models

        if args.model_name not in models.MODELS:
            raise UsageError(f"unknown model {args.model_name!r}; known: {', '.join(sorted(models.MODELS))}")
        spec = models.MODELS[args.model_name]
        model = spec.build()
        if any(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer):
            # The registry states the weights mode in each description ("random weights" / "external").
            runnable = [s.name for s in models.list_models() if "external weights" not in s.description]
            raise ValidateError(f"--model {args.model_name} is built without weight bytes; --validate needs "
                                f"a model onnxruntime can run: {', '.join(runnable)}")
        name_nodes(model)
        return model, model.SerializeToString(), {**spec.default_dims, **dims}
    if not args.model_path:
        raise UsageError("no model: give a path to an .onnx file or --model NAME (see --list-models)")
    model = read_model(args.model_path)  # no external weight bytes: onnxruntime reads them from the path
    check_opset(model)
    if name_nodes(model):  # unnamed or repeated node names: run a renamed copy, weights included
        full = onnx.load(args.model_path)
        name_nodes(full)
        return model, full.SerializeToString(), dims
    return model, args.model_path, dims

