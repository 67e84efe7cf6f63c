"""GPU inference performance estimator.

`from_torch` (estimate a PyTorch module through torch-mlir) imports torch and torch-mlir when called,
so importing `estimator` never imports torch."""

from typing import Any

__all__ = ["from_torch"]


def from_torch(module, example_args: Any, dynamic_shapes: Any = None, *, arch: Any = "h100-sxm",
               decompose: bool = False, **estimate_kwargs: Any):
    """Export, import and estimate `module` on `arch` (a SKU, alias, YAML path or HardwareDescriptor);
    `estimate_kwargs` go to `estimator.estimate.estimate` (precision, dims, pipeline, roofline, strict...).
    The export and import are estimator/frontends/torch_api.py's."""
    # Imported here: every `import estimator.X` runs this file first, and these need sympy, torch and
    # torch-mlir (lean start: `estimate --list-archs` imports none of them).
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.mlir_import import check_dim_ranges
    from estimator.frontends.torch_api import to_graph

    graph = to_graph(module, example_args, dynamic_shapes, decompose=decompose)
    check_dim_ranges(graph, estimate_kwargs.get("dims") or {})
    hw = hwdesc.load(arch) if isinstance(arch, str) else arch
    return estimate(graph, hw, **estimate_kwargs)
