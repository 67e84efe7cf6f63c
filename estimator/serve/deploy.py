"""A deployment end to end: model + GPU + TP + framework -> priced steps, memory plan, serving metrics.

`Deployment.build` prices the steps once (estimator/serve/steps.py); `serve(workload)` then evaluates
any request stream against them (a sweep over concurrencies re-uses one Deployment). A model that does
not fit is a finding: `smallest_fitting_tp` re-shards the decode graph at larger TPs and reports the
first whose memory plan holds one sequence.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from estimator.serve.frameworks import Framework
from estimator.serve.memory import Memory, plan_memory
from estimator.serve.serving import ServeResult, Workload, prefetch, serve
from estimator.serve.steps import Options, Steps, model_steps

TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class Deployment:
    model: str
    opts: Options
    steps: Steps
    memory: Memory

    @classmethod
    def build(cls, model: str, opts: Options, fold: bool = True) -> Deployment:
        steps = model_steps(model, opts, fold_layers=fold)
        memory = plan_memory(opts.hw, opts.framework, opts.parallel.moe_group, steps.weights_bytes,
                             steps.kv_per_token, steps.activations)
        return cls(model, opts, steps, memory)

    @property
    def framework(self) -> Framework:
        return self.opts.framework

    @property
    def parallel(self):
        return self.opts.parallel

    def rank_workload(self, work: Workload) -> Workload:
        """What one attention-DP rank serves: its share of the concurrency (the whole under attention TP)."""
        dp = self.parallel.attention_dp
        return work if dp == 1 else replace(work, concurrency=max(1, math.ceil(work.concurrency / dp)))

    def serve(self, work: Workload) -> ServeResult:
        """The serving metrics of `work`: one attention-DP rank serves its share of the concurrency (its
        own batch and KV cache, estimator/serve/parallel.py); tokens/s adds the ranks, per GPU over all
        tp x attention_dp GPUs."""
        p = self.parallel
        result = serve(self.steps, self.memory, self.framework, self.rank_workload(work), p.tp)
        if p.attention_dp == 1:
            return result
        dp = p.attention_dp
        notes = [*result.notes, f"attention DP {dp}: each rank serves {self.rank_workload(work).concurrency} "
                 f"of the {work.concurrency} requests with its own batch and KV cache; tokens/s, admitted "
                 f"and the KV capacity are the {dp} ranks' together (the memory below is one GPU's)"]
        return replace(result, workload=work, gpus=p.tp * dp, tokens_per_s=result.tokens_per_s * dp,
                       admitted=result.admitted * dp, kv_capacity_tokens=result.kv_capacity_tokens * dp,
                       notes=notes)

    def prefetch(self, works: Sequence[Workload]) -> None:
        """Price the steps every workload's `serve` asks, in one pass (serving.prefetch)."""
        prefetch(self.steps, self.memory, self.framework, [self.rank_workload(w) for w in works])

    def serve_many(self, works: Sequence[Workload]) -> list[ServeResult]:
        """`serve` of every workload, their steps priced first in one pass."""
        self.prefetch(works)
        return [self.serve(w) for w in works]

    @functools.cached_property
    def decode_graph(self):
        """One GPU's sharded decode graph of the whole model (dims free): the steps' decode graph unfolded,
        from the same imported graph and the same sharding (estimator/serve/steps.py)."""
        from estimator.serve.steps import bundled_config, imported
        from passes.shard_tp import shard_tp

        base, p = self.model.removesuffix("-decode"), self.parallel
        return shard_tp(imported(base, bundled_config(base)[2], p.ep, p.attention_dp, p.tp)[0], p.tp).graph

    @functools.cached_property
    def step_graph(self):
        """`decode_graph` as the serving steps price it (estimator/serve/steps.py `_retyped`): at the
        deployed precision, its KV cache at --kv-precision; the decode_graph itself without one."""
        from estimator.serve.steps import _retyped

        return _retyped(self.decode_graph, self.opts) if self.opts.kv_precision else self.decode_graph

    @property
    def step_pricing(self):
        """`pricing` for `step_graph`: with --kv-precision the graph is typed already (re-typing it at
        --precision would undo the cache's dtype)."""
        return replace(self.pricing, precision=None) if self.opts.kv_precision else self.pricing

    @property
    def pricing(self):
        """The EstimateOptions of this deployment's kernels (its precision, pipeline, tile model or
        roofline, and the framework's collectives)."""
        from estimator.estimate import EstimateOptions

        fw = self.framework
        return EstimateOptions(precision=self.opts.precision, pipeline=self.opts.pipeline,
                               roofline=not self.opts.tiling,
                               framework=fw.name if fw.custom_allreduce else None)

    def decode_step(self, work: Workload, result: ServeResult, after_pass=None, **checks):
        """The decode step `result` served (its batch, padded to its CUDA graph, at the mean context isl
        + osl / 2) on `decode_graph`, priced with the deployment's options (`checks`: strict,
        verify_each): the per-kernel table under the serving summary and the base of its report."""
        from estimator.estimate import estimate

        step = estimate(self.step_graph, self.opts.hw, self.step_pricing, dims=decode_dims(work, result),
                        after_pass=after_pass, **checks)
        step.precision = self.opts.precision or "graph"  # typed before estimate() under --kv-precision
        return step


def decode_dims(work: Workload, result: ServeResult) -> dict[str, int]:
    """The served decode batch (padded to its CUDA graph) and the mean context isl + osl / 2."""
    return {"batch": result.decode.batch, "past_seq": work.isl + work.osl // 2}


def smallest_fitting_tp(model: str, opts: Options, work: Workload) -> int | None:
    """The smallest TP (above opts.tp, within the NVLink domain when the descriptor says) that fits."""
    domain = getattr(getattr(opts.hw, "interconnect", None), "nvlink_domain_gpus", None) or 8
    for tp in (t for t in TP_CANDIDATES if opts.tp < t <= max(domain, 8)):
        try:
            dep = Deployment.build(model, opts.with_tp(tp))
        except Exception:  # noqa: BLE001  (a TP that cannot shard this model is skipped)
            continue
        if dep.memory.fits(work.isl, work.osl):
            return tp
    return None
