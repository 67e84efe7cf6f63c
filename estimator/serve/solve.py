"""Exact inversions of the serving model: the largest concurrency, decode batch or context, or the
smallest TP, that meets an SLA, with the term that binds there named.

The serving figures are the closed-form serving model (estimator/serve/serving.py) over priced steps;
they are piecewise in the integer dimensions (CUDA-graph padding, whole prompts per step, KV blocks),
so the inversion is a bisection on the exact model over the integers (no fitted curve, no
interpolation): lo meets the SLA, hi does not, and the answer v is checked: met at v, missed at v + 1
(NB: bisection assumes the figure grows with the dimension; where it does not, e.g. TTFT falling as
more prompts share a prefill step, the answer is a boundary, not necessarily the largest one).
- concurrency: the clients of `--serve` at this deployment (TTFT and/or TPOT), up to the admitted
  maximum (KV capacity or max batch: then the binding term is the capacity);
- batch: the decode step alone at the mean context isl + osl / 2 (TPOT's decode-step part);
- context: the prompt length isl at the given concurrency, up to the longest that fits;
- gpus: the smallest TP of the candidates that meets the SLA.
The binding term: TPOT's parts at the answer (decode attention, the other decode kernels, launch and
scheduler, prefills mixed into the decode steps) against the same parts at the dimension's smallest
value; the part that grew most is named ("decode attention's KV read reaches TPOT 20 ms at
concurrency 212"). For TTFT: queueing against prefill.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from estimator.errors import UserError
from estimator.serve.launch import decode_step
from estimator.serve.serving import TTFT_TERMS, Workload

DIMS = ("concurrency", "batch", "context", "gpus")
TERMS = {"attention": "decode attention's KV read", "other": "decode GEMMs and the other decode kernels",
         "launch": "launch and scheduler", "mixed": "prefills mixed into the decode steps",
         # TTFT's own terms (serving.TTFT_TERMS), named by the head of their description
         **{k: v.split(":")[0].split(" (")[0] for k, v in TTFT_TERMS.items()}}


class SolveError(UserError):
    pass


@dataclass
class Solution:
    dim: str
    value: int | None
    metric: str  # what binds: "tpot" or "ttft"
    target_s: float
    at_value_s: float | None  # the metric at the answer
    at_next_s: float | None  # at the answer + 1 (None: the limit is the dimension's own)
    binding: str
    terms: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.value is None:
            return (f"no {self.dim} meets {self.metric.upper()} {self.target_s * 1e3:g} ms "
                    f"({self.binding})")
        if self.dim == "gpus":
            return (f"tp {self.value} is the smallest TP that meets {self.metric.upper()} "
                    f"{self.target_s * 1e3:g} ms: {self.metric.upper()} {self.at_value_s * 1e3:.2f} ms, "
                    f"its largest part {self.binding}")
        limit = ("" if self.at_next_s is None
                 else f" ({self.dim} {self.value + 1}: {self.at_next_s * 1e3:.3f} ms)")
        return (f"{self.binding} reaches {self.metric.upper()} {self.target_s * 1e3:g} ms at {self.dim} "
                f"{self.value}: {self.metric.upper()} {self.at_value_s * 1e3:.3f} ms{limit}")

    def to_json(self) -> dict:
        return {"dim": self.dim, "value": self.value, "metric": self.metric, "target_s": self.target_s,
                "at_value_s": self.at_value_s, "at_next_s": self.at_next_s, "binding": self.binding,
                "terms_s": self.terms, "text": self.text}


def tpot_terms(dep, work: Workload, result) -> dict[str, float]:
    """TPOT's parts (seconds per output token) of `result` served by `dep`."""
    step = result.decode
    ctx = float(dep.steps.decode_context(step.batch, work.isl + work.osl // 2))
    return {"attention": ctx, "other": float(step.gpu_s) - ctx, "launch": float(step.launch_s + step.sched_s),
            "mixed": max(result.tpot_s - float(step.step_s), 0.0)}


def ttft_terms(result) -> dict[str, float]:
    """TTFT's parts (seconds) as the serving model sums them (ServeResult.ttft_terms, TTFT_TERMS)."""
    return dict(result.ttft_terms)


def _terms(metric: str, dep, work: Workload, result) -> dict[str, float]:
    return tpot_terms(dep, work, result) if metric == "tpot" else ttft_terms(result)


def _bisect(ok, lo: int, hi: int) -> int:
    """The largest v in [lo, hi] with ok(v), given ok(lo) and not ok(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _metric(sla) -> str:
    return "tpot" if sla.tpot_s is not None else "ttft"


def _binding(metric: str, dep, base_work, base_res, work, res) -> tuple[str, dict]:
    now, before = _terms(metric, dep, work, res), _terms(metric, dep, base_work, base_res)
    grew = max(now, key=lambda k: now[k] - before.get(k, 0.0))
    return TERMS[grew], now


def _solve_workload(dim: str, key: str, cap: int, dep, work: Workload, sla, misses: str,
                    capped: str) -> Solution:
    """The largest value of the workload's `key` (1 .. `cap`) whose served result fits and meets `sla`,
    by bisection on the exact serving model, with the term that grew most from 1 to it named."""
    metric = _metric(sla)
    target = getattr(sla, f"{metric}_s")

    def at(v: int) -> Workload:
        return replace(work, **{key: v})

    def ok(v: int) -> bool:
        r = dep.serve(at(v))
        return r.fits and sla.met(r.ttft_s, r.tpot_s)

    base = dep.serve(at(1))
    if not ok(1):
        return Solution(dim, None, metric, target, getattr(base, f"{metric}_s"), None, misses, {})
    if ok(cap):
        r = dep.serve(at(cap))
        return Solution(dim, cap, metric, target, getattr(r, f"{metric}_s"), None, capped,
                        _terms(metric, dep, at(cap), r))
    v = _bisect(ok, 1, cap)
    r, nxt = dep.serve(at(v)), dep.serve(at(v + 1))
    binding, terms = _binding(metric, dep, at(1), base, at(v), r)
    return Solution(dim, v, metric, target, getattr(r, f"{metric}_s"), getattr(nxt, f"{metric}_s"),
                    binding, terms)


def solve_concurrency(dep, work: Workload, sla) -> Solution:
    cap = min(dep.memory.max_concurrency(work.isl, work.osl), int(dep.framework.max_batch_size))
    if cap < 1:
        raise SolveError("--solve concurrency: the model does not fit this deployment")
    return _solve_workload("concurrency", "concurrency", cap, dep, work, sla, "even one request misses it",
                           "the KV capacity (admitted concurrency)")


def decode_step_s(dep, work: Workload, batch: int) -> float:
    return float(decode_step(dep.steps, dep.framework, batch, np.array([work.isl + work.osl // 2])).step_s[0])


def solve_batch(dep, work: Workload, sla) -> Solution:
    if sla.tpot_s is None:
        raise SolveError("--solve batch needs --sla tpot=T (the decode step against TPOT)")
    target = sla.tpot_s
    cap = max(1, dep.memory.largest_batch(work.isl + work.osl))

    def ok(b):
        return decode_step_s(dep, work, b) <= target

    parts = {}
    if not ok(1):
        return Solution("batch", None, "tpot", target, decode_step_s(dep, work, 1), None,
                        "even a decode step of one request misses it")
    if ok(cap):
        return Solution("batch", cap, "tpot", target, decode_step_s(dep, work, cap), None,
                        "the KV capacity (largest batch)")
    v = _bisect(ok, 1, cap)
    ctx = work.isl + work.osl // 2
    for name, b in (("at", v), ("one", 1)):
        step = decode_step(dep.steps, dep.framework, b, np.array([ctx])).first()
        att = float(dep.steps.decode_context(step.batch, ctx))
        parts[name] = {"attention": att, "other": step.gpu_s - att, "launch": step.launch_s + step.sched_s}
    grew = max(parts["at"], key=lambda k: parts["at"][k] - parts["one"][k])
    return Solution("batch", v, "tpot", target, decode_step_s(dep, work, v), decode_step_s(dep, work, v + 1),
                    TERMS[grew], parts["at"])


def solve_context(dep, work: Workload, sla) -> Solution:
    # the longest prompt whose sequences (isl + osl) of this concurrency fit
    cap = dep.memory.longest_context(work.concurrency) - work.osl
    if cap < 1:
        raise SolveError("--solve context: no context fits this concurrency")
    return _solve_workload("context", "isl", cap, dep, work, sla, "even a one-token prompt misses it",
                           "the KV capacity (longest context)")


def solve_gpus(at_tp, work: Workload, sla, tps=(1, 2, 4, 8, 16, 32, 64)) -> Solution:
    """The smallest TP meeting the SLA; `at_tp(tp)` is the Deployment at tp (None: cannot shard)."""
    metric = _metric(sla)
    target = getattr(sla, f"{metric}_s")
    last = None
    for tp in tps:
        dep = at_tp(tp)
        if dep is None or not dep.memory.fits(work.isl, work.osl):
            continue
        r = dep.serve(work)
        if sla.met(r.ttft_s, r.tpot_s):
            terms = _terms(metric, dep, work, r)
            binding = TERMS[max(terms, key=terms.get)]
            return Solution("gpus", tp, metric, target, getattr(r, f"{metric}_s"),
                            None if last is None else last, binding, terms)
        last = getattr(r, f"{metric}_s")
    return Solution("gpus", None, metric, target, last, None, "no TP of the candidates meets it")
