"""Run tools/sim_closed_loop.py on `estimate validate serving`'s measured sets (an EXPERIMENT).

    python -m tools.sim_serving_sets [--sets 8b-trtllm,32b-trtllm,70b-vllm] [--rounds 10] [--host]
        [--slots-short N] [--no-overlap] [--client-delay-ms D] [--json OUT]

Every row is deployed as estimator/calibration/validate_serving.py deploys it (the same Deployment
per TP, the same benchmark framework: max_batch_size = C, max_num_tokens = C + isl + 1500 rounded to
the block), plus
the benchmark rule's CUDA graphs at every batch 1 .. C (TensorRT-LLM sets; aiconfigurator's
trtllm.rule), and replayed by the simulation over `--rounds` x C requests. Step times are the
product's: estimator.serve.launch decode_step / prefill_step and the decodes' attention riding in a
mixed step (Steps.decode_context), as serving.py prices a mixed step; one price per kernel.
`--host`: the framework's front-end figures (frameworks.yaml host_s_per_request,
host_output_tokens_per_s; fitted for serving.py's MVA stations) as the simulation's FIFO front end.
Printed: estimator/calibration/validate_serving.py's summary of the simulated rows, and the run's CPU
seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from estimator.calibration.validate_serving import (
    DEFAULT_DATA,
    SETS,
    _err,
    bad_args,
    bench_framework,
    deployments,
    read_rows,
    summary,
)
from tools.sim_closed_loop import Knobs, simulate


class PricedRow:
    """Step times of one row from the product's priced steps: decode_s(b, past) and the decodes'
    attention ride(b, past) linear in the past between isl and isl + osl - 2 (their two priced
    points), the prefill step of k whole prompts per k (chunks pro rata)."""

    def __init__(self, steps, fw, isl: int, osl: int, max_batch: int, max_prompts: int) -> None:
        from estimator.serve.launch import decode_step, prefill_dispatch_s, prefill_step

        lo, hi = isl, max(isl, isl + osl - 2)
        pasts = np.array([lo, hi])
        self.isl, self.lo, span = isl, lo, max(hi - lo, 1)
        dec = [decode_step(steps, fw, b, pasts).step_s for b in range(1, max_batch + 1)]
        ctx = [np.asarray(steps.decode_context(b, pasts), dtype=float) for b in range(1, max_batch + 1)]
        self.dec = [(float(d[0]), float(d[1] - d[0]) / span) for d in dec]
        self.ctx = [(0.0, 0.0)] + [(float(c[0]), float(c[1] - c[0]) / span) for c in ctx]
        self.pre = [0.0] + [float(prefill_step(steps, fw, k, isl, 1).step_s)
                            for k in range(1, max_prompts + 1)]
        self.first_token_extra_s = prefill_dispatch_s(steps, fw)

    def decode_s(self, batch: int, past: float) -> float:
        a, s = self.dec[batch - 1]
        return a + s * (past - self.lo)

    def mixed_s(self, tokens: int, batch: int, past: float) -> float:
        k = math.ceil(tokens / self.isl)
        pre = self.pre[min(k, len(self.pre) - 1)] * tokens / (k * self.isl)
        a, s = self.ctx[batch]
        return pre + a + s * (past - self.lo)


def row_setup(dep, spec: dict, row: dict, every_graph: bool):
    """(framework as the benchmark ran it, isl, osl, concurrency, admitted batch, max prompts a step)."""
    from estimator.serve.serving import Workload, admitted

    isl, osl, c = int(row["isl"]), int(row["osl"]), int(row["batch_size"])
    fw = bench_framework(dep.framework, Workload(isl, osl, c), spec["budget_block"])
    if every_graph:  # trtllm.rule: cuda_graph_config batch_sizes 1 .. max_batch_size
        fw = replace(fw, values={**fw.values, "cuda_graph_batch_sizes": list(range(1, c + 1)),
                                 "cuda_graph_max_batch": c})
    w = admitted(Workload(isl, osl, c), fw, dep.memory)
    budget = int(fw.max_num_tokens)
    prompts = math.ceil(budget / isl) if fw.chunked_prefill else max(1, min(w, budget // isl))
    return fw, isl, osl, c, w, prompts


def prefetch_rows(dep, setups) -> None:
    """Price every decode / prefill point the rows ask, in one pass (Steps.prefetch)."""
    decode, prefill = [], []
    for fw, isl, osl, _c, w, prompts in setups:
        pasts = [isl, max(isl, isl + osl - 2)]
        for b in range(1, w + 1):
            decode.append((b, pasts))
            padded = fw.graph_batch(b)
            if padded and padded != b:
                decode.append((padded, pasts))
        prefill += [(k, isl) for k in range(1, prompts + 1)]
    if hasattr(dep.steps, "prefetch"):
        dep.steps.prefetch(decode=decode, prefill=prefill)


def prepare(name: str, data: Path) -> list[tuple]:
    """Every row of set `name` with its benchmark framework and priced steps:
    (tp, row, framework, isl, osl, concurrency, admitted batch, PricedRow)."""
    spec = SETS[name]
    deps = deployments(spec, read_rows(data, *spec["match"], spec.get("version")))
    out = []
    for (tp, _, _), (dep, rows) in deps.items():
        setups = [row_setup(dep, spec, r, spec["framework"] == "trtllm") for r in rows]
        prefetch_rows(dep, setups)
        for r, (fw, isl, osl, c, w, prompts) in zip(rows, setups, strict=True):
            out.append((tp, r, fw, isl, osl, c, w, PricedRow(dep.steps, fw, isl, osl, w, prompts)))
    return out


def front_end(fw, args) -> tuple[float, float]:
    """(seconds per request, seconds per token) of the front end: --fe-* (fitted on the TensorRT-LLM 8B
    rows: TensorRT-LLM sets only), else frameworks.yaml under --host, else none."""
    per_request = float(fw.host_s_per_request or 0.0) if args.host else 0.0
    rate = fw.host_output_tokens_per_s if args.host else None
    per_token = 1.0 / float(rate) if rate else 0.0
    if args.fe_request_ms is not None and fw.name == "trtllm":
        per_request = args.fe_request_ms * 1e-3
    if args.fe_token_us is not None and fw.name == "trtllm":
        per_token = args.fe_token_us * 1e-6
    return per_request, per_token


def simulate_rows(prepared: list[tuple], args) -> list[dict]:
    out = []
    for tp, r, fw, isl, osl, c, w, prices in prepared:
        per_request, per_token = front_end(fw, args)
        trt = fw.name == "trtllm"
        knobs = Knobs(w, int(fw.max_num_tokens), overlap=trt and not args.no_overlap,
                      chunked=bool(fw.chunked_prefill), host_s_per_request=per_request,
                      host_s_per_token=per_token, client_delay_s=args.client_delay_ms * 1e-3,
                      client_jitter_s=args.jitter_ms * 1e-3, split_front_end=args.split_fe,
                      slots_short=min(args.slots_short, w - 1) if trt else 0,
                      loop_s_per_prompt=args.loop_prompt_ms * 1e-3 if trt else 0.0,
                      loop_s_per_token=args.loop_token_us * 1e-6 if trt else 0.0)
        res = simulate(prices, isl, osl, c, args.rounds * c, knobs, warmup=args.warmup_rounds * c)
        out.append({"tp": tp, "isl": isl, "osl": osl, "concurrency": c,
                    "ttft_ms": float(r["silicon_ttft_ms"]), "tpot_ms": float(r["silicon_tpot_ms"]),
                    "ttft_pred_ms": res.ttft_s * 1e3, "tpot_pred_ms": res.tpot_s * 1e3,
                    "e2e_pred_ms": res.e2e_s * 1e3, "requests_per_s": res.requests_per_s,
                    "admitted": w, "iterations": res.iterations})
    return out


GRIDS = {  # --fit grids: one front end; intake and delivery on two (--split-fe)
    "shared": {"loop_prompt_ms": [0.0, 2.5, 5.0, 7.5, 10.0], "fe_token_us": [0.0, 25.0, 50.0, 75.0],
               "fe_request_ms": [0.0, 5.0, 10.0, 15.0]},
    "split": {"loop_prompt_ms": [0.0, 2.5, 5.0], "fe_token_us": [75.0, 90.0, 110.0, 130.0],
              "fe_request_ms": [10.0, 15.0, 20.0, 25.0, 30.0]},
}


def objective(points: list[dict]) -> float:
    """The median + p90 |error| of TTFT and TPOT (calibration/validate_serving.py fit_host's objective)."""
    errs = [np.abs(_err(points, k)) for k in ("ttft", "tpot")]
    return float(sum(np.median(e) + np.percentile(e, 90) for e in errs))


def grid_fit(prepared: list[tuple], args) -> dict:
    """The point of GRIDS[args.grid] minimising `objective` (the other knobs as given)."""
    best: dict = {"objective": math.inf}
    grid = GRIDS[args.grid]
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values, strict=True))
        obj = objective(simulate_rows(prepared, argparse.Namespace(**{**vars(args), **point})))
        print(f"  grid {point}: objective {obj:.3f}", flush=True)
        if obj < best["objective"]:
            best = {**point, "objective": obj}
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default="8b-trtllm,32b-trtllm,70b-vllm")
    ap.add_argument("--rounds", type=int, default=10, help="requests per client: N = rounds x C")
    ap.add_argument("--host", action="store_true", help="the frameworks.yaml front end as a FIFO server")
    ap.add_argument("--slots-short", type=int, default=0, help="admit max_batch - N requests")
    ap.add_argument("--no-overlap", action="store_true", help="TensorRT-LLM without the overlap scheduler")
    ap.add_argument("--client-delay-ms", type=float, default=0.0, help="client think time per request")
    ap.add_argument("--fe-request-ms", type=float, help="front-end seconds per request (ms)")
    ap.add_argument("--fe-token-us", type=float, help="front-end seconds per output token (us)")
    ap.add_argument("--loop-prompt-ms", type=float, default=0.0, help="engine-loop ms per prompt (trtllm)")
    ap.add_argument("--loop-token-us", type=float, default=0.0, help="engine-loop host us per token (trtllm)")
    ap.add_argument("--fit", action="store_true", help="grid-fit GRID's knobs on the first set, then run all")
    ap.add_argument("--jitter-ms", type=float, default=0.0, help="client send jitter U(0, J) per request")
    ap.add_argument("--split-fe", action="store_true", help="intake and delivery on two front-end servers")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="shared", help="the --fit grid")
    ap.add_argument("--warmup-rounds", type=int, default=0,
                    help="unmeasured requests per client sent first, not drained (aiperf: 2)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    problem = bad_args(args.sets, args.data) or (
        f"error: --rounds {args.rounds}: must be >= 1" if args.rounds < 1 else None)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    everything = {}
    prepared = {name: prepare(name, args.data) for name in args.sets.split(",")}
    if args.fit:
        best = grid_fit(prepared[args.sets.split(",")[0]], args)
        print(f"fit: {best}", flush=True)
        args = argparse.Namespace(**{**vars(args), **{k: best[k] for k in GRIDS[args.grid]}})
    for name in args.sets.split(","):
        t0 = time.process_time()
        points = simulate_rows(prepared[name], args)
        everything[name] = points
        print(summary(f"{name} (simulated, {args.rounds} rounds)", points), flush=True)
        print(f"  CPU {time.process_time() - t0:.1f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
