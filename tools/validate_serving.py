"""Validate the serving model against measured end-to-end TTFT / TPOT of H100 deployments.

    python tools/validate_serving.py [--data ../shared/calibration/h100_sxm] [--sets 8b-trtllm,70b-vllm]
                                     [--json OUT]

Source: `e2e_serving.csv.gz` (aiconfigurator's silicon set, serving.md 0.3): closed-loop benchmarks with
`batch_size` = client concurrency, aggregated (not disaggregated) serving, `silicon_ttft_ms` and
`silicon_tpot_ms` measured. Two sets:
- 8b-trtllm: meta-llama/Llama-3.1-8B-Instruct, TensorRT-LLM 1.0.0rc3, bf16, TP 1/2/4/8, every
  ISL/OSL/concurrency row; priced as `--model llama-3.1-8b --precision bf16 --framework trtllm`.
- 70b-vllm: meta-llama/Llama-3.1-70B, vLLM, fp8 weights (bf16 KV cache, vLLM's default `auto`),
  TP 2/4/8; priced as `--model llama-3.1-70b --precision fp8 --kv-precision bf16 --framework vllm`.
Each TP is priced once (estimator/serve/deploy.py) and every row of it evaluated on those steps.
Reported: |predicted - measured| / measured for TPOT and TTFT, median and 90th percentile, overall and
per TP, and a table of the median errors (signed: + = over-predicted) by TP and concurrency.
Tolerances the issue sets (8b-trtllm): TPOT median <= 10 %, p90 <= 25 %; TTFT median <= 20 %, p90 <= 40 %.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT.parent / "shared" / "calibration" / "h100_sxm"
SETS = {
    "8b-trtllm": {
        "match": ("trtllm", "Llama-3.1-8B"),
        "model": "llama-3.1-8b",
        "precision": "bf16",
        "kv": "bf16",
        "framework": "trtllm",
    },
    "70b-vllm": {
        "match": ("vllm", "Llama-3.1-70B"),
        "model": "llama-3.1-70b",
        "precision": "fp8",
        "kv": "bf16",
        "framework": "vllm",
    },
}


def read_rows(data: Path, backend: str, model_part: str) -> list[dict]:
    with gzip.open(data / "e2e_serving.csv.gz", "rt") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if r["backend"] == backend and model_part in r["model_path"] and r["mode"] == "agg"
        ]
    return rows


def predict(spec: dict, rows: list[dict]) -> list[dict]:
    import hwdesc
    from estimator.serve.deploy import Deployment
    from estimator.serve.frameworks import framework
    from estimator.serve.serving import Workload
    from estimator.serve.steps import Options
    from passes import STRATEGIES

    hw = hwdesc.load("h100-sxm")
    by_tp: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_tp[int(r["tp_size"])].append(r)
    out = []
    for tp in sorted(by_tp):
        opts = Options(
            hw, tp, spec["precision"], spec["kv"], STRATEGIES["tensorrt"], framework(spec["framework"])
        )
        dep = Deployment.build(spec["model"], opts)
        for r in by_tp[tp]:
            res = dep.serve(Workload(int(r["isl"]), int(r["osl"]), int(r["batch_size"])))
            out.append(
                {
                    "tp": tp,
                    "isl": int(r["isl"]),
                    "osl": int(r["osl"]),
                    "concurrency": int(r["batch_size"]),
                    "ttft_ms": float(r["silicon_ttft_ms"]),
                    "tpot_ms": float(r["silicon_tpot_ms"]),
                    "ttft_pred_ms": res.ttft_s * 1e3,
                    "tpot_pred_ms": res.tpot_s * 1e3,
                    "admitted": res.admitted,
                }
            )
    return out


def _err(points: list[dict], key: str) -> np.ndarray:
    return np.array([(p[f"{key}_pred_ms"] - p[f"{key}_ms"]) / p[f"{key}_ms"] for p in points])


def summary(name: str, points: list[dict]) -> str:
    lines = [f"== {name}: {len(points)} rows"]
    for key in ("tpot", "ttft"):
        e = np.abs(_err(points, key))
        lines.append(f"  {key.upper()} |error| median {np.median(e):.1%}  p90 {np.percentile(e, 90):.1%}")
    for tp in sorted({p["tp"] for p in points}):
        sub = [p for p in points if p["tp"] == tp]
        t, f = np.abs(_err(sub, "tpot")), np.abs(_err(sub, "ttft"))
        lines.append(
            f"  tp {tp}: TPOT median {np.median(t):.1%} p90 {np.percentile(t, 90):.1%}; "
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--json", type=Path, help="write every row's measured and predicted values")
    args = ap.parse_args(argv)
    everything = {}
    for name in args.sets.split(","):
        spec = SETS[name]
        points = predict(spec, read_rows(args.data, *spec["match"]))
        everything[name] = points
        print(summary(name, points), flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
