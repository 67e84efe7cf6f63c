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
    p.add_argument("file", help=".cu, .ptx, .cubin, fatbin, executable or shared library")
    p.add_argument(
        "--arch", help="GPU (h100-sxm, b200, rtx-5090, ...) or SM (sm_90a); default: a cubin's own SM"
    )
    p.add_argument("--kernel", help="analyse only this kernel (its ELF symbol name)")
    p.add_argument("--block", type=int, metavar="THREADS", help="threads per block (default: launch bounds)")
    p.add_argument(
        "--dynamic-smem", type=int, default=0, metavar="BYTES", help="dynamic shared memory per block"
    )
    p.add_argument(
        "--tmem-cols", type=int, metavar="N", help="TMEM columns per CTA (tcgen05; default: from alloc)"
    )
    p.add_argument(
        "--nvcc-arg", action="append", default=[], metavar="ARG", help="extra nvcc argument for a .cu"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from estimator.sass.analyse import analyse_file
    from estimator.sass.report import to_text

    if args.block is not None and not 1 <= args.block <= 1024:
        raise UserError(f"--block must be 1..1024 threads, got {args.block}")
    if args.tmem_cols is not None and args.tmem_cols not in (32, 64, 128, 256, 512):
        raise UserError(f"--tmem-cols must be a power of 2 in 32..512, got {args.tmem_cols}")
    result = analyse_file(
        args.file,
        args.arch,
        kernel=args.kernel,
        block=args.block,
        dynamic_smem=args.dynamic_smem,
        tmem_columns=args.tmem_cols,
        nvcc_args=tuple(args.nvcc_arg),
    )
    print(json.dumps(result, indent=1) if args.json else to_text(result))
    return 0
