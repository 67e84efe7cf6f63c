"""`estimate`: price an ONNX model's kernels on a GPU.

Exit codes: 0 ok; 2 bad usage or bad input (one `error:` line); 1 internal error (re-run with --debug).
"""

from __future__ import annotations

import argparse
import sys
import traceback

from estimator import jsonout
from estimator.cli.options import UsageError, from_args
from estimator.errors import UserError
from estimator.gc_pause import cyclic_gc_paused
from estimator.version import SCHEMA_VERSION, stamped, tool_version

EPILOG = """\
other modes (each has its own --help):
  estimate profile FILE [--model M]   a measured profile (nsys, ncu, onnxruntime, PyTorch) vs peaks and
                                      the estimate (docs/profiles.md)
  estimate sass FILE                  a compiled kernel (.cu, .ptx, .cubin, fatbin, cuobjdump/nvdisasm
                                      text): tensor path, occupancy (docs/sass.md)
  estimate calibrate ...              fit the efficiency constants on measured tables (docs/validation.md)
  estimate validate ...               the estimate against measured tables (docs/validation.md)
  MODEL --validate                    run MODEL in onnxruntime and compare (docs/validation.md)
examples:
  estimate model.onnx --arch blackwell --dim batch=1 --dim seq=4096
  estimate --model llama-3-8b --arch h100-sxm --precision bf16
  estimate --model llama-3-8b-decode --symbolic
dims: --model NAME binds the model's default dims (see --list-models) unless --symbolic or --dim says
otherwise; an ONNX file keeps every dim not given by --dim symbolic.
"""


__all__ = ["UsageError", "build_parser", "main", "run"]

# Optional modes: modules with `add_arguments(parser)` and `run(opts) -> int | None` (None when the
# mode was not asked for), `opts` the one frozen estimator.cli.options.Options built from the parsed
# command line. Each feature (sweeps, validation, other frontends...) adds its module here and its flags'
# fields to estimator/cli/options.py instead of growing this file; a mode loads its graph through
# estimator.cli.load.load_graph.
# estimator.cli.serve comes first (with --serve it runs a `--sweep concurrency=` itself), then
# estimator.cli.report (with --report/--recommend/--trace it also draws a --sweep itself).
MODES: list[str] = ["estimator.cli.search", "estimator.cli.serve", "estimator.cli.report",
                    "estimator.cli.sweep", "estimator.cli.validate", "estimator.cli.pytorch",
                    "estimator.cli.hf"]


# Subcommands with their own parser: `estimate sass FILE ...`, `estimate profile FILE ...`. Each module
# has `run(argv: list[str]) -> int` and raises UserError for bad input, like the modes above.
SUBCOMMANDS: dict[str, str] = {"sass": "estimator.cli.sass", "profile": "estimator.cli.profile",
                               "calibrate": "estimator.cli.calibrate",
                               "validate": "estimator.cli.validate_cmd"}


def _modes():
    import importlib

    return [importlib.import_module(name) for name in MODES]


class _Precisions:
    """--precision's choices (estimator.precision.precision_names), imported only when a precision is given or
    the help is printed: dtypes imports sympy and onnx, which `--list-archs` never needs."""

    def _names(self) -> list[str]:
        from estimator.precision import precision_names

        return precision_names()

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage + 2 lines)
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="estimate", description="Latency bound and estimate of an ONNX model on an NVIDIA GPU.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"estimate {tool_version()} (JSON schema "
                                                           f"{SCHEMA_VERSION})")
    p.add_argument("model_path", nargs="?", metavar="MODEL", help="path to an .onnx file")
    p.add_argument("--model", dest="model_name", metavar="NAME", help="a bundled model (see --list-models)")
    p.add_argument("--arch", default="h100-sxm",
                   help="GPU SKU, alias (hopper, blackwell), path to a hwdesc YAML, or host (this machine, "
                        "measured through onnxruntime on first use) (default: h100-sxm)")
    p.add_argument("--precision", choices=_Precisions(), metavar="P",
                   help="re-type every float tensor to this precision: %(choices)s; fp8-w8a8: a per-tensor "
                        "fp8 checkpoint as serving engines run it (fp8 linears and their activation "
                        "quantization, bf16 elsewhere) (default: the graph's dtypes)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="bind a free dimension (repeatable)")
    p.add_argument("--fusion", default=None, metavar="STRATEGY",
                   help="how kernels are fused: none, ort, inductor, tensorrt, max (default: tensorrt, the "
                        "deployment most users target)")
    p.add_argument("--pipeline", default=None,
                   help="explicit pass pipeline instead of a strategy, e.g. 'canonicalize,fuse-attention'")
    p.add_argument("--compare-fusion", metavar="S1,S2,...", nargs="?", const="none,ort,inductor,tensorrt,max",
                   help="one table comparing fusion strategies (default list: all)")
    p.add_argument("--explain", action="store_true", help="list every fusion a rule refused, with the reason")
    p.add_argument("--print-after", metavar="PASS", action="append", default=[],
                   help="dump the graph after this pass (repeatable; 'all' for every pass)")
    p.add_argument("--verify-each", action="store_true", help="check the graph's invariants after every pass")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--symbolic", action="store_true", help="print closed-form totals in the free dims")
    p.add_argument("--top", type=int, default=15, metavar="N", help="kernels in the table (default 15)")
    p.add_argument("--wide", action="store_true",
                   help="every table column whole (default: tables fit the terminal's width, COLUMNS)")
    p.add_argument("--strict", action="store_true", help="an uncosted op is an error")
    p.add_argument("--roofline", action="store_true",
                   help="price kernels by the roofline estimate only (no tile plans, no L2 residency)")
    p.add_argument("--warm-inputs", action="store_true",
                   help="graph inputs start resident in L2 when they fit (as in a benchmark that re-runs "
                        "one kernel on the same activations); lowers the bound of kernels that read them")
    p.add_argument("--list-archs", action="store_true", help="list bundled GPUs and exit")
    p.add_argument("--list-models", action="store_true", help="list bundled models and exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--kernel-sass", action="append", default=[], metavar="NODE=FILE[#KERNEL]",
                   help="price the GEMM kernel(s) holding graph node NODE (a name or fnmatch pattern) "
                        "with the MMA path and occupancy of a compiled kernel (.cu, .ptx, .cubin, "
                        "fatbin; see `estimate sass`; estimator/sass/seam.py)")
    for mode in _modes():
        mode.add_arguments(p)
    return p


def list_archs() -> str:
    import hwdesc
    from estimator.textfit import fit_table

    rows = [["arch", "name", "SMs", "bf16 TF/s", "fp8 TF/s", "fp4 TF/s", "fp32 TF/s", "DRAM TB/s", "L2 MB"]]
    for name in hwdesc.list_archs():
        hw = hwdesc.load(name)
        tc = hw.tensor_flops_per_s

        def tf(key: str, peaks=tc) -> str:
            return f"{peaks[key] / 1e12:.0f}" if key in peaks else "-"

        rows.append([name, hw.display_name, str(hw.sm_count), tf("bf16"), tf("fp8"), tf("fp4"),
                     f"{hw.cuda_flops_per_s['fp32'] / 1e12:.1f}", f"{hw.dram_bytes_per_s / 1e12:.2f}",
                     f"{hw.l2_bytes / 2**20:.0f}"])
    aliases = ", ".join(f"{a} = {t}" for a, t in sorted(hwdesc.ALIASES.items()))
    # the terminal's width: the names keep their tail, then fp32 and L2 give way before the tensor peaks
    return "\n".join([*fit_table(rows, "llrrrrrrr", clip=(1,), drop=(6, 8, 5, 2)),
                      f"aliases: {aliases}; any path to a .yaml descriptor works too"])


def list_models() -> str:
    import textwrap

    import models
    from estimator.textfit import width

    specs = models.list_models()
    indent = max(len(s.name) for s in specs) + 2
    limit = width()
    lines = []
    for s in specs:
        dims = ", ".join(f"{k}={v}" for k, v in s.default_dims.items())
        text = f"{s.description}  [default dims: {dims}]"
        if limit is None or indent + len(text) <= limit:
            lines.append(f"{s.name:<{indent}}{text}")
        else:  # the description wrapped under itself, the names in one column
            body = textwrap.wrap(text, max(40, limit - indent), break_on_hyphens=False)
            lines += [f"{s.name:<{indent}}{body[0]}", *(" " * indent + b for b in body[1:])]
    return "\n".join(lines)


def run(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        import importlib

        return importlib.import_module(SUBCOMMANDS[argv[0]]).run(argv[1:])
    args = build_parser().parse_args(argv)
    if args.list_archs or args.list_models:
        import contextlib

        from estimator.textfit import fitted

        with fitted(None) if args.wide else contextlib.nullcontext():
            print(list_archs() if args.list_archs else list_models())
        return 0
    with cyclic_gc_paused(freeze=True):  # start-up: imports and the GPUs live until exit (gc_pause.py)
        opts = from_args(args)  # the one read of the Namespace: every mode takes `opts`
    import contextlib

    from estimator.textfit import fitted

    # tables fit the terminal (estimator/textfit.py); --wide: every column whole
    with fitted(None) if opts.output.wide else contextlib.nullcontext():
        for mode in _modes():
            code = mode.run(opts)
            if code is not None:
                return code
        return plain(opts)


def plain(opts) -> int:
    """The default mode: one table (or JSON, or closed forms) of the model's kernels on the first GPU."""
    if opts.output.top < 1:
        raise UsageError("--top must be at least 1")
    with cyclic_gc_paused(freeze=True):  # start-up: imports and the IR live until exit (gc_pause.py)
        from estimator.cli.load import load_graph
        from estimator.estimate import estimate
        from estimator.report import fusion as fusion_report
        from estimator.report.table import to_json, to_symbolic, to_table

        graph, dims = load_graph(opts.model, opts.dims, defaults=not opts.output.symbolic)
    gpu = opts.gpu
    pricing = gpu.pricing
    if opts.kernel_sass:  # --kernel-sass NODE=FILE: compiled kernels for the tile model
        from dataclasses import replace

        from estimator.sass.seam import parse_kernel_sass

        pricing = replace(pricing, kernel_sass=parse_kernel_sass(list(opts.kernel_sass), gpu.hw))
    if opts.fusion.compare:
        if opts.output.symbolic:
            raise UsageError("--compare-fusion prints numbers; drop --symbolic")
        from dataclasses import replace

        from passes import pipeline_for

        results = {name: estimate(graph, gpu.hw, replace(pricing, pipeline=pipeline_for(name, gpu.hw.family)),
                                  dims=dims)
                   for name in opts.fusion.compare}
        print(jsonout.dumps(stamped({"strategies": {n: to_json(r) for n, r in results.items()}}), indent=1)
              if opts.output.json else fusion_report.compare_table(results))
        return 0
    result = estimate(graph, gpu.hw, pricing, dims=dims,
                      after_pass=fusion_report.printer(opts.fusion.print_after))
    from estimator.study.closed_form import closed_form

    cf = closed_form(result) if result.symbolic else None  # free dims: how exact the formulas are
    from estimator.cli.hf import ep_decisions

    ep = ep_decisions(graph)  # --expert-parallel: the all-to-all it inserted
    from estimator.serve.memory import result_fit

    fit = result_fit(result, opts.serving.framework)
    if opts.output.json:
        split = opts.model.parallel.to_json() if opts.model.parallel is not None else {"tp": 1, "pp": 1}
        parallel = {"parallel": {**split, "decisions": ep}} if ep else {}
        fits = {"memory_fit": fit.to_json()} if fit is not None else {}
        doc = {**to_json(result), **({"closed_form": cf.to_json()} if cf else {}), **parallel, **fits}
        print(jsonout.dumps(stamped(doc), indent=1))
    elif opts.output.symbolic:
        print("\n".join([to_symbolic(result), *(cf.lines() if cf else [])]))
    else:
        print(to_table(result, opts.output.top))
    if fit is not None and not fit.fits and not opts.output.json:
        print(fit.text())
    if opts.fusion.explain:
        print(fusion_report.explain(result))
        if ep:
            print(f"sharding decisions (--expert-parallel {opts.model.expert_parallel}):")
            print("\n".join(f"  {d}" for d in ep))
    return 0


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    from hwdesc import HwdescError  # hwdesc stands alone (no estimator import), so it has its own base

    return (UserError, HwdescError)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        return run(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except BrokenPipeError:  # output piped into `head`: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
    except Exception as exc:
        if isinstance(exc, _bad_input_errors()):
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if debug:
            traceback.print_exc()
        print(f"error: internal error ({type(exc).__name__}: {exc}); re-run with --debug for a traceback",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
