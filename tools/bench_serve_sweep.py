"""Benchmark the serving sweep: a TP x concurrency grid of one model, end to end (build, shard and price
each TP's steps, then every point's serving arithmetic), wall clock and this process's CPU time
after the imports.

Target (issue 17): a 4 x 8 sweep (tp 1,2,4,8 x 8 concurrencies) of llama-3.1-70b in <= 3 s.

    python -m tools.bench_serve_sweep [--model llama-3.1-70b] [--tp 1,2,4,8]
        [--concurrency 1,2,4,8,16,32,64,128] [--isl 1024] [--osl 1024] [--precision fp8]
        [--framework trtllm] [--roofline] [--no-fold]

`--roofline` prices kernels by the roofline estimate (no tile plans); the default, the tile model. Both
price every step asked at arrays of points through the one pricing core (estimator/serve/step_points.py).
`--no-fold` builds the full L-layer graphs instead of the 1- and 2-layer ones (estimator/serve/steps.py).
A TP whose memory does not hold one sequence prints "does not fit" rows (still priced: the sweep
shows where the model starts to fit).
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--tp", default="1,2,4,8")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--isl", type=int, default=1024)
    ap.add_argument("--osl", type=int, default=1024)
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--framework", default="trtllm")
    ap.add_argument("--arch", default="h100-sxm")
    ap.add_argument("--roofline", action="store_true")
    ap.add_argument("--no-fold", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import hwdesc
    from estimator.serve.frameworks import framework
    from estimator.serve.serving import Workload
    from estimator.serve.steps import Options
    from estimator.serve.summary import sweep_text
    from estimator.serve.sweep import sweep_deployments
    from passes import STRATEGIES

    t_import = time.perf_counter() - t0
    hw, fw = hwdesc.load(args.arch), framework(args.framework)
    tps = [int(t) for t in args.tp.split(",")]
    concs = [int(c) for c in args.concurrency.split(",")]
    opts = [
        Options(hw, tp, args.precision, None, STRATEGIES["tensorrt"], fw, tiling=not args.roofline)
        for tp in tps
    ]
    works = [Workload(args.isl, args.osl, c) for c in concs]
    t1, c1 = time.perf_counter(), time.process_time()
    rows = sweep_deployments(args.model, opts, works, fold=not args.no_fold)
    t_sweep, c_sweep = time.perf_counter() - t1, time.process_time() - c1
    print(sweep_text(rows))
    mode = "roofline" if args.roofline else "tiled"
    print(
        f"\n{len(tps)} x {len(concs)} sweep of {args.model} ({mode}, {'full' if args.no_fold else 'folded'} "
        f"graphs): {t_sweep:.2f} s wall, {c_sweep:.2f} s CPU after {t_import:.2f} s of imports; "
        "target <= 3 s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
