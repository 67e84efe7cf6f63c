"""A served deployment as the recommenders and the report see it, and its what-ifs.

`Serving` holds what `--serve` priced (the model, the Options, the Workload, the Deployment and its
ServeResult). A what-if changes one thing and goes through the same serving code (serving.serve over the
same priced steps, or Deployment.build at another TP), never a second model:

- `with_framework(fw)`: the same steps and memory plan served under other framework defaults (CUDA
  graphs capture another batch, prefill captured);
- `at(tp, concurrency)`: the deployment at another TP size (built and priced once per TP, shared by
  every concurrency) and/or another concurrency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from estimator.errors import UserError
from estimator.serve.deploy import Deployment
from estimator.serve.frameworks import Framework
from estimator.serve.serving import ServeResult, Workload, serve
from estimator.serve.steps import Options


@dataclass
class Serving:
    model: str
    opts: Options
    work: Workload
    deployment: Deployment
    result: ServeResult
    _deployments: dict[int, Deployment | None] = field(default_factory=dict)
    _points: dict[tuple[int, int], ServeResult | None] = field(default_factory=dict)

    @property
    def tp(self) -> int:
        return self.opts.tp

    @property
    def framework(self) -> Framework:
        return self.opts.framework

    def with_framework(self, fw: Framework) -> ServeResult:
        """The workload served by the same priced steps and memory plan under `fw`'s defaults. NB: the
        memory plan is the base framework's (only launch and scheduling figures are meant to change)."""
        dep = self.deployment
        return serve(dep.steps, dep.memory, fw, self.work, self.tp)

    def deployment_at(self, tp: int) -> Deployment | None:
        """The deployment at `tp` (None when the model cannot be sharded that way)."""
        if tp == self.tp:
            return self.deployment
        if tp not in self._deployments:
            try:
                self._deployments[tp] = Deployment.build(self.model, self.opts.with_tp(tp))
            except UserError:  # e.g. heads not divisible by tp: not a candidate
                self._deployments[tp] = None
        return self._deployments[tp]

    def prefetch(self, points: Sequence[tuple[int, int]]) -> None:
        """Price, one pass per TP, the steps of every (tp, concurrency) that `at` will be asked."""
        by_tp: dict[int, list[Workload]] = {}
        for tp, c in points:
            by_tp.setdefault(tp, []).append(replace(self.work, concurrency=c))
        for tp, works in by_tp.items():
            dep = self.deployment_at(tp)
            if dep is not None:
                dep.prefetch(works)

    def at(self, tp: int, concurrency: int) -> ServeResult | None:
        """The workload at `concurrency` clients on `tp` GPUs (memoised), None when `tp` cannot shard."""
        key = (tp, concurrency)
        if key not in self._points:
            dep = self.deployment_at(tp)
            work = replace(self.work, concurrency=concurrency)
            self._points[key] = None if dep is None else dep.serve(work)
        return self._points[key]


def capturing(fw: Framework, batch: int) -> Framework:
    """`fw` with a CUDA graph captured at decode batch `batch` (max batch raised, the size added)."""
    sizes = sorted({*fw.cuda_graph_batch_sizes, batch})
    values = {**fw.values, "cuda_graph_max_batch": max(int(fw.cuda_graph_max_batch), batch),
              "cuda_graph_batch_sizes": sizes}
    return replace(fw, values=values)


def prefill_captured(fw: Framework) -> Framework:
    """`fw` with its prefill steps captured in CUDA graphs too."""
    return replace(fw, values={**fw.values, "prefill_graphed": True})
