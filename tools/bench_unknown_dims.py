"""Benchmark: pricing a graph whose dims are all unknown against the same graph with named dims.

The graph is a stack of transformer-MLP-like blocks (LayerNormalization, MatMul, Add, Gelu, MatMul, Add
residual, Softmax, Mul: 9 nodes a block), --nodes in all. Three variants of the same nodes and weights:

- named:   the input is [batch, seq, hidden] and shape inference names every activation dim from it;
- bound:   named, with batch=1 and seq=512 bound (what `estimate --dim ...` prices);
- unknown: every activation tensor has its own value_info whose dims carry neither a value nor a name
  and no shape inference runs, so each tensor gets its own free dims (`unk__<tensor>_<axis>`): the worst
  case of a graph shape inference could not follow (the hanging mutants of issue 11 were of this kind).
  The ONNX frontend then merges the dims its ops prove equal (estimator/frontends/unify_dims.py), as
  every `estimate` run does;
- apart:   the unknown graph with that merge off (to_graph(unify=False)): every dim stays its own, the
  flat-symbolic pricing path (symmath.py) of dims no rule can prove equal.

Each variant is built into the IR once and priced with the CLI's defaults (tensorrt fusion, tile plans)
in this process; the figure is the median of --runs pricing times in CPU seconds of this process
(time.process_time: other load on the machine does not inflate it; import and IR build excluded).
Target (issue 11): unknown <= 3x named. The IR build (import, and the merge) is timed apart and printed.

    python -m tools.bench_unknown_dims [--nodes 2000] [--runs 3] [--arch b200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 64
BLOCK_NODES = 9


def build(blocks: int, named: bool) -> onnx.ModelProto:
    """`blocks` MLP blocks over x[batch, seq, HIDDEN]; unknown: no dim names anywhere, and a value_info
    with unnamed dims for every activation."""
    rng = np.random.default_rng(0)
    inits, nodes, acts = [], [], []

    def weight(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name))
        return name

    x = "x"
    for b in range(blocks):
        p = f"b{b}_"
        ln, h1, h2, g, h3, h4, res, sm, out = (p + s for s in ("ln", "h1", "h2", "g", "h3", "h4", "res",
                                                                "sm", "out"))
        nodes += [
            helper.make_node("LayerNormalization",
                             [x, weight(p + "gamma", HIDDEN), weight(p + "beta", HIDDEN)], [ln],
                             name=p + "ln", axis=-1),
            helper.make_node("MatMul", [ln, weight(p + "w1", HIDDEN, 4 * HIDDEN)], [h1], name=p + "mm1"),
            helper.make_node("Add", [h1, weight(p + "b1", 4 * HIDDEN)], [h2], name=p + "add1"),
            helper.make_node("Gelu", [h2], [g], name=p + "gelu"),
            helper.make_node("MatMul", [g, weight(p + "w2", 4 * HIDDEN, HIDDEN)], [h3], name=p + "mm2"),
            helper.make_node("Add", [h3, weight(p + "b2", HIDDEN)], [h4], name=p + "add2"),
            helper.make_node("Add", [h4, x], [res], name=p + "res"),
            helper.make_node("Softmax", [res], [sm], name=p + "softmax", axis=-1),
            helper.make_node("Mul", [sm, res], [out], name=p + "mul"),
        ]
        acts += [ln, h1, h2, g, h3, h4, res, sm, out]
        x = out
    dims = ["batch", "seq", HIDDEN] if named else [None, None, None]
    graph = helper.make_graph(nodes, "mlp_stack",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, dims)], inits)
    if not named:
        graph.value_info.extend(helper.make_tensor_value_info(a, TensorProto.FLOAT, [None, None, None])
                                for a in acts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def to_ir(model: onnx.ModelProto, infer: bool, unify: bool = True):
    """The IR the CLI builds (validation, weights split off, shape inference when `infer`); `unify`
    False keeps the invented dims apart (on checkouts without unify_dims they always are)."""
    import inspect

    from estimator.frontends.onnx_import import infer_shapes, split_weights, to_graph

    try:  # issue 11's checks; absent on older checkouts (for a before/after figure)
        from estimator.frontends.validate_graph import validate_graph
    except ImportError:
        validate_graph = None
    if validate_graph is not None:
        validate_graph(model)
    light, weights = split_weights(model)
    shaped = infer_shapes(light) if infer else light
    if "unify" in inspect.signature(to_graph).parameters:
        return to_graph(shaped, weights, unify=unify)
    return to_graph(shaped, weights)


def price_time(graph, hw, dims: dict[str, int], runs: int) -> tuple[float, float, int, int]:
    """(median seconds, first run's seconds, kernels, free symbols left) of estimate() with the CLI's
    defaults. The first run prices every kernel; later ones find the plans and Timings of its kernels in
    the process's memo (estimator/pricing/memo.py), as a sweep or a second graph of the same model does."""
    from estimator.estimate import estimate
    from passes import DEFAULT_STRATEGY, pipeline_for

    times = []
    for _ in range(runs):
        t0 = time.process_time()
        r = estimate(graph, hw, dims=dims, pipeline=pipeline_for(DEFAULT_STRATEGY))
        times.append(time.process_time() - t0)
    free = len(getattr(r.totals["estimate_s"], "free_symbols", ()))
    return statistics.median(times), times[0], len(r.kernels), free


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arch", default="b200")
    args = ap.parse_args()

    import hwdesc

    hw = hwdesc.load(args.arch)
    blocks = max(1, -(-args.nodes // BLOCK_NODES))
    named = to_ir(build(blocks, named=True), infer=True)
    model = build(blocks, named=False)
    t0 = time.process_time()
    unknown = to_ir(model, infer=False)
    t1 = time.process_time()
    apart = to_ir(model, infer=False, unify=False)
    t2 = time.process_time()
    merged = len(getattr(unknown, "dim_merges", {}))
    print(f"IR build cpu s: unknown {t1 - t0:.2f} (merging {merged} invented dims), apart {t2 - t1:.2f}")
    rows = [("named", named, {}), ("bound", named, {"batch": 1, "seq": 512}), ("unknown", unknown, {}),
            ("apart", apart, {})]
    results, firsts = {}, {}
    print(f"{'variant':<9}{'nodes':>7}{'free dims':>11}{'kernels':>9}{'price cpu s':>13}{'first run':>11}")
    for label, graph, dims in rows:
        secs, first, kernels, free = price_time(graph, hw, dims, args.runs)
        results[label], firsts[label] = secs, first
        ndims = len({s.name for s in graph.free_symbols()}) - len(dims)
        print(f"{label:<9}{len(graph.nx):>7}{ndims:>11}{kernels:>9}{secs:>13.2f}{first:>11.2f}   "
              f"(total keeps {free} free symbols)")
    print(f"unknown / named = {results['unknown'] / results['named']:.2f}x, unknown / bound = "
          f"{results['unknown'] / results['bound']:.2f}x (target <= 3x named; median of {args.runs} runs); "
          f"first runs: unknown / named = {firsts['unknown'] / firsts['named']:.2f}x")
    print(f"apart / named = {results['apart'] / results['named']:.2f}x, apart / bound = "
          f"{results['apart'] / results['bound']:.2f}x; first runs: apart / named = "
          f"{firsts['apart'] / firsts['named']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
