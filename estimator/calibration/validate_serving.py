"""Validate the serving model against measured end-to-end TTFT / TPOT of H100 deployments.

    estimate validate serving --data ../shared/calibration/h100_sxm [--sets 8b-trtllm,70b-vllm]
                              [--json OUT] [--fit] [--rounds 10] [--markdown]

Source: `e2e_serving.csv.gz` (aiconfigurator's silicon set, serving.md 0.3): closed-loop benchmarks with
`batch_size` = client concurrency, aggregated (not disaggregated) serving, `silicon_ttft_ms` and
`silicon_tpot_ms` measured. Two sets:
- 8b-trtllm: meta-llama/Llama-3.1-8B-Instruct, TensorRT-LLM 1.0.0rc3, bf16, TP 1/2/4/8, every
  ISL/OSL/concurrency row; priced as `--model llama-3.1-8b --precision bf16 --framework trtllm`.
- 70b-vllm: meta-llama/Llama-3.1-70B, vLLM, fp8, TP 2/4/8; priced as `--model llama-3.1-70b --precision
  fp8 --framework vllm` (fp8 weights and KV cache: the table does not say the KV dtype; a bf16 cache
  over-predicts TPOT by ~25 % median, an fp8 one matches within ~6 %).
- 32b-trtllm (held out: nothing is fitted on it): Qwen/Qwen3-32B, TensorRT-LLM 1.0.0rc3 (the 8B set's
  version), per-tensor fp8 checkpoint, TP 1/2/4/8; priced as `--model qwen3-32b --precision fp8-w8a8
  --kv-precision fp8 --framework trtllm` (the engine's W8A8 path, estimator/w8a8.py, as
  `estimate validate moe-serving` prices it). It checks whether the front end and the wait to join fitted
  on the 8B rows (frameworks.yaml host_*, admission_wait) carry to another model on the same server.
- 32b-vllm / 32b-sglang: Qwen3-32B bf16 (the table's empty precision) on vLLM 0.12.0 (TP 2/4/8) and
  SGLang 0.5.1 / 0.5.8 (TP 1-8, prefill-first waves at SGLang's own chunked_prefill_size).
- 235b-trtllm: Qwen3-235B-A22B-FP8 (fp8_block), TensorRT-LLM 1.0.0rc3, TP 4 / EP 4 and TP 8 / EP 8 (and
  two rows at TP 4 / MoE-TP 2 / EP 2); priced as `--model qwen3-235b-a22b --precision fp8 --tp N
  --expert-parallel E`, each row at the split its moe_tp_size / moe_ep_size columns give (split_of).
- gpt-oss-vllm: gpt-oss-120b on vLLM (MXFP4 experts as the bundled config stores them, W4A16 on Hopper;
  bf16 elsewhere), TP 2/4/8.
Each deployment (TP, and for a MoE model the row's MoE-TP x EP split) is priced once
(estimator/serve/deploy.py) and every row of it evaluated on those steps.
Each row runs the server as the benchmark deployed it, not at the framework's defaults: aiconfigurator's
config generator (src/aiconfigurator/generator/rule_plugin/trtllm.rule and vllm.rule) sets an
aggregated worker's `max_num_tokens = max_batch_size + isl + 1500` (TensorRT-LLM rounds it up to
tokens_per_block), with max_batch_size at least the concurrency: `bench_framework` applies that.
The benchmark client runs `--concurrency C --request-count 10 x C` (genai-perf / aiperf as the Dynamo /
aiconfigurator recipes call it: ai-dynamo/dynamo benchmarks/llm/perf.sh), its C clients starting
together on an idle server: each row is the mean over those 10 rounds, the first a burst of C prompts
(estimator/serve/burst.py; `--rounds 0` prices the steady state alone).
Reported: |predicted - measured| / measured for TPOT and TTFT, median and 90th percentile, overall and
per TP, and a table of the median errors (signed: + = over-predicted) by TP and concurrency.
Reported per set: the worst TTFT ratio predicted / measured and the rows beyond 3x or 1/3; with several
sets, every row together and the signed medians per framework. Targets (issue 25): TPOT median <= 10 %,
TTFT median <= 20 %, no row's TTFT beyond 3x or 1/3.
"""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from estimator import jsonout
from estimator.calibration.markdown import pct, table
from estimator.calibration.tables import DEFAULT_DATA  # noqa: F401 (tools.sim_serving_sets' default)
from estimator.errors import UserError

SETS = {
    "8b-trtllm": {
        "match": ("trtllm", "Llama-3.1-8B"),
        "model": "llama-3.1-8b",
        "precision": "bf16",
        "kv": "bf16",
        "framework": "trtllm",
        "budget_block": 32,  # trtllm.rule rounds max_num_tokens up to tokens_per_block
    },
    "70b-vllm": {
        "match": ("vllm", "Llama-3.1-70B"),
        "model": "llama-3.1-70b",
        "precision": "fp8",
        "kv": "fp8",
        "framework": "vllm",
        "budget_block": 1,  # vllm.rule does not round
    },
    "32b-trtllm": {  # held out (module doc)
        "match": ("trtllm", "Qwen3-32B"),
        "version": "1.0.0rc3",
        "model": "qwen3-32b",
        "precision": "fp8-w8a8",
        "kv": "fp8",
        "framework": "trtllm",
        "budget_block": 32,
    },
    "32b-vllm": {  # Qwen3-32B, bf16 checkpoint (the table's empty precision), vLLM 0.12.0, TP 2/4/8
        "match": ("vllm", "Qwen3-32B"),
        "row_precision": "",
        "model": "qwen3-32b",
        "precision": "bf16",
        "kv": "bf16",
        "framework": "vllm",
        "budget_block": 1,
    },
    "32b-sglang": {  # Qwen3-32B bf16, SGLang 0.5.1 (TP 2/4/8) and 0.5.8 (TP 1): prefill-first waves
        "match": ("sglang", "Qwen3-32B"),
        "row_precision": "",
        "model": "qwen3-32b",
        "precision": "bf16",
        "kv": "bf16",
        "framework": "sglang",
        "budget_block": 1,
        "bench_budget": False,  # SGLang's chunked_prefill_size is not the generator's max_num_tokens rule
    },
    "235b-trtllm": {  # Qwen3-235B-A22B-FP8 (fp8_block), TensorRT-LLM 1.0.0rc3, TP 4 / EP 4 and TP 8 / EP 8
        "match": ("trtllm", "Qwen3-235B-A22B-FP8"),
        "version": "1.0.0rc3",
        "model": "qwen3-235b-a22b",
        "precision": "fp8",
        "kv": "fp8",
        "framework": "trtllm",
        "budget_block": 32,
    },
    "gpt-oss-vllm": {  # gpt-oss-120b, MXFP4 experts (W4A16 on Hopper), bf16 elsewhere, vLLM, TP 2/4/8
        "match": ("vllm", "gpt-oss-120b"),
        "model": "gpt-oss-120b",
        "precision": "bf16",
        "kv": "bf16",
        "framework": "vllm",
        "budget_block": 1,
    },
}


def read_rows(data: Path, backend: str, model_part: str, version: str | None = None,
              precision: str | None = None) -> list[dict]:
    with gzip.open(data / "e2e_serving.csv.gz", "rt") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if r["backend"] == backend and model_part in r["model_path"] and r["mode"] == "agg"
            and (version is None or r["backend_version"] == version)
            and (precision is None or r["precision"] == precision)
            and r.get("silicon_ttft_ms") != "" and r.get("silicon_tpot_ms") != ""
        ]
    return rows


def rows_of(data: Path, spec: dict) -> list[dict]:
    """The rows of one set (SETS)."""
    return read_rows(data, *spec["match"], spec.get("version"), spec.get("row_precision"))


def split_of(spec: dict, row: dict) -> tuple[int, int, int]:
    """(tp, moe_tp, ep) the row's benchmark deployed: its tp_size, and for a MoE model its moe_tp_size and
    moe_ep_size (Qwen3-235B's TensorRT-LLM rows run TP 4 / EP 4 and TP 8 / EP 8: one GPU holds E / EP
    whole experts, not every expert at 1 / TP of its width); a dense model's MoE columns say nothing."""
    from estimator.serve.steps import bundled_config

    tp = int(row["tp_size"])
    found = bundled_config(spec["model"])
    if found is None or getattr(found[1], "moe", None) is None:
        return tp, tp, 1
    ep = int(row.get("moe_ep_size") or 1) or 1
    moe_tp = int(row.get("moe_tp_size") or 0) or tp // ep
    return tp, moe_tp, ep


def deployments(spec: dict, rows: list[dict]) -> dict[tuple[int, int, int], tuple]:
    """(tp, moe_tp, ep) -> (Deployment, its rows): each split the rows ran (split_of) priced once; a row
    whose split does not multiply out (moe_tp x ep != tp) is left out with a note on stderr."""
    import sys

    import hwdesc
    from estimator.serve.deploy import Deployment
    from estimator.serve.frameworks import framework
    from estimator.serve.parallel import Parallelism
    from estimator.serve.steps import Options
    from passes import STRATEGIES

    hw = hwdesc.load("h100-sxm")
    by_split: dict[tuple[int, int, int], list[dict]] = defaultdict(list)
    for r in rows:
        by_split[split_of(spec, r)].append(r)
    out = {}
    for (tp, moe_tp, ep) in sorted(by_split):
        if moe_tp * ep != tp:
            print(f"  skipped {len(by_split[(tp, moe_tp, ep)])} rows: tp {tp} != moe_tp {moe_tp} x ep {ep}",
                  file=sys.stderr)
            continue
        parallel = Parallelism(tp=tp, moe_tp=moe_tp, ep=ep)
        opts = Options(hw, tp, spec["precision"], spec["kv"], STRATEGIES["tensorrt"],
                       framework(spec["framework"]), parallel=parallel)
        out[(tp, moe_tp, ep)] = (Deployment.build(spec["model"], opts), by_split[(tp, moe_tp, ep)])
    return out


def label(p: dict) -> str:
    """A row's deployment as the tables name it: `tp N`, with `ep E` (and `moe-tp M` when not 1) under
    expert parallelism."""
    if p.get("ep", 1) == 1:
        return f"tp {p['tp']}"
    return f"tp {p['tp']} ep {p['ep']}" + (f" moe-tp {p['moe_tp']}" if p["moe_tp"] != 1 else "")


BENCH_EXTRA_TOKENS = 1500  # aiconfigurator generator: agg max_num_tokens = max_batch_size + isl + 1500
BENCH_ROUNDS = 10  # requests per client: --request-count 10 x the concurrency (module doc)


def bench_framework(fw, work, block: int):
    """`fw` as the benchmark ran it for `work`: max_batch_size >= the concurrency, max_num_tokens =
    max_batch_size + isl + 1500 rounded up to `block` tokens (aiconfigurator's generator rules)."""
    from dataclasses import replace

    batch = work.concurrency  # the generator's max_batch_size is the deployment's batch: the concurrency
    budget = -(-(batch + work.isl + BENCH_EXTRA_TOKENS) // block) * block
    return replace(fw, values={**fw.values, "max_num_tokens": budget, "max_batch_size": max(batch, 1)})


def predict(deps: dict[tuple[int, int, int], tuple], fw=None, block: int = 1,
            rounds: int | None = BENCH_ROUNDS, bench_budget: bool = True) -> list[dict]:
    """Every row's measured and predicted TTFT / TPOT (`fw`: a framework to use instead of each
    deployment's own, for --fit), each row's framework as the benchmark configured it, over `rounds`
    requests per client (None: the steady state alone)."""
    from estimator.serve.serving import Workload, prefetch, serve

    out = []
    for (tp, moe_tp, ep), (dep, rows) in deps.items():
        works = [Workload(int(r["isl"]), int(r["osl"]), int(r["batch_size"]), rounds=rounds) for r in rows]
        fws = [bench_framework(fw or dep.framework, work, block) if bench_budget else (fw or dep.framework)
               for work in works]
        groups: dict[tuple, tuple] = {}  # rows of one benchmark configuration: their steps in one pass
        for f, work in zip(fws, works, strict=True):  # bench_framework sets only these two values
            key = (f.values["max_num_tokens"], f.values["max_batch_size"])
            groups.setdefault(key, (f, []))[1].append(work)
        for f, group in groups.values():
            prefetch(dep.steps, dep.memory, f, group)
        for r, work, f in zip(rows, works, fws, strict=True):
            res = serve(dep.steps, dep.memory, f, work, tp)
            out.append(
                {
                    "tp": tp,
                    "moe_tp": moe_tp,
                    "ep": ep,
                    "isl": work.isl,
                    "osl": work.osl,
                    "concurrency": work.concurrency,
                    "ttft_ms": float(r["silicon_ttft_ms"]),
                    "tpot_ms": float(r["silicon_tpot_ms"]),
                    "ttft_pred_ms": res.ttft_s * 1e3,
                    "tpot_pred_ms": res.tpot_s * 1e3,
                    "admitted": res.admitted,
                    "tokens_per_s": res.tokens_per_s,
                    "ttft_terms_ms": {k: v * 1e3 for k, v in res.ttft_terms.items()},
                }
            )
    return out


HOST_RATES = [None, *np.arange(8000.0, 30001.0, 1000.0)]  # output tokens/s; None: no per-token cost
HOST_PER_REQUEST_S = np.arange(0.0, 0.0301, 0.0025)


def fit_host(deps: dict[tuple[int, int, int], tuple], block: int) -> tuple[float | None, float, float]:
    """(host_output_tokens_per_s, host_s_per_request, objective): the host front end's costs
    (estimator/serve/closed_loop.py) minimising the sum of the median and p90 |error| of TTFT and
    TPOT over a grid (HOST_RATES x HOST_PER_REQUEST_S)."""
    from dataclasses import replace

    base = next(iter(deps.values()))[0].framework
    best: tuple[float | None, float, float] = (None, 0.0, float("inf"))
    for rate in HOST_RATES:
        for per_request in HOST_PER_REQUEST_S:
            values = {**base.values, "host_output_tokens_per_s": None if rate is None else float(rate),
                      "host_s_per_request": float(per_request)}
            pts = predict(deps, replace(base, values=values), block)
            obj = sum(f(np.abs(_err(pts, k))) for k in ("ttft", "tpot")
                      for f in (np.median, lambda e: np.percentile(e, 90)))
            if obj < best[2]:
                best = (None if rate is None else float(rate), float(per_request), float(obj))
    return best


def bad_args(sets: str, data: Path) -> str | None:
    """The `error:` line for a --sets name not in SETS or a --data folder without the table, else None."""
    unknown = [n for n in sets.split(",") if n not in SETS]
    if unknown:
        return f"error: --sets: unknown set(s) {', '.join(unknown)}; known: {', '.join(SETS)}"
    if not (data / "e2e_serving.csv.gz").is_file():
        return f"error: --data {data}: no e2e_serving.csv.gz there"
    return None


def worst_ratio(points: list[dict]) -> tuple[float, dict]:
    """The TTFT ratio predicted / measured farthest from 1 (in either direction), and its row."""
    row = max(points, key=lambda p: abs(np.log(p["ttft_pred_ms"] / p["ttft_ms"])))
    return row["ttft_pred_ms"] / row["ttft_ms"], row


def beyond(points: list[dict], factor: float) -> int:
    """Rows whose predicted TTFT is over `factor` x or under 1 / `factor` of the measured."""
    return sum(abs(np.log(p["ttft_pred_ms"] / p["ttft_ms"])) > np.log(factor) for p in points)


def _err(points: list[dict], key: str) -> np.ndarray:
    return np.array([(p[f"{key}_pred_ms"] - p[f"{key}_ms"]) / p[f"{key}_ms"] for p in points])


def summary(name: str, points: list[dict]) -> str:
    lines = [f"== {name}: {len(points)} rows"]
    for key in ("tpot", "ttft"):
        e = np.abs(_err(points, key))
        lines.append(f"  {key.upper()} |error| median {np.median(e):.1%}  p90 {np.percentile(e, 90):.1%}  "
                     f"signed median {np.median(_err(points, key)):+.1%}")
    worst, row = worst_ratio(points)
    lines.append(f"  TTFT worst ratio predicted / measured {worst:.2f} (tp {row['tp']} isl {row['isl']} "
                 f"osl {row['osl']} concurrency {row['concurrency']}: {row['ttft_pred_ms']:.0f} ms vs "
                 f"{row['ttft_ms']:.0f} ms); rows beyond 3x or 1/3: {beyond(points, 3.0)}")
    for split in sorted({(p["tp"], p.get("ep", 1), p.get("moe_tp", p["tp"])) for p in points}):
        sub = [p for p in points if (p["tp"], p.get("ep", 1), p.get("moe_tp", p["tp"])) == split]
        t, f = np.abs(_err(sub, "tpot")), np.abs(_err(sub, "ttft"))
        lines.append(
            f"  {label(sub[0])}: TPOT median {np.median(t):.1%} p90 {np.percentile(t, 90):.1%}; "
            f"TTFT median {np.median(f):.1%} p90 {np.percentile(f, 90):.1%}  ({len(sub)} rows)"
        )
    concs = sorted({p["concurrency"] for p in points})
    tps = sorted({p["tp"] for p in points})
    for key in ("tpot", "ttft"):
        lines.append(f"  {key.upper()} signed median error by TP (rows) and concurrency (columns):")
        lines.append("    tp " + "".join(f"{c:>9}" for c in concs))
        for tp in tps:
            cells = []
            for c in concs:
                sub = [p for p in points if p["tp"] == tp and p["concurrency"] == c]
                cells.append(f"{np.median(_err(sub, key)):>+9.1%}" if sub else f"{'-':>9}")
            lines.append(f"    {tp:>2} " + "".join(cells))
    return "\n".join(lines)


def markdown(name: str, points: list[dict]) -> str:
    """A set's TPOT and TTFT accuracy per TP and overall as a Markdown table: |predicted - measured| /
    measured (median, p90) and the signed median (+ = over-predicted)."""
    def cells(sub):
        out = []
        for key in ("tpot", "ttft"):
            e = _err(sub, key)
            out += [pct(float(np.median(np.abs(e)))), pct(float(np.percentile(np.abs(e), 90))),
                    pct(float(np.median(e)), True)]
        return out

    splits = sorted({(p["tp"], p.get("ep", 1), p.get("moe_tp", p["tp"])) for p in points})
    rows = [(label(sub[0]), len(sub), *cells(sub)) for split in splits
            for sub in [[p for p in points if (p["tp"], p.get("ep", 1), p.get("moe_tp", p["tp"])) == split]]]
    rows.append(("all", len(points), *cells(points)))
    return f"**{name}**: {len(points)} rows\n\n" + table(
        ("deployment", "rows", "TPOT median", "TPOT p90", "TPOT signed", "TTFT median", "TTFT p90",
         "TTFT signed"), rows)


def overall(everything: dict[str, list[dict]]) -> str:
    """Every set's rows together, and the signed TTFT / TPOT medians per framework."""
    every = [p for pts in everything.values() for p in pts]
    lines = [f"== all sets: {len(every)} rows"]
    for key in ("tpot", "ttft"):
        e = np.abs(_err(every, key))
        lines.append(f"  {key.upper()} |error| median {np.median(e):.1%}  p90 {np.percentile(e, 90):.1%}")
    worst, row = worst_ratio(every)
    lines.append(f"  TTFT worst ratio {worst:.2f}; rows beyond 3x or 1/3: {beyond(every, 3.0)}")
    by_fw: dict[str, list[dict]] = defaultdict(list)
    for name, pts in everything.items():
        by_fw[SETS[name]["framework"]].extend(pts)
    for fw, pts in by_fw.items():
        lines.append(f"  {fw}: {len(pts)} rows, signed median TTFT {np.median(_err(pts, 'ttft')):+.1%}, "
                     f"TPOT {np.median(_err(pts, 'tpot')):+.1%}; |error| median TTFT "
                     f"{np.median(np.abs(_err(pts, 'ttft'))):.1%}, "
                     f"TPOT {np.median(np.abs(_err(pts, 'tpot'))):.1%}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ServingCheck:
    """What `estimate validate serving` was asked (the command line, read once)."""

    data: Path
    sets: tuple[str, ...] = tuple(SETS)
    json: Path | None = None
    fit: bool = False
    rounds: int = BENCH_ROUNDS
    markdown: bool = False


def run(args: ServingCheck) -> int:
    problem = bad_args(",".join(args.sets), args.data) or (
        f"error: --rounds {args.rounds}: must be >= 0" if args.rounds < 0 else None)
    if problem:
        raise UserError(problem.removeprefix("error: "))
    everything = {}
    for name in args.sets:
        spec = SETS[name]
        deps = deployments(spec, rows_of(args.data, spec))
        if args.fit and name == "8b-trtllm":
            rate, per_request, obj = fit_host(deps, spec["budget_block"])
            print(f"fit: host_output_tokens_per_s {rate}, host_s_per_request {per_request:.4f} "
                  f"(objective {obj:.3f})")
        points = predict(deps, block=spec["budget_block"], rounds=args.rounds or None,
                         bench_budget=spec.get("bench_budget", True))
        everything[name] = points
        print(markdown(name, points) + "\n" if args.markdown else summary(name, points), flush=True)
    if len(everything) > 1 and not args.markdown:
        print(overall(everything))
    if args.json:
        args.json.write_text(jsonout.dumps(everything, indent=1))
    return 0
