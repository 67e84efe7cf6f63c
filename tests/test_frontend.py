"""ONNX frontend: symbolic dims, constness, external weights, fallbacks, control flow."""

import numpy as np
import onnx
import sympy
from onnx import TensorProto, helper, numpy_helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model, parse_model
from estimator.ir import dim, parse_dim
from onnxutil import matmul_model


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_parse_dim_expressions():
    b, s, p = dim("batch"), dim("seq"), dim("past_seq")
    assert parse_dim("batch") == b
    assert parse_dim("batch*seq") == b * s
    assert parse_dim("past_seq + seq") == p + s
    assert parse_dim("floor(seq/2) + 1") == sympy.floor(s / 2) + 1
    assert b.is_positive and b.is_integer


def test_reshape_minus_one_keeps_batch_times_seq():
    # [batch, seq, 64] -> Reshape([-1, 64]) -> [batch*seq, 64] -> MatMul [64, 32]
    shape = numpy_helper.from_array(np.array([-1, 64], np.int64), "shape")
    w = numpy_helper.from_array(np.zeros((64, 32), np.float32), "w")
    m = model([helper.make_node("Reshape", ["x", "shape"], ["x2"], name="r"),
               helper.make_node("MatMul", ["x2", "w"], ["y"], name="mm")],
              [vi("x", ["batch", "seq", 64])], [vi("y", None)], [shape, w])
    g = import_model(m)
    assert g.tensors["x2"].shape == (dim("batch") * dim("seq"), sympy.Integer(64))
    assert g.tensors["shape"].is_const and not g.tensors["shape"].is_weight
    assert g.tensors["w"].is_weight
    r = estimate(g, hwdesc.load("h100-sxm"), roofline=True)
    assert [k.kernel.name for k in r.kernels] == ["mm"]  # the Reshape is a free view
    assert sympy.expand(r.totals["flops"] - 2 * dim("batch") * dim("seq") * 64 * 32) == 0


def test_concat_with_past_gives_past_plus_seq():
    m = model([helper.make_node("Concat", ["past", "new"], ["y"], name="cat", axis=2)],
              [vi("past", ["batch", 8, "past_seq", 64]), vi("new", ["batch", 8, "seq", 64])], [vi("y", None)])
    g = import_model(m)
    assert g.tensors["y"].shape[2] == dim("past_seq") + dim("seq")


def test_external_weights_are_never_read(tmp_path):
    m = matmul_model(1, 4096, 4096, weight=True)  # refers to w.bin, which does not exist
    data = m.SerializeToString()
    g = import_model(parse_model(data))
    assert g.tensors["b"].is_weight and g.tensors["b"].nbytes == 2 * 4096 * 4096


def test_shape_arithmetic_is_host_side():
    # Shape -> Gather -> Unsqueeze -> Concat builds a reshape target: no kernels, only the Relu.
    idx = numpy_helper.from_array(np.array(0, np.int64), "idx")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "m1")
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "idx"], ["b"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["b1"], name="unsq"),
             helper.make_node("Concat", ["b1", "m1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["x2"], name="reshape"),
             helper.make_node("Relu", ["x2"], ["y"], name="relu")]
    ax = numpy_helper.from_array(np.array([0], np.int64), "ax")
    m = model(nodes, [vi("x", ["batch", "seq", 16])], [vi("y", None)], [idx, minus1, ax])
    g = import_model(m)
    r = estimate(g, hwdesc.load("h100-sxm"), pipeline="dce", roofline=True)
    assert [k.kernel.name for k in r.kernels] == ["relu"]
    assert r.free_nodes == 5  # lowering prices the shape nodes as free
    r = estimate(g, hwdesc.load("h100-sxm"), roofline=True)  # canonicalize drops them before lowering
    assert [k.kernel.name for k in r.kernels] == ["relu"] and r.free_nodes == 1


def test_unnamed_dims_are_reported_not_guessed():
    # NonZero's output length is data-dependent: shape inference can only invent a name for it.
    m = model([helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
               helper.make_node("Cast", ["nz"], ["y"], name="cast", to=TensorProto.FLOAT)],
              [vi("x", ["batch", 16])], [vi("y", None)])
    g = import_model(m)
    assert g.unknown_dims, g.tensors["nz"].shape
    r = estimate(g, hwdesc.load("h100-sxm"), dims={"batch": 2}, roofline=True)
    from estimator.report.table import to_table

    assert g.unknown_dims[0] in to_table(r) and "--dim" in to_table(r)


def test_control_flow_is_uncosted_with_reason():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", [4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [4])])
    m = model([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
              [vi("c", [], TensorProto.BOOL), vi("x", [4])], [vi("y", [4])])
    r = estimate(import_model(m), hwdesc.load("h100-sxm"), roofline=True)
    assert [u.node for u in r.uncosted] == ["branch"]
    assert "control flow" in r.uncosted[0].reason


def test_opset23_attention_falls_back_to_onnx_inference():
    # onnxruntime's symbolic inference dispatches on op name and fails on the standard Attention op.
    nodes = [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", is_causal=1)]
    m = model(nodes, [vi("q", ["batch", 8, "seq", 64]), vi("k", ["batch", 8, "seq", 64]),
                      vi("v", ["batch", 8, "seq", 64])], [vi("y", None)], opset=23)
    g = import_model(m)
    assert g.tensors["y"].shape == (dim("batch"), 8, dim("seq"), 64)


def test_onnx_checker_accepts_test_models():
    onnx.checker.check_model(matmul_model(8, 8, 8))
