"""How far the free-dim closed form is from `--dim`, per model and free dim, and which kernels make it so.

    python -m tools.closed_form_gaps [--models all|NAME,...] [--arch h100-sxm] [--precision bf16]
                                     [--points seq=64,512,2048,8192 ...] [--top 3]

Per bundled model (`estimate --list-models`) and each of its free dims d: the model is estimated with d
free and the other dims at the model's defaults, as `--json` would price it; at each point the total of
the kernels' closed forms (the `--json` total evaluated there) is set against the same kernels priced at
the point by the tile model (what `--dim` gives there; tools/check_one_price.py checks that equality).
Printed: the worst relative gap of the total over the points, the number of distinct kernels whose
formula is off by more than estimator.study.closed_form.EXACT_REL at some point, and the `--top` worst
of them with the tile their formula keeps. "exact" where no kernel is off.

Default points per dim (POINTS): batch 2..512, seq 64..8192, past_seq 64..16384 (a dim of 1 is left
out: binding a dim to 1 changes the graph itself, see estimator.study.sweep.Sweeper).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.study.closed_form import EXACT_REL
from estimator.study.sweep import Compiled
from passes import DEFAULT_STRATEGY, pipeline_for

POINTS = {"batch": (2, 8, 64, 512), "seq": (64, 512, 2048, 8192), "past_seq": (64, 512, 4096, 16384)}
OTHER_POINTS = (2, 64, 1024, 8192)


def gaps(result, d: str, points: tuple[int, ...]) -> tuple[float, list[tuple[str, str | None, float]]]:
    """(worst |total gap| over the points, [(kernel, tile, worst |gap|)] for every inexact kernel)."""
    compiled = Compiled(result)
    formula, priced = compiled.group_estimates({d: np.array(points, dtype=float)})
    counts = compiled.counts[:, None]
    total_f, total_p = (formula * counts).sum(axis=0), (priced * counts).sum(axis=0)
    worst_total = float(np.max(np.abs(total_f / total_p - 1)))
    kernels = []
    for i, g in enumerate(compiled.groups):
        rel = np.abs(formula[i] - priced[i]) / np.where(priced[i] > 0, priced[i], 1.0)
        if np.max(rel) > EXACT_REL:
            tile = g.kernel.tile.tile if g.kernel is not None and g.kernel.tile is not None else None
            kernels.append((g.name, tile, float(np.max(rel))))
    return worst_total, sorted(kernels, key=lambda k: -k[2])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="all")
    p.add_argument("--arch", default="h100-sxm")
    p.add_argument("--precision", default=None)
    p.add_argument("--points", action="append", default=[], metavar="DIM=V1,V2,...")
    p.add_argument("--top", type=int, default=3)
    args = p.parse_args(argv)
    points = dict(POINTS)
    for spec in args.points:
        name, _, values = spec.partition("=")
        points[name] = tuple(int(v) for v in values.split(","))
    names = args.models.split(",")
    specs = models.list_models() if args.models == "all" else [models.MODELS[n] for n in names]
    hw = hwdesc.load(args.arch)
    pipe = pipeline_for(DEFAULT_STRATEGY, hw.family)
    print(f"{hw.name}, precision {args.precision or 'graph'}; the closed form against --dim at the points")
    print(f"{'model':<24}{'dim':<10}{'points':<24}{'total gap':>10}  inexact kernels (worst |gap|, tile)")
    exact = inexact = 0
    for spec in specs:
        graph = import_model(spec.build())
        free = sorted(s.name for s in graph.free_symbols())
        for d in free:
            dims = {o: spec.default_dims.get(o, 1) for o in free if o != d}
            result = estimate(graph, hw, precision=args.precision, dims=dims, pipeline=pipe)
            pts = points.get(d, OTHER_POINTS)
            total, kernels = gaps(result, d, pts)
            exact, inexact = exact + (not kernels), inexact + bool(kernels)
            worst = "; ".join(f"{k} {e:.1%} ({t})" for k, t, e in kernels[:args.top])
            label = "exact" if not kernels else f"{len(kernels)}: {worst}"
            print(f"{spec.name:<24}{d:<10}{','.join(map(str, pts)):<24}{total:>9.2%}  {label}", flush=True)
    print(f"{exact} (model, dim) closed forms exact within {EXACT_REL:g} at their points, "
          f"{inexact} approximate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
