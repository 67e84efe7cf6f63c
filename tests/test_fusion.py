"""Fusion rules (modified True/False, the graph after the rewrite, refusal reasons) and strategies."""

import json

import numpy as np
import pytest
import sympy
from onnx import TensorProto, helper, numpy_helper

import hwdesc
import models
from estimator.cli.main import main
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from onnxutil import gpt_block_model
from passes import STRATEGIES, Pipeline
from passes.canonicalize import canonicalize
from passes.fuse_attention import fuse_attention
from passes.fuse_elementwise import fuse_elementwise
from passes.fuse_epilogue import fuse_bias_act, fuse_epilogue
from passes.fuse_norm import fuse_norm
from passes.fuse_patterns import fuse_rotary, fuse_swiglu
from passes.graph_edit import is_fused

H100 = hwdesc.load("h100-sxm")


def graph_of(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def const(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def weight(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def fused_nodes(graph):
    return [graph.node(n) for n in graph.nx.nodes if is_fused(graph.node(n))]


def member_ops(node):
    return sorted(m.op_type for m in node.body)


# ---- fuse-attention --------------------------------------------------------------------------------


def test_attention_fuses_the_score_path_with_its_transposes():
    g = canonicalize(import_model(gpt_block_model())).graph
    result = fuse_attention(g)
    assert result.modified
    (fused,) = fused_nodes(result.graph)
    assert {m.name for m in fused.body} == {
        "split_q",
        "split_k",
        "split_v",
        "tq",
        "tk",
        "tv",
        "qk",
        "scale_scores",
        "softmax",
        "pv",
        "to",
        "merge",
    }
    assert fused.attrs["kind"] == "attention" and fused.attrs["attention"]["causal"] is False
    # The kernel reads Q, K, V as the projections wrote them and writes O: no [b, h, s, s] tensor.
    activations = {t for t in fused.inputs if not result.graph.tensors[t].is_const}
    assert activations == {"q2", "k2", "v2"} and fused.outputs == ("om",)


def test_attention_flash_work_by_hand():
    g = import_model(gpt_block_model(64, 4))
    none = estimate(g, H100, dims={"batch": 2, "seq": 128}, precision="bf16", roofline=True)
    fused = estimate(
        g, H100, dims={"batch": 2, "seq": 128}, precision="bf16", pipeline="canonicalize,fuse-attention",
        roofline=True,
    )
    (k,) = [p.kernel for p in fused.kernels if p.kernel.kind == "attention"]
    assert k.work.flops[("tensor", "bf16")] == 4 * 2 * 4 * 128 * 128 * 16  # 4*b*h*s*s_kv*d, no mask
    assert k.work.bytes_read == 3 * 2 * 2 * 128 * 64  # Q, K, V: [b, s, h, d] bf16 each
    assert k.work.bytes_written == 2 * 2 * 128 * 64  # O
    assert fused.totals["dram_bytes"] < none.totals["dram_bytes"]


def test_attention_refuses_when_probabilities_escape():
    g = canonicalize(import_model(gpt_block_model())).graph
    probs = g.tensors["p"]
    g.outputs = (*g.outputs, "p")  # someone reads the probabilities: they must be written
    g.tensors["p"] = probs
    result = fuse_attention(g)
    assert not result.modified and result.graph is g
    assert [r.reason for r in result.refusals] == ["attention probabilities are a graph output"]


def test_attention_without_softmax_is_unmodified():
    g = graph_of([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [4])], [vi("y", [4])])
    result = fuse_attention(g)
    assert not result.modified and not result.refusals


def test_causal_mask_halves_attention_flops_llama():
    g = import_model(models.build("llama-tiny"))  # 2 layers, 4 heads, head_dim 16, causal prefill
    s = dim("seq")
    none = estimate(g, H100, dims={"batch": 1}, precision="bf16", roofline=True)
    fused = estimate(g, H100, dims={"batch": 1}, precision="bf16", pipeline="canonicalize,fuse-attention",
                     roofline=True)

    def tensor_flops(r):
        return sympy.expand(
            sum((p.kernel.work.flops.get(("tensor", "bf16"), 0) for p in r.kernels), sympy.Integer(0))
        )

    # unfused: QK^T and PV over the full s x s; flash with causal skipping: the s(s+1)/2 triangle
    saved = 2 * 4 * 4 * 16 * (s * s - s * (s + 1) / 2)  # layers * 4*d FLOPs * heads * d... per score
    assert sympy.expand(tensor_flops(none) - tensor_flops(fused) - saved) == 0


# ---- fuse-norm ---------------------------------------------------------------------------------------


def rms_norm_graph(reduce_last=True):
    axes = numpy_helper.from_array(np.array([-1 if reduce_last else 1], np.int64), "axes")
    nodes = [
        helper.make_node("Add", ["a", "b"], ["x"], name="residual"),
        helper.make_node("Pow", ["x", "two"], ["sq"], name="pow"),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="mean", keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"], name="eps_add"),
        helper.make_node("Sqrt", ["mse"], ["rms"], name="sqrt"),
        helper.make_node("Reciprocal", ["rms"], ["inv"], name="recip"),
        helper.make_node("Mul", ["x", "inv"], ["xn"], name="scale"),
        helper.make_node("Mul", ["w", "xn"], ["y"], name="weight_mul"),
    ]
    return graph_of(
        nodes,
        [vi("a", ["batch", "seq", 64]), vi("b", ["batch", "seq", 64])],
        [vi("y", None), vi("x", None)],
        [axes, const("two", 2.0), const("eps", 1e-5), weight("w", 64)],
    )


def test_decomposed_rmsnorm_with_residual_becomes_one_kernel():
    result = fuse_norm(rms_norm_graph())
    assert result.modified
    (fused,) = fused_nodes(result.graph)
    assert member_ops(fused) == ["Add", "Add", "Mul", "Mul", "Pow", "Reciprocal", "ReduceMean", "Sqrt"]
    assert set(fused.outputs) == {"y", "x"}  # the normalized output and the residual sum (a graph output)
    r = estimate(result.graph, H100, dims={"batch": 1, "seq": 10}, pipeline="", roofline=True)
    (k,) = [p.kernel for p in r.kernels]
    assert k.work.bytes_read == 4 * (2 * 10 * 64 + 64)  # a, b and the weight, fp32
    assert k.work.bytes_written == 4 * 2 * 10 * 64  # y and x


def test_norm_refuses_a_mean_over_another_axis():
    result = fuse_norm(rms_norm_graph(reduce_last=False))
    assert not result.modified
    assert [r.reason for r in result.refusals] == ["ReduceMean does not reduce the last axis only"]


# ---- fuse-rotary and fuse-swiglu ---------------------------------------------------------------------


def rotary_graph(leak=False):
    starts_hi, ends_hi = [
        numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("h0", 8), ("h1", 16))
    ]
    starts_lo, ends_lo = [
        numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("l0", 0), ("l1", 8))
    ]
    axes = numpy_helper.from_array(np.array([-1], np.int64), "ax")
    nodes = [
        helper.make_node("Slice", ["x", "h0", "h1", "ax"], ["hi"], name="slice_hi"),
        helper.make_node("Slice", ["x", "l0", "l1", "ax"], ["lo"], name="slice_lo"),
        helper.make_node("Neg", ["hi"], ["nhi"], name="neg"),
        helper.make_node("Concat", ["nhi", "lo"], ["rot"], name="cat", axis=-1),
        helper.make_node("Mul", ["rot", "sin"], ["rs"], name="mul_sin"),
        helper.make_node("Mul", ["x", "cos"], ["xc"], name="mul_cos"),
        helper.make_node("Add", ["xc", "rs"], ["y"], name="add"),
    ]
    outputs = [vi("y", None)] + ([vi("rot", None)] if leak else [])
    return graph_of(
        nodes,
        [vi("x", ["seq", 16]), vi("cos", ["seq", 16]), vi("sin", ["seq", 16])],
        outputs,
        [starts_hi, ends_hi, starts_lo, ends_lo, axes],
    )


def test_rotary_pattern():
    result = fuse_rotary(rotary_graph())
    assert result.modified
    (fused,) = fused_nodes(result.graph)
    assert member_ops(fused) == ["Add", "Concat", "Mul", "Mul", "Neg", "Slice", "Slice"]
    activations = {t for t in fused.inputs if not result.graph.tensors[t].is_const}
    assert activations == {"x", "sin", "cos"} and fused.outputs == ("y",)
    refused = fuse_rotary(rotary_graph(leak=True))
    assert not refused.modified
    assert refused.refusals[0].reason == "an intermediate Concat is also read outside the pattern"


def test_swiglu_pattern():
    nodes = [
        helper.make_node("Sigmoid", ["g"], ["sg"], name="sig"),
        helper.make_node("Mul", ["g", "sg"], ["silu"], name="silu"),
        helper.make_node("Mul", ["silu", "u"], ["y"], name="gate"),
    ]
    g = graph_of(nodes, [vi("g", ["n", 32]), vi("u", ["n", 32])], [vi("y", None)])
    result = fuse_swiglu(g)
    assert result.modified and member_ops(fused_nodes(result.graph)[0]) == ["Mul", "Mul", "Sigmoid"]
    lone = graph_of([helper.make_node("Sigmoid", ["g"], ["y"], name="sig")], [vi("g", [4])], [vi("y", None)])
    assert not fuse_swiglu(lone).modified


# ---- epilogues --------------------------------------------------------------------------------------


def gemm_graph():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "bias"], ["biased"], name="bias"),
        helper.make_node("Relu", ["biased"], ["act"], name="relu"),
        helper.make_node("Add", ["act", "x"], ["y"], name="residual"),
    ]
    return graph_of(nodes, [vi("x", ["n", 64])], [vi("y", None)], [weight("w", 64, 64), weight("bias", 64)])


def test_bias_act_stops_at_the_residual_and_epilogue_takes_it():
    bias_act = fuse_bias_act(gemm_graph())
    (fused,) = fused_nodes(bias_act.graph)
    assert member_ops(fused) == ["Add", "MatMul", "Relu"] and fused.outputs == ("act",)
    full = fuse_epilogue(gemm_graph())
    (fused,) = fused_nodes(full.graph)
    assert member_ops(fused) == ["Add", "Add", "MatMul", "Relu"] and fused.outputs == ("y",)
    lone = graph_of(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [vi("x", ["n", 64])],
        [vi("y", None)],
        [weight("w", 64, 64)],
    )
    assert not fuse_epilogue(lone).modified


# ---- fuse-elementwise --------------------------------------------------------------------------------


def test_vertical_fusion_of_a_chain_and_a_broadcast():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Exp", ["a"], ["b"], name="exp"),
        helper.make_node("Add", ["b", "bias"], ["y"], name="add"),
    ]  # bias [64] broadcast to [n, 64]
    g = graph_of(nodes, [vi("x", ["n", 64]), vi("bias", [64])], [vi("y", None)])
    result = fuse_elementwise(g)
    (fused,) = fused_nodes(result.graph)
    assert member_ops(fused) == ["Add", "Exp", "Relu"]
    r = estimate(result.graph, H100, dims={"n": 8}, pipeline="", roofline=True)
    assert r.kernels[0].kernel.work.dram_bytes == 4 * (8 * 64 + 64 + 8 * 64)  # x and bias in, y out
    assert not fuse_elementwise(result.graph).modified


def test_vertical_fusion_refuses_a_cycle():
    # relu -> matmul -> add and relu -> add: merging relu with add would swallow the path through matmul
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("MatMul", ["a", "w"], ["m"], name="mm"),
        helper.make_node("Add", ["a", "m"], ["y"], name="add"),
    ]
    g = graph_of(nodes, [vi("x", ["n", 64])], [vi("y", None)], [weight("w", 64, 64)])
    result = fuse_elementwise(g)
    assert not result.modified
    assert [r.reason for r in result.refusals] == [
        "fusing would make a cycle (a path leaves the group and comes back)"
    ]


def test_canonicalize_drops_identity_and_noop_cast():
    nodes = [
        helper.make_node("Identity", ["x"], ["a"], name="id"),
        helper.make_node("Cast", ["a"], ["b"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    g = graph_of(nodes, [vi("x", [4])], [vi("y", None)])
    result = canonicalize(g)
    assert result.modified and [n.name for n in result.graph.topo_nodes()] == ["relu"]
    assert result.graph.node("relu").inputs == ("x",)
    assert not canonicalize(result.graph).modified


# ---- strategies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", models.SUITE_MODELS)
def test_every_strategy_keeps_flops_and_never_adds_bytes(name):
    spec = models.MODELS[name]
    g = import_model(spec.build())
    dims = dict(spec.default_dims)
    base = estimate(g, H100, precision="bf16", dims=dims, roofline=True)

    def tensor(r):
        return float(sum((p.kernel.work.flops.get(("tensor", "bf16"), 0) for p in r.kernels), 0))

    for strategy, pipeline in STRATEGIES.items():
        r = estimate(g, H100, precision="bf16", dims=dims, pipeline=pipeline, verify_each=True, roofline=True)
        assert float(r.totals["dram_bytes"]) <= float(base.totals["dram_bytes"]), strategy
        assert not r.uncosted
        # Tensor-core FLOPs are kept, except the causal tiles flash attention skips (documented).
        if "fuse-attention" in pipeline and "decode" not in name and f"{name}-decode" in models.MODELS:
            assert tensor(r) < tensor(base)
        else:
            assert tensor(r) == pytest.approx(tensor(base), rel=1e-12), strategy


def test_llama3_8b_done_when():
    g = import_model(models.build("llama-3-8b"))
    b200 = hwdesc.load("b200")
    runs = {
        s: estimate(g, b200, precision="bf16", dims={"batch": 1, "seq": 4096}, pipeline=STRATEGIES[s],
                    roofline=True)
        for s in ("none", "inductor", "max")
    }
    kernels = {s: len(r.kernels) for s, r in runs.items()}
    assert kernels["none"] >= 3 * kernels["max"]
    dram = {s: float(r.totals["dram_bytes"]) for s, r in runs.items()}
    assert dram["none"] > dram["inductor"] > dram["max"]
    free_seq = estimate(g, b200, precision="bf16", dims={"batch": 1}, pipeline=STRATEGIES["max"],
                        roofline=True)
    s = dim("seq")
    quadratic = [
        p.kernel.name for p in free_seq.kernels if sympy.degree(sympy.expand(p.kernel.work.dram_bytes), s) > 1
    ]
    assert quadratic == []


# ---- CLI ---------------------------------------------------------------------------------------------


def test_compare_fusion_and_explain_cli(capsys):
    assert main(["--model", "gpt2-small", "--compare-fusion", "--dim", "seq=128"]) == 0
    out = capsys.readouterr().out
    for s in STRATEGIES:
        assert f"\n{s} " in out
    assert main(["--model", "gpt2-small", "--compare-fusion", "none,max", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["strategies"]) == {"none", "max"} and doc["strategies"]["max"]["fusion"] == "max"
    assert main(["--model", "llama-tiny", "--fusion", "max", "--explain"]) == 0
    assert "refused fusions" in capsys.readouterr().out
    assert main(["--model", "llama-tiny", "--fusion", "bogus"]) == 2
    assert main(["--model", "llama-tiny", "--compare-fusion", "none,bogus"]) == 2


def test_print_after_and_verify_each(capsys):
    assert main(["--model", "llama-tiny", "--print-after", "fuse-attention", "--verify-each", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # the dump goes to stderr
    assert "// ---- after fuse-attention" in captured.err and "[attention:" in captured.err


def test_pipeline_string_round_trips():
    for pipeline in STRATEGIES.values():
        assert str(Pipeline.parse(pipeline)) == pipeline


# ---- exporter output -----------------------------------------------------------------------------------


@pytest.mark.parametrize("family, causal", [("llama", True), ("gpt2", True), ("bert", False)])
def test_patterns_in_dynamo_exports(family, causal, tmp_path_factory):
    pytest.importorskip("transformers")
    from models.hf import export_tiny

    path = export_tiny(family)
    from estimator.frontends.onnx_import import import_file

    g = import_file(str(path))
    r = estimate(g, H100, precision="bf16", dims={"batch": 1, "seq": 64}, pipeline=STRATEGIES["tensorrt"],
                 roofline=True)
    kinds = [p.kernel.kind for p in r.kernels]
    assert kinds.count("attention") == 2  # both layers
    assert kinds.count("norm") >= 4  # two per layer (plus the final one)
    fused = [r.graph.node(n) for n in r.graph.nx.nodes if r.graph.node(n).attrs.get("attention")]
    assert all(n.attrs["attention"]["causal"] is causal for n in fused)
    assert float(r.totals["dram_bytes"]) < float(
        estimate(g, H100, precision="bf16", dims={"batch": 1, "seq": 64}, roofline=True).totals["dram_bytes"]
    )
