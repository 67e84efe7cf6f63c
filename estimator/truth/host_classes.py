"""Per kernel class (kind, or op type) fits of this host's runtime: the `kernel_classes` of a host descriptor.

A CPU runtime's kernels are far from uniform: on a 2-core EPYC, onnxruntime's MLAS GEMM reaches ~85% of
the FMA peak on 1024^3 but a fraction of it on the 64-wide GEMMs of a tiny transformer, its Transpose
and Slice move bytes at a few percent of the streaming rate, and its Where (generic three-way
broadcast, one thread) is ~10x slower than an Add of the same size. One efficiency per execution unit
cannot describe that, so the host descriptor carries, per class, Hockney's two-parameter model on the
roofline:

    estimate_s = bound_s / roofline + op_overhead_s

`bound_s` is the kernel's speed-of-light time on the descriptor's peaks (what `price()` computes as the
bound), `roofline` the fraction of it the runtime reaches on large kernels of the class, and
`op_overhead_s` its fixed cost per op (dispatch, thread-pool fork/join, packing, the executor between
nodes).

How they are measured: a calibration network, `layers` blocks at a few (tokens, width) sizes, built from
the ops transformers run (GEMMs with a bias, SiLU, a residual Add, LayerNormalization, Transpose, Slice
and Concat, a ReduceMean, masked scores through Where and Softmax), runs in onnxruntime with its
profiler on. Each node's profiled time less the profiler's own per-node time (validate.profiler_overhead,
measured as profiled minus unprofiled wall time per op, so what is left includes the executor's time
between nodes) is one point; each class's two parameters are a least-squares fit over its points (see
`fit`). The network is calibration, not validation: none of the estimator's bundled models is run.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from estimator.frontends.onnx_import import import_model
from estimator.kernel import lower
from estimator.pricing.price import price
from estimator.truth import ort_runner

FLOAT = TensorProto.FLOAT
# Op types fitted as a class of their own instead of with their kind (their runtime kernel differs from
# the rest of the kind by an order of magnitude; see the module docstring).
OWN_CLASS_OPS = ("Where",)
MIN_POINTS = 3
# onnxruntime's profiler counts whole microseconds: relative errors are taken against at least this.
RESOLUTION_S = 1e-6  # a class with fewer points keeps the descriptor's global efficiencies


@dataclass(frozen=True)
class ClassFit:
    roofline: float  # achieved fraction of the roofline time on large kernels, (0, 1]
    op_overhead_s: float  # fixed seconds per op, >= 0
    points: int
    median_abs_error: float  # of the fit over its own points (relative)


def class_of(kind: str, op_type: str) -> str:
    return op_type if op_type in OWN_CLASS_OPS else kind


def _block(nodes: list, inits: list, x: str, tokens: int, width: int, i: int,
           rng: np.random.Generator) -> str:
    """One calibration block on x [tokens, width]; returns the name of its output (same shape)."""
    def init(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), f"{name}{i}"))
        return f"{name}{i}"

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"{op.lower()}_{i}_{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def weight(name: str, rows: int, cols: int) -> str:
        return init(name, (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32))

    def ints(name: str, value: int) -> str:
        return init(name, np.array([value], np.int64))

    wide, half = 4 * width, width // 2
    up = node("Add", [node("MatMul", [x, weight("w_up", width, wide)]),
                      init("b_up", rng.standard_normal(wide).astype(np.float32))])
    act = node("Mul", [up, node("Sigmoid", [up])])  # SiLU
    res = node("Add", [node("MatMul", [act, weight("w_dn", wide, width)]), x])
    norm = node("LayerNormalization", [res, init("g", np.ones(width, np.float32)),
                                       init("b", np.zeros(width, np.float32))], axis=-1)
    back = node("Transpose", [node("Transpose", [norm], perm=[1, 0])], perm=[1, 0])
    axes = ints("axes", 1)
    lo = node("Slice", [back, ints("s0", 0), ints("e0", half), axes])
    hi = node("Slice", [back, ints("s1", half), ints("e1", width), axes])
    rot = node("Concat", [hi, lo], axis=1)  # rotate-half, as rotary embeddings do
    mean = node("ReduceMean", [rot, axes], keepdims=1)
    rms = node("Sqrt", [node("Add", [mean, init("eps", np.float32(2.0))])])
    q = node("Mul", [rot, node("Reciprocal", [rms])])
    scores = node("MatMul", [q, node("Transpose", [q], perm=[1, 0])])
    causal = init("mask", np.tril(np.ones((tokens, tokens), bool)))
    probs = node("Softmax", [node("Where", [causal, scores, init("neg", np.float32(-1e4))])], axis=-1)
    return node("MatMul", [probs, q])


def calibration_model(tokens: int, width: int, layers: int, seed: int = 0) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []
    x = "x"
    for i in range(layers):
        x = _block(nodes, inits, x, tokens, width, i, rng)
    nodes[-1].output[0] = "y"
    nodes[-1].name = "y"
    graph = helper.make_graph(nodes, "calibration",
                              [helper.make_tensor_value_info("x", FLOAT, [tokens, width])],
                              [helper.make_tensor_value_info("y", FLOAT, [tokens, width])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model, {"x": rng.standard_normal((tokens, width)).astype(np.float32)}


def points(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], hw, runs: int,
           profiler_overhead_s: float) -> list[tuple[str, float, float]]:
    """(class, bound seconds on `hw`, measured seconds) per node of `model`."""
    profile = ort_runner.profile_nodes(model.SerializeToString(), feeds, runs=runs, warmup=1).medians()
    own = {t.name: max(t.seconds - profiler_overhead_s, 0.0) for t in profile}
    out = []
    for k in lower(import_model(model)).kernels:
        names = [n.name for n in k.nodes if n.name in own]
        if len(names) != 1:
            continue
        bound = float(price(k.work, hw).bound_s)
        out.append((class_of(k.kind, k.nodes[0].op_type), bound, own[names[0]]))
    return out


def fit(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(roofline, op_overhead_s) of measured = bound / roofline + overhead over (bound, measured) pairs.

    Least squares on relative errors weighted by the measured time (weight 1 / sqrt(t) on the residual):
    plain relative errors let the many microsecond kernels set the slope, and the calibration's large
    GEMMs then came out ~20% slower than they run; absolute errors would ignore the small kernels that
    make up tiny models. The roofline is clipped to (0, 1] and the overhead to >= 0 (then refitted)."""
    x = np.array([b for b, _ in pairs], float)
    t = np.array([m for _, m in pairs], float)
    w = 1 / np.sqrt(np.maximum(t, RESOLUTION_S))
    a = np.stack([x, np.ones_like(x)], axis=1) * w[:, None]
    (slope, overhead), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    if overhead < 0:  # no fixed cost: a pure rate through the origin
        overhead = 0.0
        slope = float(np.sum(w * w * x * t) / np.sum(w * w * x * x))
    if slope < 1:  # faster than the bound on large kernels cannot be: the bound is the speed of light
        slope = 1.0
        overhead = max(float(np.sum(w * w * (t - x)) / np.sum(w * w)), 0.0)
    return 1 / float(slope), float(overhead)


def fit_classes(hw, sizes: Sequence[tuple[int, int]], layers: int, runs: int,
                profiler_overhead_s: float) -> dict[str, ClassFit]:
    by_class: dict[str, list[tuple[float, float]]] = {}
    for tokens, width in sizes:
        model, feeds = calibration_model(tokens, width, layers)
        for cls, bound, measured in points(model, feeds, hw, runs, profiler_overhead_s):
            by_class.setdefault(cls, []).append((bound, measured))
    fits = {}
    for cls, pairs in sorted(by_class.items()):
        if len(pairs) < MIN_POINTS:
            continue
        roofline, overhead = fit(pairs)
        errors = [abs(b / roofline + overhead - m) / m for b, m in pairs if m > 0]
        fits[cls] = ClassFit(roofline, overhead, len(pairs), statistics.median(errors) if errors else 0.0)
    return fits
