"""The estimator's one entry point: Graph + hardware + options -> priced kernels and totals."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import sympy

from estimator import symmath
from estimator.errors import UserError
from estimator.gc_pause import cyclic_gc_paused
from estimator.ir import Expr, Graph, bind
from estimator.kernel import CostCache, Kernel, Lowered, Uncosted, lower
from estimator.precision import apply_precision, check_precision
from estimator.pricing import deferred, memo
from estimator.pricing.compiled import check_priced
from estimator.pricing.plan import alike_signature, plan_kernels
from estimator.pricing.price import Timing, price
from hwdesc import HardwareDescriptor
from passes import DEFAULT_PIPELINE, STRATEGIES, Pipeline, pipeline_for


class EstimateError(UserError):
    """Bad options for this graph (unknown dim, strict mode with uncosted ops...)."""


@dataclass(frozen=True)
class PricedKernel:
    kernel: Kernel
    timing: Timing


@dataclass
class Result:
    graph: Graph
    hw: HardwareDescriptor
    precision: str  # "graph" when dtypes were kept as the model has them
    dims: dict[str, int | None]  # every free dim of the model: its bound value or None
    kernels: list[PricedKernel]
    uncosted: list[Uncosted]
    free_nodes: int
    pipeline: str
    totals: Mapping[str, Expr] = field(default_factory=dict)  # see totals(): summed when first read
    fusion: str = "custom"  # the strategy name when the pipeline is one of passes.STRATEGIES
    refusals: list = field(default_factory=list)  # passes.graph_edit.Refusal, for --explain
    tiling: bool = False  # kernels carry tile plans (estimator/pricing) and tile-level estimates
    warm_inputs: bool | Iterable[str] = False  # graph inputs started resident in L2
    # invented dims the frontend merged and the merges it refused (frontends/unify_dims.py), for --explain
    dim_merges: dict[str, Expr] = field(default_factory=dict)
    dim_conflicts: list[str] = field(default_factory=list)

    @property
    def symbolic(self) -> bool:
        return any(v is None for v in self.dims.values())


def sum_by_signature(items: list[tuple[Hashable, Expr]]) -> Expr:
    """Sum expressions, adding each distinct one once with its multiplicity (identical layers make
    this tens of terms instead of thousands: a naive sympy sum over 1,800 nodes takes seconds); over
    many unknown dims, a flat sum (symmath.sym_sum)."""
    counts: Counter[Hashable] = Counter()
    exprs: dict[Hashable, Expr] = {}
    for sig, expr in items:
        counts[sig] += 1
        exprs[sig] = expr
    return symmath.sym_sum(exprs[s] if counts[s] == 1 else counts[s] * exprs[s] for s in counts)


def bind_dims(graph: Graph, dims: Mapping[str, int]) -> Graph:
    known = {s.name for s in graph.free_symbols()}
    for name, value in dims.items():
        if name not in known:
            have = ", ".join(sorted(known)) or "none (all dims are static)"
            into = graph.dim_merges.get(name)
            why = "" if into is None else (f" (the graph proves it equal to {into}, which replaced it; "
                                           f"see --explain)")
            raise EstimateError(f"--dim {name}: the model has no dim {name!r}{why}; its free dims: {have}")
        if value <= 0:
            raise EstimateError(f"--dim {name}={value}: a dimension must be a positive integer")
    return bind(graph, dims) if dims else graph


@dataclass(frozen=True)
class EstimateOptions:
    """How `estimate()` lowers and prices a graph: everything but the graph, the GPU and the dims.

    `precision`: re-type every float tensor (None: the graph's dtypes). `pipeline`: the pass pipeline (a
    fusion strategy's, see passes.STRATEGIES). `roofline`: price every kernel by the roofline estimate of
    estimator/pricing/price.py instead of the tile model (tile plans on `hw`, L2 residency between
    kernels), which is the default, as on the command line. `warm_inputs`: graph inputs (all, or the
    named ones) start resident in L2 when they fit. `framework` (trtllm, vllm, sglang; None: plain NCCL)
    and `comm_graphed` (inside a CUDA graph) say how collective kernels are priced
    (estimator/pricing/collectives.py). `kernel_sass`: node name -> estimator.pricing.compiled.SassPlan (a
    compiled kernel for that node's GEMM). `strict`: an uncosted op is an error; `verify_each`: check the
    graph's invariants after every pass."""

    precision: str | None = None
    pipeline: str = DEFAULT_PIPELINE
    roofline: bool = False
    warm_inputs: bool | Iterable[str] = False
    framework: str | None = None
    comm_graphed: bool = True
    kernel_sass: Mapping | None = None
    strict: bool = False
    verify_each: bool = False


def estimate(graph: Graph, hw: HardwareDescriptor, options: EstimateOptions | None = None, *,
             dims: Mapping[str, int] | None = None, after_pass: Callable | None = None,
             **changes) -> Result:
    """Bind `dims`, re-type the precision, run the pass pipeline, lower to kernels and price them, as
    `options` (EstimateOptions) say; keyword `changes` replace its fields, so `estimate(graph, hw)` prices
    on the tile model with the default pipeline and `estimate(graph, hw, precision="bf16", dims={"seq":
    4096}, roofline=True)` asks for the roofline. `after_pass(name, PassResult)` sees each pass's result."""
    if options is not None and not isinstance(options, EstimateOptions):
        raise TypeError(f"estimate(): options must be an EstimateOptions, not {type(options).__name__} "
                        "(precision, pipeline, ... are keyword arguments)")
    opts = replace(options or EstimateOptions(), **changes) if changes else (options or EstimateOptions())
    dims = dict(dims or {})
    free = sorted(s.name for s in graph.free_symbols())
    with cyclic_gc_paused(), symmath.flat_symbolic(len(set(free) - set(dims))):  # flat: see symmath
        return _estimate(graph, hw, opts, dims, free, after_pass)


def lowered_graph(graph: Graph, hw: HardwareDescriptor, precision: str | None, dims: Mapping[str, int],
                  pipeline: str, after_pass: Callable | None = None,
                  verify_each: bool = False) -> tuple[Graph, CostCache, Lowered, list]:
    """The first half of `estimate()`: bind `dims`, re-type `precision`, run the pass pipeline and lower
    to kernels (graph, CostCache, Lowered, refusals), before any tile plan or price. The serving steps
    (estimator/serve/step_points.py) price these kernels at arrays of points. Without `after_pass`, the
    lowering is remembered across calls (pricing/memo.py: it reads `hw` only to check the precision;
    keyed by the GPU's family as well)."""
    if after_pass is None:
        # the family too: a precision pass that lowered per family (Hopper's block-quantized BMM input,
        # Blackwell's dequantized weights) must not share a lowering across families
        key = (tuple(sorted(dims.items())), precision, pipeline, verify_each, symmath.flat(),
               getattr(hw, "family", None))
        out = memo.lowered(key, graph, lambda: _lowered_graph(graph, hw, precision, dims, pipeline, None,
                                                              verify_each))
        if precision is not None:
            check_precision(precision, hw)  # as apply_precision does for the GPU at hand: a hit too
        return out
    return _lowered_graph(graph, hw, precision, dims, pipeline, after_pass, verify_each)


def _lowered_graph(graph: Graph, hw: HardwareDescriptor, precision: str | None, dims: Mapping[str, int],
                   pipeline: str, after_pass: Callable | None,
                   verify_each: bool) -> tuple[Graph, CostCache, Lowered, list]:
    graph = bind_dims(graph, dims)
    if precision is not None:
        graph = apply_precision(graph, precision, hw)
    refusals: list = []

    def seen(name, res) -> None:
        refusals.extend(res.refusals)
        if after_pass is not None:
            after_pass(name, res)

    graph = Pipeline.parse(pipeline).run(graph, after=seen, verify_each=verify_each)
    costs = CostCache(graph)
    return graph, costs, lower(graph, costs), refusals


def _estimate(graph: Graph, hw: HardwareDescriptor, opts: EstimateOptions, dims: dict[str, int],
              free: list[str], after_pass: Callable | None) -> Result:
    precision, pipeline, tiling = opts.precision, opts.pipeline, not opts.roofline
    warm_inputs, kernel_sass, framework, comm_graphed = (opts.warm_inputs, opts.kernel_sass, opts.framework,
                                                         opts.comm_graphed)
    source = graph
    graph, costs, lowered, refusals = lowered_graph(graph, hw, precision, dims, pipeline, after_pass,
                                                    opts.verify_each)
    if opts.strict and lowered.uncosted:
        u = lowered.uncosted[0]
        raise EstimateError(f"--strict: {len(lowered.uncosted)} op(s) uncosted, first {u.node} ({u.op}): "
                            f"{u.reason}")
    if kernel_sass:
        check_priced(lowered.kernels, kernel_sass, tiling)
    keys = [costs.full_signature(k.signature) for k in lowered.kernels]  # for the cross-call memo
    plans = (plan_kernels(graph, lowered.kernels, hw, warm_inputs, kernel_sass, keys) if tiling
             else [None] * len(lowered.kernels))
    if kernel_sass:
        check_priced(lowered.kernels, kernel_sass, tiling, plans)
    timings: dict[Hashable, Timing] = {}
    alike: dict[Hashable, Timing] = {}  # Timings up to a renaming of the dims (symmath.renamed)
    priced = []
    hw_key = memo.hw_key(hw)
    for k, plan, key in zip(lowered.kernels, plans, keys, strict=True):
        if plan is not None:  # equal signatures must price identically: the plan (residency) joins it
            k = replace(k, tile=plan, signature=(k.signature, plan.key))
        if k.signature not in timings:
            def make(k=k, plan=plan) -> Timing:
                return price(k.work, hw, plan, k.kind, k.op, framework, comm_graphed)

            if symmath.flat():  # many unknown dims: kernels alike up to a renaming share one Timing
                def make(k=k, plan=plan, priced=make) -> Timing:  # noqa: F811 - the flat path wraps it
                    return symmath.renamed(alike, alike_signature(graph, k), priced, plan and plan.key)

            # a plan carrying residency or a compiled kernel is not remembered: nor is its Timing
            plain = plan is None or not (plan.resident_bytes or plan.resident_bytes_bound or plan.sass)
            full = (hw_key, framework, comm_graphed, key, plan.key if plan else None, k.kind, k.op,
                    symmath.flat())  # flat or not builds the same values in other forms: never mixed
            timings[k.signature] = memo.timing(full, make) if plain else make()
        priced.append(PricedKernel(k, timings[k.signature]))
    fusion = next((name for name, p in STRATEGIES.items()
                   if Pipeline.parse(pipeline_for(name, hw.family)) == Pipeline.parse(pipeline)), "custom")
    result = Result(graph, hw, precision or "graph", {n: dims.get(n) for n in free}, priced,
                    lowered.uncosted, lowered.free_nodes, str(Pipeline.parse(pipeline)), fusion=fusion,
                    refusals=refusals, tiling=tiling and any(p is not None for p in plans),
                    warm_inputs=warm_inputs, dim_merges=source.dim_merges, dim_conflicts=source.dim_conflicts)
    result.totals = totals(result)
    return result


def weight_bytes(graph: Graph) -> Expr:
    """Bytes of the model's stored weights (initializers and Constant tensors, not derived values).
    Tensors produced inside a fused kernel's body are derived too, so the count is the same under
    every fusion strategy."""
    made: dict[str, str] = {}  # tensor -> op type of the node (or fused member) producing it
    for n in graph.topo_nodes():
        for m in (n.body or (n,)):
            made.update(dict.fromkeys((t for t in m.outputs if t), m.op_type))
    sizes = []
    for name, t in graph.tensors.items():
        src = made.get(name)
        if t.is_weight and t.shape is not None and (src is None or src == "Constant"):
            sizes.append(t.nbytes)
    return sympy.Add(*sizes)


TOTALS = ("bound_s", "estimate_s", "flops", "dram_bytes", "weight_bytes", "kernels")


def totals(result: Result) -> Mapping[str, Expr]:
    """The Result's totals (TOTALS). Outside a flat_symbolic() block each is summed when first read
    (estimator/pricing/deferred.py): a sweep reads its kernels' expressions, not the sums."""
    ks, graph = tuple(result.kernels), result.graph  # as they are now, whenever summed
    if not deferred.enabled():
        return {key: _total(ks, graph, key) for key in TOTALS}
    return deferred.LazyMapping(TOTALS, lambda key: _total(ks, graph, key), per_key=True)


def _total(ks: Sequence[PricedKernel], graph: Graph, key: str) -> Expr:
    if key == "bound_s":
        return sum_by_signature([(p.kernel.signature, p.timing.bound_s) for p in ks])
    if key == "estimate_s":
        return sum_by_signature([(p.kernel.signature, p.timing.estimate_s) for p in ks])
    if key == "flops":
        return sum_by_signature([(p.kernel.signature, p.kernel.work.total_flops) for p in ks])
    if key == "dram_bytes":
        return sum_by_signature([(p.kernel.signature, p.kernel.work.dram_bytes) for p in ks])
    if key == "weight_bytes":
        return weight_bytes(graph)
    return sympy.Integer(len(ks))


def group_totals(result: Result, key: str) -> dict[str, dict[str, Expr]]:
    """Estimate and bound summed per kernel `kind` or per `limiter`."""
    groups: dict[str, list[PricedKernel]] = defaultdict(list)
    for p in result.kernels:
        groups[p.kernel.kind if key == "kind" else p.timing.limiter].append(p)
    return {g: {"estimate_s": sum_by_signature([(p.kernel.signature, p.timing.estimate_s) for p in ps]),
                "bound_s": sum_by_signature([(p.kernel.signature, p.timing.bound_s) for p in ps]),
                "kernels": sympy.Integer(len(ps))}
            for g, ps in groups.items()}
