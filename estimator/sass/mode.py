"""The `--kernel-sass NODE=FILE[#KERNEL]` flag of `estimate MODEL` (see estimator/sass/seam.py).

A mode module in the sense of estimator/cli/main.py's MODES: it adds the flag and never takes over the run
(`run` returns None); `kernel_sass(args, hw)` turns the flags into the estimate's `kernel_sass` argument.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel-sass", action="append", default=[], metavar="NODE=FILE[#KERNEL]",
                        help="price the GEMM kernel(s) holding graph node NODE (a name or fnmatch pattern) "
                             "with the MMA path and occupancy of a compiled kernel (.cu, .ptx, .cubin, "
                             "fatbin; see `estimate sass`)")


def run(args: argparse.Namespace) -> int | None:
    return None


def kernel_sass(args: argparse.Namespace, hw) -> dict | None:
    values = getattr(args, "kernel_sass", None)
    if not values:
        return None
    from estimator.sass.seam import parse_kernel_sass

    return parse_kernel_sass(values, hw)
