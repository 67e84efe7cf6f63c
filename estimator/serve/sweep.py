"""A serving sweep: every (TP size, workload) point of a deployment grid, each TP priced once.

The steps of one GPU are priced once per TP (estimator/serve/steps.py, layer-folded) and every workload
of the sweep re-uses them: a decode step is priced once per distinct (padded) batch, a prefill step once
per distinct (prompts, isl). The points are then the serving model's arithmetic (estimator/serve/serving.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from estimator.serve.deploy import Deployment, smallest_fitting_tp
from estimator.serve.serving import ServeResult, Workload
from estimator.serve.steps import Options


def sweep_deployments(model: str, options: Sequence[Options], workloads: Sequence[Workload],
                      fold: bool = True) -> list[tuple[int, ServeResult]]:
    """(tp, result) for every option x workload, in that order; a point that does not fit carries the
    smallest TP that fits its request shape (`smallest_fit`, found once per TP and shape)."""
    rows = []
    for opts in options:
        dep = Deployment.build(model, opts, fold=fold)
        found: dict[tuple[int, int], dict] = {}
        for r in dep.serve_many(workloads):
            if not r.fits:
                shape = (r.workload.isl, r.workload.osl)
                if shape not in found:
                    better = smallest_fitting_tp(model, opts, r.workload)
                    found[shape] = {"tp": better} if better else {}
                r.smallest_fit = found[shape]
            rows.append((opts.tp, r))
    return rows
