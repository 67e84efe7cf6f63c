"""CLI mode: `estimate MODEL --validate [--ep cpu|cuda|tensorrt] [--runs N]` and `--calibrate-host PATH`.

--validate runs the model in onnxruntime at the bound dims and prints measured vs bound vs estimate
(estimator/truth/validate.py); --calibrate-host measures this machine into a hwdesc YAML
(estimator/truth/host.py), which `--arch host` uses from the user's cache.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from estimator import jsonout
from estimator.cli.options import Model, Options, UsageError
from estimator.truth.providers import EXECUTION_PROVIDERS
from estimator.version import stamped

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


def run(opts: Options) -> int | None:
    v = opts.validation
    if v.calibrate_host:
        from estimator.truth import host

        path = host.calibrate(v.calibrate_host)
        print(f"wrote {path}; use it with --arch {path}")
        if not v.validate:
            return 0
    if not v.validate:
        return None
    return _validate(opts)


def _validate(opts: Options) -> int:
    from estimator.estimate import estimate
    from estimator.report import validation as validate_report
    from estimator.truth.validate import JOIN_PLANS, validate
    from passes import pipeline_for

    v = opts.validation
    if v.runs < 1:
        raise UsageError(f"--runs {v.runs}: need at least one timed run")
    if opts.output.symbolic:
        raise UsageError("--validate runs the model at bound dims; it cannot be --symbolic")
    if opts.precision:
        raise UsageError("--validate runs the graph's own dtypes; drop --precision")
    fusion = opts.fusion.strategy or "none"  # not the CLI's tensorrt default: onnxruntime runs unfused
    if opts.fusion.pipeline is not None or fusion not in JOIN_PLANS:
        raise UsageError(f"--validate compares with onnxruntime, which runs a graph unfused or fused its "
                         f"own way: use --fusion {' or --fusion '.join(JOIN_PLANS)} (not --pipeline)")
    if len(opts.gpus) > 1:
        raise UsageError("--validate takes one GPU in --arch")
    hw = opts.hw
    model, source, dims = load_model(opts.model, dict(opts.dims))
    from estimator.frontends.onnx_import import import_model

    # a file's shapes are always inferred (it may have been edited): only a built model skips it
    graph = import_model(model, builder_shapes=not opts.model.path)
    result = estimate(graph, hw, dims=dims, pipeline=pipeline_for(fusion, hw.family),
                      strict=opts.pricing.strict, roofline=True)
    measured = validate(result, model, source, ep=v.ep, runs=v.runs, fusion=fusion)
    if opts.output.json:
        print(jsonout.dumps(stamped(validate_report.to_json(measured)), indent=1))
    else:
        print(validate_report.to_table(measured, opts.output.top))
    return 0


def load_model(m: Model, dims: dict[str, int]) -> tuple[onnx.ModelProto, bytes | str, dict]:
    """(proto with node names as the frontend gives them, what onnxruntime loads, dims to bind) for MODEL
    or --model NAME. Like cli.load.load_graph, but onnxruntime needs the weights too."""
    import onnx

    from estimator.frontends.onnx_import import check_opset
    from estimator.frontends.onnx_import import load_model as read_model
    from estimator.truth.validate import ValidateError, name_nodes

    if m.path and m.name:
        raise UsageError("give either MODEL or --model NAME, not both")
    if m.name:
        import models

        if m.name not in models.MODELS:
            raise UsageError(f"unknown model {m.name!r}; known: {', '.join(sorted(models.MODELS))}")
        spec = models.MODELS[m.name]
        model = spec.build()
        if any(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer):
            # The registry states the weights mode in each description ("random weights" / "external").
            runnable = [s.name for s in models.list_models() if "external weights" not in s.description]
            raise ValidateError(f"--model {m.name} is built without weight bytes; --validate needs "
                                f"a model onnxruntime can run: {', '.join(runnable)}")
        name_nodes(model)
        return model, model.SerializeToString(), {**spec.default_dims, **dims}
    if not m.path:
        raise UsageError("no model: give a path to an .onnx file or --model NAME (see --list-models)")
    model = read_model(m.path)  # no external weight bytes: onnxruntime reads them from the path
    check_opset(model)
    if name_nodes(model):  # unnamed or repeated node names: run a renamed copy, weights included
        full = onnx.load(m.path)
        name_nodes(full)
        return model, full.SerializeToString(), dims
    return model, m.path, dims
