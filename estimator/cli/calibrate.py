"""`estimate calibrate`: fit the descriptors' constants on measured tables (estimator/calibration/).

    estimate calibrate [--data DIR] [--arch h100-sxm] [--sample N] [--seed S] [--no-fit] [--write]
                       [--attention | --decode | --gemm-keys K,.. | --fp8 [--fp8-keys K,..] [--fp8-sample N]
                        | --comm [--restarts N] [--keep-nccl] [--comm-split] | --host [PATH] [--quick]]

Without a stage flag: both kernel stages (the GEMM constants, then the attention ones and l2) on
gemm.csv.gz, context_attention.csv.gz and generation_attention.csv.gz of DIR. `--write` puts the fit
into the --arch GPU's family file (hwdesc/families/<family>.yaml, read by every SKU of the family and by
the families inheriting it; --comm: the family files' `collectives` and
estimator/pricing/custom_allreduce.yaml). `--host` measures this machine
through onnxruntime into a descriptor instead (as `estimate --calibrate-host PATH`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from estimator.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one `error:` line, exit 2
        raise UserError(f"estimate calibrate: {message}")


def build_parser() -> argparse.ArgumentParser:
    from estimator.calibration.fit_kernels import FP8_KEYS
    from estimator.calibration.tables import DEFAULT_DATA

    p = _Parser(prog="estimate calibrate", description=__doc__.splitlines()[0],
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="DIR",
                   help="the folder of measured tables (default: ../shared/calibration/h100_sxm beside a "
                        "checkout)")
    p.add_argument("--arch", default="h100-sxm", help="the GPU the tables were measured on")
    p.add_argument("--sample", type=int, default=6000, help="rows per table used by the search")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write", action="store_true",
                   help="write the fitted constants into the --arch GPU's family file "
                        "(hwdesc/families/<family>.yaml)")
    p.add_argument("--no-fit", action="store_true", help="only print the residuals of the current YAML")
    stage = p.add_mutually_exclusive_group()
    stage.add_argument("--attention", action="store_true",
                       help="fit only the attention constants (stage 2 without l2), the rest as the YAML "
                            "has it")
    stage.add_argument("--decode", action="store_true",
                       help="fit only the decode-only attention constants on the generation table")
    stage.add_argument("--gemm-keys", metavar="K1,K2", help="fit only these GEMM constants, on the GEMM "
                       "table alone (stage 1; the attention constants and tables untouched)")
    stage.add_argument("--fp8", action="store_true", help="fit only the fp8 constants on the fp8 GEMM rows")
    stage.add_argument("--comm", action="store_true",
                       help="fit the collective constants on nccl.csv.gz and custom_allreduce.csv.gz")
    stage.add_argument("--mla-moe", choices=("mla_generation", "moe", "mla_bmm"), metavar="TABLE",
                       help="fit the MLA decode (mla_generation), MLA BMM (mla_bmm) or MoE layer (moe) "
                            "constants on a seeded half of that table, checked on the other half (printed; "
                            "written by hand)")
    stage.add_argument("--host", nargs="?", const="", metavar="PATH",
                       help="measure this machine into a descriptor YAML (default: the user cache, where "
                            "`--arch host` reads it)")
    p.add_argument("--refine", action="store_true",
                   help="with --mla-moe moe: fit only the per-dtype and min-latency MoE constants "
                        "(estimator/calibration/fit_mla_moe.py REFINE), the others held")
    p.add_argument("--fp8-sample", type=int, default=200, help="with --fp8: rows priced by the search")
    p.add_argument("--fp8-keys", default="tensor_fp8,block_scale",
                   help=f"with --fp8: the constants fitted (from {', '.join(FP8_KEYS)})")
    p.add_argument("--restarts", type=int, default=6, help="with --comm: seeded restarts of each NCCL search")
    p.add_argument("--comm-split", action="store_true",
                   help="with --comm: fit on every other message size of each curve, check on the rest")
    p.add_argument("--keep-nccl", action="store_true",
                   help="with --comm: take the NCCL and NVLS constants from the descriptor; fit only the "
                        "custom all-reduce stage")
    p.add_argument("--quick", action="store_true", help="with --host: fewer sizes and repeats")
    return p


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.sample < 1 or args.fp8_sample < 1:
        raise UserError("estimate calibrate: --sample and --fp8-sample must be at least 1")
    if args.host is not None:
        return calibrate_host(args.host or None, args.quick)
    if args.mla_moe:
        from estimator.calibration import fit_mla_moe

        return fit_mla_moe.main(["--data", str(args.data), "--arch", args.arch, "--table", args.mla_moe,
                                 "--seed", str(args.seed), *(["--refine"] if args.refine else [])])
    if args.comm:
        from estimator.calibration import fit_comm

        return fit_comm.run(fit_comm.CommFit(args.data, args.arch, args.write, args.restarts, args.keep_nccl,
                                             args.comm_split))
    from estimator.calibration import fit_kernels

    which = ("attention" if args.attention else "decode" if args.decode else "fp8" if args.fp8
             else "gemm-keys" if args.gemm_keys else "all")
    return fit_kernels.run(fit_kernels.KernelFit(
        args.data, args.arch, which, args.sample, args.seed, args.write, args.no_fit,
        tuple(args.gemm_keys.split(",")) if args.gemm_keys else (), tuple(args.fp8_keys.split(",")),
        args.fp8_sample))


def calibrate_host(path: str | None, quick: bool) -> int:
    """This machine through onnxruntime into a descriptor YAML (estimator/truth/host.py), and its figures."""
    import hwdesc
    from estimator.truth import host, host_bench

    path = host.calibrate(path or host.cache_path(), host_bench.QUICK if quick else host_bench.FULL)
    hw = hwdesc.load(str(path))  # schema-checks what was written
    print(f"wrote {path}")
    print(f"  fp32 FLOP/s   {hw.cuda_flops_per_s['fp32']:.3e}  (achievable {hw.efficiency['cuda']:.0%})")
    print(f"  SFU ops/s     {hw.sfu_ops_per_s:.3e}  (achievable {hw.efficiency['sfu']:.0%})")
    print(f"  bytes/s       {hw.dram_bytes_per_s:.3e}  (achievable {hw.efficiency['dram']:.0%}; in cache)")
    print(f"  per-op cost   {hw.efficiency.get('op_overhead_s', 0.0) * 1e6:.2f} us")
    return 0
