"""The benchmark's closed loop as a queueing network: where a request waits before its prefill.

C clients each send their next request as soon as the previous one ends. Besides the GPU steps the
serving model prices (estimator/serve/serving.py), two resources serve one request at a time:
- the prefill slot: a step without chunked prefill admits at most k_max prompts, the ones that fit the
  step's token budget beside the running decodes, k_max = (max_num_tokens - (W - 1)) // isl (both
  frameworks count a decode as one token of the budget); a request holds 1 / k_max of a mixed step,
  D_prefill = n_chunks x T_mix / k_max;
- the host front end (request intake and tokenisation, detokenising and streaming every output token,
  run by one host process): D_host = host_s_per_request + osl / host_output_tokens_per_s.
Each is a queueing station of demand D_i; the rest of a request's cycle, Z - sum D_i, is a delay (its
decode steps run batched with everyone else's, they do not queue). Exact mean value analysis (Reiser &
Lavenberg 1980) over n = 1 .. C:
  R_i(n) = D_i (1 + Q_i(n - 1));   X(n) = n / (Z - sum D_i + sum R_i(n));   Q_i(n) = X(n) R_i(n)
gives each station's residence R_i, and the wait R_i - D_i a request spends queued there before its
prefill (TTFT and E2E grow by it, TPOT does not). Asymptotes: few clients see no wait; many saturate
the busiest station (X -> 1 / max D_i) and each extra client adds max D_i to the cycle, the TTFT
blow-up of a loaded server.
NB: MVA takes the stations' service times as exponential; a station whose demand is nearly constant
queues less just below saturation and as much beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoopWaits:
    waits_s: dict[str, float]  # per station, the time queued beyond the station's own work
    throughput_per_s: float  # requests per second through the loop
    utilisation: dict[str, float]  # per station, X x D

    @property
    def wait_s(self) -> float:
        return sum(self.waits_s.values())


def host_demand_s(osl: int, s_per_request: float | None, output_tokens_per_s: float | None) -> float:
    """Host seconds one request of `osl` output tokens costs (0 for a framework without host figures)."""
    per_token = 1.0 / float(output_tokens_per_s) if output_tokens_per_s else 0.0
    return float(s_per_request or 0.0) + osl * per_token


def closed_loop(clients: int, cycle_s: float, demands: dict[str, float]) -> LoopWaits:
    """Exact MVA of `clients` requests, each cycling through the stations' `demands` (seconds) and a
    delay of the rest of `cycle_s` (the unqueued cycle, which includes the demands themselves)."""
    stations = {k: float(d) for k, d in demands.items() if d > 0.0}
    if clients < 1 or cycle_s <= 0.0:
        return LoopWaits(dict.fromkeys(demands, 0.0), 0.0, dict.fromkeys(demands, 0.0))
    delay = max(cycle_s - sum(stations.values()), 0.0)
    names, ds = list(stations), list(stations.values())
    res, throughput = _mva(clients, delay, ds) if ds else ([], clients / (delay or cycle_s))
    residence = dict(zip(names, res, strict=True))
    waits = {k: residence.get(k, 0.0) - stations.get(k, 0.0) for k in demands}
    return LoopWaits(waits, throughput, {k: throughput * stations.get(k, 0.0) for k in demands})


def _mva(clients: int, delay: float, ds: list[float]) -> tuple[list[float], float]:
    """The MVA recursion above over station demands `ds` (a search prices thousands of loops: the
    one- and two-station cases run on plain floats, the same operations in the same order)."""
    if len(ds) == 1:
        d0, q0, r0, x = ds[0], 0.0, ds[0], 0.0
        for n in range(1, clients + 1):
            r0 = d0 * (1.0 + q0)
            x = n / (delay + r0)
            q0 = x * r0
        return [r0], x
    if len(ds) == 2:
        d0, d1 = ds
        q0 = q1 = 0.0
        r0, r1, x = d0, d1, 0.0
        for n in range(1, clients + 1):
            r0, r1 = d0 * (1.0 + q0), d1 * (1.0 + q1)
            x = n / (delay + (r0 + r1))
            q0, q1 = x * r0, x * r1
        return [r0, r1], x
    queue, res, x = [0.0] * len(ds), list(ds), 0.0
    for n in range(1, clients + 1):
        res = [d * (1.0 + q) for d, q in zip(ds, queue, strict=True)]
        x = n / (delay + sum(res))
        queue = [x * r for r in res]
    return res, x
