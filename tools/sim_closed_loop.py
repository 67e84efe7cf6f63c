"""An iteration-level simulation of a closed-loop serving benchmark (an EXPERIMENT, not the product).

The product's serving model (estimator/serve/serving.py) is analytical; this replays the benchmark one
engine iteration at a time on step times the product prices (tools/sim_serving_sets.py builds them from
estimator.serve.launch decode_step / prefill_step: one price per kernel), to see which mechanism of the
server or of the client explains the measured TTFT of estimator/calibration/validate_serving.py's sets.

The benchmark (aiperf `--concurrency C --num-requests N`): C clients start together on an idle server
(a burst of C prompts); each completion issues the next request while fewer than N were issued; the
reported TTFT / TPOT are the means over the N requests, TTFT = send -> first token received,
TPOT = (E2E - TTFT) / (osl - 1); `warmup` requests sent before them are not measured (and not drained).

The engine (TensorRT-LLM's PyTorch executor; vLLM V1 with `overlap=False`), iteration m:
- scheduled at host time s_m: with the overlap scheduler the host schedules m while the GPU still runs
  m - 1, so s_m = end_{m-2} and it knows the results of iterations <= m - 2 only; without it
  s_m = end_{m-1}. A request reaching the engine strictly before s_m can join m (one reaching it later
  waits for the next iteration); on an idle engine the host schedules as soon as a request arrives;
- the batch: every running request not yet known to be finished (with the overlap scheduler a request
  whose last token came out of m - 1 still holds its slot in m, a wasted decode), then the waiting
  prompts in arrival order while slots (`max_batch`) and the token budget (`max_num_tokens`, a decode
  counts one token) allow: whole prompts only, or (`chunked`) a chunk of the next prompt filling the
  rest of the budget, a partly prefilled prompt going first;
- its GPU time: `prices.decode_s(b, past)` for b decodes at their mean past, or, with prompt tokens,
  `prices.mixed_s(tokens, b, past)` (serving.py's mixed step: the prefill step plus the decodes'
  attention riding along); it starts at max(end_{m-1}, s_m);
- its tokens reach the clients at end_m (the host waits for m, then sends), through the front end when
  one is modelled.
The front end (optional, `host_s_per_request`, `host_s_per_token`): one FIFO server in front of the
engine that takes in each request (host_s_per_request before it reaches the engine) and delivers each
iteration's tokens (host_s_per_token each, the batch of one iteration as one job); `split_front_end`:
intake and delivery on two such servers (two processes), so that the throughput is capped by the
busier of the two, min(1 / host_s_per_request, 1 / (osl x host_s_per_token)), not by their sum.
The engine loop's own host work (optional): `loop_s_per_prompt` per prompt it admits (before the
iteration can launch: start_m = max(end_{m-1}, s_m + prompts x loop_s_per_prompt)) and
`loop_s_per_token` per token an iteration makes (handled after it ends, before the host schedules
m + lag and before the tokens leave); with the overlap scheduler both hide behind the GPU while shorter
than a step, beyond that they stretch every iteration.
`client_jitter_s`: a client sends its next request a random U(0, jitter) after its last token (a
deterministic replay keeps requests that finished together in lock-step; jitter spreads them by at
most its amplitude a round).
`slots_short`: the engine admits max_batch - slots_short requests (a mechanism under test: one client
always waiting for a departure).
NB: a decode step is priced at the mean past of its batch (the attention is linear in the past); a
chunked iteration's prompt tokens are priced as whole-prompt steps pro rata.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Knobs:
    """The server and client as the benchmark ran them (see the module doc)."""

    max_batch: int
    max_num_tokens: int
    overlap: bool = True
    chunked: bool = False
    host_s_per_request: float = 0.0
    host_s_per_token: float = 0.0
    client_delay_s: float = 0.0
    split_front_end: bool = False  # intake and delivery on two servers (each FIFO) instead of one
    client_jitter_s: float = 0.0  # each send delayed a further U(0, jitter) (seeded: reproducible)
    slots_short: int = 0
    loop_s_per_prompt: float = 0.0  # engine-loop host work per prompt admitted, before its step launches
    loop_s_per_token: float = 0.0  # engine-loop host work per token of an iteration, after it ends


@dataclass(frozen=True)
class SimResult:
    ttft_s: float  # mean over the measured requests
    tpot_s: float
    e2e_s: float
    requests_per_s: float  # measured requests / the span from the first send to the last token
    iterations: int


class _FrontEnd:
    """One FIFO server: jobs (arrival, work, kind, payload) served in arrival order."""

    def __init__(self) -> None:
        self.jobs: list = []
        self.free_at = 0.0
        self.seq = 0

    def submit(self, arrival: float, work: float, kind: str, payload) -> None:
        heapq.heappush(self.jobs, (arrival, self.seq, work, kind, payload))
        self.seq += 1

    def next_arrival(self) -> float:
        return self.jobs[0][0] if self.jobs else math.inf

    def pop(self):
        arrival, _, work, kind, payload = heapq.heappop(self.jobs)
        self.free_at = max(self.free_at, arrival) + work
        return self.free_at, kind, payload


class _Sim:
    def __init__(self, prices, isl: int, osl: int, clients: int, requests: int, knobs: Knobs) -> None:
        self.p, self.isl, self.osl, self.k = prices, isl, osl, knobs
        self.n_req, self.issued = requests, 0
        self.send, self.first, self.last = [0.0] * requests, [0.0] * requests, [0.0] * requests
        self.fe = _FrontEnd()  # intake, and delivery too unless split
        self.fe_out = _FrontEnd() if knobs.split_front_end else self.fe
        self.rng = random.Random(0)
        self.arrived: deque = deque()  # (engine arrival, rid), in time order (FIFO front end)
        self.waiting: deque = deque()  # rids eligible, not yet prefilled: [rid, prompt tokens left]
        self.running: list = []  # heap of (last-token iteration, rid, first-token iteration)
        self.sum_p = 0  # sum of the first-token iterations of the running requests
        self.lasts: dict[int, list] = {}  # iteration -> rids whose last token it makes
        for _ in range(min(clients, requests)):
            self._issue(0.0)

    def _issue(self, t: float) -> None:
        rid, self.issued = self.issued, self.issued + 1
        jitter = self.rng.uniform(0.0, self.k.client_jitter_s) if self.k.client_jitter_s else 0.0
        self.send[rid] = t + self.k.client_delay_s + jitter
        self.fe.submit(self.send[rid], self.k.host_s_per_request, "intake", rid)

    def advance(self, until: float, strict: bool) -> None:
        """Serve the front-end jobs that arrived by `until`; engine arrivals before it become eligible."""
        while (self.fe.jobs or self.fe_out.jobs) and min(self.fe.next_arrival(),
                                                         self.fe_out.next_arrival()) <= until:
            server = self.fe if self.fe.next_arrival() <= self.fe_out.next_arrival() else self.fe_out
            done, kind, payload = server.pop()
            if kind == "intake":
                self.arrived.append((done, payload))
                continue
            firsts, lasts = payload
            for rid in firsts:
                self.first[rid] = done
            for rid in lasts:
                self.last[rid] = done
                if self.issued < self.n_req:
                    self._issue(done)
        while self.arrived and (self.arrived[0][0] < until or (not strict and self.arrived[0][0] <= until)):
            self.waiting.append([self.arrived.popleft()[1], self.isl])

    def _batch(self, m: int, lag: int) -> tuple[int, int, float, list]:
        """(decodes, prompt tokens, mean past, prompts finishing their prefill) of iteration m."""
        while self.running and self.running[0][0] <= m - lag:  # known finished
            _, _, p = heapq.heappop(self.running)
            self.sum_p -= p
        dec = len(self.running)
        slots = self.k.max_batch - self.k.slots_short - dec
        budget = self.k.max_num_tokens - dec
        tokens, done = 0, []
        for item in self.waiting:
            if slots <= 0 or budget <= 0:
                break
            take = item[1] if not self.k.chunked else min(item[1], budget)
            if take > budget:
                break
            item[1] -= take
            tokens, budget, slots = tokens + take, budget - take, slots - 1
            if item[1] == 0:
                done.append(item[0])
        for _ in done:
            self.waiting.popleft()
        past = self.isl + m - 1 - self.sum_p / dec if dec else float(self.isl)
        return dec, tokens, past, done

    def _schedule(self, m: int, lag: int, s_m: float) -> tuple[float, tuple]:
        """(host time, batch) of iteration m: at s_m, or, on an idle engine, at the next arrival."""
        self.advance(s_m, strict=True)
        batch = self._batch(m, lag)
        while batch[0] == 0 and batch[1] == 0:
            pending = min(self.fe.next_arrival(), self.fe_out.next_arrival())
            if not self.arrived and pending == math.inf:
                raise RuntimeError("simulation stalled: no request running, waiting or arriving")
            s_m = max(s_m, self.arrived[0][0] if self.arrived else pending)
            self.advance(s_m, strict=False)
            batch = self._batch(m, lag)
        return s_m, batch

    def run(self) -> int:
        """Iterate until every request has its last token; the number of iterations."""
        lag = 2 if self.k.overlap else 1
        host = [0.0, 0.0]  # when the host is done with iterations m - 2, m - 1 (0: the idle start)
        gpu_end, m, completed, wasted = 0.0, 0, 0, 0
        while completed < self.n_req:
            s_m, (dec, tokens, past, done) = self._schedule(m, lag, host[-lag])
            cost = self.p.mixed_s(tokens, dec, past) if tokens else self.p.decode_s(dec, past)
            gpu_end = max(gpu_end, s_m + len(done) * self.k.loop_s_per_prompt) + cost
            for rid in done:
                heapq.heappush(self.running, (m + self.osl - 1, rid, m))
                self.sum_p += m
                self.lasts.setdefault(m + self.osl - 1, []).append(rid)
            lasts = self.lasts.pop(m, [])
            completed += len(lasts)
            produced = dec - wasted + len(done)  # the finished requests riding along make no token
            out = gpu_end + produced * self.k.loop_s_per_token  # the host has handled m's tokens
            if done or lasts or self.k.host_s_per_token:
                self.fe_out.submit(out, produced * self.k.host_s_per_token, "deliver", (done, lasts))
            wasted = len(lasts) if self.k.overlap else 0
            host = [host[-1], out]
            m += 1
        self.advance(math.inf, strict=False)
        return m


def simulate(prices, isl: int, osl: int, clients: int, requests: int, knobs: Knobs,
             warmup: int = 0) -> SimResult:
    """The benchmark's mean TTFT / TPOT / E2E of `requests` requests from `clients` closed-loop clients
    (module doc), after `warmup` unmeasured requests sent first, the measured ones following them
    without a drain. `prices`: decode_s(batch, past), mixed_s(prompt_tokens, decodes, past) and
    first_token_extra_s (a host term of the request's own prefill, TTFT only)."""
    if not knobs.chunked and isl > knobs.max_num_tokens:
        raise ValueError(f"an unchunked prompt of {isl} tokens never fits a step of {knobs.max_num_tokens}")
    sim = _Sim(prices, isl, osl, clients, warmup + requests, knobs)
    iterations = sim.run()
    extra = float(getattr(prices, "first_token_extra_s", 0.0))
    send, first, last = sim.send[warmup:], sim.first[warmup:], sim.last[warmup:]
    ttft = [f - s + extra for f, s in zip(first, send, strict=True)]
    e2e = [e - s for e, s in zip(last, send, strict=True)]
    n = len(ttft)
    mean_ttft, mean_e2e = sum(ttft) / n, sum(e2e) / n
    tpot = (mean_e2e - mean_ttft + extra) / (osl - 1)
    span = max(last) - min(send)
    return SimResult(mean_ttft, tpot, mean_e2e + extra, n / span if span > 0 else 0.0, iterations)
