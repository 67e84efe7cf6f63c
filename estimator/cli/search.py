"""The `estimate` CLI mode for deployment search: --search, --sla, --disagg, --solve, --sensitivity.

    estimate --model llama-3.1-70b --arch h100-sxm,h200,b200 --precision fp8 --search gpus=8 \\
             --sla ttft=1s,tpot=30ms --serve isl=2048,osl=256 [--csv FILE] [--plot FILE] [--json]
    estimate --model llama-3.1-70b --arch h200 --precision fp8 --serve isl=2048,osl=256 \\
             --disagg prefill=3xtp1,decode=1xtp4,decode_batch=64
    estimate --model llama-3.1-70b --arch h200 --precision fp8 --tp 4 --serve isl=2048,osl=256 \\
             --solve concurrency --sla tpot=20ms
    estimate --model llama-3.1-70b --arch h200 --precision fp8 --tp 4 \\
             --serve isl=2048,osl=256,concurrency=32 --sensitivity

A comma list in --model and in --arch makes a study of one search per (model, GPU): serial by default,
on a Dask LocalCluster of 2 workers with --dask-local, on a running scheduler with --scheduler ADDRESS
(estimator/serve/fanout.py). The search itself: estimator/serve/search.py and disagg.py.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys

from estimator import jsonout
from estimator.cli.options import Options, UsageError
from estimator.textfit import fit_table, width, wrap
from estimator.version import stamped

DISAGG_KEYS = ("prefill", "decode", "prefill_batch", "decode_batch", "prefill_adp", "decode_adp",
               "prefill_ep", "decode_ep")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("deployment search (SLA, disaggregated serving, inversions)")
    g.add_argument("--search", metavar="gpus=N",
                   help="every deployment of N GPUs (TP x concurrency; with --disagg the xPyD units too) "
                        "meeting --sla")
    g.add_argument("--sla", metavar="ttft=T,tpot=T", help="targets, e.g. ttft=500ms,tpot=20ms")
    g.add_argument("--disagg", nargs="?", const="", metavar="prefill=XxtpN,decode=YxtpM[,decode_batch=B]",
                   help="disaggregated serving: alone, with --search, the search adds the xPyD units of the "
                        "budget; a SPEC serves one unit (prefill_batch=K prompts a prefill step)")
    g.add_argument("--solve", metavar="DIM", help="concurrency, batch, context or gpus meeting --sla")
    g.add_argument("--sensitivity", action="store_true",
                   help="elasticities of TPOT and TTFT to the descriptor's figures at the --serve point")
    g.add_argument("--scheduler", metavar="ADDRESS", help="run a study's searches on this Dask scheduler")
    g.add_argument("--dask-local", action="store_true",
                   help="run a study's searches on a Dask LocalCluster of 2 workers")


def run(opts: Options) -> int | None:
    s = opts.search
    if not s.asked:
        if s.sla or s.scheduler or s.dask_local:
            raise UsageError("--sla, --scheduler and --dask-local go with --search, --solve or --disagg")
        return None
    if not opts.model.name or not opts.serving.workload:
        raise UsageError("--search, --disagg, --solve and --sensitivity need --model NAME and "
                         "--serve isl=I,osl=O")
    if s.budget:
        return _search(opts)
    if len(opts.gpus) > 1 or "," in opts.model.name:
        raise UsageError("a comma list in --model or --arch goes with --search")
    if s.disagg:
        return _disagg(opts)
    if s.disagg == "":
        raise UsageError("--disagg alone goes with --search; to serve one unit give "
                         "--disagg prefill=XxtpN,decode=YxtpM[,decode_batch=B]")
    if s.solve:
        return _solve(opts)
    return _sensitivity(opts)


def _sla(opts: Options):
    from estimator.serve.search import parse_sla

    return parse_sla(opts.search.sla)


def _tp(opts: Options) -> int:
    tps = opts.parallel.tp or (1,)
    if len(tps) > 1:
        raise UsageError("--solve and --sensitivity take one --tp")
    return tps[0]


# --- the search -----------------------------------------------------------------------------------------

def tasks_of(opts: Options) -> list:
    from estimator.serve.fanout import SearchTask
    from estimator.serve.search import parse_budget

    budget = parse_budget(opts.search.budget)
    sla = _sla(opts)
    work = opts.serving.workload
    disagg = opts.search.disagg == ""  # --disagg alone: the xPyD units join the search
    models = [m.strip() for m in opts.model.name.split(",") if m.strip()]
    return [SearchTask(m, g.arch, g.hw.path, opts.precision, opts.serving.kv_precision, g.pricing.pipeline,
                       opts.serving.framework or "trtllm", not opts.roofline, work.isl, work.osl, budget,
                       sla.ttft_s, sla.tpot_s, disagg, work.batching)
            for m in models for g in opts.gpus]


def _search(opts: Options) -> int:
    from estimator.serve.fanout import fan_out
    from estimator.serve.search import Row, rank

    if opts.search.solve or opts.search.sensitivity:
        raise UsageError("--solve and --sensitivity take one deployment (--tp), not --search")
    if opts.search.disagg:
        raise UsageError("with --search, --disagg takes no SPEC (the search enumerates the xPyD units)")
    if opts.parallel.tp or opts.parallel.pp:
        raise UsageError("--tp and --pp go with one deployment, not --search (the search enumerates them)")
    if opts.study.plot:
        from estimator.study.plot import check_path

        check_path(opts.study.plot)
    tasks = tasks_of(opts)
    results = fan_out(tasks, opts.search.scheduler, opts.search.dask_local)
    sections = []
    for task, dicts in zip(tasks, results, strict=True):
        rows = [Row(**{k: v for k, v in d.items() if k != "model"}) for d in dicts if "none_fit" not in d]
        missing = next((d["none_fit"] for d in dicts if "none_fit" in d), None)
        sections.append((task, rank(rows), missing))
    if opts.output.json:
        out = {"search": [{"model": t.model, "gpu": t.gpu, "budget_gpus": t.budget,
                           "sla": {"ttft_s": t.ttft_s, "tpot_s": t.tpot_s}, "isl": t.isl, "osl": t.osl,
                           "deployments": [r.to_json() for r in rows], "none_fit": missing}
                          for t, rows, missing in sections]}
        print(jsonout.dumps(stamped(out), indent=1))
    else:
        for t, rows, missing in sections:
            print(search_text(t, rows, opts.output.top, missing))
            print()
    if opts.study.csv:
        _write_csv(opts.study.csv, sections)
    if opts.study.plot:
        plot_front(sections, opts.study.plot)
        if not opts.output.json:
            print(f"wrote {opts.study.plot}")
    return 0


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms"


def _split(st: dict, ep_always: bool) -> str:
    """tp_size (and ep_size), then what a plain TP deployment leaves at its default: attention DP, and a
    MoE-TP that is not the attention group's."""
    parts = [f"tp_size={st['tp_size']}"]
    if ep_always or st.get("ep_size", 1) > 1:
        parts.append(f"ep_size={st['ep_size']}")
    dp = st.get("attention_dp_size", 1)
    if dp > 1:
        parts.append(f"enable_attention_dp=true attention_dp_size={dp}")
    group = st["tp_size"] * dp
    if st.get("moe_tp_size", group) not in (group, 1) or (dp > 1 and st.get("ep_size", 1) == 1):
        parts.append(f"moe_tp_size={st['moe_tp_size']}")
    return " ".join(parts)


def _settings(r) -> str:
    st = r.settings
    if r.mode == "agg":
        return (f"{_split(st, True)} max_batch_size={st['max_batch_size']} "
                f"max_num_tokens={st['max_num_tokens']} kv_fraction={st['kv_cache_fraction']}")
    p, d = st["prefill"], st["decode"]
    return (f"prefill {p['workers']}x({_split(p, False)} max_batch_size={p['max_batch_size']}) "
            f"decode {d['workers']}x({_split(d, False)} max_batch_size={d['max_batch_size']}) "
            f"max_num_tokens={d['max_num_tokens']} kv_fraction={st['kv_cache_fraction']} "
            f"kv over {st['kv_transfer']}")


def search_text(task, rows, top: int, missing: str | None) -> str:
    sla = []
    if task.ttft_s:
        sla.append(f"TTFT <= {task.ttft_s * 1e3:g} ms")
    if task.tpot_s:
        sla.append(f"TPOT <= {task.tpot_s * 1e3:g} ms")
    head = (f"search: {task.model} on {task.budget} x {task.gpu}, precision {task.precision or 'graph'}, "
            f"{task.framework}, isl {task.isl}, osl {task.osl}; SLA {', '.join(sla) or 'none'}")
    lines = wrap(head)
    if missing:
        lines.append(f"  no deployment fits: {missing}")
        return "\n".join(lines)
    if not rows:
        lines.append("  no deployment meets the SLA")
        return "\n".join(lines)
    table = [["#", "mode", "deployment", "conc", "TTFT", "TPOT", "tok/s/GPU", "tok/s/user", "KV headroom"]]
    for i, r in enumerate(rows[:top], 1):
        table.append([str(i), r.mode, r.label, str(r.concurrency), _ms(r.ttft_s), _ms(r.tpot_s),
                      f"{r.tokens_per_s_per_gpu:,.0f}", f"{r.tokens_per_s_per_user:,.1f}",
                      f"{r.memory_headroom_bytes / 1e9:.1f} GB"])
    fitted = fit_table(table, "rllrrrrrr")
    lines.append(fitted[0])
    limit = width()
    for i, r in enumerate(rows[:top], 1):  # each row, then the engine settings to type, under it
        lines.append(fitted[i])
        lines += ["      " + x for x in wrap(f"settings: {_settings(r)}", limit and max(40, limit - 6))]
    lines += fitted[len(table):]  # the note of columns left out, if any
    lines += wrap(f"({len(rows)} deployments meet the SLA; conc = clients of one replica / xPyD unit; "
                  f"{task.budget} GPUs hold budget // its GPUs replicas)", limit)
    lines.append("Pareto front (tokens/s/GPU against tokens/s/user):")
    for mode in ("agg", "disagg"):
        front = sorted((r for r in rows if r.pareto and r.mode == mode),
                       key=lambda r: r.tokens_per_s_per_user)
        for r in front:
            lines.append(f"  {mode:<6} {r.label:<28} conc {r.concurrency:>4}  "
                         f"{r.tokens_per_s_per_gpu:>8,.0f} "
                         f"tok/s/GPU  {r.tokens_per_s_per_user:>7,.1f} tok/s/user")
    return "\n".join(lines)


def _write_csv(path: str, sections) -> None:
    from estimator.serve.search import CSV_FIELDS

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(("model", *CSV_FIELDS))
    for t, rows, _ in sections:
        for r in rows:
            d = r.to_json()
            w.writerow((t.model, *[json.dumps(d[k], sort_keys=True) if k == "settings" else d[k]
                                   for k in CSV_FIELDS]))
    if path == "-":
        sys.stdout.write(buf.getvalue())
    else:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(buf.getvalue())


def plot_front(sections, path: str) -> None:
    """tokens/s/GPU against tokens/s/user: one Pareto curve per (model, GPU, agg/disagg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    models = {t.model for t, _, _ in sections}
    for t, rows, _ in sections:
        for mode, style in (("agg", "-o"), ("disagg", "--s")):
            pts = sorted((r.tokens_per_s_per_user, r.tokens_per_s_per_gpu) for r in rows
                         if r.pareto and r.mode == mode)
            if pts:
                name = f"{t.model} " if len(models) > 1 else ""
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4,
                        label=f"{name}{t.gpu} {mode}", gid=f"{t.model}:{t.gpu}:{mode}")
    ax.set_xlabel("tokens/s per user (1 / TPOT)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title("Pareto fronts of the deployments meeting the SLA", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, bbox_inches="tight")


# --- one disaggregated unit -----------------------------------------------------------------------------

def parse_disagg(text: str):
    """`prefill=XxtpN,decode=YxtpM[,prefill_batch=K][,decode_batch=B][,prefill_adp=A][,prefill_ep=E]
    [,decode_adp=A][,decode_ep=E]` -> Disagg (a worker is tp x adp GPUs; batches per attention-DP rank)."""
    from estimator.serve.disagg import Disagg

    values: dict[str, str] = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        if not sep or key not in DISAGG_KEYS:
            raise UsageError(f"--disagg {text!r}: expected prefill=XxtpN,decode=YxtpM[,prefill_batch=K]"
                             f"[,decode_batch=B][,prefill_adp=A,prefill_ep=E,decode_adp=A,decode_ep=E], "
                             f"got {item!r}")
        values[key] = value.strip().lower()

    def pool(key: str) -> tuple[int, int]:
        if key not in values:
            raise UsageError(f"--disagg {text!r}: missing {key}=XxtpN")
        workers, sep, tp = values[key].partition("xtp")
        try:
            x, t = int(workers), int(tp)
        except ValueError:
            raise UsageError(f"--disagg {key}={values[key]!r}: expected XxtpN, e.g. 2xtp4") from None
        if not sep or x < 1 or t < 1:
            raise UsageError(f"--disagg {key}={values[key]!r}: workers and tp must be positive (XxtpN)")
        return x, t

    def count(key: str, default: int) -> int:
        try:
            v = int(values.get(key, default))
        except ValueError:
            raise UsageError(f"--disagg {key}={values[key]!r}: must be an integer") from None
        if v < 1:
            raise UsageError(f"--disagg {key}={v}: must be a positive integer")
        return v

    (x, tp_p), (y, tp_d) = pool("prefill"), pool("decode")
    return Disagg(x, tp_p, count("prefill_batch", 1), y, tp_d, count("decode_batch", 1),
                  count("prefill_adp", 1), count("decode_adp", 1), count("prefill_ep", 1),
                  count("decode_ep", 1))


def _disagg(opts: Options) -> int:
    from dataclasses import replace

    from estimator.serve.deploy import Deployment
    from estimator.serve.disagg import prefetch, serve_disagg
    from estimator.serve.search import options_of, pools

    spec = parse_disagg(opts.search.disagg)
    work = opts.serving.workload
    clients = work.concurrency if opts.search.concurrency_given else None
    if clients is not None and spec.decode_batch == 1:  # the clients share the decode workers
        ranks = spec.decode_workers * spec.decode_attention_dp
        spec = replace(spec, decode_batch=math.ceil(clients / ranks))
    # each pool its own split (search.pools / options_of: the records the search lists), built once
    deps = {lay: Deployment.build(opts.model.name, options_of(lay, opts.steps_options(lay.tp)))
            for lay in set(pools(spec))}
    pre, dec = (deps[lay] for lay in pools(spec))
    prefetch(pre, dec, spec, work)
    r = serve_disagg(pre, dec, spec, work, clients)
    if opts.output.json:
        doc = {"arch": opts.hw.name, "precision": opts.precision, "serve": r.to_json()}
        print(jsonout.dumps(stamped(doc), indent=1))
        return 0
    print(f"serving {opts.model.name} disaggregated on {spec.gpus} x {opts.hw.name}: {spec.label}, precision "
          f"{opts.precision or 'graph'}, {pre.framework.display_name}")
    print(f"workload: isl {work.isl}, osl {work.osl}, {r.clients} clients")
    if not r.fits:
        print(f"  {'; '.join(r.notes)}")
        return 0
    print(f"  TTFT          {_ms(r.ttft_s):>12}  (prefill {_ms(r.prefill_s)}, "
          f"queued {_ms(r.prefill_wait_s)})")
    print(f"  TPOT          {_ms(r.tpot_s):>12}  (KV transfer {r.kv_transfer_s * 1e3:.3f} ms "
          f"over {r.kv_transfer_link})")
    print(f"  E2E           {_ms(r.e2e_s):>12}")
    print(f"  tokens/s      {r.tokens_per_s:>12,.0f}   per GPU {r.tokens_per_s_per_gpu:,.0f}   "
          f"per user {r.tokens_per_s_per_user:,.1f}")
    print(f"  decode batch  {r.decode_batch:>12.1f}   per worker on average (of {spec.decode_batch}); "
          f"prefill pool {r.prefill_busy:.0%} busy")
    for note in r.notes:
        print(f"  note: {note}")
    return 0


# --- inversions and sensitivities -----------------------------------------------------------------------

def _solve(opts: Options) -> int:
    from estimator.errors import UserError
    from estimator.serve import solve
    from estimator.serve.deploy import Deployment

    dim = opts.search.solve
    if dim not in solve.DIMS:
        raise UsageError(f"--solve {dim!r}: choose from {', '.join(solve.DIMS)}")
    sla = _sla(opts)
    if sla.ttft_s is None and sla.tpot_s is None:
        raise UsageError("--solve needs --sla ttft=T and/or tpot=T")
    work = opts.serving.workload
    if dim == "gpus":
        built: dict = {}

        def at(tp):
            if tp not in built:
                try:
                    built[tp] = Deployment.build(opts.model.name, opts.steps_options(tp))
                except UserError:
                    built[tp] = None
            return built[tp]

        sol = solve.solve_gpus(at, work, sla)
    else:
        dep = Deployment.build(opts.model.name, opts.steps_options(_tp(opts)))
        sol = {"concurrency": solve.solve_concurrency, "batch": solve.solve_batch,
               "context": solve.solve_context}[dim](dep, work, sla)
    if opts.output.json:
        print(jsonout.dumps(stamped({"solve": sol.to_json()}), indent=1))
    else:
        print(sol.text)
    return 0


def _sensitivity(opts: Options) -> int:
    from estimator.serve import sensitivity

    tp = _tp(opts)
    rows = sensitivity.elasticities(opts.model.name, opts.steps_options(tp), opts.serving.workload)
    if opts.output.json:
        print(jsonout.dumps(stamped({"sensitivity": [r.to_json() for r in rows]}), indent=1))
    else:
        w = opts.serving.workload
        print(f"sensitivity of {opts.model.name} on {tp} x {opts.hw.name}, isl {w.isl}, osl {w.osl}, "
              f"concurrency {w.concurrency}:")
        print(sensitivity.text(rows))
    return 0
