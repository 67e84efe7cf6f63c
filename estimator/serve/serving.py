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
  prefill step: k prompts packed up to max_num_tokens (k = max(1, min(W, max_num_tokens // isl)));
    where requests join at every step (vLLM, SGLang) k is the arrivals of one step, at most
    ceil(W / (osl - 1 + n_c)), at least 1;
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
S - (osl - 1 + n_c) steps its lifetime does not cover, plus the wait to join: half a step (vLLM,
SGLang: new requests join at every step) or, for TensorRT-LLM, the mean interval between departures of
the other W - 1 requests, (own prefill + decode phase) / W x (W - 1) / W (fitted shape, frameworks.yaml
`admission_wait`).
  TTFT = wait + n_c T_mix (+ the framework's per-layer prefill dispatch, launch.py);
  E2E = TTFT + sum of its osl - 1 step times.
Host limit (TensorRT-LLM, fitted): the server's host handles at most R output tokens/s (detokenising
and streaming); at utilisation rho = tokens/s / R the TTFT gains host_queue_s x rho / (1 - rho) (an
M/M/1 wait, rho capped at 0.95), and past rho = 1 the host paces the decode (TPOT x rho).
Static batching: the W requests are prefilled together (g plain prefill steps, no decode riding
along), then decode together; TTFT is the mean over groups of the prefill time up to its group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from estimator.errors import UserError
from estimator.serve.frameworks import Framework
from estimator.serve.launch import StepCost, decode_step, prefill_dispatch_s, prefill_step
from estimator.serve.memory import Memory
from estimator.serve.steps import Steps

KEYS = ("isl", "osl", "concurrency")
HOST_RHO_CAP = 0.95  # the host queue's utilisation is capped: past it the host paces the decode instead


class ServeError(UserError):
    pass


@dataclass(frozen=True)
class Workload:
    isl: int
    osl: int
    concurrency: int
    batching: str = "inflight"  # or "static"


def parse_workload(text: str, batching: str = "inflight") -> Workload:
    """`isl=I,osl=O,concurrency=C` -> Workload; one ServeError naming the problem otherwise."""
    values: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS:
            raise ServeError(f"--serve {text!r}: expected isl=I,osl=O,concurrency=C, got {item!r}")
        try:
            values[key] = int(value)
        except ValueError:
            raise ServeError(f"--serve {key}={value!r}: must be an integer") from None
    missing = [k for k in KEYS if k not in values]
    if missing:
        raise ServeError(f"--serve {text!r}: missing key {missing[0]} (give isl=I,osl=O,concurrency=C)")
    if values["isl"] < 1 or values["osl"] < 2 or values["concurrency"] < 1:
        raise ServeError(f"--serve {text!r}: need isl >= 1, osl >= 2 and concurrency >= 1")
    if batching not in ("inflight", "static"):
        raise ServeError(f"--batching {batching!r}: choose inflight or static")
    return Workload(values["isl"], values["osl"], values["concurrency"], batching)


@dataclass
class ServeResult:
    workload: Workload
    framework: str
    gpus: int
    admitted: int
    kv_capacity_tokens: int
    fits: bool
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tokens_per_s: float
    memory: Memory
    queue_s: float = 0.0
    prefill: StepCost | None = None
    decode: StepCost | None = None  # the decode step at the mean context, with its launch terms
    notes: list[str] = field(default_factory=list)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
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
               "concurrency": self.workload.concurrency, "notes": list(self.notes)}
        for name, step in (("prefill_step", self.prefill), ("decode_step", self.decode)):
            if step is not None:
                out[name] = step.to_json()
        return out


def admitted(work: Workload, fw: Framework, memory: Memory) -> int:
    return max(0, min(work.concurrency, int(fw.max_batch_size), memory.max_concurrency(work.isl, work.osl)))


def _prefill_shape(work: Workload, fw: Framework, w: int) -> tuple[int, int]:
    """(chunk steps per prompt n_c, prompts per prefill step k) of `work` with `w` requests admitted."""
    budget = int(fw.max_num_tokens)
    n_c = math.ceil(work.isl / budget)
    k = 1 if n_c > 1 else max(1, min(w, budget // work.isl))
    if work.batching == "inflight" and fw.admission_wait == "half_step":
        # requests arrive spread out and join at the next step: a prefill step holds the arrivals of
        # one step, W / (osl - 1 + n_c) on average (at least one prompt)
        k = min(k, max(1, math.ceil(w / (work.osl - 1 + n_c))))
    return n_c, k


def prefetch(steps: Steps, memory: Memory, fw: Framework, works: Sequence[Workload]) -> None:
    """Have `steps` price, in one pass, every decode and prefill step that `serve` will ask for these
    workloads (the same batches and contexts serve() asks: see there)."""
    decode, prefill = [], []
    for work in works:
        w = admitted(work, fw, memory)
        if not memory.fits(work.isl, work.osl) or w == 0:
            continue
        n_c, k = _prefill_shape(work, fw, w)
        batch = fw.graph_batch(w) or w
        decode += [(batch, np.arange(work.isl, work.isl + work.osl - 1)), (batch, [work.isl + work.osl // 2])]
        if work.batching != "static" and w > k:
            decode.append((w - k, [work.isl + work.osl // 2]))
        prefill.append((k, work.isl))
    if hasattr(steps, "prefetch"):
        steps.prefetch(decode=decode, prefill=prefill)


def serve(steps: Steps, memory: Memory, fw: Framework, work: Workload, gpus: int) -> ServeResult:
    """The serving metrics of `work` on one tp-group whose GPU priced `steps`."""
    w = admitted(work, fw, memory)
    if not memory.fits(work.isl, work.osl) or w == 0:
        nan = float("nan")
        return ServeResult(work, fw.name, gpus, 0, memory.kv_capacity_tokens, False, nan, nan, nan, 0.0,
                           memory, notes=["does not fit: no room for one sequence's KV cache"])
    isl, osl = work.isl, work.osl
    n_c, k = _prefill_shape(work, fw, w)
    groups = math.ceil(w / k)
    pre = prefill_step(steps, fw, k, isl, n_c)
    pasts = np.arange(isl, isl + osl - 1)
    dec_steps = decode_step(steps, fw, w, pasts)
    mean_dec = decode_step(steps, fw, w, np.array([isl + osl // 2]))
    if work.batching == "static":
        group_end = np.cumsum([pre.step_s * n_c] * groups)
        ttft = float(group_end.mean()) + prefill_dispatch_s(steps, fw)
        prefill_all = float(group_end[-1])
        decode_total = float(dec_steps.step_s.sum())
        e2e = prefill_all + decode_total
        tpot = (e2e - ttft) / (osl - 1)
        cycle, queue_in = e2e, 0.0
    else:
        ride = float(steps.decode_context(max(w - k, 0), isl + osl // 2)) if w > k else 0.0
        t_mix = pre.step_s + ride
        mixed = min((groups - 1) * n_c, osl - 1)
        gen = dec_steps.step_s
        # the mixed steps stand in for that many plain decode steps, spread over the decode phase
        decode_total = float(gen.sum()) * (osl - 1 - mixed) / (osl - 1) + mixed * t_mix
        tpot = decode_total / (osl - 1)
        s_steps = max(osl - 1 + n_c, groups * n_c)
        avg_step = (decode_total + n_c * t_mix) / (osl - 1 + n_c)
        lifetime = decode_total + n_c * t_mix
        # departure_interval: the mean interval between departures of the other W - 1 requests, (W - 1) / W
        # of lifetime / W (a lone client's next request starts as its previous one ends: no wait)
        join = lifetime / w * (w - 1) / w if fw.admission_wait == "departure_interval" else 0.5 * avg_step
        queue_in = (s_steps - (osl - 1 + n_c)) * avg_step + join
        ttft = queue_in + n_c * t_mix + prefill_dispatch_s(steps, fw)
        e2e = ttft + decode_total
        cycle = e2e
    notes = []
    host = fw.host_output_tokens_per_s
    if host:  # the host's output-token rate (serving.md 4: TTFT blows up near it)
        rho = w * osl / cycle / float(host)
        if rho > 1.0:  # the host paces the decode
            tpot, cycle, e2e = tpot * rho, cycle * rho, ttft + (e2e - ttft) * rho
            notes.append(f"host-bound: output tokens limited to {host:,.0f}/s")
        rho_q = min(rho, HOST_RHO_CAP)
        host_wait = float(fw.host_queue_s) * rho_q / (1.0 - rho_q)
        ttft, e2e, queue_in = ttft + host_wait, e2e + host_wait, queue_in + host_wait
    queue = (work.concurrency / w - 1.0) * cycle if work.concurrency > w else 0.0
    if work.concurrency > w:
        notes.append(f"{work.concurrency - w} of {work.concurrency} requests queue (admitted {w})")
    tokens_per_s = w * osl / cycle
    return ServeResult(work, fw.name, gpus, w, memory.kv_capacity_tokens, True, ttft + queue, tpot,
                       e2e + queue, tokens_per_s, memory, queue + queue_in, pre, mean_dec.first(), notes)
