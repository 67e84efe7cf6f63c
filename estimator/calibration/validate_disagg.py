"""Validate disaggregated serving (estimator/serve/disagg.py) against the measured H100 xPyD rows.

    estimate validate disagg --data ../shared/calibration/h100_sxm [--json OUT] [--markdown] [--verbose]

Source: `e2e_serving.csv.gz` rows with `mode == disagg` and `system == h100_sxm` (aiconfigurator's silicon
set; no other GPU's rows are read): DeepSeek-V3 / R1 on TensorRT-LLM and SGLang (100 rows; the set the
issue names), and beside them the few Qwen3-32B / Qwen3-235B rows. Columns prefill_* / decode_*: each
pool's workers, TP, attention-DP, MoE-TP, EP and batch; silicon_ttft_ms, silicon_tpot_ms measured.
Each row is priced as the unit it describes: prefill_num_workers x (tp prefill_tp_size, prefill_batch_size
prompts a step) and decode_num_workers x (tp decode_tp_size, decode_batch_size requests each), its clients
decode_num_workers x decode_batch_size x decode_attention_dp_size (every decode slot held: the table
gives no benchmark concurrency), the model's bundled config (DeepSeek-R1 has DeepSeek-V3's), fp8.
A row the serving model cannot price is counted under its reason, never dropped silently:
- no batch or worker counts in the row (most DeepSeek-R1 rows leave them blank);
- a pool with attention-DP or EP > 1 (the serving model on this branch takes tp only: attention-DP and
  EP serving come with the parallelism work of the same issue set);
- a deployment the sharding refuses (DeepSeek's MLA under --tp on this branch) or that does not fit.
Reported: signed median error (+ = over-predicted) of TTFT and TPOT by framework, and |error| medians.
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


def unit_of(row: dict):
    """(Disagg, clients) of a row, or (None, the reason it cannot be priced)."""
    from estimator.serve.disagg import Disagg

    keys = ("num_workers", "tp_size", "batch_size", "attention_dp_size", "moe_ep_size")
    pools = {p: {k: _int(row, f"{p}_{k}") for k in keys} for p in ("prefill", "decode")}
    if any(v is None for p in pools.values() for k, v in p.items() if k != "moe_ep_size"):
        return None, "no batch or worker counts in the row"
    if any(p["attention_dp_size"] > 1 or (p["moe_ep_size"] or 1) > 1 for p in pools.values()):
        return None, "attention-DP / EP pool (the serving model here takes tp only)"
    p, d = pools["prefill"], pools["decode"]
    spec = Disagg(p["num_workers"], p["tp_size"], p["batch_size"], d["num_workers"], d["tp_size"],
                  d["batch_size"])
    return spec, d["num_workers"] * d["batch_size"] * d["attention_dp_size"]


def predict(rows: list[dict]) -> tuple[list[dict], Counter]:
    from estimator.serve.deploy import Deployment
    from estimator.serve.disagg import prefetch, serve_disagg
    from estimator.serve.frameworks import framework
    from estimator.serve.serving import Workload
    from estimator.serve.steps import Options
    from hwdesc import load
    from passes import DEFAULT_STRATEGY, pipeline_for

    hw = load("h100-sxm")
    pipeline = pipeline_for(DEFAULT_STRATEGY, hw.family)
    built: dict = {}
    points, blocked = [], Counter()
    for row in rows:
        model = model_of(row)
        spec, clients = unit_of(row)
        if model is None or spec is None:
            blocked[clients if spec is None else "model not bundled"] += 1
            continue
        fw = framework(row["backend"])
        deps = []
        for tp in (spec.prefill_tp, spec.decode_tp):
            key = (model, row["backend"], tp)
            if key not in built:
                try:
                    built[key] = Deployment.build(model, Options(hw, tp, "fp8", "fp8", pipeline, fw))
                except UserError as exc:
                    built[key] = str(exc)
            deps.append(built[key])
        refused = next((d for d in deps if isinstance(d, str)), None)
        if refused:
            blocked[f"sharding refused: {refused[:90]}"] += 1
            continue
        work = Workload(int(row["isl"]), int(row["osl"]), clients)
        prefetch(deps[0], deps[1], spec, work)
        r = serve_disagg(deps[0], deps[1], spec, work, clients)
        if not r.fits:
            blocked["does not fit"] += 1
            continue
        points.append({"backend": row["backend"], "model": row["model_path"], "isl": work.isl,
                       "osl": work.osl,
                       "unit": spec.label, "clients": clients,
                       "ttft_ms": float(row["silicon_ttft_ms"]), "tpot_ms": float(row["silicon_tpot_ms"]),
                       "pred_ttft_ms": r.ttft_s * 1e3, "pred_tpot_ms": r.tpot_s * 1e3})
    return points, blocked


def _signed(points: list[dict], key: str) -> np.ndarray:
    return np.array([(p[f"pred_{key}"] - p[key]) / p[key] for p in points])


def summary(rows: list[dict], points: list[dict], blocked: Counter, markdown: bool) -> str:
    deepseek = sum(1 for r in rows if "DeepSeek" in r["model_path"])
    lines = [f"disaggregated H100 rows: {len(rows)} ({deepseek} DeepSeek-V3/R1); priced {len(points)}, "
             f"blocked {sum(blocked.values())}"]
    for reason, n in blocked.most_common():
        lines.append(f"  blocked: {n:>3} x {reason}")
    by = defaultdict(list)
    for p in points:
        by[(p["backend"], p["model"].split("/")[-1])].append(p)
    head = f"{'framework':<8} {'model':<22} {'rows':>4} {'TTFT signed median':>19} {'TPOT signed median':>19}"
    lines.append(head)
    if markdown:
        lines = lines[:-1] + ["| framework | model | rows | TTFT signed median | TPOT signed median |",
                              "|---|---|---|---|---|"]
    for (backend, model), pts in sorted(by.items()):
        t, o = np.median(_signed(pts, "ttft_ms")), np.median(_signed(pts, "tpot_ms"))
        if markdown:
            lines.append(f"| {backend} | {model} | {len(pts)} | {t:+.1%} | {o:+.1%} |")
        else:
            lines.append(f"{backend:<8} {model:<22} {len(pts):>4} {t:>+18.1%} {o:>+18.1%}")
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
