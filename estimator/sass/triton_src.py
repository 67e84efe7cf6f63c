"""Compiling a Triton kernel for a target GPU without one (the optional `triton` extra).

`estimate sass kernels.py --triton-kernel NAME --triton-arg a_ptr=*bf16 --triton-arg BM=128 ...` loads
`kernels.py`, takes its `@triton.jit` function NAME and compiles it with
`triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget("cuda", <SM number>, 32),
options={num_warps, num_stages})`; Triton runs its own bundled ptxas. Every parameter needs a
`--triton-arg`: a type (`*bf16`, `i32`, `fp32`, `tensordesc<bf16[128,64]>`) for a run-time parameter, a
value for a `tl.constexpr` one. What the cubin does not hold comes from Triton's metadata: the dynamic
shared memory (`shared`), the block size (`num_warps x 32`) and, on sm_100, the TMEM columns.
NB: the SM number is the arch's (90 -> sm_90a, 100 -> sm_100a, 120 -> sm_120a), as Triton targets them.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from estimator.errors import UserError


@dataclass(frozen=True)
class TritonSpec:
    kernel: str
    args: dict[str, str] = field(default_factory=dict)  # NAME -> type or constexpr value (as text)
    num_warps: int = 4
    num_stages: int = 3


@dataclass(frozen=True)
class TritonBuild:
    cubin: Path
    shared_bytes: int
    threads: int
    tmem_columns: int | None


def parse_args(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name or not text:
            raise UserError(f"--triton-arg {value!r}: expected NAME=TYPE or NAME=VALUE")
        out[name.strip()] = text.strip()
    return out


def _constexpr(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # e.g. a dtype name; Triton judges it


def compile_kernel(path: Path, spec: TritonSpec, sm_number: int, work: Path) -> TritonBuild:
    """Compiles `spec.kernel` of the Python file at `path` for `sm_number` into a cubin under `work`."""
    # Triton 3.9 warns unless this is set; "1" is its current default (FP contraction on), kept as is
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        raise UserError("triton is not installed: pip install 'gpu-inference-estimator[triton]'") from None
    fn = _load(path, spec.kernel)
    params = [(p.name, bool(p.is_constexpr)) for p in fn.params]
    missing = [name for name, _ in params if name not in spec.args]
    if missing:
        raise UserError(f"{path}: {spec.kernel} needs --triton-arg for {', '.join(missing)}")
    extra = sorted(set(spec.args) - {name for name, _ in params})
    if extra:
        raise UserError(f"{path}: {spec.kernel} has no parameter {extra[0]!r}")
    signature = {name: ("constexpr" if const else spec.args[name]) for name, const in params}
    constexprs = {name: _constexpr(spec.args[name]) for name, const in params if const}
    try:
        compiled = triton.compile(ASTSource(fn, signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", sm_number, 32),
                                  options={"num_warps": spec.num_warps, "num_stages": spec.num_stages})
    except Exception as e:  # Triton's compile errors have many types; all are the user's kernel
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: triton could not compile {spec.kernel}: {first}") from None
    cubin = work / f"{spec.kernel}.sm_{sm_number}.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    meta = compiled.metadata
    tmem = getattr(meta, "tmem_size", None)
    return TritonBuild(cubin, int(meta.shared), int(meta.num_warps) * 32, int(tmem) if tmem else None)


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"_estimate_triton_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's module failed to import
        raise UserError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    fn = getattr(module, name, None)
    if fn is None or not hasattr(fn, "params"):
        found = sorted(n for n, v in vars(module).items() if hasattr(v, "params") and hasattr(v, "fn"))
        raise UserError(f"{path}: no @triton.jit kernel {name!r} (found: {', '.join(found) or 'none'})")
    return fn
