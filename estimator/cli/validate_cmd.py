"""`estimate validate WHAT --data DIR`: the estimator against measured tables (estimator/calibration/).

    estimate validate kernels --data DIR [--arch h100-sxm] [--tables gemm,fp8,nvfp4,...] [--warm-inputs]
                              [--sample N] [--seed S] [--json OUT] [--markdown]
    estimate validate comm --data DIR [--arch h100-sxm] [--sample N] [--seed S] [--json OUT] [--markdown]
    estimate validate serving --data DIR [--sets 8b-trtllm,...] [--rounds 10] [--fit] [--json OUT]
                              [--markdown]
    estimate validate moe-serving --data DIR [--models qwen3-32b,...] [--frameworks trtllm,...] [--tp 1,2]
                                  [--verbose] [--no-steady] [--no-mixed] [--no-waves] [--no-w8a8]
                                  [--markdown]
    estimate validate host [--arch host] [--models llama-tiny,...] [--seqs 64,128] [--runs 10]
                           [--repeat 1] [--batch 1] [--fusion none|ort] [--json OUT] [--markdown]

`--markdown` prints the accuracy tables (median, p90 and signed median of the relative error, per regime,
deployment or set) as Markdown tables, for docs/validation.md. `host` runs onnxruntime on this machine
(no --data); the others read DIR's gzipped CSVs (../shared/calibration/h100_sxm beside a checkout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from estimator.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one `error:` line, exit 2
        raise UserError(f"{self.prog}: {message}")


def _names(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="estimate validate", description=__doc__.splitlines()[0],
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="what", metavar="{kernels,comm,serving,moe-serving,disagg,host}",
                           parser_class=_Parser)
    sub.required = True

    def add(name: str, help_: str, data: bool = True) -> argparse.ArgumentParser:
        q = sub.add_parser(name, help=help_, description=help_)
        if data:
            q.add_argument("--data", type=Path, required=True, metavar="DIR",
                           help="the folder of measured tables")
        q.add_argument("--markdown", action="store_true", help="print the accuracy tables as Markdown")
        return q

    for name, help_ in (("kernels", "measured kernel tables: bound violations and estimate error per regime"),
                        ("comm", "measured collectives (nccl.csv.gz, custom_allreduce.csv.gz)")):
        q = add(name, help_)
        q.add_argument("--arch", default="h100-sxm")
        if name == "kernels":
            q.add_argument("--tables", default="",
                           help="comma list of the tables to run (gemm, fp8, fp8_block, nvfp4, context, "
                                "generation, mla_context, mla_generation, mla_bmm, moe, nccl, allreduce; "
                                "default: every table whose file --data holds)")
            q.add_argument("--warm-inputs", action="store_true",
                           help="activations start resident in L2 (the benchmarks rotate weights only)")
        q.add_argument("--sample", type=int, default=0, help="rows per table (0: every row)")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--json", type=Path, help="also write the results as JSON here")
    q = add("serving", "measured end-to-end TTFT / TPOT of H100 deployments (e2e_serving.csv.gz)")
    q.add_argument("--sets", default="8b-trtllm,70b-vllm,32b-trtllm,32b-vllm,32b-sglang,235b-trtllm,"
                   "gpt-oss-vllm")  # every set of estimator/calibration/validate_serving.py SETS
    q.add_argument("--json", type=Path, help="write every row's measured and predicted values")
    q.add_argument("--fit", action="store_true",
                   help="fit the host front end (host_output_tokens_per_s, host_s_per_request) on 8b-trtllm")
    q.add_argument("--rounds", type=int, default=10,
                   help="requests per client of the benchmark run (0: the steady state alone)")
    q = add("moe-serving",
            "measured TPOT of Qwen3-32B, Qwen3-235B-A22B and gpt-oss-120b (e2e_serving.csv.gz)")
    q.add_argument("--models", default="qwen3-32b,qwen3-235b-a22b,gpt-oss-120b")
    q.add_argument("--frameworks", default="trtllm,vllm,sglang", help="only these backends' rows")
    q.add_argument("--tp", default="", help="only rows of these TP sizes (comma list)")
    q.add_argument("--verbose", action="store_true", help="print every row's TPOT")
    q.add_argument("--no-steady", dest="steady", action="store_false",
                   help="price the decode step alone (no in-flight prefills)")
    q.add_argument("--no-mixed", dest="mixed", action="store_false",
                   help="charge each in-flight prefill whole on top of the decode step")
    q.add_argument("--no-waves", dest="waves", action="store_false",
                   help="price a prefill-first framework's rows (SGLang) with the in-flight model too")
    q.add_argument("--no-w8a8", dest="w8a8", action="store_false",
                   help="price per-tensor fp8 rows with --precision fp8 (every tensor fp8)")
    q = add("disagg", "measured TTFT / TPOT of disaggregated (xPyD) H100 deployments (e2e_serving.csv.gz)")
    q.add_argument("--json", type=Path, help="write every priced row's measured and predicted values")
    q.add_argument("--verbose", action="store_true", help="print every priced row")
    q = add("host", "onnxruntime on this machine: models x sequence lengths", data=False)
    q.add_argument("--arch", default="host")
    q.add_argument("--models", default="llama-tiny,gpt2-small,bert-base,hf-llama")
    q.add_argument("--seqs", default="64,128,256")
    q.add_argument("--batch", type=int, default=1)
    q.add_argument("--fusion", default="none", choices=("none", "ort"),
                   help="none (optimizer off, join by name) or ort (through the optimized model)")
    q.add_argument("--runs", type=int, default=10)
    q.add_argument("--repeat", type=int, default=1,
                   help="sweep this many times, pooling each row's runs (a busy host has quiet spells)")
    q.add_argument("--json", type=Path, help="also write every row (with the per-op breakdown) here")
    return p


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.what in ("kernels", "comm"):
        from estimator.calibration import validate_kernels as vk

        tables = _names(args.tables) if args.what == "kernels" else ("nccl", "allreduce")
        return vk.run(vk.KernelCheck(args.data, tables, args.arch, vars(args).get("warm_inputs", False),
                                     args.sample, args.seed, args.json, args.markdown))
    if args.what == "serving":
        from estimator.calibration import validate_serving as vs

        return vs.run(vs.ServingCheck(args.data, _names(args.sets), args.json, args.fit, args.rounds,
                                      args.markdown))
    if args.what == "moe-serving":
        from estimator.calibration import validate_moe_serving as vms

        return vms.run(vms.MoeServingCheck(args.data, _names(args.models), _names(args.frameworks),
                                           _names(args.tp), args.verbose, args.steady, args.mixed, args.waves,
                                           args.w8a8, args.markdown))
    if args.what == "disagg":
        from estimator.calibration import validate_disagg as vd

        return vd.run(vd.DisaggCheck(args.data, args.json, args.markdown, args.verbose))
    from estimator.calibration import validate_host as vh

    try:
        seqs = tuple(int(s) for s in _names(args.seqs))
    except ValueError:
        raise UserError(f"estimate validate host: --seqs {args.seqs}: a comma list of integers") from None
    if args.runs < 1 or args.repeat < 1 or args.batch < 1 or not seqs or min(seqs) < 1:
        raise UserError("estimate validate host: --runs, --repeat, --batch and every --seqs must be >= 1")
    return vh.run(vh.HostCheck(args.arch, _names(args.models), seqs, args.batch, args.fusion, args.runs,
                               args.repeat, args.json, args.markdown))
