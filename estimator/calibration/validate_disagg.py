"""Validate disaggregated serving (estimator/serve/disagg.py) against the measured H100 xPyD rows.

    estimate validate disagg --data ../shared/calibration/h100_sxm [--json OUT] [--markdown] [--verbose]

Source: `e2e_serving.csv.gz` rows with `mode == disagg` and `system == h100_sxm` (aiconfigurator's silicon
set; no other GPU's rows are read): DeepSeek-V3 / R1 on TensorRT-LLM and SGLang (100 rows; the set the
issue names), and beside them the few Qwen3-32B / Qwen3-235B rows. Columns prefill_* / decode_*: each
pool's workers, TP, attention-DP, MoE-TP, EP and batch; silicon_ttft_ms, silicon_tpot_ms measured.
Each row is priced as the unit it describes, by one of two rules (the count of rows each prices is
reported):
- "stated": the row gives every pool's workers, TP, attention-DP, EP and batch: prefill_num_workers x
  (tp x attention-DP GPUs, prefill_batch_size prompts a step on each attention-DP rank) and
  decode_num_workers x (decode_batch_size requests on each rank), its clients decode_num_workers x
  decode_batch_size x decode_attention_dp_size (every decode slot held: the table gives no benchmark
  concurrency);
- "searched": the row gives the pools' parallelism (TP, attention-DP, MoE-TP, EP), isl, osl and the
  framework but no worker, batch or client counts (most DeepSeek-R1 rows). A user of this tool fills the
  rest by the search: the smallest unit of the stated pools (one prefill and one decode worker: nothing
  states more GPUs) at the prefill batch (1, or the step budget's max_num_tokens // isl) and decode batch
  (search.DECODE_BATCHES) with the most tokens/s per GPU, every decode slot held - the stated numbers
  and nothing else (no SLA: the row states none; the measured TTFT / TPOT are never an input).
The model is the bundled config (DeepSeek-R1 has DeepSeek-V3's), at fp8. A row the serving model cannot
price is counted under its reason, never dropped silently (a deployment the sharding refuses, or one
that does not fit). EP 16 under attention TP with DeepSeek's top-8 routing (half a route per token a GPU)
is priced as models.decoder_config.replicated_ep_share writes it.
Reported per (framework, model, rule): |error| median, p90 and signed median (+ = over-predicted) of TTFT
and TPOT, then |error| medians per rule and over all rows.
Tolerance the issue sets: TTFT and TPOT median <= 25 %.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from estimator.errors import UserError

MODELS = {"DeepSeek-V3": "deepseek-v3", "DeepSeek-R1": "deepseek-v3", "Qwen3-235B-A22B": "qwen3-235b-a22b",
          "Qwen3-32B": "qwen3-32b"}
SYSTEM = "h100_sxm"


@dataclass(frozen=True)
class DisaggCheck:
    data: Path
    json_out: Path | None = None
    markdown: bool = False
    verbose: bool = False


def read_rows(data: Path) -> list[dict]:
    path = data / "e2e_serving.csv.gz"
    if not path.exists():
        raise UserError(f"estimate validate disagg: {path} not found")
    with gzip.open(path, "rt", newline="") as f:
        return [r for r in csv.DictReader(f) if r["mode"] == "disagg" and r["system"] == SYSTEM]


def _int(row: dict, key: str) -> int | None:
    try:
        return int(row[key])
    except (KeyError, ValueError):
        return None


def model_of(row: dict) -> str | None:
    return next((name for part, name in MODELS.items() if part in row["model_path"]), None)


POOL_KEYS = ("num_workers", "tp_size", "batch_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def pools_of(row: dict) -> dict:
    return {p: {k: _int(row, f"{p}_{k}") for k in POOL_KEYS} for p in ("prefill", "decode")}


def layout_of(pool: dict) -> tuple[int, int, int] | None:
    """(tp, attention-DP, EP) of a pool (EP: moe_ep_size, else tp x attention-DP / moe_tp_size)."""
    tp, dp = pool["tp_size"], pool["attention_dp_size"] or 1
    if tp is None:
        return None
    ep = pool["moe_ep_size"] or ((tp * dp) // pool["moe_tp_size"] if pool["moe_tp_size"] else 1)
    return tp, dp, ep


def unit_of(row: dict):
    """("stated", Disagg, clients), ("searched", [candidate Disagg units], None) or (None, the reason it
    cannot be priced, None)."""
    from estimator.serve.disagg import Disagg

    pools = pools_of(row)
    lay = {p: layout_of(pools[p]) for p in pools}
    if any(v is None for v in lay.values()):
        return None, "no pool parallelism in the row", None
    (tp_p, dp_p, ep_p), (tp_d, dp_d, ep_d) = lay["prefill"], lay["decode"]
    p, d = pools["prefill"], pools["decode"]
    counts = (p["num_workers"], p["batch_size"], d["num_workers"], d["batch_size"])
    if all(v is not None for v in counts):
        spec = Disagg(p["num_workers"], tp_p, p["batch_size"], d["num_workers"], tp_d, d["batch_size"],
                      dp_p, dp_d, ep_p, ep_d)
        return "stated", spec, d["num_workers"] * d["batch_size"] * dp_d
    from estimator.serve.frameworks import framework
    from estimator.serve.search import DECODE_BATCHES

    # the search's prefill batches (search.search_disagg): 1, and as many prompts as the step budget holds
    budget = int(framework(row.get("backend") or "trtllm").max_num_tokens)
    per_step = max(1, budget // int(row.get("isl") or 1))
    return "searched", [Disagg(1, tp_p, k, 1, tp_d, b, dp_p, dp_d, ep_p, ep_d)
                        for k in sorted({1, per_step}) for b in DECODE_BATCHES], None


def _deployment(built: dict, model: str, backend: str, tp: int, dp: int, ep: int, hw, pipeline):
    from estimator.serve.deploy import Deployment
    from estimator.serve.frameworks import framework
    from estimator.serve.search import options_of, record
    from estimator.serve.steps import Options

    key = (model, backend, tp, dp, ep)
    if key not in built:
        base = Options(hw, tp, "fp8", "fp8", pipeline, framework(backend))
        try:
            built[key] = Deployment.build(model, options_of(record(tp, dp, ep), base))
        except UserError as exc:
            built[key] = str(exc)
    return built[key]


def _best(pre, dec, specs, work):
    """The searched unit: the candidate with the most tokens/s per GPU that fits (None: none fits)."""
    from estimator.serve.disagg import prefetch_many, serve_disagg_many

    jobs = [(pre, dec, s) for s in specs]
    prefetch_many(jobs, work)
    results = [r for r in serve_disagg_many(jobs, work) if r.fits]
    return max(results, key=lambda r: r.tokens_per_s_per_gpu, default=None)


def predict(rows: list[dict]) -> tuple[list[dict], Counter]:
    from estimator.serve.disagg import prefetch, serve_disagg
    from estimator.serve.serving import Workload
    from hwdesc import load
    from passes import DEFAULT_STRATEGY, pipeline_for

    hw = load("h100-sxm")
    pipeline = pipeline_for(DEFAULT_STRATEGY, hw.family)
    built: dict = {}
    points, blocked = [], Counter()
    for row in rows:
        model = model_of(row)
        rule, spec, clients = unit_of(row)
        if model is None or rule is None:
            blocked[spec if rule is None else "model not bundled"] += 1
            continue
        first = spec if rule == "stated" else spec[0]
        deps = [_deployment(built, model, row["backend"], *lay, hw, pipeline) for lay in
                ((first.prefill_tp, first.prefill_attention_dp, first.prefill_ep),
                 (first.decode_tp, first.decode_attention_dp, first.decode_ep))]
        refused = next((d for d in deps if isinstance(d, str)), None)
        if refused:
            blocked[f"sharding refused: {refused[:100]}"] += 1
            continue
        work = Workload(int(row["isl"]), int(row["osl"]), clients or 1)
        if rule == "stated":
            prefetch(deps[0], deps[1], spec, work)
            r = serve_disagg(deps[0], deps[1], spec, work, clients)
        else:
            r = _best(deps[0], deps[1], spec, work)
        if r is None or not r.fits:
            blocked["does not fit"] += 1
            continue
        points.append({"backend": row["backend"], "model": row["model_path"], "isl": work.isl,
                       "osl": work.osl, "rule": rule, "unit": r.spec.label, "clients": r.clients,
                       "ttft_ms": float(row["silicon_ttft_ms"]), "tpot_ms": float(row["silicon_tpot_ms"]),
                       "pred_ttft_ms": r.ttft_s * 1e3, "pred_tpot_ms": r.tpot_s * 1e3})
    return points, blocked


def _signed(points: list[dict], key: str) -> np.ndarray:
    return np.array([(p[f"pred_{key}"] - p[key]) / p[key] for p in points])


def _stats(points: list[dict]) -> tuple[float, ...]:
    """(|TTFT| median, |TTFT| p90, TTFT signed median, the same three of TPOT)."""
    out = []
    for key in ("ttft_ms", "tpot_ms"):
        e = _signed(points, key)
        out += [float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90)), float(np.median(e))]
    return tuple(out)


def summary(rows: list[dict], points: list[dict], blocked: Counter, markdown: bool) -> str:
    deepseek = sum(1 for r in rows if "DeepSeek" in r["model_path"])
    lines = [f"disaggregated H100 rows: {len(rows)} ({deepseek} DeepSeek-V3/R1); priced {len(points)}, "
             f"blocked {sum(blocked.values())}"]
    for reason, n in blocked.most_common():
        lines.append(f"  blocked: {n:>3} x {reason}")
    for rule, n in sorted(Counter(p["rule"] for p in points).items()):
        lines.append(f"  priced by rule {rule!r}: {n}")
    by = defaultdict(list)
    for p in points:
        by[(p["backend"], p["model"].split("/")[-1], p["rule"])].append(p)
    cols = ("TTFT |med|", "p90", "signed", "TPOT |med|", "p90", "signed")
    if markdown:
        lines += ["| framework | model | rule | rows | " + " | ".join(cols) + " |",
                  "|---|---|---|---|" + "---|" * 6]
    else:
        lines.append(f"{'framework':<8} {'model':<20} {'rule':<8} {'rows':>4} "
                     + " ".join(f"{c:>10}" for c in cols))
    for (backend, model, rule), pts in sorted(by.items()):
        cells = [f"{v:+.1%}" if i % 3 == 2 else f"{v:.1%}" for i, v in enumerate(_stats(pts))]
        if markdown:
            lines.append(f"| {backend} | {model} | {rule} | {len(pts)} | " + " | ".join(cells) + " |")
        else:
            lines.append(f"{backend:<8} {model:<20} {rule:<8} {len(pts):>4} "
                         + " ".join(f"{c:>10}" for c in cells))
    for rule in sorted({p["rule"] for p in points}):
        pts = [p for p in points if p["rule"] == rule]
        t, _, _, o, _, _ = _stats(pts)
        lines.append(f"rule {rule!r} ({len(pts)} rows): |TTFT| median {t:.1%}, |TPOT| median {o:.1%}")
    if points:
        lines.append(f"all priced rows: |TTFT| median {np.median(np.abs(_signed(points, 'ttft_ms'))):.1%}, "
                     f"|TPOT| median {np.median(np.abs(_signed(points, 'tpot_ms'))):.1%} (target <= 25 %)")
    return "\n".join(lines)


def run(args: DisaggCheck) -> int:
    rows = read_rows(args.data)
    points, blocked = predict(rows)
    print(summary(rows, points, blocked, args.markdown))
    if args.verbose:
        for p in points:
            print(f"  {p['backend']:<7} {p['model'].split('/')[-1]:<20} isl {p['isl']:>5} osl {p['osl']:>5} "
                  f"{p['unit']:<28} TTFT {p['ttft_ms']:>9.1f} -> {p['pred_ttft_ms']:>9.1f} ms  "
                  f"TPOT {p['tpot_ms']:>7.2f} -> {p['pred_tpot_ms']:>7.2f} ms")
    if args.json_out:
        args.json_out.write_text(json.dumps({"points": points, "blocked": dict(blocked)}, indent=1,
                                            allow_nan=False))
    return 0
