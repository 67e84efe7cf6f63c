"""Ground truth: run the estimated graph in onnxruntime and hold the estimate against it.

`validate()` builds inputs for the bound dims, times the model end to end (warm-up, then N runs: min and
median), profiles it per node, and joins the profiled nodes to the estimator's kernels, so each kernel
and the total have a measured time beside their bound and estimate.

The join compares like with like. The estimator's kernels are built from the source nodes by a fusion
strategy; onnxruntime's executed nodes come from its own graph optimizer. A `JoinPlan` names the
onnxruntime optimization level that matches a strategy and how to map executed nodes back to source
nodes: with `--fusion none` the optimizer is off (ORT_DISABLE_ALL), every executed node is a source
node and the map is by name. For an `ort` strategy (onnxruntime's own fusions: FusedMatMul,
SkipLayerNormalization, ...) the plan runs ORT_ENABLE_EXTENDED, saves the optimized graph
(SessionOptions.optimized_model_filepath) and maps each fused node to the source nodes it replaced
through the tensors it reads and writes (`map_by_tensors`).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np
import onnx
import sympy

from estimator.errors import UserError
from estimator.estimate import Result
from estimator.ir import DimParseError, parse_dim
from estimator.truth import ort_runner
from estimator.truth.free_views import split_free_views
from estimator.truth.ort_runner import NodeTime
from hwdesc.schema import CPU_FAMILY

# A kernel is a model error when its measured time is below its bound by more than this: onnxruntime's
# profiler counts whole microseconds.
PROFILER_RESOLUTION_S = 1e-6
# Ops an integer id can flow through unchanged on its way to the embedding Gather.
_PASS_THROUGH = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"})


class ValidateError(UserError):
    pass


# ---- the join ------------------------------------------------------------------------------------

NameMap = Mapping[str, tuple[str, ...]]  # executed node -> the source nodes it computes


def map_by_name(source: onnx.ModelProto, executed: onnx.ModelProto | None) -> NameMap:
    """Unoptimized runs execute the source nodes themselves."""
    return {n.name: (n.name,) for n in source.graph.node}


def map_by_tensors(source: onnx.ModelProto, executed: onnx.ModelProto | None) -> NameMap:
    """Each executed node of an optimized graph -> the source nodes between its inputs and its outputs.

    Walks back from the node's output tensors through their source producers until it reaches one of
    the node's input tensors (or a graph input or initializer). A fused node keeps the tensor names at
    its boundary, so this finds what it replaced without knowing onnxruntime's naming. Each source node
    goes to the first executed node that claims it; a node with new output names maps to nothing
    (its time is reported as unjoined).
    """
    if executed is None:
        raise ValidateError("map_by_tensors needs the optimized model onnxruntime saved")
    producer = {out: n for n in source.graph.node for out in n.output if out}
    claimed: set[str] = set()
    mapping: dict[str, tuple[str, ...]] = {}
    for node in executed.graph.node:
        stop = set(node.input)
        found: list[str] = []
        todo = [t for t in node.output if t in producer]
        while todo:
            src = producer[todo.pop()]
            if src.name in claimed:
                continue
            claimed.add(src.name)
            found.append(src.name)
            todo += [t for t in src.input if t and t not in stop and t in producer]
        mapping[node.name] = tuple(found)
    return mapping


@dataclass(frozen=True)
class JoinPlan:
    level: str  # onnxruntime graph optimization level (ort_runner.opt_level)
    name_map: Callable[[onnx.ModelProto, onnx.ModelProto | None], NameMap]
    needs_optimized_model: bool = False


# --fusion strategy -> how to run onnxruntime and join its nodes. The other strategies (inductor,
# tensorrt, max) fuse in ways onnxruntime does not, so there is nothing like-for-like to run.
JOIN_PLANS: dict[str, JoinPlan] = {
    "none": JoinPlan("disable_all", map_by_name),
    "ort": JoinPlan("extended", map_by_tensors, needs_optimized_model=True),
}


@dataclass(frozen=True)
class Match:
    """Executed nodes and the kernels they compute (1 : 1 unfused; n : m when the two sides fuse
    differently), with the measured seconds of those nodes."""

    kernels: tuple[int, ...]  # indexes into Result.kernels
    nodes: tuple[str, ...]
    measured_s: float


def join(result: Result, times: Sequence[NodeTime], name_map: NameMap) -> tuple[list[Match], list[NodeTime]]:
    """Group executed nodes with the kernels that share source nodes with them (connected components
    of that relation); nodes that touch no kernel are returned as unjoined."""
    kernel_of = {n.name: i for i, p in enumerate(result.kernels) for n in p.kernel.nodes}
    links = nx.Graph()
    unjoined = []
    for t in times:
        kernels = {kernel_of[s] for s in name_map.get(t.name, ()) if s in kernel_of}
        if not kernels:
            unjoined.append(t)
        for k in kernels:
            links.add_edge(("node", t), ("kernel", k))
    matches = []
    for component in nx.connected_components(links):
        kernels = tuple(sorted(v for kind, v in component if kind == "kernel"))
        nodes = [v for kind, v in component if kind == "node"]
        matches.append(Match(kernels, tuple(n.name for n in nodes), sum(n.seconds for n in nodes)))
    return sorted(matches, key=lambda m: m.kernels[0]), unjoined


# ---- inputs --------------------------------------------------------------------------------------

def _shape(vi: onnx.ValueInfoProto, dims: Mapping[str, int]) -> tuple[int, ...]:
    out = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            out.append(d.dim_value)
            continue
        text = d.dim_param
        try:
            expr = parse_dim(text) if text else None
        except DimParseError:
            expr = None
        value = expr.subs({s: dims[s.name] for s in expr.free_symbols if s.name in dims}) if expr else None
        if value is None or not sympy.sympify(value).is_Integer:
            raise ValidateError(f"input {vi.name!r}: dim {text or '?'!r} is not bound; give --dim NAME=VALUE "
                                f"for every free dim")
        out.append(int(value))
    return tuple(out)


def embedding_rows(model: onnx.ModelProto, tensor: str) -> int | None:
    """Rows of the smallest Gather table that `tensor` indexes (through casts and reshapes), or None."""
    inits = {i.name: i for i in model.graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for t in n.input:
            consumers.setdefault(t, []).append(n)
    rows, seen, todo = [], set(), [tensor]
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        for n in consumers.get(t, []):
            if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == t and n.input[0] in inits:
                axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
                table = inits[n.input[0]].dims
                rows.append(table[axis % len(table)])
            elif n.op_type in _PASS_THROUGH and n.input and n.input[0] == t:
                todo.extend(n.output)
    return min(rows) if rows else None


def make_inputs(model: onnx.ModelProto, dims: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for the bound dims: token ids below the vocabulary of the Gather they feed, masks
    of ones, position ids counting up, zeros for other integers, normal floats (KV caches included)."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise ValidateError(f"input {vi.name!r} is not a tensor; --validate feeds tensors only")
        shape = _shape(vi, dims)
        elem = vi.type.tensor_type.elem_type
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        except KeyError:
            dtype = None
        if dtype is None or elem == onnx.TensorProto.BFLOAT16:
            raise ValidateError(f"input {vi.name!r}: element type {elem} has no numpy equivalent to feed")
        name = vi.name.lower()
        if dtype == np.bool_ or "mask" in name:
            feeds[vi.name] = np.ones(shape, dtype)
        elif np.issubdtype(dtype, np.integer):
            rows = embedding_rows(model, vi.name)
            if "position" in name:
                count = np.broadcast_to(np.arange(shape[-1] if shape else 1), shape)
                feeds[vi.name] = (count % rows if rows else count).astype(dtype)
            elif rows:
                feeds[vi.name] = rng.integers(0, rows, shape).astype(dtype)
            else:
                feeds[vi.name] = np.zeros(shape, dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def name_nodes(model: onnx.ModelProto) -> bool:
    """Give every node the name the frontend gives it (`op_type_index` when unnamed, `_index` appended
    to a repeat: estimator/frontends/onnx_import.py `to_graph`), in place, so onnxruntime's profile and
    the estimator's kernels use the same names. True when a name changed."""
    used: set[str] = set()
    changed = False
    for i, n in enumerate(model.graph.node):
        name = n.name or f"{n.op_type}_{i}"
        if name in used:
            name = f"{name}_{i}"
        used.add(name)
        if name != n.name:
            n.name = name
            changed = True
    return changed


# ---- the run -------------------------------------------------------------------------------------

@dataclass
class Validation:
    result: Result
    ep: str
    level: str
    wall_s: list[float]  # end-to-end seconds of each timed run
    profile: list[NodeTime]  # per executed node, corrected for the profiler's own time
    profile_runs: int
    profiler_overhead_s: float  # subtracted from every profiled node
    matches: list[Match]
    unjoined: list[NodeTime]  # executed nodes in no kernel that are not free views either
    notes: list[str] = field(default_factory=list)
    free_views: list[NodeTime] = field(default_factory=list)  # views / shape arithmetic priced as free
    source: str = ""  # a profile read from a file (estimator/profile/): what measured it; "" for a live run
    # what makes the comparison not like for like (a CPU run against a GPU estimate, another GPU)
    warnings: list[str] = field(default_factory=list)

    @property
    def measured_s(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def measured_min_s(self) -> float:
        return min(self.wall_s)

    @property
    def profiled_s(self) -> float:
        return sum(t.seconds for t in self.profile)

    @property
    def joined_s(self) -> float:
        return sum(m.measured_s for m in self.matches)

    @property
    def unjoined_s(self) -> float:
        return sum(t.seconds for t in self.unjoined)

    @property
    def free_view_s(self) -> float:
        return sum(t.seconds for t in self.free_views)

    @property
    def joined_share(self) -> float:
        return self.joined_s / self.profiled_s if self.profiled_s > 0 else 0.0


def profiler_overhead(ep: str, level: str, chain: int = 32) -> float:
    """Seconds onnxruntime's profiler adds to each node's kernel time (it formats shapes and memory
    statistics inside the timed span: ~3 us a node on a 2-core CPU, which would swamp small kernels):
    the median profiled time of a tiny Add in a chain, less its wall time per op unprofiled."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i - 1}", "b"], [f"t{i}"], name=f"add{i}")
             for i in range(chain)]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [16]) for n in ("x", "b")],
                              [helper.make_tensor_value_info(f"t{chain - 1}", TensorProto.FLOAT, [16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    data = model.SerializeToString()
    feeds = {"x": np.ones(16, np.float32), "b": np.ones(16, np.float32)}
    plain = min(ort_runner.time_runs(ort_runner.session(data, ep, level), feeds, runs=20, warmup=3)) / chain
    profile = ort_runner.profile_nodes(data, feeds, 3, ep, level)
    profiled = statistics.median(t.seconds for t in profile.medians())
    return max(profiled - plain, 0.0)


def validate(result: Result, model: onnx.ModelProto, source: bytes | str | None = None, *, ep: str = "cpu",
             runs: int = 10, warmup: int = 1, profile_runs: int | None = None, fusion: str = "none",
             seed: int = 0) -> Validation:
    """Run `model` (the proto `result` was estimated from; `source` is what onnxruntime loads, default
    the serialized proto) and join the measurements to `result`'s kernels."""
    if runs < 1:
        raise ValidateError(f"--runs {runs}: need at least one timed run")
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        raise ValidateError(f"--validate needs every dim bound; free: {free} (give --dim NAME=VALUE)")
    if fusion not in JOIN_PLANS:
        raise ValidateError(f"--fusion {fusion}: no onnxruntime join for it (known: {', '.join(JOIN_PLANS)})")
    plan = JOIN_PLANS[fusion]
    dims = {k: v for k, v in result.dims.items() if v is not None}
    feeds = make_inputs(model, dims, seed)
    source = model.SerializeToString() if source is None else source
    with tempfile.TemporaryDirectory(prefix="estimate-validate-") as tmp:
        optimized = str(Path(tmp) / "optimized.onnx") if plan.needs_optimized_model else None
        sess = ort_runner.session(source, ep, plan.level, optimized_path=optimized)
        wall = ort_runner.time_runs(sess, feeds, runs, warmup)
        del sess
        n_profiled = profile_runs or max(1, min(runs, 3))
        profile = ort_runner.profile_nodes(source, feeds, n_profiled, ep, plan.level, warmup=1).medians()
        executed = onnx.load(optimized, load_external_data=False) if optimized else None
    overhead = profiler_overhead(ep, plan.level)
    return measured_validation(result, model, profile, wall_s=wall, profile_runs=n_profiled, ep=ep,
                               fusion=fusion, overhead_s=overhead, executed=executed)


def measured_validation(result: Result, model: onnx.ModelProto | None, profile: Sequence[NodeTime], *,
                        wall_s: Sequence[float], profile_runs: int, ep: str, fusion: str = "none",
                        overhead_s: float = 0.0, executed: onnx.ModelProto | None = None,
                        source: str = "") -> Validation:
    """The Validation of measurements already taken: per-node profile times (less `overhead_s` each)
    joined to `result`'s kernels by `fusion`'s plan. `validate()` ends here, and so does a profile read
    from a file (estimator/profile/), so both print through the same report."""
    plan = JOIN_PLANS[fusion]
    profile = [NodeTime(t.name, t.op, max(t.seconds - overhead_s, 0.0)) for t in profile]
    name_map = plan.name_map(model, executed)
    matches, unjoined = join(result, profile, name_map)
    free, unjoined = split_free_views(result, model, unjoined, name_map)  # truth/free_views.py
    notes = []
    if ep != "cpu" and not source:
        notes.append(f"--ep {ep}: per-node times are the host side of each node (launches are asynchronous); "
                     f"the end-to-end time is real")
    warnings = []
    if ep == "cpu" and result.hw.family != CPU_FAMILY:
        warnings.append(f"a CPU measurement (onnxruntime CPU provider) compared with a GPU estimate "
                        f"({result.hw.name}): the error compares two machines, not the estimate (give "
                        f"--arch host for this machine's CPU)")
    return Validation(result, ep, plan.level, list(wall_s), profile, profile_runs, overhead_s, matches,
                      unjoined, notes, free, source, warnings)


def validate_model(model: onnx.ModelProto, hw, dims: Mapping[str, int], *, graph=None, fusion: str = "none",
                   **kw) -> Validation:
    """Estimate `model` (or its already imported `graph`) at `dims` with `fusion` and validate it: the
    one call tools and tests need. `kw` goes to `validate`."""
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from passes import pipeline_for

    if fusion not in JOIN_PLANS:
        raise ValidateError(f"--fusion {fusion}: no onnxruntime join for it (known: {', '.join(JOIN_PLANS)})")
    name_nodes(model)
    result = estimate(graph if graph is not None else import_model(model), hw, dims=dims,
                      pipeline=pipeline_for(fusion, getattr(hw, "family", None)), roofline=True)
    return validate(result, model, fusion=fusion, **kw)
