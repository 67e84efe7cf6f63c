"""The graph a command line names (MODEL, --model NAME, --hf-config, --torch), for every mode."""

from __future__ import annotations

from collections.abc import Mapping

from estimator.cli.options import Model, UsageError


def load_graph(model: Model, dims: Mapping[str, int], defaults: bool = True):
    """The IR graph for the MODEL path or --model NAME (or --hf-config, --torch), and the dims to bind:
    `dims`, joined by a bundled model's default dims when `defaults` (not under --symbolic)."""
    dims = dict(dims)
    if model.path and model.name:
        raise UsageError("give either MODEL or --model NAME, not both")
    if model.name:
        if model.moe_split:  # estimator/cli/hf.py
            import models
            from estimator.cli.hf import load_named_graph

            _known_model(model.name)
            graph = load_named_graph(model, model.name)
            default_dims = models.MODELS[model.name].default_dims
        else:
            # from the graph cache when it holds the model: no onnx import (estimator/frontends/bundled.py)
            from estimator.frontends.bundled import bundled_graph

            found = bundled_graph(model.name)
            if found is None:
                _known_model(model.name)
            graph, default_dims = found
        if defaults:
            dims = {**default_dims, **dims}
        return graph, dims
    if model.hf_config:  # --hf-config config.json (estimator/cli/hf.py)
        from estimator.cli.hf import load_hf_graph

        if model.path or model.name:
            raise UsageError("give either MODEL, --model NAME or --hf-config, not two")
        return load_hf_graph(model), dims
    if model.torch:  # --torch MODULE:FACTORY (estimator/cli/pytorch.py)
        from estimator.cli.pytorch import load_torch_graph

        return load_torch_graph(model), dims
    if model.moe_split:
        raise UsageError("--expert-parallel needs --hf-config or a bundled MoE model (--model NAME)")
    if not model.path:
        raise UsageError("no model: give a path to an .onnx file or --model NAME (see --list-models)")
    if model.path.endswith((".mlir", ".mlirbc")):  # torch-dialect MLIR (frontends/mlir_import.py)
        from estimator.frontends.mlir_import import check_dim_ranges, import_mlir_file

        graph = import_mlir_file(model.path)
        check_dim_ranges(graph, dims)
        return graph, dims
    from estimator.frontends.onnx_import import import_file

    return import_file(model.path), dims


def _known_model(name: str) -> None:
    import models

    if name not in models.MODELS:
        raise UsageError(f"unknown model {name!r}; known: {', '.join(sorted(models.MODELS))}")
