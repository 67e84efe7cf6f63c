"""Deployment search: every deployment of a model on N GPUs of one kind, priced by the serving model,
filtered by an SLA and ranked by tokens/s per GPU.

A deployment is a frozen record (`Deployment` below: tp, pp, attention-DP, MoE-TP, EP, concurrency
per replica; the parallel sizes default to 1). `options_of(record, base)` is the one place a record
becomes the serving model's call (estimator/serve/steps.Options, then estimator/serve/deploy.Deployment):
its split goes through estimator/serve/parallel.Parallelism.

Enumeration (aggregated): for each layout of `layouts` (attention TP, attention DP, EP / MoE-TP) that
divides the GPU budget and that the model takes (a layout the serving model refuses is skipped, with its
reason kept), the model is priced once
(Deployment.build, layer-folded) and every concurrency of `CONCURRENCIES` (up to the KV capacity) is
served from the same priced steps (serving.serve). The N / (tp x pp) replicas are independent copies:
tokens/s per GPU and per user are one replica's; the engine settings are one replica's. Disaggregated
deployments (estimator/serve/disagg.py) re-use the same priced Deployments as prefill and decode
workers. A deployment is kept when it fits, and its TTFT and TPOT meet the SLA.
Engine settings printed (TensorRT-LLM names): tp_size, pp_size, ep_size, max_batch_size (the
admitted concurrency of a replica), max_num_tokens (the framework's step budget the step prices were
formed with) and the KV fraction (the framework's kv_memory_fraction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from estimator.errors import UserError
from estimator.serve import deploy
from estimator.serve.parallel import Parallelism
from estimator.serve.serving import ServeResult, Workload
from estimator.serve.steps import Options

CONCURRENCIES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # per decode worker, disaggregated
UNITS = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
MAX_GPUS = 512  # a budget beyond is many copies of a smaller one: search that one


class SearchError(UserError):
    pass


@dataclass(frozen=True)
class Sla:
    ttft_s: float | None = None
    tpot_s: float | None = None

    def met(self, ttft_s: float, tpot_s: float) -> bool:
        ttft_ok = self.ttft_s is None or ttft_s <= self.ttft_s
        return ttft_ok and (self.tpot_s is None or tpot_s <= self.tpot_s)

    def text(self) -> str:
        parts = [f"{k} <= {v * 1e3:g} ms" for k, v in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s)) if v]
        return ", ".join(parts) or "none"


def parse_seconds(text: str, where: str) -> float:
    t = text.strip()
    for unit in ("ms", "us", "s"):
        if t.endswith(unit):
            number, scale = t[: -len(unit)], UNITS[unit]
            break
    else:
        number, scale = t, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise SearchError(f"{where}: {text!r} is not a time (e.g. 500ms, 1s)") from None
    if not math.isfinite(value) or value <= 0:
        raise SearchError(f"{where}: {text!r} must be a positive time")
    return value


def parse_sla(text: str | None) -> Sla:
    """`ttft=500ms,tpot=20ms` (either may be left out)."""
    if not text:
        return Sla()
    values: dict[str, float] = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        if not sep or key not in ("ttft", "tpot"):
            raise SearchError(f"--sla {text!r}: expected ttft=T,tpot=T, got {item!r}")
        values[key] = parse_seconds(value, f"--sla {key}")
    return Sla(values.get("ttft"), values.get("tpot"))


def parse_budget(text: str) -> int:
    """`gpus=N` -> N."""
    key, sep, value = text.partition("=")
    if key.strip() != "gpus" or not sep:
        raise SearchError(f"--search {text!r}: expected gpus=N")
    try:
        n = int(value)
    except ValueError:
        raise SearchError(f"--search {text!r}: N must be an integer") from None
    if n < 1 or n > MAX_GPUS:
        raise SearchError(f"--search {text!r}: N must be between 1 and {MAX_GPUS}")
    return n


@dataclass(frozen=True)
class Deployment:
    """One aggregated deployment of one replica: its parallel sizes and its concurrency."""

    tp: int = 1
    pp: int = 1
    attention_dp: int = 1
    moe_tp: int = 1
    ep: int = 1
    concurrency: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp * self.pp

    @property
    def layout(self) -> Deployment:
        """The parallel part alone (what one priced Deployment serves at every concurrency)."""
        return replace(self, concurrency=1)

    @property
    def label(self) -> str:
        more = (("pp", self.pp), ("adp", self.attention_dp), ("moe-tp", self.moe_tp), ("ep", self.ep))
        return " ".join([f"tp {self.tp}"] + [f"{name} {v}" for name, v in more if v > 1])


def layouts(gpus: int) -> list[Deployment]:
    """The parallel layouts of one replica that a budget of `gpus` holds (tp x attention_dp a power of two
    up to the budget), in TensorRT-LLM's vocabulary:
    - attention TP t with the MoE layers at MoE-TP t (ep 1), and with expert parallelism t (moe-tp 1);
    - attention DP a (tp 1) with expert parallelism a (the wide-EP deployment: the dispatch / combine
      all-to-all) and with the MoE layers at MoE-TP a behind an all-gather / reduce-scatter (ep 1).
    These are the two ends of moe_tp x ep = tp x attention_dp, the splits the serving frameworks' own
    recipes use (TensorRT-LLM's DeepSeek guide: TP 8 / EP 8 and attention-DP 8 / EP 8). A layout the
    model refuses (a dense model with ep or attention DP > 1, a size that does not divide the experts,
    attention DP with tp > 1 inside a replica) is refused by the serving model at `Priced.at`, its reason
    kept; pp > 1 is not enumerated (`--serve` does not price pipeline stages)."""
    out = []
    for t in tp_sizes(gpus):
        out.append(record(t))
        if t > 1:
            out.extend((record(t, ep=t), record(1, t, ep=t), record(1, t, ep=1)))
    return out


def record(tp: int, attention_dp: int = 1, ep: int = 1, pp: int = 1) -> Deployment:
    """The one record of a layout (moe-tp = tp x attention_dp / ep): plain attention TP with the MoE
    layers at TP keeps moe_tp = ep = 1 (options_of's "Parallelism default"), every other split states
    both, so that two spellings of one layout are one priced Deployment."""
    if attention_dp == 1 and ep == 1:
        return Deployment(tp=tp, pp=pp)
    return Deployment(tp=tp, pp=pp, attention_dp=attention_dp, moe_tp=tp * attention_dp // ep, ep=ep)


def options_of(record: Deployment, base: Options) -> Options:
    """The serving model's Options of `record` (the one place a record becomes the model's call): its
    split as estimator/serve/parallel.Parallelism states it (moe-tp x ep = tp x attention-DP; a record
    leaving both at 1 takes the MoE layers at TP, Parallelism's default); pp is refused (`--serve` does not
    take it)."""
    if record.pp != 1:
        raise SearchError(f"{record}: the serving model does not price pipeline parallelism (pp)")
    split = (None, None) if (record.moe_tp, record.ep) == (1, 1) else (record.moe_tp, record.ep)
    par = Parallelism(tp=record.tp, attention_dp=record.attention_dp, moe_tp=split[0], ep=split[1])
    return replace(base, tp=record.tp, parallel=par)


def tp_sizes(gpus: int) -> list[int]:
    """The TPs a budget of `gpus` GPUs holds: powers of two up to the budget (and the NVLink domain)."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= gpus]


@dataclass
class Row:
    """One priced deployment as the search lists it."""

    gpu: str
    mode: str  # "agg" or "disagg"
    label: str  # the deployment as a user says it ("tp 4 x 2 replicas", "1p(tp2) 3d(tp2)")
    gpus: int  # GPUs one replica (agg) or one xPyD unit (disagg) uses
    replicas: int
    concurrency: int  # of one replica / unit
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    kv_headroom_tokens: int
    memory_headroom_bytes: float
    settings: dict  # engine settings a user would type
    record: dict  # the frozen record(s) that re-estimate this row
    meets_sla: bool = True
    pareto: bool = False

    def to_json(self) -> dict:
        return asdict(self)


CSV_FIELDS = ("gpu", "mode", "label", "gpus", "replicas", "concurrency", "ttft_s", "tpot_s",
              "tokens_per_s_per_gpu", "tokens_per_s_per_user", "kv_headroom_tokens", "memory_headroom_bytes",
              "meets_sla", "pareto", "settings")


def engine_settings(record: Deployment, result: ServeResult, fw) -> dict:
    """TensorRT-LLM's names; max_batch_size is one attention-DP rank's (the engine's per-rank limit)."""
    moe_tp = record.tp * record.attention_dp // record.ep
    return {"tp_size": record.tp, "pp_size": record.pp, "ep_size": record.ep, "moe_tp_size": moe_tp,
            "attention_dp_size": record.attention_dp,
            "enable_attention_dp": record.attention_dp > 1,
            "max_batch_size": math.ceil(result.admitted / record.attention_dp),
            "max_num_tokens": int(fw.max_num_tokens), "kv_cache_fraction": float(fw.kv_memory_fraction)}


def agg_row(gpu: str, record: Deployment, result: ServeResult, fw, budget: int, sla: Sla) -> Row:
    mem = result.memory
    # one attention-DP rank's headroom (its own KV cache on its GPUs), as a disaggregated row gives one
    # decode worker's: the served result adds the ranks' capacities, the GBs are of one GPU's cache
    headroom = result.kv_headroom_tokens // record.attention_dp
    return Row(gpu, "agg", record.label, record.gpus, budget // record.gpus, record.concurrency,
               result.ttft_s, result.tpot_s, result.tokens_per_s_per_gpu, result.tokens_per_s_per_user,
               headroom, headroom * mem.kv_bytes_per_token,
               engine_settings(record, result, fw), {"agg": asdict(record)},
               sla.met(result.ttft_s, result.tpot_s))


@dataclass
class Priced:
    """The Deployments of one model on one GPU, built once per layout (None: the layout cannot shard it;
    `refused` keeps why, by the layout's label)."""

    model: str
    base: Options
    built: dict
    refused: dict

    def at(self, layout: Deployment | int):
        key = Deployment(tp=layout) if isinstance(layout, int) else layout.layout
        if key not in self.built and key.label not in self.refused:
            try:
                self.built[key] = deploy.Deployment.build(self.model, options_of(key, self.base))
            except UserError as exc:
                self.refused[key.label] = str(exc)
        return self.built.get(key)


def price_model(model: str, base: Options) -> Priced:
    return Priced(model, base, {}, {})


def search_agg(priced: Priced, gpu: str, work: Workload, budget: int, sla: Sla,
               concurrencies: Sequence[int] = CONCURRENCIES) -> list[Row]:
    """Every aggregated (tp, concurrency) of the budget, priced (rows that fit, SLA or not)."""
    rows = []
    for layout in layouts(budget):
        dep = priced.at(layout)
        if dep is None or not dep.memory.fits(work.isl, work.osl):
            continue
        # one attention-DP rank's KV capacity and batch limit; the replica serves attention_dp ranks of it
        per_rank = min(dep.memory.max_concurrency(work.isl, work.osl), int(dep.framework.max_batch_size))
        cap = per_rank * layout.attention_dp
        works = [replace(work, concurrency=c) for c in concurrencies if c <= cap]
        for w, r in zip(works, dep.serve_many(works), strict=True):
            if r.fits and math.isfinite(r.ttft_s) and math.isfinite(r.tpot_s):
                rows.append(agg_row(gpu, replace(layout, concurrency=w.concurrency), r, dep.framework,
                                    budget, sla))
    return rows


def pareto_flags(rows: Sequence[Row]) -> list[bool]:
    """Which rows no other row beats on both tokens/s/GPU and tokens/s/user."""
    pts = [(r.tokens_per_s_per_gpu, r.tokens_per_s_per_user) for r in rows]
    return [not any(o[0] >= p[0] and o[1] >= p[1] and o != p for o in pts) for p in pts]


def rank(rows: list[Row]) -> list[Row]:
    """The rows meeting the SLA, best tokens/s/GPU first (ties: faster per user), Pareto marked over
    the rows of each (GPU, mode) curve."""
    for key in {(r.gpu, r.mode) for r in rows}:
        group = [r for r in rows if (r.gpu, r.mode) == key and r.meets_sla]
        for r, front in zip(group, pareto_flags(group), strict=True):
            r.pareto = front
    kept = [r for r in rows if r.meets_sla]
    return sorted(kept, key=lambda r: (-r.tokens_per_s_per_gpu, -r.tokens_per_s_per_user, r.label,
                                       r.concurrency))


def disagg_row(gpu: str, result, fw, budget: int, sla: Sla) -> Row:
    s = result.spec
    pre, dec = pools(s)

    def pool(workers: int, lay: Deployment, batch: int) -> dict:
        return {"workers": workers, "tp_size": lay.tp, "attention_dp_size": lay.attention_dp,
                "ep_size": lay.ep, "moe_tp_size": lay.tp * lay.attention_dp // lay.ep,
                "max_batch_size": batch, "max_num_tokens": int(fw.max_num_tokens)}

    settings = {"prefill": pool(s.prefill_workers, pre, s.prefill_batch),
                "decode": pool(s.decode_workers, dec, s.decode_batch),
                "kv_cache_fraction": float(fw.kv_memory_fraction),
                "kv_transfer": result.kv_transfer_link}
    return Row(gpu, "disagg", s.label, s.gpus, budget // s.gpus, result.clients, result.ttft_s,
               result.tpot_s, result.tokens_per_s_per_gpu, result.tokens_per_s_per_user,
               result.kv_headroom_tokens, result.kv_headroom_tokens * result.kv_bytes_per_token, settings,
               {"disagg": asdict(s)}, sla.met(result.ttft_s, result.tpot_s))


def pools(spec) -> tuple[Deployment, Deployment]:
    """The (prefill, decode) layouts of an xPyD unit (estimator/serve/disagg.Disagg), as `record`s."""
    return (record(spec.prefill_tp, spec.prefill_attention_dp, spec.prefill_ep),
            record(spec.decode_tp, spec.decode_attention_dp, spec.decode_ep))


def search_disagg(priced: Priced, gpu: str, work: Workload, budget: int, sla: Sla,
                  batches: Sequence[int] = DECODE_BATCHES) -> list[Row]:
    """Every xPyD unit of the budget whose pools are layouts of `layouts` (attention TP, attention DP,
    EP: each pool its own), priced from the layouts' Deployments."""
    from estimator.serve.disagg import prefetch_many, serve_disagg_many, units

    kept = [lay for lay in layouts(budget) if priced.at(lay) is not None]
    if not kept:
        return []
    fw = priced.at(kept[0]).framework
    per_step = max(1, int(fw.max_num_tokens) // work.isl)
    specs = units(budget, kept, batches, tuple(sorted({1, per_step})))
    jobs = [(*(priced.at(p) for p in pools(s)), s) for s in specs]
    prefetch_many(jobs, work)
    return [disagg_row(gpu, r, fw, budget, sla) for r in serve_disagg_many(jobs, work) if r.fits]
