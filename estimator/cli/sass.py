"""`estimate sass FILE [--arch A] [--kernel NAME] [--block THREADS] [--dynamic-smem BYTES] [--json]`: the
command line of the compiled-kernel analysis (estimator/sass/), read once into a frozen SassOptions."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from estimator import jsonout
from estimator.errors import UserError
from estimator.version import stamped


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one `error:` line, exit 2
        raise UserError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="estimate sass", description="Static analysis of a compiled CUDA kernel (no GPU needed)."
    )
    p.add_argument("file", help=".cu, .ptx, .cubin, fatbin, executable, shared library or Triton .py")
    p.add_argument(
        "--arch", help="GPU (h100-sxm, b200, rtx-5090, ...) or SM (sm_90a); default: a cubin's own SM"
    )
    p.add_argument("--kernel", help="analyse only this kernel (its ELF symbol name)")
    p.add_argument("--block", type=int, metavar="THREADS", help="threads per block (default: launch bounds)")
    p.add_argument(
        "--dynamic-smem", type=int, metavar="BYTES",
        help="dynamic shared memory per block (default 0, or Triton's metadata)",
    )
    p.add_argument(
        "--tmem-cols", type=int, metavar="N", help="TMEM columns per CTA (tcgen05; default: from alloc)"
    )
    p.add_argument(
        "--nvcc-arg", action="append", default=[], metavar="ARG", help="extra nvcc argument for a .cu"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    t = p.add_argument_group("Triton sources (the optional `triton` extra)")
    t.add_argument("--triton-kernel", metavar="NAME", help="the @triton.jit function of FILE to compile")
    t.add_argument("--triton-arg", action="append", default=[], metavar="NAME=TYPE|VALUE",
                   help="a parameter's type (*bf16, i32) or a constexpr's value (BM=128); one per parameter")
    t.add_argument("--num-warps", type=int, default=4, help="Triton num_warps (default 4)")
    t.add_argument("--num-stages", type=int, default=3, help="Triton num_stages (default 3)")
    return p


@dataclass(frozen=True)
class SassOptions:
    file: str
    arch: str | None = None
    kernel: str | None = None
    block: int | None = None
    dynamic_smem: int | None = None
    tmem_cols: int | None = None
    nvcc_args: tuple[str, ...] = ()
    triton: object = None  # estimator.sass.triton_src.TritonSpec for a Triton source
    json: bool = False


def from_args(a: argparse.Namespace) -> SassOptions:
    if a.block is not None and not 1 <= a.block <= 1024:
        raise UserError(f"--block must be 1..1024 threads, got {a.block}")
    if a.tmem_cols is not None and a.tmem_cols not in (32, 64, 128, 256, 512):
        raise UserError(f"--tmem-cols must be a power of 2 in 32..512, got {a.tmem_cols}")
    triton = None
    if a.triton_kernel:
        from estimator.sass.triton_src import TritonSpec, parse_args

        triton = TritonSpec(a.triton_kernel, parse_args(a.triton_arg), a.num_warps, a.num_stages)
    elif a.triton_arg:
        raise UserError("--triton-arg needs --triton-kernel NAME")
    return SassOptions(a.file, a.arch, a.kernel, a.block, a.dynamic_smem, a.tmem_cols, tuple(a.nvcc_arg),
                       triton, a.json)


def run(argv: list[str]) -> int:
    opts = from_args(build_parser().parse_args(argv))
    from estimator.sass.analyse import analyse_file
    from estimator.sass.report import to_text

    result = analyse_file(
        opts.file,
        opts.arch,
        kernel=opts.kernel,
        block=opts.block,
        dynamic_smem=opts.dynamic_smem,
        tmem_columns=opts.tmem_cols,
        nvcc_args=opts.nvcc_args,
        triton=opts.triton,
    )
    print(jsonout.dumps(stamped(result), indent=1) if opts.json else to_text(result))
    return 0
