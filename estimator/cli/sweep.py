"""The `estimate` CLI mode for scaling studies: --sweep, --crossover, comma-separated --arch, --csv, --plot.

    estimate --model llama-3-8b --sweep seq=128:32768:x2 --arch h100-sxm,b200 --plot s.png
    estimate --model llama-3-8b-decode --crossover --arch h100-sxm,b200
    estimate --model llama-3-8b --sweep seq=512,2048 --sweep batch=1,8 --json

The model is priced once per GPU with the swept dims free and every other dim bound (--dim, or a bundled
model's defaults); the sweep then evaluates lambdified expressions (see estimator.study.sweep). Without
--sweep, --crossover solves along every dim not given by --dim, the others at their default values; a
comma list of GPUs alone prints one comparison row per GPU (or, with --symbolic, one closed form each).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from estimator import jsonout
from estimator.cli.load import load_graph
from estimator.cli.options import Options, UsageError
from estimator.errors import UserError
from estimator.version import stamped


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("scaling studies (several GPUs: --arch h100-sxm,h200,b200)")
    g.add_argument("--sweep", action="append", default=[], metavar="DIM=SPEC",
                   help="sweep a free dim: seq=128:32768:x2 (geometric), seq=128:4096:+128 (linear) or "
                        "seq=512,2048,8192 (list); repeat for a grid")
    g.add_argument("--crossover", action="store_true",
                   help="solve where kernels change limiter and where attention time overtakes MLP time")
    g.add_argument("--csv", metavar="FILE", help="write the sweep's points as CSV ('-': stdout)")
    g.add_argument("--plot", metavar="FILE",
                   help="plot latency against the first swept dim (.png, .svg, .pdf)")
    g.add_argument("--plot-stack", choices=("kind", "limiter"),
                   help="add panels with the estimate's shares stacked by op kind or limiter")


def run(opts: Options) -> int | None:
    st = opts.study
    if not (st.sweeps or st.crossover or len(opts.gpus) > 1):
        for flag, value in (("--csv", st.csv), ("--plot", st.plot), ("--plot-stack", st.plot_stack)):
            if value:
                raise UsageError(f"{flag} needs --sweep, e.g. --sweep seq=128:32768:x2")
        return None
    return _run(opts)


def _check_flags(opts: Options, sweeps) -> None:
    st = opts.study
    if st.plot_stack and not st.plot:
        raise UsageError("--plot-stack needs --plot FILE")
    if st.plot:
        from estimator.study.plot import check_path

        check_path(st.plot)
        if not sweeps or len(sweeps[0].values) < 2:
            raise UsageError("--plot needs a --sweep with at least two values "
                             "(its first --sweep is the x axis)")
    if st.csv and not sweeps:
        raise UsageError("--csv needs --sweep")
    if st.csv == "-" and opts.output.json:
        raise UsageError("--csv - and --json both write to stdout; give --csv a file name")


def _plan(opts: Options, graph, values: Mapping[str, int], explicit: Mapping[str, int], sweeps):
    """(dims to bind at build time, dims to solve crossovers in) after checking every dim is covered."""
    free = sorted(s.name for s in graph.free_symbols())
    have = ", ".join(free) or "none (all dims are static)"
    swept = [s.name for s in sweeps]
    for name in swept:
        if name not in free:
            raise UsageError(f"--sweep {name}: the model has no dim {name!r}; its free dims: {have}")
        if name in explicit:
            raise UsageError(f"--sweep {name} and --dim {name}: give one or the other")
    if sweeps:
        bound = {k: v for k, v in values.items() if k in free and k not in swept}
        solve = swept
    elif opts.study.crossover or opts.output.symbolic:
        bound = {k: v for k, v in explicit.items() if k in free}
        solve = [d for d in free if d not in bound]
    else:
        bound = {k: v for k, v in values.items() if k in free}
        solve = []
    missing = [d for d in free if d not in bound and d not in solve]
    if missing:
        raise UsageError(f"dim(s) {', '.join(missing)} are neither swept nor bound: add --dim "
                         f"{missing[0]}=VALUE or --sweep {missing[0]}=...")
    return bound, solve


def _fixed_for(x: str, solve: Sequence[str], values: Mapping[str, int], sweeps) -> dict[str, int]:
    """Values of the other solve dims while solving along x: their --dim/default value, else the first
    value of their sweep."""
    first = {s.name: s.values[0] for s in sweeps}
    fixed = {}
    for d in solve:
        if d == x:
            continue
        if d in values:
            fixed[d] = values[d]
        elif d in first:
            fixed[d] = first[d]
        else:
            raise UsageError(f"--crossover along {x} needs a value for {d}: add --dim {d}=VALUE "
                             f"(or --sweep {x}=... with --dim {d}=VALUE)")
    return fixed


def _run(opts: Options) -> int:
    from estimator.estimate import estimate
    from estimator.report.table import to_symbolic
    from estimator.study.crossover import crossovers, format_crossovers
    from estimator.study.crossover_points import point_crossovers
    from estimator.study.sweep import Sweeper, parse_sweeps

    sweeps = parse_sweeps(list(opts.study.sweeps))
    _check_flags(opts, sweeps)
    explicit = dict(opts.dims)
    # Defaults of a bundled model are the fixed values of dims that are not swept or solved along.
    graph, values = load_graph(opts.model, explicit, defaults=True)
    bound, solve = _plan(opts, graph, values, explicit, sweeps)

    builds = []
    for gpu in opts.gpus:
        def build(extra, gpu=gpu):
            # The tile model, as --dim prices: sweep points are priced per point by it
            # (estimator/pricing/points.py); --roofline turns it off here too.
            return estimate(graph, gpu.hw, gpu.pricing, dims={**bound, **extra})

        sweeper = Sweeper(build)
        builds.append((sweeper.result, sweeper))

    text: list[str] = []
    doc: dict = {}
    if opts.output.symbolic:
        from estimator.study.closed_form import closed_form

        ranges = {s.name: (min(s.values), max(s.values)) for s in sweeps}
        for result, _ in builds:
            cf = closed_form(result, ranges)
            text.append("\n".join([to_symbolic(result), *(cf.lines() if cf else [])]) + "\n")
    found = []
    if opts.study.crossover and not solve:
        text.append("# --crossover: every dim is bound (--dim), so there is no dim to solve along")
    if opts.study.crossover:
        for result, sweeper in builds:
            for x in solve:
                fixed = _fixed_for(x, solve, values, sweeps)
                if result.tiling:  # on the priced points: the formulas keep one tile per kernel
                    cs = point_crossovers(sweeper.compiled, x, fixed)
                else:
                    cs = crossovers(result, x, fixed, sweeper.compiled.groups)
                found += cs
                others = {**{k: v for k, v in result.dims.items() if v is not None}, **fixed}
                at = ", ".join(f"{k} = {v}" for k, v in others.items()) or "no other free dim"
                header = (f"# crossovers on {result.hw.name} ({result.hw.display_name}), precision "
                          f"{result.precision}, along {x} ({at})")
                text += format_crossovers(cs, header) + [""]
        doc["crossovers"] = [c.to_json() for c in found]
    runs = []
    if sweeps or not (opts.output.symbolic or opts.study.crossover):
        runs = _sweep_outputs(opts, builds, sweeps, text, doc)
    _fits(builds, text, doc)
    if opts.output.json:
        print(jsonout.dumps(stamped(doc), indent=1))
    elif text:
        print("\n".join(text).rstrip())
    if opts.study.plot:
        _plot(opts, builds, runs, sweeps)
    return 0


def _fits(builds, text: list[str], doc: dict) -> None:
    """Each GPU's weights fit (estimator/serve/memory.py result_fit): a `does not fit` line under the
    table for a GPU that cannot hold them, and `memory_fit` per GPU in the JSON."""
    from estimator.serve.memory import result_fit

    fits = {}
    for result, _ in builds:
        fit = result_fit(result)
        if fit is None:
            continue
        fits[result.hw.name] = fit.to_json()
        if not fit.fits:
            text.append(f"{result.hw.name}: {fit.text()}")
    if fits:
        doc["memory_fit"] = fits


def _sweep_outputs(opts: Options, builds, sweeps, text: list[str], doc: dict):
    from estimator.study.sweep import format_table, grid, to_csv, to_json

    points = grid(sweeps)
    runs = [sweeper.evaluate(points) for _, sweeper in builds]
    for p in runs:  # columns in the order the sweeps were given
        p.dims = {s.name: p.dims[s.name] for s in sweeps}
    csv = opts.study.csv
    if opts.output.json:
        doc.update(to_json(runs, sweeps))
    elif not opts.output.symbolic and csv != "-":  # with --csv -, stdout is the CSV alone
        text.insert(0, format_table(runs) + "\n")
    if csv:
        body = to_csv(runs)
        if csv == "-":
            sys.stdout.write(body)
        else:
            try:
                with open(csv, "w", encoding="utf-8") as f:
                    f.write(body)
            except OSError as exc:
                raise UserError(f"--csv {csv}: {exc.strerror or exc}") from None
    return runs


def _plot(opts: Options, builds, runs, sweeps) -> None:
    from estimator.study.plot import make_figure, save

    first = runs[0]
    model = opts.model.title
    fixed = ", ".join(f"{k}={v}" for k, v in first.fixed.items())
    title = f"{model} | precision {first.precision}" + (f" | {fixed}" if fixed else "")
    fig = make_figure([(s.compiled, p) for (_, s), p in zip(builds, runs, strict=True)], sweeps[0].name,
                      opts.study.plot_stack, title)
    save(fig, opts.study.plot)
    print(f"plot written to {opts.study.plot}", file=sys.stderr)
