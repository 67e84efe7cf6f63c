"""The server's host process as a queue in the benchmark's closed loop (mean value analysis).

A serving framework's front end (request intake, tokenisation, scheduling bookkeeping, detokenising and
streaming every output token) runs on the host, one request at a time. Per request it costs
  D = host_s_per_request + osl / host_output_tokens_per_s      (seconds of host time)
and the requests it serves spend the rest of their cycle on the GPU side (prefill, decode steps):
Z = the model's E2E without the host queue. The host work of a request runs alongside its GPU work
(tokens stream while the next ones decode), so a request's cycle is Z plus only its *wait* at the host.

C clients in a closed loop (each sends its next request when the previous one ends) form a closed
queueing network of one queueing station (the host, demand D) and one delay station (the GPU side,
delay Z - D, at least 0). Exact mean value analysis (Reiser & Lavenberg 1980) over n = 1 .. C:
  R(n) = D x (1 + Q(n - 1));   X(n) = n / (Z - D + R(n));   Q(n) = X(n) x R(n)
gives the host's residence time R(C) and the throughput X(C) (requests/s). The wait R - D is spent in
the front end before the request reaches the scheduler, so it adds to TTFT and E2E, not to TPOT.
Its asymptotes: a few clients see no wait (R -> D); many clients saturate the host (X -> 1 / D) and
every extra client adds D to the cycle: E2E -> C x D, the TTFT blow-up of a server at its host limit.
NB: MVA assumes exponential service times at the host; a host whose per-request work is nearly constant
queues less just below saturation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostQueue:
    wait_s: float  # time a request waits for the host, beyond the host's own work on it
    throughput_per_s: float  # requests per second through the closed loop
    utilisation: float  # the host's busy fraction, X x D


def host_demand_s(osl: int, s_per_request: float, output_tokens_per_s: float | None) -> float:
    """Host seconds one request of `osl` output tokens costs (0 when the framework has no host limit)."""
    per_token = 1.0 / float(output_tokens_per_s) if output_tokens_per_s else 0.0
    return float(s_per_request or 0.0) + osl * per_token


def closed_loop(clients: int, cycle_s: float, demand_s: float) -> HostQueue:
    """Exact MVA of `clients` requests cycling through the host (demand `demand_s`) and the GPU side
    (the rest of a `cycle_s` cycle)."""
    if demand_s <= 0.0 or clients < 1:
        return HostQueue(0.0, clients / cycle_s if cycle_s > 0 else 0.0, 0.0)
    delay = max(cycle_s - demand_s, 0.0)
    queue, residence, throughput = 0.0, demand_s, 0.0
    for n in range(1, clients + 1):
        residence = demand_s * (1.0 + queue)
        throughput = n / (delay + residence)
        queue = throughput * residence
    return HostQueue(residence - demand_s, throughput, throughput * demand_s)
