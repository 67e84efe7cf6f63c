"""Disaggregated serving: x prefill workers and y decode workers (xPyD), each worker a priced Deployment
(estimator/serve/deploy.py) with its own parallelism and batch, composed into one closed loop.

Mechanisms (all step prices are the serving model's: launch.prefill_step / launch.decode_step over the
same priced Steps as aggregated serving; no second model):
- prefill worker: a step of k prompts of isl tokens (k <= max_num_tokens // isl; one prompt in
  n_c = ceil(isl / max_num_tokens) chunks when it is longer than the budget), no decodes riding along.
  A request's service is n_c x T_pre(k); the pool of x workers is one queueing station of demand
  D_p = n_c T_pre(k) / (k x) per request (NB: x servers as one x-fold faster server: exact at
  saturation, it over-counts the wait below it);
- KV transfer: after its prefill every prefill GPU sends its share of the prompt's KV cache
  (isl x its KV bytes per token) to the decode worker; a decode GPU receives its own share. The
  larger of the two is one `send` of the collective model (estimator/pricing/collectives.py) over the
  GPUs the pair spans: NVLink when the xPyD unit fits in the NVLink domain, the network beyond
  (Interconnect.link_bytes_per_s). The first token comes out of the prefill worker, so the transfer
  lies between the first and the second token: it adds to TPOT (t_kv / (osl - 1)), not TTFT;
- decode worker: pure decode steps of B_eff requests at contexts isl .. isl + osl - 2 (CUDA-graphed at
  the padded batch as the framework captures it): TPOT_dec = their mean step;
- rate matching: C clients (default y x B: every decode slot held) cycle through the prefill station,
  the host front end (the framework's host figures, as aggregated serving) and a delay of the rest
  (transfer and decode phase). Exact MVA (estimator/serve/closed_loop.py) gives the throughput X and the
  prefill queue wait; the decode pool then holds B_eff = X (osl - 1) TPOT / y requests per worker on
  average (Little's law), at most B: a fixed point (TPOT depends on B_eff) iterated until its batch
  stops changing. A prefill pool too slow for the decode pool shows as B_eff < B and a busy prefill
  station; a decode pool too slow as TTFT waits at the prefill of nearly nothing and X = y B / cycle.
TTFT = prefill wait + n_c T_pre(k) + the framework's per-layer prefill dispatch; TPOT = TPOT_dec +
t_kv / (osl - 1); E2E = TTFT + (osl - 1) TPOT; tokens/s = X osl, per GPU over x g_p + y g_d (a worker's
GPUs g = tp x attention-DP).
Attention DP in a pool: each of a worker's dp ranks is its own prefill server (k prompts a step) or decode
batch (B requests, its own KV cache), so a pool of w workers is w x dp ranks in the formulas above; the
MoE layers' all-to-all (EP) or all-gather / reduce-scatter (MoE-TP) among the ranks is in each rank's
step price (estimator/serve/parallel.py), over NVLink or the network as the collective model prices a
group of that size (a 16-GPU pool spans two 8-GPU H100 nodes).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import asdict, dataclass, field

import numpy as np

from estimator.pricing.collectives import collective_cost
from estimator.serve.closed_loop import closed_loop, host_demand_s
from estimator.serve.launch import decode_step, prefill_dispatch_s, prefill_step
from estimator.serve.serving import Workload

FIXED_POINT_ROUNDS = 8
MAX_WORKERS = 64  # workers per pool a search enumerates (NB: a larger pool is not searched)


@dataclass(frozen=True)
class Disagg:
    """An xPyD unit: `prefill_workers` x (tp `prefill_tp` x attention-DP `prefill_attention_dp` GPUs,
    `prefill_batch` prompts a step on each attention-DP rank) and `decode_workers` x (tp `decode_tp` x
    attention-DP `decode_attention_dp` GPUs, at most `decode_batch` requests on each rank: aiconfigurator's
    and TensorRT-LLM's per-rank batch). Each pool's MoE split is its expert parallelism `*_ep` (moe-tp =
    tp x attention-DP / ep); the pools reach the serving model as search records (search.pools)."""

    prefill_workers: int = 1
    prefill_tp: int = 1
    prefill_batch: int = 1
    decode_workers: int = 1
    decode_tp: int = 1
    decode_batch: int = 1
    prefill_attention_dp: int = 1
    decode_attention_dp: int = 1
    prefill_ep: int = 1
    decode_ep: int = 1

    @property
    def gpus(self) -> int:
        return (self.prefill_workers * self.prefill_tp * self.prefill_attention_dp
                + self.decode_workers * self.decode_tp * self.decode_attention_dp)

    @property
    def prefill_worker_gpus(self) -> int:
        return self.prefill_tp * self.prefill_attention_dp

    @property
    def decode_worker_gpus(self) -> int:
        return self.decode_tp * self.decode_attention_dp

    @property
    def label(self) -> str:
        def pool(tp, dp, ep, batch):
            split = f"tp{tp}" + (f",adp{dp}" if dp > 1 else "") + (f",ep{ep}" if ep > 1 else "")
            return f"({split},b{batch})"
        pre = pool(self.prefill_tp, self.prefill_attention_dp, self.prefill_ep, self.prefill_batch)
        dec = pool(self.decode_tp, self.decode_attention_dp, self.decode_ep, self.decode_batch)
        return f"{self.prefill_workers}p{pre} {self.decode_workers}d{dec}"


@dataclass
class DisaggResult:
    spec: Disagg
    workload: Workload
    clients: int
    fits: bool
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    tokens_per_s: float
    prefill_s: float = 0.0  # n_c x T_pre(k)
    prefill_wait_s: float = 0.0
    kv_transfer_s: float = 0.0
    kv_transfer_link: str = ""
    decode_batch: float = 0.0  # B_eff, requests per decode worker on average
    prefill_busy: float = 0.0
    kv_headroom_tokens: int = 0  # of one decode worker at the full batch
    kv_bytes_per_token: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.spec.gpus

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s else 0.0

    def to_json(self) -> dict:
        return {"disagg": asdict(self.spec), "clients": self.clients, "fits": self.fits,
                "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s,
                "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "tokens_per_s_per_user": self.tokens_per_s_per_user, "gpus": self.gpus,
                "prefill_s": self.prefill_s, "prefill_wait_s": self.prefill_wait_s,
                "kv_transfer_s": self.kv_transfer_s, "kv_transfer_link": self.kv_transfer_link,
                "decode_batch": self.decode_batch, "prefill_busy": self.prefill_busy,
                "kv_headroom_tokens": self.kv_headroom_tokens, "isl": self.workload.isl,
                "osl": self.workload.osl, "notes": list(self.notes)}


def prefill_shape(fw, isl: int, batch: int) -> tuple[int, int]:
    """(chunks per prompt n_c, prompts per step k) of a prefill worker asked for `batch` prompts a step."""
    budget = int(fw.max_num_tokens)
    n_c = math.ceil(isl / budget)
    return n_c, (1 if n_c > 1 else max(1, min(batch, budget // isl)))


_SENDS: dict = {}  # (descriptor id, bytes, GPUs spanned) -> seconds (a search asks the same send often)


def kv_transfer(pre, dec, spec: Disagg, isl: int) -> tuple[float, str]:
    """Seconds to move one prompt's KV from its prefill worker to its decode worker, and the link."""
    nbytes = isl * max(pre.memory.kv_bytes_per_token, dec.memory.kv_bytes_per_token)
    hw = pre.opts.hw
    span = max(spec.prefill_worker_gpus + spec.decode_worker_gpus, spec.gpus)
    key = (id(hw), hw.path, nbytes, span)
    if key not in _SENDS:
        _SENDS[key] = (float(collective_cost("send", nbytes, span, hw, dtype="bf16").estimate_s), hw)
    ic = hw.interconnect
    link = "nvlink" if ic is not None and ic.on_nvlink(span) else "network"
    return _SENDS[key][0], link


_TPOT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # steps -> {(isl, osl, batch): TPOT}


def decode_tpot(dec, work: Workload, batch: int) -> float:
    """Mean pure-decode step of `batch` requests over the contexts isl .. isl + osl - 2 (remembered per
    priced Steps: a search asks the same batch of many units)."""
    memo = _TPOT.setdefault(dec.steps, {})
    key = (work.isl, work.osl, dec.framework.name, batch)
    if key not in memo:
        pasts = np.arange(work.isl, work.isl + work.osl - 1)
        memo[key] = float(np.mean(decode_step(dec.steps, dec.framework, batch, pasts).step_s))
    return memo[key]


def prefetch(pre, dec, spec: Disagg, work: Workload) -> None:
    """Price, in one pass each, the prefill and decode steps `serve_disagg` asks for."""
    prefetch_many([(pre, dec, spec)], work)


def prefetch_many(units, work: Workload) -> None:
    """`prefetch` of many (prefill Deployment, decode Deployment, Disagg) at once: one pass of the
    pricing core per priced Steps (the fixed point's batches: every captured size up to a unit's
    decode batch, where a padded batch runs, and the batch itself)."""
    pasts = np.arange(work.isl, work.isl + work.osl - 1)
    decode: dict = {}
    prefill: dict = {}
    for pre, dec, spec in units:
        fw = dec.framework
        b = min(spec.decode_batch, int(fw.max_batch_size))
        steps = decode.setdefault(id(dec.steps), (dec.steps, set()))
        steps[1].update(fw.graph_batch(x) or x for x in (*fw.cuda_graph_batch_sizes, b) if x <= b)
        _, k = prefill_shape(pre.framework, work.isl, spec.prefill_batch)
        prefill.setdefault(id(pre.steps), (pre.steps, set()))[1].add((k, work.isl))
    for steps, batches in decode.values():
        steps.prefetch(decode=[(x, pasts) for x in sorted(batches)])
    for steps, asked in prefill.values():
        steps.prefetch(prefill=sorted(asked))


def serve_disagg(pre, dec, spec: Disagg, work: Workload, clients: int | None = None,
                 rounds: int = FIXED_POINT_ROUNDS) -> DisaggResult:
    """The xPyD unit `spec` with prefill Deployment `pre` and decode Deployment `dec` serving `work`
    to `clients` closed-loop clients (default: every decode slot held, decode_workers x decode
    attention-DP x decode_batch)."""
    return serve_disagg_many([(pre, dec, spec)], work, clients, rounds)[0]


def serve_disagg_many(units, work: Workload, clients: int | None = None,
                      rounds: int = FIXED_POINT_ROUNDS) -> list[DisaggResult]:
    """`serve_disagg` of many (prefill Deployment, decode Deployment, Disagg): the units' fixed points run
    side by side, round by round, and the decode batches a round asks are priced in one pass per
    priced Steps (the fixed point asks one batch at a time; one pass of many points costs about what
    one of a single batch does). Each unit's figures are the ones it has alone: the same fixed point
    (`_served`), the steps priced point by point."""
    results: list[DisaggResult | None] = [None] * len(units)
    pending = []
    for i, (pre, dec, spec) in enumerate(units):
        pending.append((i, _served(pre, dec, spec, work, clients, rounds), None))
    while pending:
        asked: dict = {}
        for _, _, ask in pending:
            if ask is not None:
                asked.setdefault(id(ask[0].steps), (ask[0], set()))[1].add(ask[1])
        for dec, batches in asked.values():
            _prefetch_decode(dec, work, batches)
        moved = []
        for i, unit, _ in pending:
            try:
                moved.append((i, unit, next(unit)))
            except StopIteration as done:
                results[i] = done.value
        pending = moved
    return results


def _prefetch_decode(dec, work: Workload, batches) -> None:
    """Have `dec`'s steps price the decode steps `decode_tpot` asks at these batches (padded to the
    captured size a padded batch runs at), in one pass."""
    fw = dec.framework
    pasts = np.arange(work.isl, work.isl + work.osl - 1)
    dec.steps.prefetch(decode=[(x, pasts) for x in sorted({fw.graph_batch(b) or b for b in batches})])


def _served(pre, dec, spec: Disagg, work: Workload, clients: int | None, rounds: int):
    """serve_disagg's model as a generator: it yields (decode Deployment, batch) before each fixed-point
    round asks `decode_tpot` of that batch (the caller may price it first, with other units' asks) and
    returns the DisaggResult."""
    isl, osl = work.isl, work.osl
    # attention DP: every rank of a worker is its own prefill server / decode batch (its own KV cache);
    # a pool of w workers is w x dp such ranks (the MoE layers' collectives are in the ranks' step prices)
    ranks_p = spec.prefill_workers * spec.prefill_attention_dp
    ranks_d = spec.decode_workers * spec.decode_attention_dp
    c = clients or ranks_d * spec.decode_batch
    fw_p, fw_d = pre.framework, dec.framework
    n_c, k = prefill_shape(fw_p, isl, spec.prefill_batch)
    room_p = pre.memory.max_concurrency(isl, 1) if pre.memory.fits(isl, 1) else 0
    room_d = dec.memory.max_concurrency(isl, osl) if dec.memory.fits(isl, osl) else 0
    slots = min(spec.decode_batch, room_d, int(fw_d.max_batch_size))
    if room_p < k or slots < 1:
        where = "prefill" if room_p < k else "decode"
        return DisaggResult(spec, work, c, False, None, None, None, 0.0,
                            notes=[f"does not fit: the {where} worker has no room for its batch's KV cache"])
    notes = []
    if slots < spec.decode_batch:
        notes.append(f"decode batch capped at {slots} by the decode worker's KV capacity")
    c = min(c, ranks_d * slots)
    pre_s = n_c * float(prefill_step(pre.steps, fw_p, k, isl, n_c).step_s)
    demand_p = pre_s / (k * ranks_p)
    t_kv, link = kv_transfer(pre, dec, spec, isl)
    host = host_demand_s(osl, fw_d.host_s_per_request, fw_d.host_output_tokens_per_s)
    batch = float(slots)
    for _ in range(rounds):
        b = max(1, math.ceil(batch))
        yield dec, b
        tpot_dec = decode_tpot(dec, work, b)
        cycle = pre_s + t_kv + (osl - 1) * tpot_dec + host
        loop = closed_loop(c, cycle, {"prefill": demand_p, "host": host})
        new = min(float(slots), loop.throughput_per_s * (osl - 1) * tpot_dec / ranks_d)
        if math.ceil(new) == math.ceil(batch):
            batch = new
            break
        batch = new
    busy = loop.utilisation.get("prefill", 0.0)
    if busy > 0.9:
        notes.append(f"prefill-bound: the prefill pool is {busy:.0%} busy "
                     f"(decode batch {batch:.1f} of {slots})")
    ttft = loop.waits_s.get("prefill", 0.0) + loop.waits_s.get("host", 0.0) + pre_s + prefill_dispatch_s(
        pre.steps, fw_p)
    tpot = tpot_dec + t_kv / (osl - 1)
    e2e = ttft + (osl - 1) * tpot
    headroom = dec.memory.kv_capacity_tokens - slots * dec.memory.tokens_per_sequence(isl, osl)
    return DisaggResult(spec, work, c, True, ttft, tpot, e2e, loop.throughput_per_s * osl, pre_s,
                        loop.waits_s.get("prefill", 0.0), t_kv, link, batch, busy, headroom,
                        dec.memory.kv_bytes_per_token, notes)


def units(gpus: int, pools, batches=(1,), prefill_batches=(1,)) -> list[Disagg]:
    """Every xPyD unit of exactly `gpus` GPUs whose prefill and decode workers are each one of `pools`
    (ints: attention TP alone; or search records with tp, attention_dp, ep), x, y >= 1, with each
    decode batch of `batches` and each prefill batch of `prefill_batches` (per attention-DP rank)."""
    lays = [(p, 1, 1) if isinstance(p, int) else (p.tp, p.attention_dp, p.ep) for p in pools]
    out = []
    for tp_p, dp_p, ep_p in lays:
        for tp_d, dp_d, ep_d in lays:
            g_p, g_d = tp_p * dp_p, tp_d * dp_d
            for x in range(1, min(gpus // g_p, MAX_WORKERS) + 1):
                rest = gpus - x * g_p
                if rest < g_d or rest % g_d or rest // g_d > MAX_WORKERS:
                    continue
                y = rest // g_d
                out.extend(Disagg(x, tp_p, k, y, tp_d, b, dp_p, dp_d, ep_p, ep_d)
                           for k in prefill_batches for b in batches)
    return out
