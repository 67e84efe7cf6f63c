"""Estimate a PyTorch module directly: torch.export -> torch-mlir's FX importer (torch dialect) -> IR.

    from estimator import from_torch
    batch, seq = Dim("batch"), Dim("seq", min=2, max=4096)
    result = from_torch(block, (x,), dynamic_shapes={"x": {0: batch, 1: seq}}, arch="blackwell")

Rules:
- The module is exported with ``torch.export.export`` and functionalised with an empty decomposition
  table (``run_decompositions({})``), so high-level ops survive (linear, layer_norm, rms_norm,
  scaled_dot_product_attention, gelu, silu) and map to the same Nodes the ONNX exporter writes at
  opset 23; ``decompose=True`` applies torch-mlir's default decompositions instead (mm, bmm,
  var_mean, the math form of attention...). Import stays at the torch-dialect level (output_type RAW):
  torch-mlir's linalg lowering narrows dims wrongly when two dims are dynamic (torch-mlir issue 4743).
- Symbols are imported with ``import_symbolic_shape_expressions=True`` and renamed from torch's
  ``s77``, ``s27`` to the names of the ``Dim``s in `dynamic_shapes` (``batch``, ``seq``), the names
  torch.onnx.export gives the same dims. A dim given as ``Dim.DYNAMIC`` / ``Dim.AUTO`` (no name) or one
  only derived from others keeps torch's name.
- Export the module in eval mode (dropout is then an alias).

Importing this module needs torch and torch-mlir (the ``mlir`` extra); `estimator` itself imports it
lazily, so ``import estimator`` never imports torch.
"""

from __future__ import annotations

import inspect
from typing import Any

from estimator.errors import UserError
from estimator.frontends.mlir_import import INSTALL_HINT, import_module
from estimator.ir import Graph


class TorchExportError(UserError):
    """The module could not be exported (torch.export or torch-mlir's importer refused it)."""


def _require():
    try:
        import torch
        from torch_mlir import fx
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return torch, fx


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def export_module(module, example_args: Any, dynamic_shapes: Any = None, *, decompose: bool = False):
    """The torch-dialect torch_mlir Module of `module` called on `example_args`, with symbolic shapes
    named after `dynamic_shapes`' Dims."""
    torch, fx = _require()
    args = tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)
    try:
        program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        names = dim_names(program, module, args, dynamic_shapes)
        program = program.run_decompositions({})
        _keep_non_persistent_buffers(program)
        mlir = fx.export_and_import(program, import_symbolic_shape_expressions=True,
                                    decomposition_table=None if decompose else {})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any export failure is a property of the user's module
        raise TorchExportError(f"cannot export {type(module).__name__}: {_first_line(exc)}") from None
    rename_symbols(mlir, names)
    return mlir


def _keep_non_persistent_buffers(program) -> None:
    """torch-mlir's frozen import looks buffers up in state_dict only; non-persistent ones (e.g. a
    RoPE inv_freq registered with persistent=False) live in `constants`."""
    for name in program.graph_signature.non_persistent_buffers:
        if name not in program.state_dict and name in program.constants:
            program.state_dict[name] = program.constants[name]


def dim_names(program, module, args: tuple, dynamic_shapes: Any) -> dict[str, str]:
    """torch.export's symbol name -> Dim name, read where a named Dim sits on a top-level tensor
    argument ({index: Dim} or a list of Dims per argument, arguments by name or position)."""
    import torch

    if not dynamic_shapes:
        return {}
    if isinstance(dynamic_shapes, dict):
        try:
            params = list(inspect.signature(module.forward).bind(*args).arguments)
        except (TypeError, ValueError):
            return {}
        specs = [dynamic_shapes.get(p) for p in params]
    else:
        specs = list(dynamic_shapes)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    names: dict[str, str] = {}
    for ph, arg, spec in zip(program.graph_signature.user_inputs, args, specs, strict=False):
        val = placeholders[ph].meta.get("val") if ph in placeholders else None
        if not isinstance(arg, torch.Tensor) or spec is None or val is None:
            continue
        for i, d in (spec.items() if isinstance(spec, dict) else enumerate(spec)):
            size, name = val.shape[i], getattr(d, "__name__", None)
            if name and isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                names[str(size.node.expr)] = name
    return names


def rename_symbols(mlir, names: dict[str, str]) -> None:
    """Rename torch.symbolic_int symbols in place (`names`: old -> new)."""
    from torch_mlir import ir

    if not names:
        return
    with mlir.context:
        for func in mlir.body.operations:
            for block in func.operation.regions[0].blocks if func.operation.regions else ():
                for op in block.operations:
                    op = op.operation
                    if op.name == "torch.symbolic_int":
                        new = names.get(op.attributes["symbol_name"].value)
                        if new:
                            op.attributes["symbol_name"] = ir.StringAttr.get(new)


def export_mlir(module, example_args: Any, dynamic_shapes: Any = None, *, decompose: bool = False,
                weights: bool = False) -> str:
    """The torch-dialect MLIR text `estimate MODEL.mlir` reads; weight blobs elided unless `weights`
    (the estimator never reads them)."""
    mlir = export_module(module, example_args, dynamic_shapes, decompose=decompose)
    return mlir.operation.get_asm(large_resource_limit=None if weights else 256)


def to_graph(module, example_args: Any, dynamic_shapes: Any = None, *, decompose: bool = False) -> Graph:
    mlir = export_module(module, example_args, dynamic_shapes, decompose=decompose)
    return import_module(mlir, type(module).__name__)


def from_torch(module, example_args: Any, dynamic_shapes: Any = None, *, arch: Any = "h100-sxm",
               decompose: bool = False, **estimate_kwargs: Any):
    """Export, import and estimate `module` on `arch` (a SKU, alias, YAML path or HardwareDescriptor);
    `estimate_kwargs` go to `estimator.estimate.estimate` (precision, dims, pipeline, roofline, strict...)."""
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.mlir_import import check_dim_ranges

    graph = to_graph(module, example_args, dynamic_shapes, decompose=decompose)
    check_dim_ranges(graph, estimate_kwargs.get("dims") or {})
    hw = hwdesc.load(arch) if isinstance(arch, str) else arch
    return estimate(graph, hw, **estimate_kwargs)
