"""A serving sweep: every (TP size, workload) point of a deployment grid, each TP priced once.

The steps of one GPU are priced once per TP (estimator/serve/steps.py, layer-folded) and every workload
of the sweep re-uses them: a decode step is priced once per distinct (padded) batch, a prefill step once
per distinct (prompts, isl). The points are then the serving model's arithmetic (estimator/serve/serving.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from estimator.serve.deploy import Deployment
from estimator.serve.serving import ServeResult, Workload
from estimator.serve.steps import Options


def sweep_deployments(model: str, options: Sequence[Options], workloads: Sequence[Workload],
                      fold: bool = True) -> list[tuple[int, ServeResult]]:
    """(tp, result) for every option x workload, in that order."""
    rows = []
    for opts in options:
        dep = Deployment.build(model, opts, fold=fold)
        rows.extend((opts.tp, r) for r in dep.serve_many(workloads))
    return rows
