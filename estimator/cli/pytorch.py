"""CLI mode `--torch package.module:factory`: estimate a PyTorch module through torch-mlir.

`factory()` returns ``(module, example_args, dynamic_shapes)`` (or just the first two). The mode only
checks its flags: `estimator.cli.load.load_graph` builds the graph through `load_torch_graph` when --torch is
given, so every other mode and report takes a --torch model like an .onnx or .mlir file.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from typing import TYPE_CHECKING

from estimator.errors import UserError

if TYPE_CHECKING:
    from estimator.cli.options import Model, Options


class TorchSpecError(UserError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("PyTorch input (needs the mlir extra: torch, torch-mlir)")
    group.add_argument("--torch", metavar="MODULE:FACTORY",
                       help="estimate the PyTorch module FACTORY() returns as (module, example_args, "
                            "dynamic_shapes), exported through torch-mlir")
    group.add_argument("--save-mlir", metavar="PATH",
                       help="with --torch: also write the torch-dialect MLIR it estimated (weights elided)")


def run(opts: Options) -> int | None:
    """Flag checks only (returns None): the graph is built by load_graph."""
    m = opts.model
    if m.save_mlir and not m.torch:
        raise TorchSpecError("--save-mlir needs --torch")
    if m.torch and (m.path or m.name):
        raise TorchSpecError("give one model: MODEL, --model NAME or --torch MODULE:FACTORY")
    return None


def _import_user_module(name: str):
    """Import `name` (dotted) as `python -m` would from the working directory: its top-level package or
    module is looked up in the working directory first, then on sys.path, without adding the working
    directory to sys.path (a module next to the caller is importable; its own top-level imports of
    neighbours must be on PYTHONPATH, as for any installed package)."""
    top = name.partition(".")[0]
    if top not in sys.modules:
        spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[top] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[top]
                raise
    return importlib.import_module(name)


def load_factory(spec: str):
    """Import `package.module` and call its `factory`; (module, example_args, dynamic_shapes)."""
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise TorchSpecError(f"--torch {spec!r}: expected MODULE:FACTORY, e.g. my_models.blocks:llama_block")
    try:
        mod = _import_user_module(mod_name)
    except ImportError as exc:
        raise TorchSpecError(f"--torch {spec!r}: cannot import {mod_name} ({exc})") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise TorchSpecError(f"--torch {spec!r}: {mod_name} has no callable {attr}")
    made = factory()
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise TorchSpecError(f"--torch {spec!r}: {attr}() must return (module, example_args, "
                             f"dynamic_shapes)")
    return made if len(made) == 3 else (*made, None)


def load_torch_graph(model: Model):
    """The IR graph of --torch SPEC (and the MLIR written to --save-mlir)."""
    from estimator.frontends.mlir_import import import_module
    from estimator.frontends.torch_api import export_module

    module, example_args, dynamic_shapes = load_factory(model.torch)
    mlir = export_module(module, example_args, dynamic_shapes)
    if model.save_mlir:
        with open(model.save_mlir, "w") as f:
            f.write(mlir.operation.get_asm(large_resource_limit=256))
    return import_module(mlir, type(module).__name__)
