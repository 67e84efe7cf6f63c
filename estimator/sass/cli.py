"""`estimate sass FILE [--arch A] [--kernel NAME] [--block THREADS] [--dynamic-smem BYTES] [--json]`."""

from __future__ import annotations

import argparse
import json

from estimator.errors import UserError


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


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from estimator.sass.analyse import analyse_file
    from estimator.sass.report import to_text

    if args.block is not None and not 1 <= args.block <= 1024:
        raise UserError(f"--block must be 1..1024 threads, got {args.block}")
    if args.tmem_cols is not None and args.tmem_cols not in (32, 64, 128, 256, 512):
        raise UserError(f"--tmem-cols must be a power of 2 in 32..512, got {args.tmem_cols}")
    triton = None
    if args.triton_kernel:
        from estimator.sass.triton_src import TritonSpec, parse_args

        triton = TritonSpec(args.triton_kernel, parse_args(args.triton_arg), args.num_warps, args.num_stages)
    elif args.triton_arg:
        raise UserError("--triton-arg needs --triton-kernel NAME")
    result = analyse_file(
        args.file,
        args.arch,
        kernel=args.kernel,
        block=args.block,
        dynamic_smem=args.dynamic_smem,
        tmem_columns=args.tmem_cols,
        nvcc_args=tuple(args.nvcc_arg),
        triton=triton,
    )
    print(json.dumps(result, indent=1) if args.json else to_text(result))
    return 0
