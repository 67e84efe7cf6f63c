"""Recommendations: what-ifs that were actually estimated, ranked by the time they save. This module
holds what a recommendation is (`Recommendation`), what a recommender sees (`Context`), the registry of
recommenders and the model-level ones; recommend.py runs them all and chooses what to show.

Every recommendation comes from running `estimator.estimate.estimate()` again with one change (another
fusion strategy, precision, GPU; a reshaped GEMM for a kernel-level finding) and comparing totals:

    gain_s   = base estimate_s - what-if estimate_s      (both from estimate(); no second cost model)
    gain_pct = 100 * gain_s / base estimate_s

A recommendation is shown only when gain_s >= threshold * base estimate_s (default 2%), and each one
states its evidence: the number that triggered it. Recommenders are small registered functions
`fn(ctx) -> list[Recommendation]` (the decorator is the only registry, as for cost functions), so the
serving recommenders (estimator/report/serve_recommend.py: TP/concurrency, CUDA graphs) and the profile
join (findings.py "profile": kernels far from their estimate or peak) add theirs without touching this
file; `Context.serve` and `Context.profile` carry their inputs (None when those modes are off).
Kernel-level recommenders live in estimator/report/findings.py. A serving or measured recommendation
states its `metric` (TPOT, TTFT, GPU-seconds per token, measured time): gain_pct is of that metric's base
value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from estimator.errors import UserError
from estimator.estimate import Result, estimate
from estimator.ir import Graph
from hwdesc import HardwareDescriptor

# Recommenders of mutually exclusive alternatives where only the best is shown (the rest stay in the
# what-ifs): three Blackwell variants one under the other say nothing the first does not.
BEST_ONLY: set[str] = {"gpu"}  # recommender(name, best_only=True) adds to it


class RecommendError(UserError):
    pass


@dataclass(frozen=True)
class Recommendation:
    action: str  # what to change, in words
    flags: tuple[str, ...]  # the estimate flags that re-run the what-if (empty: no CLI flag for it)
    estimate_s: float  # the what-if's total estimate
    gain_s: float  # base estimate - what-if estimate
    gain_pct: float
    reason: str  # why it helps, with the what-if's numbers
    evidence: Mapping[str, Any]  # the figure(s) that triggered it
    level: str = "model"  # "model" or "kernel"
    recommender: str = ""
    # the quantity gain_s and estimate_s are in: "estimate_s" (the model's total estimate) or a serving or
    # measured figure (tpot_s, ttft_s, s_per_token_per_gpu, measured_s); gain_pct is of that metric's base
    metric: str = "estimate_s"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "flags": list(self.flags), "estimate_s": self.estimate_s,
                "gain_s": self.gain_s, "gain_pct": self.gain_pct, "reason": self.reason,
                "evidence": dict(self.evidence), "level": self.level, "recommender": self.recommender,
                "metric": self.metric}


def action_key(r: Recommendation) -> tuple:
    """What makes two recommendations the same what-if: the same flags, or the same words where it has
    none."""
    return tuple(r.flags) if r.flags else (r.action,)


def distinct_actions(recs: Sequence[Recommendation]) -> list[tuple[Recommendation, list[Recommendation]]]:
    """The recommendations with one row per action: the first (highest ranked) with the others of that
    action, which measure the same what-if by another metric (serving on tp 4 at concurrency 32 saves
    GPU-s per token and TPOT alike). The terminal and the HTML page both list these."""
    rows: dict[tuple, tuple[Recommendation, list[Recommendation]]] = {}
    for r in recs:
        key = action_key(r)
        if key in rows:
            rows[key][1].append(r)
        else:
            rows[key] = (r, [])
    return list(rows.values())


@dataclass
class Context:
    """The base estimate, how it was made (so a what-if changes one thing), and the optional inputs of
    other modes. `graph` is the model as loaded: unbound dims, its own dtypes, no passes run."""

    graph: Graph
    hw: HardwareDescriptor
    base: Result
    precision: str | None = None
    dims: Mapping[str, int] = field(default_factory=dict)
    pipeline: str = ""
    tiling: bool = True
    warm_inputs: bool = False
    serve: Any = None  # estimator.serve.whatif.Serving, when --serve is on
    framework: str | None = None  # estimate(framework=...): the serving framework's collectives
    profile: Mapping[str, Any] | None = None  # kernel name -> {"measured_s", "counters"} (issue 14)
    _memo: dict = field(default_factory=dict)
    _prepared: Graph | None = None
    _after: dict = field(default_factory=dict)  # pass names run -> the prepared graph after them

    def after_pass(self) -> Callable:
        """A hook for the base's estimate(after_pass=...): keeps the graph after each of its passes, so
        what-ifs whose pipeline shares a prefix with the base's (ort and max with tensorrt) run only the
        rest. Passes are pure functions of the graph, so the result is the same graph."""
        names: list[str] = []

        def keep(name: str, res) -> None:
            names.append(name)
            self._after[tuple(names)] = res.graph
        return keep

    def prepared(self) -> Graph:
        """The model with the base's dims bound and its precision applied, as estimate() does first (on
        an 80-layer model binding and re-typing take over half of an estimate, so what-ifs that keep both
        start from this graph; estimate() then binds nothing and re-types nothing: the same graph)."""
        if self._prepared is None:
            from estimator.estimate import bind_dims
            from estimator.precision import apply_precision

            graph = bind_dims(self.graph, self.dims)
            if self.precision is not None:
                graph = apply_precision(graph, self.precision, self.hw)
            self._prepared = graph
        return self._prepared

    def rerun(self, graph: Graph | None = None, hw: HardwareDescriptor | None = None, **changes) -> Result:
        """estimate() with the base's options, `changes` applied (precision, dims, pipeline...). Results
        are memoised: the fusion recommenders and the report's fusion table share one estimate each."""
        opts = {"precision": self.precision, "dims": dict(self.dims), "pipeline": self.pipeline,
                "roofline": not self.tiling, "warm_inputs": self.warm_inputs, "framework": self.framework,
                **changes}
        hw = hw or self.hw
        same = graph is None and opts["precision"] == self.precision and opts["dims"] == dict(self.dims)
        graph = graph or self.graph
        key = (id(graph), hw.name, opts["precision"], tuple(sorted(opts["dims"].items())), opts["pipeline"],
               opts["roofline"], opts["warm_inputs"], opts["framework"])
        if key not in self._memo:
            self._memo[key] = self._from_prefix(hw, opts) if same else estimate(graph, hw, **opts)
        return self._memo[key]

    def _from_prefix(self, hw: HardwareDescriptor, opts: dict) -> Result:
        """estimate() of the prepared graph, its pipeline resumed from the longest prefix already run."""
        from passes import STRATEGIES, Pipeline

        names = Pipeline.parse(opts["pipeline"]).names
        done = max((k for k in range(len(names) + 1) if k == 0 or names[:k] in self._after))
        graph = self._after[names[:done]] if done else self.prepared()
        for k in range(done, len(names)):
            graph = Pipeline(names[k:k + 1]).run(graph)
            self._after[names[:k + 1]] = graph
        result = estimate(graph, hw, pipeline="", roofline=opts["roofline"], warm_inputs=opts["warm_inputs"],
                          framework=opts["framework"])
        result.pipeline = str(Pipeline(names))
        result.fusion = next((n for n, p in STRATEGIES.items() if Pipeline.parse(p).names == names), "custom")
        return result

    @property
    def total_s(self) -> float:
        return seconds(self.base.totals["estimate_s"])


def seconds(expr) -> float:
    e = sympy.sympify(expr)
    if not e.is_number:
        raise RecommendError("--recommend needs numbers: bind every free dim with --dim NAME=VALUE "
                             f"(free: {', '.join(sorted(str(s) for s in e.free_symbols))})")
    return float(e)


def whatif(ctx: Context, alt: Result, action: str, flags: Iterable[str], reason: str,
           evidence: Mapping[str, Any], level: str = "model") -> Recommendation:
    """A Recommendation whose gain is the difference of the base's and `alt`'s total estimates."""
    new = seconds(alt.totals["estimate_s"])
    return from_gain(ctx, ctx.total_s - new, new, action, flags, reason, evidence, level)


def from_gain(ctx: Context, gain_s: float, estimate_s: float, action: str, flags: Iterable[str],
              reason: str, evidence: Mapping[str, Any], level: str = "kernel") -> Recommendation:
    total = ctx.total_s
    return Recommendation(action, tuple(flags), estimate_s, gain_s, 100 * gain_s / total if total else 0.0,
                          reason, evidence, level)


Recommender = Callable[[Context], list[Recommendation]]
RECOMMENDERS: dict[str, Recommender] = {}


def recommender(name: str, best_only: bool = False) -> Callable[[Recommender], Recommender]:
    """Register a recommender; a name registered twice is an error. `best_only`: its what-ifs are
    alternatives of which only the best is shown."""
    def register(fn: Recommender) -> Recommender:
        if name in RECOMMENDERS:
            raise ValueError(f"recommender {name!r} registered twice")
        RECOMMENDERS[name] = fn
        if best_only:
            BEST_ONLY.add(name)
        return fn
    return register


# ---- model level ----------------------------------------------------------------------------------

def _fmt_s(v: float) -> str:
    from estimator.report.table import show

    return show(v, "s")


def fmt_bytes(v) -> str:
    """Bytes in the unit that reads best: 16.1 GB, 528 kB."""
    b = float(sympy.sympify(v))
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.3g} B"


@recommender("fusion")
def fusion_strategies(ctx: Context) -> list[Recommendation]:
    """Each other fusion strategy of passes.STRATEGIES, re-estimated."""
    from passes import STRATEGIES, Pipeline

    here = Pipeline.parse(ctx.pipeline)
    out = []
    for name, pipeline in STRATEGIES.items():
        if Pipeline.parse(pipeline) == here:
            continue
        alt = ctx.rerun(pipeline=pipeline)
        b, a = ctx.base.totals, alt.totals
        reason = (f"{int(a['kernels'])} kernels instead of {int(b['kernels'])}, DRAM traffic "
                  f"{fmt_bytes(b['dram_bytes'])} -> {fmt_bytes(a['dram_bytes'])}")
        out.append(whatif(ctx, alt, f"switch fusion to {name}", ("--fusion", name), reason,
                          {"kernels": int(b["kernels"]), "dram_bytes": float(b["dram_bytes"]),
                           "fusion": ctx.base.fusion}))
    return out


def _float_bits(graph: Graph) -> int:
    """Bits of the widest float tensor the graph computes in (its effective precision)."""
    from estimator.dtypes import FLOAT_DTYPES, itemsize

    sizes = [float(itemsize(t.dtype)) for t in graph.tensors.values() if t.dtype in FLOAT_DTYPES]
    return int(8 * max(sizes)) if sizes else 0


@recommender("precision")
def lower_precision(ctx: Context) -> list[Recommendation]:
    """bf16, fp8 and fp4 (weights and activations) where the GPU has tensor cores for them and they are
    narrower than what runs now. NB: accuracy is not modelled; the reason says what memory it frees."""
    from estimator.dtypes import PRECISIONS, itemsize
    from estimator.precision import DEPLOYED, PrecisionError, check_precision

    now = _float_bits(ctx.base.graph)
    if ctx.precision in DEPLOYED:  # a quantized deployment: its GEMMs' width, not its fp32 scales'
        now = int(8 * float(itemsize(DEPLOYED[ctx.precision][0])))
    out = []
    for name in ("bf16", "fp8", "fp4"):
        try:
            check_precision(name, ctx.hw)
        except PrecisionError:
            continue
        if 8 * float(itemsize(PRECISIONS[name])) >= now:
            continue
        alt = ctx.rerun(precision=name)
        before, after = ctx.base.totals["weight_bytes"], alt.totals["weight_bytes"]
        freed = float(sympy.sympify(before - after))
        reason = (f"{name} tensor cores; weights {fmt_bytes(before)} -> {fmt_bytes(after)} (frees "
                  f"{fmt_bytes(freed)} of HBM for KV cache or batch); NB: accuracy is not modelled, "
                  "validate it")
        out.append(whatif(ctx, alt, f"quantize weights and activations to {name}", ("--precision", name),
                          reason, {"float_bits": now, "weight_bytes": float(sympy.sympify(before)),
                                   "freed_bytes": freed}))
    return out


@recommender("gpu")
def other_gpus(ctx: Context) -> list[Recommendation]:
    """The same model, precision and fusion on every other bundled GPU that supports the precision."""
    import hwdesc
    from estimator.precision import PrecisionError, check_precision

    if not ctx.hw.name or ctx.hw.name not in hwdesc.list_archs():
        return []  # a host or custom descriptor: no comparable set
    out = []
    for arch in hwdesc.list_archs():
        if arch == ctx.hw.name:
            continue
        hw = hwdesc.load(arch)
        try:
            if ctx.precision is not None:
                check_precision(ctx.precision, hw)
            alt = ctx.rerun(hw=hw)
        except (PrecisionError, UserError):
            continue  # e.g. no fp4 tensor cores, or a dtype of the graph the GPU cannot run
        peak = _peak_key(ctx)
        ev = {"arch": ctx.hw.name, "dram_bytes_per_s": ctx.hw.dram_bytes_per_s,
              "tensor_flops_per_s": ctx.hw.tensor_flops_per_s.get(peak)}
        reason = (f"{hw.display_name}: DRAM {hw.dram_bytes_per_s / 1e12:.2f} vs "
                  f"{ctx.hw.dram_bytes_per_s / 1e12:.2f} TB/s"
                  + (f", {peak} tensor {hw.tensor_flops_per_s[peak] / 1e12:.0f} vs "
                     f"{ctx.hw.tensor_flops_per_s[peak] / 1e12:.0f} TF/s"
                     if peak in hw.tensor_flops_per_s and peak in ctx.hw.tensor_flops_per_s else ""))
        out.append(whatif(ctx, alt, f"run on {arch}", ("--arch", arch), reason, ev))
    return out


def _peak_key(ctx: Context) -> str:
    from estimator.dtypes import PRECISIONS, tensor_peak_key
    from estimator.precision import DEPLOYED

    name = ctx.precision or "bf16"
    dtype = DEPLOYED[name][0] if name in DEPLOYED else PRECISIONS.get(name, "bf16")
    return tensor_peak_key(dtype) or "bf16"


def kv_tensors(graph: Graph) -> list[str]:
    """The KV cache: float graph inputs named past_key_values.* (decode) and outputs named present.*
    (written by prefill and decode), as torch's exporter and models/llama.py name them."""
    from estimator.dtypes import FLOAT_DTYPES

    names = [n for n in graph.inputs if "past" in n] + [n for n in graph.outputs if "present" in n]
    return [n for n in names if n in graph.tensors and graph.tensors[n].dtype in FLOAT_DTYPES]


@recommender("kv-cache")
def fp8_kv_cache(ctx: Context) -> list[Recommendation]:
    """An fp8 KV cache: the graph at the base's dims and precision, then the cache tensors re-typed to fp8
    (e4m3), priced with no further re-typing. NB: the attention kernel reads the fp8 cache as it is
    stored (as FP8 KV-cache kernels do); the what-if has no CLI flag until the serving mode adds one."""
    from dataclasses import replace

    from estimator.precision import PrecisionError, check_precision

    try:
        check_precision("fp8", ctx.hw)
    except PrecisionError:
        return []
    graph = ctx.prepared()  # the base's dims and precision, then only the cache re-typed
    kv = [n for n in kv_tensors(graph) if graph.tensors[n].dtype not in ("fp8e4m3", "fp8e5m2", "fp4e2m1")]
    if not kv:
        return []
    fp8 = graph.with_tensors({n: replace(graph.tensors[n], dtype="fp8e4m3") for n in kv})
    try:
        alt = ctx.rerun(graph=fp8, precision=None, dims={})
    except UserError:
        return []
    if len(alt.uncosted) > len(ctx.base.uncosted):
        return []  # a cost function refused the mixed dtypes: no honest number
    # the cache's footprint: what decode reads (past_*), else what prefill writes (present.*)
    held = [n for n in kv if n in graph.inputs] or kv
    before = sum(float(sympy.sympify(graph.tensors[n].nbytes).subs(_syms(ctx.dims))) for n in held)
    after = sum(float(sympy.sympify(fp8.tensors[n].nbytes).subs(_syms(ctx.dims))) for n in held)
    reason = (f"the KV cache ({len(held)} tensors) takes {fmt_bytes(after)} instead of {fmt_bytes(before)} "
              f"at these dims (frees {fmt_bytes(before - after)} for more context or batch)")
    return [whatif(ctx, alt, "store the KV cache in fp8", (), reason,
                   {"kv_tensors": len(kv), "kv_bytes": before, "freed_bytes": before - after})]


def _syms(dims: Mapping[str, int]) -> dict:
    from estimator.ir import dim

    return {dim(k): v for k, v in dims.items()}
