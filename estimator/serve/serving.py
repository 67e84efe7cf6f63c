"""Serving metrics from one GPU's priced steps (estimator/serve/steps.py): TTFT, TPOT, E2E, tokens/s.

Definitions (printed with the output):
  TTFT  = arrival of a request -> its first output token (the end of its prefill step);
  TPOT  = (E2E - TTFT) / (osl - 1): the mean time per output token after the first;
  E2E   = arrival -> last output token;  tokens/s = output tokens per second of the deployment;
  tokens/s/GPU = tokens/s / (tp x pp);  tokens/s/user = 1 / TPOT.
A closed loop of C clients, each sending a request of isl prompt tokens and osl output tokens as soon
as its previous one finished (the benchmark the measured tables use).

Admission: W = min(C, the framework's max batch, the sequences the KV cache holds). Requests beyond W
queue for a slot: by Little's law each waits (C/W - 1) cycles on average (TTFT grows, as on a real
server past its KV capacity).

Step times (launch and scheduling terms apart, estimator/serve/launch.py):
  prefill step: k whole prompts (k_max = max(1, min(W, (max_num_tokens - (W - 1)) // isl)): the running
    decodes take one token of the step's budget each; static batching gives the prompts all of it);
    with arrivals spread over the cycle (admission_wait half_step: vLLM, SGLang) a prefill step holds the
    arrivals of one step, ceil(W / (osl - 1 + n_c)), at least 1 and at most k_max; in phase (overlap_step:
    TensorRT-LLM, see below) the k_max prompts the benchmark's start packed into a step finish together
    and come back together: k = k_max;
    a prompt longer than max_num_tokens takes n_c = ceil(isl / max_num_tokens) chunk steps (chunked
    prefill), each priced as E_pre(1, isl) / n_c;  T_pre = E_pre(k, isl) (eager);
  mixed step (in-flight batching): a prefill step in which the W - k decoding requests also advance:
    T_mix = T_pre + E_ctx(W - k, isl + osl/2)  (NB: their non-attention work rides in the prefill's
    GEMMs, whose cost is dominated by the k x isl prompt tokens, and is not added);
  decode step at past p: E_dec(B, p) at the batch B the framework runs (padded to a captured CUDA-graph
    size when graphed), summed exactly over the osl - 1 steps, past = isl .. isl + osl - 2.
In-flight batching (the frameworks' default): the W requests form g = ceil(W / k) prefill groups that
stay staggered (equal lengths finish together and re-enter together). During its osl - 1 decode steps
a request sees the other groups' prefills as m = min((g - 1) n_c, osl - 1) mixed steps; the rest are
plain decode steps. A cycle lasts S = max(osl - 1 + n_c, g n_c) steps; a request waits the
S - (osl - 1 + n_c) steps its lifetime does not cover (the token budget's queue), plus the wait for the
step that takes it in (frameworks.yaml `admission_wait`, documented engine rules): half a step to the
next boundary (vLLM, SGLang: the scheduler forms every step from the running and the waiting requests,
arrivals spread over the cycle), or, under TensorRT-LLM's overlap scheduler, the two steps before its own
(step n + 1 is scheduled and launched before step n's responses go out: "one extra decoding step", so a
request sent on its predecessor's last token misses the step already scheduled); the closed loop keeps
the benchmark's start in phase (equal requests prefilled on consecutive steps finish and return on
consecutive steps), so those two steps are the other requests' mixed steps (join_wait).
  TTFT = the sum of the terms of TTFT_TERMS: the KV queue, the token budget's queue, the wait to join, the
  closed-loop waits below, the prefill itself (n_c T_mix), the framework's per-layer prefill dispatch
  (launch.py) and the benchmark's first-round burst; each is in the result (`ttft_terms`);
  E2E = TTFT + sum of its osl - 1 step times.
Closed-loop queues (estimator/serve/closed_loop.py, exact mean value analysis over the W clients):
the prefill slot (a request holds n_c T_mix / k_max of the mixed steps; in flight only) and the host
front end (host_s_per_request + osl / host_output_tokens_per_s, fitted per framework) are stations a
request may queue at before its prefill; their waits add to TTFT and E2E (not TPOT), and the
throughput follows from the longer cycle.
Prefill-first scheduler (frameworks.yaml `scheduler: prefill_first`, SGLang): prefill and decode never
share a step, and the W requests run in lock-step waves (estimator/serve/waves.py: the wave's prefill
E_pre(W, isl) in chunks of max_num_tokens with the decodes stalled, then W decodes together): no mixed
steps, no prefill slot queue; a benchmark's first round, all W prompts at once, is a wave too.
Static batching: the W requests are prefilled together (g plain prefill steps, no decode riding
along), then decode together; TTFT is the mean over groups of the prefill time up to its group.
A benchmark of R rounds (`rounds=R`: R requests per client, the clients starting together on an idle
server) reports TTFT and E2E averaged with its first round, a burst of W prompts queued for the prefill
steps (estimator/serve/burst.py); without `rounds`, the steady state alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from estimator.errors import UserError
from estimator.serve.burst import benchmark_mean, burst_ttft_s
from estimator.serve.closed_loop import closed_loop, host_demand_s
from estimator.serve.frameworks import Framework
from estimator.serve.launch import StepCost, decode_step, prefill_dispatch_s, prefill_step
from estimator.serve.memory import Memory
from estimator.serve.steps import Steps
from estimator.serve.waves import priced_wave

KEYS = ("isl", "osl", "concurrency")
OPTIONAL_KEYS = ("rounds",)  # requests per client of a benchmark run (estimator/serve/burst.py)
BUSY_NOTE = 0.9  # a closed-loop station busier than this is named in the notes
STATION_NAMES = {"prefill": "slot (whole prompts per step)", "host": "front end"}
# The terms TTFT is the sum of (ServeResult.ttft_terms, printed by --serve and in its JSON `ttft_terms_s`),
# in the order a request meets them.
TTFT_TERMS = {
    "kv_queue_s": "queue for admission: requests beyond the admitted W (KV capacity, max batch) wait "
                  "(C / W - 1) cycles",
    "budget_queue_s": "queue for the step's token budget: prefill groups beyond what a request's own steps "
                      "cover (max_num_tokens)",
    "join_s": "wait for the step that takes the request in (half a step; TensorRT-LLM's overlap "
              "scheduler: one more)",
    "slot_queue_s": "closed-loop queue for the prefill slot (whole prompts per step)",
    "host_queue_s": "closed-loop queue at the front end (host work per request and output token)",
    "prefill_s": "the prefill itself: its chunk steps with the running decodes riding (in flight), "
                 "the wave's prefill (prefill-first) or the batch's (static)",
    "dispatch_s": "the framework's per-layer prefill dispatch (launch.py)",
    "burst_s": "the benchmark's start: the first round's burst of W prompts, its excess weighted 1 / R "
               "(rounds=R, burst.py)",
}
# admission_wait (frameworks.yaml) -> the steps a request waits before the step that takes it in:
# half_step (vLLM, SGLang): arrivals spread over the cycle meet a step half done on average;
# overlap_step (TensorRT-LLM's overlap scheduler, the PyExecutor loop: schedule and launch step n + 1, then
# wait for step n and send its responses): the previous request's last token goes out at the end of its
# step n, the next request arrives during step n + 1, already scheduled with n + 2 before it came, so it
# joins step n + 3: it waits the two steps before its own, which in phase (join_wait) are other
# requests' prefill steps
JOIN_STEPS = {"half_step": 0.5, "overlap_step": 2.0}


class ServeError(UserError):
    pass


@dataclass(frozen=True)
class Workload:
    isl: int
    osl: int
    concurrency: int
    batching: str = "inflight"  # or "static"
    rounds: int | None = None  # requests per client of the benchmark run; None: the steady state


def parse_workload(text: str, batching: str = "inflight") -> Workload:
    """`isl=I,osl=O,concurrency=C[,rounds=R]` -> Workload; one ServeError naming the problem otherwise."""
    values: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS + OPTIONAL_KEYS:
            raise ServeError(f"--serve {text!r}: expected isl=I,osl=O,concurrency=C[,rounds=R], got {item!r}")
        try:
            values[key] = int(value)
        except ValueError:
            raise ServeError(f"--serve {key}={value!r}: must be an integer") from None
    missing = [k for k in KEYS if k not in values]
    if missing:
        raise ServeError(f"--serve {text!r}: missing key {missing[0]} (give isl=I,osl=O,concurrency=C)")
    if values["isl"] < 1 or values["osl"] < 2 or values["concurrency"] < 1 or values.get("rounds", 1) < 1:
        raise ServeError(f"--serve {text!r}: need isl >= 1, osl >= 2, concurrency >= 1 and rounds >= 1")
    if batching not in ("inflight", "static"):
        raise ServeError(f"--batching {batching!r}: choose inflight or static")
    return Workload(values["isl"], values["osl"], values["concurrency"], batching, values.get("rounds"))


@dataclass
class ServeResult:
    workload: Workload
    framework: str
    gpus: int
    admitted: int
    kv_capacity_tokens: int
    fits: bool
    ttft_s: float | None  # None where the deployment does not fit (a finding, not a number)
    tpot_s: float | None
    e2e_s: float | None
    tokens_per_s: float
    memory: Memory
    queue_s: float = 0.0
    prefill: StepCost | None = None
    decode: StepCost | None = None  # the decode step at the mean context, with its launch terms
    notes: list[str] = field(default_factory=list)
    scheduler: str = "inflight"  # the framework's (frameworks.yaml), "static" under static batching
    ttft_terms: dict[str, float] = field(default_factory=dict)  # TTFT_TERMS -> seconds; they sum to TTFT
    smallest_fit: dict | None = None  # where it does not fit: the smallest deployment that does (caller's)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float | None:
        if self.tpot_s is None:
            return None
        return 1.0 / self.tpot_s if self.tpot_s > 0 else 0.0

    @property
    def kv_headroom_tokens(self) -> int:
        return self.kv_capacity_tokens - self.admitted * self.memory.tokens_per_sequence(
            self.workload.isl, self.workload.osl)

    def to_json(self) -> dict:
        mem = self.memory.to_json()
        out = {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
               "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
               "tokens_per_s_per_user": self.tokens_per_s_per_user, "admitted_concurrency": self.admitted,
               "kv_capacity_tokens": self.kv_capacity_tokens, "kv_headroom_tokens": self.kv_headroom_tokens,
               "fits": self.fits, "memory_per_gpu_bytes": mem, "queue_s": self.queue_s,
               "framework": self.framework, "gpus": self.gpus, "batching": self.workload.batching,
               "isl": self.workload.isl, "osl": self.workload.osl,
               "concurrency": self.workload.concurrency, "notes": list(self.notes),
               "ttft_terms_s": dict(self.ttft_terms) if self.fits else None}
        if not self.fits:
            out["smallest_fit"] = self.smallest_fit
        for name, step in (("prefill_step", self.prefill), ("decode_step", self.decode)):
            if step is not None:
                out[name] = step.to_json()
        return out


def admitted(work: Workload, fw: Framework, memory: Memory) -> int:
    return max(0, min(work.concurrency, int(fw.max_batch_size), memory.max_concurrency(work.isl, work.osl)))


def prompts_per_step(budget: int, w: int, isl: int, batching: str) -> int:
    """k_max: the whole prompts one step admits. Static batching gives the prompts the whole budget;
    in flight the W - 1 running decodes take one token of it each (TensorRT-LLM and vLLM count a
    generation request as one token of max_num_tokens), and at least one prompt always goes in."""
    room = budget - (w - 1) if batching == "inflight" else budget
    return max(1, min(w, room // isl))


def _prefill_shape(work: Workload, fw: Framework, w: int) -> tuple[int, int, int]:
    """(chunk steps per prompt n_c, whole prompts a step admits k_max, prompts per prefill step k) of
    `work` with `w` requests admitted."""
    budget = int(fw.max_num_tokens)
    n_c = math.ceil(work.isl / budget)
    k_max = 1 if n_c > 1 else prompts_per_step(budget, w, work.isl, work.batching)
    k = k_max
    if work.batching == "inflight" and fw.admission_wait == "half_step":
        # requests arrive spread out and join at the next step: a prefill step holds the arrivals of
        # one step, W / (osl - 1 + n_c) on average (at least one prompt)
        k = min(k, max(1, math.ceil(w / (work.osl - 1 + n_c))))
    return n_c, k_max, k


def prefetch(steps: Steps, memory: Memory, fw: Framework, works: Sequence[Workload]) -> None:
    """Have `steps` price, in one pass, every decode and prefill step that `serve` will ask for these
    workloads (the same batches and contexts serve() asks: see there)."""
    decode, prefill = [], []
    for work in works:
        w = admitted(work, fw, memory)
        if not memory.fits(work.isl, work.osl) or w == 0:
            continue
        n_c, k_max, k = _prefill_shape(work, fw, w)
        batch = fw.graph_batch(w) or w
        decode += [(batch, np.arange(work.isl, work.isl + work.osl - 1)), (batch, [work.isl + work.osl // 2])]
        if work.batching != "static" and w > k:
            decode.append((w - k, [work.isl + work.osl // 2]))
        prefill.append((k, work.isl))
        if work.batching != "static" and fw.scheduler == "prefill_first":
            prefill.append((w, work.isl))  # the wave's prefill (estimator/serve/waves.py)
        if work.rounds and work.batching != "static" and k_max != k:
            prefill.append((k_max, work.isl))  # the first round's burst (estimator/serve/burst.py)
    if hasattr(steps, "prefetch"):
        steps.prefetch(decode=decode, prefill=prefill)


def serve(steps: Steps, memory: Memory, fw: Framework, work: Workload, gpus: int) -> ServeResult:
    """The serving metrics of `work` on one tp-group whose GPU priced `steps`; TTFT is the sum of its
    terms (TTFT_TERMS, each in the result's `ttft_terms`)."""
    w = admitted(work, fw, memory)
    if not memory.fits(work.isl, work.osl) or w == 0:
        return ServeResult(work, fw.name, gpus, 0, memory.kv_capacity_tokens, False, None, None, None, 0.0,
                           memory, notes=["no room for one sequence's KV cache"])
    isl, osl = work.isl, work.osl
    terms = dict.fromkeys(TTFT_TERMS, 0.0)
    n_c, k_max, k = _prefill_shape(work, fw, w)
    groups = math.ceil(w / k)
    pre = prefill_step(steps, fw, k, isl, n_c)
    pasts = np.arange(isl, isl + osl - 1)
    dec_steps = decode_step(steps, fw, w, pasts)
    mean_dec = decode_step(steps, fw, w, np.array([isl + osl // 2]))
    terms["dispatch_s"] = prefill_dispatch_s(steps, fw)
    notes: list[str] = []
    if work.batching == "static":
        group_end = np.cumsum([pre.step_s * n_c] * groups)
        terms["prefill_s"] = float(group_end.mean())
        prefill_all = float(group_end[-1])
        decode_total = float(dec_steps.step_s.sum())
        e2e = prefill_all + decode_total
        tpot = (e2e - sum(terms.values())) / (osl - 1)
        prefill_slot_s = 0.0
        first_ttft = None
    elif fw.scheduler == "prefill_first":  # lock-step waves (estimator/serve/waves.py)
        pre, wave = priced_wave(steps, fw, w, isl, float(dec_steps.step_s.sum()), osl)
        terms["prefill_s"], tpot = wave.ttft_s, wave.tpot_s
        e2e = wave.e2e_s + terms["dispatch_s"]
        prefill_slot_s = 0.0
        first_ttft = None  # a benchmark's first round, all W prompts together, is a wave too
        notes.append(f"prefill-first waves: the {w} prompts in {wave.chunks} step{'s' * (wave.chunks > 1)} "
                     f"of up to {int(fw.max_num_tokens)} tokens, decodes stalled (prefill step: the first)")
    else:
        ride = float(steps.decode_context(max(w - k, 0), isl + osl // 2)) if w > k else 0.0
        t_mix = pre.step_s + ride
        mixed = min((groups - 1) * n_c, osl - 1)
        # the mixed steps stand in for that many plain decode steps, spread over the decode phase
        decode_total = float(dec_steps.step_s.sum()) * (osl - 1 - mixed) / (osl - 1) + mixed * t_mix
        tpot = decode_total / (osl - 1)
        s_steps = max(osl - 1 + n_c, groups * n_c)
        avg_step = (decode_total + n_c * t_mix) / (osl - 1 + n_c)
        terms["budget_queue_s"] = (s_steps - (osl - 1 + n_c)) * avg_step
        if fw.admission_wait == "overlap_step":  # in phase: the steps before its own are the mixed ones
            plain = float(np.mean(dec_steps.step_s))
            terms["join_s"] = join_wait(JOIN_STEPS["overlap_step"], w, k, n_c, t_mix, plain)
        else:  # arrivals spread over the cycle: half an average step to the next boundary
            terms["join_s"] = JOIN_STEPS[fw.admission_wait] * avg_step
        terms["prefill_s"] = n_c * t_mix
        e2e = sum(terms.values()) + decode_total
        prefill_slot_s = n_c * t_mix / k_max  # a request's share of the mixed steps its prompt rides in
        first_ttft = _burst_ttft(steps, fw, work, w, (n_c, k_max, k), pre, ride)
    loop = _loop(w, e2e, prefill_slot_s, work, fw)
    for station, busy in loop.utilisation.items():
        if busy > BUSY_NOTE:
            notes.append(f"{station}-bound: the {station} {STATION_NAMES[station]} is {busy:.0%} busy")
    terms["slot_queue_s"] = loop.waits_s.get("prefill", 0.0)
    terms["host_queue_s"] = loop.waits_s.get("host", 0.0)
    e2e += loop.wait_s
    cycle = e2e  # the steady state's: tokens/s and the KV queue are the steady state's
    if first_ttft is not None and work.rounds:
        steady = sum(terms.values())
        terms["burst_s"] = benchmark_mean(steady, first_ttft, work.rounds) - steady
        e2e += terms["burst_s"]
        notes.append(f"TTFT, E2E: the mean over {work.rounds} rounds; the first, a burst of {w} prompts, "
                     f"has a mean TTFT of {first_ttft * 1e3:.0f} ms")
    terms["kv_queue_s"] = (work.concurrency / w - 1.0) * cycle if work.concurrency > w else 0.0
    if work.concurrency > w:
        notes.append(f"{work.concurrency - w} of {work.concurrency} requests queue (admitted {w})")
    ttft = sum(terms.values())
    queued = ttft - terms["prefill_s"] - terms["dispatch_s"]
    tokens_per_s = w * osl / cycle
    return ServeResult(work, fw.name, gpus, w, memory.kv_capacity_tokens, True, ttft, tpot,
                       e2e + terms["kv_queue_s"], tokens_per_s, memory, queued, pre, mean_dec.first(), notes,
                       "static" if work.batching == "static" else fw.scheduler, terms)


def join_wait(steps_before: float, w: int, k: int, n_c: int, t_mix: float, t_plain: float) -> float:
    """The mean over the `w` requests of the wait for the step that takes a request in: the
    `steps_before` steps (a fraction allowed) just before its own prefill step. The closed loop keeps the
    benchmark's start in phase: the g = ceil(w / k) prefill groups of k prompts (the last one the rest)
    run back to back, n_c chunk steps each, finish on consecutive steps and come back on consecutive
    steps, so the steps before group j's prefill are the mixed steps of the groups before it,
    min(j n_c, d) of them (`t_mix` each), and plain decode steps for the rest (`t_plain`)."""
    d = float(steps_before)
    groups = -(-w // k)
    sizes = [k] * (groups - 1) + [w - k * (groups - 1)]
    mixed = sum(size * min(j * n_c, d) for j, size in enumerate(sizes)) / w
    return mixed * t_mix + (d - mixed) * t_plain


def _burst_ttft(steps: Steps, fw: Framework, work: Workload, w: int, shape: tuple[int, int, int],
                pre: StepCost, ride: float) -> float:
    """The first round's mean TTFT (estimator/serve/burst.py): all W prompts waiting, k_max a step."""
    n_c, k_max, k = shape
    pre_b = pre if k_max == k else prefill_step(steps, fw, k_max, work.isl, n_c)
    first = burst_ttft_s(w, k_max, n_c, float(pre_b.step_s), ride, max(w - k, 0))
    return first + prefill_dispatch_s(steps, fw)


def _loop(w: int, e2e: float, prefill_slot_s: float, work: Workload, fw: Framework):
    """The closed-loop waits (estimator/serve/closed_loop.py) of `w` clients cycling in `e2e`."""
    host = host_demand_s(work.osl, fw.host_s_per_request, fw.host_output_tokens_per_s)
    return closed_loop(w, e2e, {"prefill": prefill_slot_s, "host": host})
