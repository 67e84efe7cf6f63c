"""torch-mlir frontend: torch-dialect MLIR (text or bytecode) -> estimator IR Graph.

Two producers are understood, both parsed with torch-mlir's Python bindings (``torch_mlir.ir``):

- torch-mlir's FX importer (``torch_mlir.fx.export_and_import``): ``torch.aten.*`` ops on
  ``!torch.vtensor`` values. Each aten op becomes the ONNX-equivalent Node(s) the ONNX frontend would
  see for the same model (the op table is `estimator.frontends.aten_ops`), so every pass, cost
  function and report works unchanged; an op with no mapping stays a Node named after it (op_type
  ``aten.foo.Tensor``, domain ``torch``) and is listed as uncosted. Free dims are the
  ``torch.symbolic_int`` symbols under their own names (``s0``, ``s77``, or the ``Dim`` names when the
  module came through `estimator.frontends.torch_api`), with the shapes read off
  ``torch.bind_symbolic_shape``'s
  affine maps; their [min, max] ranges are kept in ``graph.dim_ranges``.
- torch-mlir's ONNX importer (``torch-mlir-import-onnx``): ``torch.operator "onnx.X"`` ops. These are
  rebuilt into an ONNX model and handed to the ONNX frontend (`estimator.frontends.mlir_onnx`).

Only the torch dialect is read: linalg-on-tensors (torch-mlir's lowered form) is refused, because its
lowering narrows dims wrongly when two dims are dynamic (upstream torch-mlir issue 4743). The frontend
computes no costs. torch-mlir is optional: without it a `FrontendError` says how to install it.
A file is at most INPUT_BYTES, its text nested at most NESTING deep (estimator/input_limits.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from estimator.frontends.errors import FrontendError
from estimator.input_limits import NESTING, read_bytes
from estimator.ir import Graph

MLIR_SUFFIXES = (".mlir", ".mlirbc")
INSTALL_HINT = "reading MLIR needs torch-mlir: pip install -e '.[mlir]' (torch==2.13.0, torch-mlir)"
# Dialects whose presence means the module is not torch-dialect IR, with what to do instead.
_LOWERED = {
    "linalg": "linalg-on-tensors is not read: torch-mlir's linalg lowering narrows dims wrongly when two "
              "dims are dynamic (torch-mlir issue 4743); give the torch-dialect module "
              "(export_and_import's default output_type, or output_type='torch')",
    "tosa": "TOSA is not read; give the torch-dialect module",
    "stablehlo": "StableHLO is not read; give the torch-dialect module",
}


def _bindings():
    """torch_mlir's `ir` module and its torch dialect, or FrontendError when torch-mlir is missing."""
    try:
        from torch_mlir import ir
        from torch_mlir.dialects import torch as torch_d
    except ImportError:
        raise FrontendError(INSTALL_HINT) from None
    return ir, torch_d


def parse_module(data: bytes | str, label: str = "<mlir>"):
    """Parse MLIR text or bytecode into a torch_mlir Module; one-line FrontendError on bad input."""
    ir, torch_d = _bindings()
    if not data:
        raise FrontendError(f"{label} is empty")
    check_nesting(data, label)
    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    try:
        return ir.Module.parse(data, ctx)
    except Exception as exc:  # MLIRError carries the diagnostics; keep the first real one
        raise FrontendError(f"{label} is not valid MLIR: {_first_diagnostic(str(exc))}") from None


def _first_diagnostic(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("error:"):
            return ln[len("error:"):].strip()
    return lines[-1] if lines else "parse error"


def import_mlir_file(path: str) -> Graph:
    """Read a .mlir (text) or .mlirbc (bytecode) file into a Graph."""
    if not os.path.exists(path):
        raise FrontendError(f"no such file: {path}")
    if os.path.isdir(path):
        raise FrontendError(f"{path} is a directory, not an MLIR file")
    _bindings()  # the install hint comes before any complaint about the file
    data = read_bytes(path)
    label = os.path.basename(path)
    return import_module(parse_module(data, label), label)


def import_mlir(data: bytes | str, label: str = "<mlir>") -> Graph:
    return import_module(parse_module(data, label), label)


_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_OPEN, _CLOSE = b"([{<", b")]}>"


def check_nesting(data: bytes | str, label: str) -> None:
    """Refuses MLIR text nested deeper than NESTING: MLIR's parser recurses once per bracket and a deep
    enough nest overflows its C++ stack (a crash, not an error). Strings and `->` are left out of the
    count; bytecode (magic `ML\xefR`) is not scanned."""
    import numpy as np

    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    if raw.startswith(b"ML\xefR"):
        return
    kept = _STRING.sub(b"", raw).replace(b"->", b"")
    codes = np.frombuffer(kept, dtype=np.uint8)
    step = np.isin(codes, np.frombuffer(_OPEN, np.uint8)).astype(np.int32)
    step -= np.isin(codes, np.frombuffer(_CLOSE, np.uint8))
    if len(step) and int(np.cumsum(step).max()) > NESTING.value():
        raise NESTING.refuse(label)


def import_module(module, label: str = "<mlir>") -> Graph:
    """The Graph of a parsed module's entry function (ONNX-importer output goes through ONNX)."""
    from estimator.frontends import mlir_onnx
    from estimator.frontends.mlir_reader import read_function

    func = main_function(module, label)
    ops = [op.operation for op in func.regions[0].blocks[0].operations]
    check_dialects(ops, func, label)
    if any(op.name == "torch.operator" and mlir_onnx.is_onnx_op(op) for op in ops):
        return mlir_onnx.import_function(module, func, label)
    return read_function(func, label)


def main_function(module, label: str):
    """The function to estimate: the only one with a body, else `main`, else the first public one."""
    funcs = [op.operation for op in module.body.operations
             if op.operation.name == "func.func" and len(op.operation.regions[0].blocks)]
    if not funcs:
        raise FrontendError(f"{label} has no function with a body to estimate")
    if len(funcs) == 1:
        return funcs[0]
    by_name = {_sym_name(f): f for f in funcs}
    if "main" in by_name:
        return by_name["main"]
    public = [f for f in funcs if "sym_visibility" not in f.attributes]
    return (public or funcs)[0]


def _sym_name(func) -> str:
    return func.attributes["sym_name"].value


def check_dialects(ops: list, func, label: str) -> None:
    """Refuse lowered (non-torch) IR with one clear message."""
    for op in ops:
        dialect = op.name.split(".", 1)[0]
        if dialect in _LOWERED:
            raise FrontendError(f"{label}: {_LOWERED[dialect]}")
    signature = str(func.attributes["function_type"])
    if re.search(r"(^|[(,\s])tensor<", signature):
        raise FrontendError(f"{label}: the function takes builtin tensors, not !torch.vtensor; "
                            f"{_LOWERED['linalg']}")


def check_dim_ranges(graph: Graph, dims: Mapping[str, int]) -> None:
    """A bound dim outside the range torch.export proved for it is bad input."""
    ranges: Mapping[str, tuple[int, int | None]] = getattr(graph, "dim_ranges", {}) or {}
    for name, value in dims.items():
        lo, hi = ranges.get(name, (None, None))
        if lo is not None and value < lo or hi is not None and value > hi:
            raise FrontendError(f"--dim {name}={value}: outside the module's range "
                                f"{lo}..{'inf' if hi is None else hi}")
