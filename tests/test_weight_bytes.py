"""weight_bytes counts stored weights only, whatever the fusion strategy (issue 13: a T5 decoder's
relative position bias, Gathered from a small table by run-time-free indices, is weight-derived and
seq x seq big; it was counted once fusion hid its producer inside a kernel)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from passes import STRATEGIES

H100 = hwdesc.load("h100-sxm")


def _t5_style_bias_model():
    """scores [1, 4, seq, seq] + Transpose(Gather(bias_table[32, 4], buckets[seq, seq])), buckets from
    Range(seq) arithmetic (host values), as T5's relative attention bias is exported."""
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.zeros((32, 4), np.float32), "relative_attention_bias.weight"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array(31, np.int64), "max_bucket")]
    nodes = [
        helper.make_node("Shape", ["scores"], ["shape"], start=2, end=3),
        helper.make_node("Squeeze", ["shape"], ["seq"]),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "ax1"], ["rows"]),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["cols"]),
        helper.make_node("Sub", ["cols", "rows"], ["rel"]),
        helper.make_node("Abs", ["rel"], ["dist"]),
        helper.make_node("Min", ["dist", "max_bucket"], ["buckets"]),
        helper.make_node("Gather", ["relative_attention_bias.weight", "buckets"], ["bias"], axis=0),
        helper.make_node("Transpose", ["bias"], ["bias_t"], perm=[2, 0, 1]),
        helper.make_node("Add", ["scores", "bias_t"], ["biased"]),
        helper.make_node("Softmax", ["biased"], ["probs"], axis=-1),
    ]
    g = helper.make_graph(nodes, "t5_bias",
                          [helper.make_tensor_value_info("scores", f, [1, 4, "seq", "seq"])],
                          [helper.make_tensor_value_info("probs", f, [1, 4, "seq", "seq"])], inits)
    return import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_weight_bytes_is_the_stored_table_under_every_strategy(strategy):
    r = estimate(_t5_style_bias_model(), H100, pipeline=STRATEGIES[strategy], roofline=True)
    assert r.totals["weight_bytes"] == 32 * 4 * 4  # the [32, 4] fp32 table; no seq in it


def test_a_fused_kernel_hiding_a_weight_derived_tensor_does_not_count_it():
    """The bias Gather, its Transpose and the Add in one kernel (as a fusion strategy may group them):
    the [seq, seq, 4] bias is produced inside the kernel, not stored."""
    from estimator.estimate import weight_bytes
    from passes.graph_edit import Group, apply_groups

    g = _t5_style_bias_model()
    names = {n.name for n in g.topo_nodes() if n.op_type in ("Gather", "Transpose", "Add")}
    fused = apply_groups(g, [Group("test", frozenset(names), "elementwise")])
    assert weight_bytes(g) == weight_bytes(fused) == 32 * 4 * 4


def test_near_miss_epilogue_is_reported():
    """fuse-bias-act admits no second activation: MatMul -> Add(residual) is a near miss, named."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("Add", ["y", "r"], ["out"], name="residual")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [8, 32]),
                                       helper.make_tensor_value_info("r", f, [8, 64])],
                          [helper.make_tensor_value_info("out", f, [8, 64])],
                          [numpy_helper.from_array(np.zeros((32, 64), np.float32), "w")])
    graph = import_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    r = estimate(graph, H100, pipeline="canonicalize,fuse-bias-act", roofline=True)
    assert [(x.rule, x.nodes) for x in r.refusals] == [("fuse-bias-act", ("mm",))]
    assert r.refusals[0].reason == ("near miss: the epilogue Add reads a second activation produced "
                                    "after the GEMM")
    fused = estimate(graph, H100, pipeline="canonicalize,fuse-epilogue",
                     roofline=True)  # the residual epilogue takes it
    assert not fused.refusals and len(fused.kernels) == 1
