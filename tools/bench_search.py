"""Benchmark the deployment search (estimator/serve/search.py, disagg.py, fanout.py).

    python -m tools.bench_search one [--model llama-3.1-70b] [--arch h200] [--gpus 8]
    python -m tools.bench_search study [--workers 2]

`one`: an N-GPU search of one model on one GPU type, aggregated and disaggregated, in this process:
wall clock and CPU time after the imports, and the imports' wall time apart (target, issue 27: <= 5 s on
the 2-core machine).
`study`: every bundled decoder model that the serving model prices (x two workloads, 20 searches a GPU)
on h100-sxm, h200 and b200, serially and on a Dask LocalCluster of `--workers` worker processes; prints
both times and whether the two runs' rows are identical (they must be).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

STUDY_MODELS = ("llama-3.1-8b", "llama-3.1-70b", "llama-3-8b", "llama-3-70b", "qwen3-32b", "mixtral-8x7b",
                "gpt-oss-20b", "gpt-oss-120b", "qwen3-235b-a22b", "llama-tiny")
STUDY_WORKLOADS = ((2048, 256), (1024, 1024))
STUDY_GPUS = ("h100-sxm", "h200", "b200")


def task(model: str, arch: str, isl: int, osl: int, gpus: int, disagg: bool):
    import hwdesc
    from estimator.serve.fanout import SearchTask
    from passes import DEFAULT_STRATEGY, pipeline_for

    hw = hwdesc.load(arch)
    return SearchTask(model, arch, hw.path, "fp8", None, pipeline_for(DEFAULT_STRATEGY, hw.family), "trtllm",
                      True, isl, osl, gpus, 1.0, 0.03, disagg)


def one(args) -> int:
    imports = time.perf_counter()
    # what run_search imports (models, and onnx with it, is most of it), timed apart from the search
    import estimator.serve.disagg  # noqa: F401
    import estimator.serve.search  # noqa: F401
    from estimator.serve.fanout import run_search

    t = task(args.model, args.arch, args.isl, args.osl, args.gpus, True)
    imports = time.perf_counter() - imports
    wall, cpu = time.perf_counter(), time.process_time()
    rows = run_search(t)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    agg = sum(1 for r in rows if r.get("mode") == "agg")
    print(f"{args.model} on {args.gpus} x {args.arch}: {agg} aggregated + {len(rows) - agg} disaggregated "
          f"deployments priced in {wall:.2f} s wall, {cpu:.2f} s CPU (after {imports:.2f} s of imports)")
    return 0


def study(args) -> int:
    from estimator.serve.fanout import fan_out

    workloads = STUDY_WORKLOADS[: args.workloads]
    tasks = [task(m, g, isl, osl, 8, False) for m in STUDY_MODELS for isl, osl in workloads
             for g in STUDY_GPUS]
    t0 = time.perf_counter()
    serial = fan_out(tasks)
    t1 = time.perf_counter()
    cluster = fan_out(tasks, local=True, workers=args.workers)
    t2 = time.perf_counter()
    same = json.dumps(serial, sort_keys=True) == json.dumps(cluster, sort_keys=True)
    for t, a, b in zip(tasks, serial, cluster, strict=True):
        if a != b:  # name the first task and row that differ
            row = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            print(f"differs: {t.model} on {t.gpu} isl {t.isl} osl {t.osl}, row {row} of {len(a)} / {len(b)}")
            break
    rows = sum(len(r) for r in serial)
    print(f"{len(tasks)} searches ({len(STUDY_MODELS)} models x {len(workloads)} workloads x "
          f"{len(STUDY_GPUS)} GPUs), {rows} rows: serial {t1 - t0:.1f} s, LocalCluster of {args.workers} "
          f"workers {t2 - t1:.1f} s; identical: {same}")
    return 0 if same else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("one")
    a.add_argument("--model", default="llama-3.1-70b")
    a.add_argument("--arch", default="h200")
    a.add_argument("--gpus", type=int, default=8)
    a.add_argument("--isl", type=int, default=2048)
    a.add_argument("--osl", type=int, default=256)
    b = sub.add_parser("study")
    b.add_argument("--workers", type=int, default=2)
    b.add_argument("--workloads", type=int, default=len(STUDY_WORKLOADS), help="the first N workloads")
    args = ap.parse_args()
    return one(args) if args.what == "one" else study(args)


if __name__ == "__main__":
    sys.exit(main())
