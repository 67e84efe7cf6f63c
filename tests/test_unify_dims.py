"""Symbolic shape unification (estimator/frontends/unify_dims.py): each rule on a hand-built node, the
union-find's anchors and conflicts, and a graph with every dim unknown priced like its named twin."""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from onnx import TensorProto, helper, numpy_helper

import hwdesc
from estimator.estimate import EstimateError, estimate
from estimator.frontends.onnx_import import infer_shapes, split_weights, to_graph
from estimator.frontends.unify_dims import unify
from estimator.ir import Node, Tensor, dim
from estimator.report.fusion import explain

A, B, C, K, M, N, O0, O1 = (dim(f"unk__{s}") for s in ("a", "b", "c", "k", "m", "n", "o0", "o1"))


def _unify(nodes, shapes, inputs):
    tensors = {name: Tensor(name, tuple(dim(d) if isinstance(d, str) else sympy.sympify(d) for d in shape),
                            "fp32") for name, shape in shapes.items()}
    return unify(nodes, tensors, inputs)


def _shape(u, name):
    return u.tensors[name].shape


def test_broadcast_merges_non_1_dims_and_the_output():
    # Add([a, b], [c, b]) -> [o0, o1]: position 0 has a and c (neither the literal 1): a == c == o0;
    # position 1 has b twice: o1 == b. a is on the first input, so it names the class.
    u = _unify([Node("add", "Add", inputs=("x", "y"), outputs=("z",))],
               {"x": (A, B), "y": (C, B), "z": (O0, O1)}, ["x", "y"])
    assert u.merges == {"unk__c": A, "unk__o0": A, "unk__o1": B}
    assert _shape(u, "y") == (A, B) and _shape(u, "z") == (A, B) and not u.conflicts


def test_broadcast_of_a_literal_1_merges_nothing():
    # Add([1, b], [c, b]) -> [c, b]: the 1 broadcasts against c, so nothing says c == anything
    u = _unify([Node("add", "Add", inputs=("x", "y"), outputs=("z",))],
               {"x": (1, B), "y": (C, B), "z": (C, B)}, ["x", "y"])
    assert u.merges == {} and _shape(u, "y") == (C, B)


def test_an_invented_dim_meeting_a_number_or_a_name_becomes_it():
    # Mul([a, 8], [batch, 8]) -> [o0, o1]: a == batch == o0 (batch is named: it replaces a); o1 == 8
    u = _unify([Node("mul", "Mul", inputs=("x", "y"), outputs=("z",))],
               {"x": (A, 8), "y": ("batch", 8), "z": (O0, O1)}, ["x", "y"])
    assert u.merges == {"unk__a": dim("batch"), "unk__o0": dim("batch"), "unk__o1": 8}
    assert _shape(u, "z") == (dim("batch"), 8)


def test_matmul_contracted_dim_rows_and_columns():
    # [m, k] @ [64, 256] -> [o0, o1]: k == 64 (contracted), o0 == m (rows), o1 == 256 (columns)
    u = _unify([Node("mm", "MatMul", inputs=("x", "w"), outputs=("y",))],
               {"x": (M, K), "w": (64, 256), "y": (O0, O1)}, ["x"])
    assert u.merges == {"unk__k": 64, "unk__o0": M, "unk__o1": 256}


def test_matmul_batch_dims_broadcast_and_a_1d_operand():
    # [a, m, 16] @ [c, 16, n] -> [o0, m, n]: batch a == c == o0; [m, 16] @ [k] -> [n]: k == 16, n == m
    u = _unify([Node("bmm", "MatMul", inputs=("x", "w"), outputs=("y",))],
               {"x": (A, M, 16), "w": (C, 16, N), "y": (O0, M, N)}, ["x", "w"])
    assert u.merges == {"unk__c": A, "unk__o0": A}
    u = _unify([Node("mv", "MatMul", inputs=("x", "v"), outputs=("y",))],
               {"x": (M, 16), "v": (K,), "y": (N,)}, ["x", "v"])
    assert u.merges == {"unk__k": 16, "unk__n": M}


def test_gemm_transposes():
    # Gemm(transB=1): A [m, k] x B^T with B [n, 32] -> [o0, o1]: k == 32, o0 == m, o1 == n
    u = _unify([Node("g", "Gemm", inputs=("x", "w"), outputs=("y",), attrs={"transB": 1})],
               {"x": (M, K), "w": (N, 32), "y": (O0, O1)}, ["x", "w"])
    assert u.merges == {"unk__k": 32, "unk__o0": M, "unk__o1": N}


def test_concat_equates_dims_off_the_axis_only():
    # Concat(axis=1) of [a, 3] and [c, 5] -> [o0, 8]: a == c == o0; the axis (3 + 5 = 8) is left alone
    u = _unify([Node("cat", "Concat", inputs=("x", "y"), outputs=("z",), attrs={"axis": 1})],
               {"x": (A, 3), "y": (C, 5), "z": (O0, 8)}, ["x", "y"])
    assert u.merges == {"unk__c": A, "unk__o0": A}


def test_a_negative_axis_counts_from_the_end_and_a_corrupt_attribute_proves_nothing():
    # Concat(axis=-1) of [a, 3] and [c, 5] is axis 1: a == c; a perm that is no permutation: nothing
    u = _unify([Node("cat", "Concat", inputs=("x", "y"), outputs=("z",), attrs={"axis": -1})],
               {"x": (A, 3), "y": (C, 5), "z": (A, 8)}, ["x", "y"])
    assert u.merges == {"unk__c": A}
    for perm in ((0, 0), (1.0, 0.0), (0, 1, 2)):
        u = _unify([Node("t", "Transpose", inputs=("x",), outputs=("y",), attrs={"perm": perm})],
                   {"x": (A, B), "y": (O0, O1)}, ["x"])
        assert u.merges == {}, perm


def test_transpose_and_softmax_carry_dims():
    # Transpose(perm=[1, 0]) [a, b] -> [o0, o1]: o0 == b, o1 == a; Softmax [o0, o1] -> [m, n]
    nodes = [Node("t", "Transpose", inputs=("x",), outputs=("y",), attrs={"perm": (1, 0)}),
             Node("sm", "Softmax", inputs=("y",), outputs=("z",), attrs={"axis": -1})]
    u = _unify(nodes, {"x": (A, B), "y": (O0, O1), "z": (M, N)}, ["x"])
    assert _shape(u, "y") == (B, A) and _shape(u, "z") == (B, A)


def test_two_anchors_for_one_class_are_a_conflict_and_keep_the_first():
    # a + [64] says a == 64; a + [256] then says a == 256: refused, reported, a stays 64
    nodes = [Node("add64", "Add", inputs=("x", "w64"), outputs=("y",)),
             Node("add256", "Add", inputs=("x", "w256"), outputs=("z",))]
    u = _unify(nodes, {"x": (A,), "w64": (64,), "w256": (256,), "y": (64,), "z": (256,)}, ["x"])
    assert u.merges == {"unk__a": 64}
    assert len(u.conflicts) == 1 and u.conflicts[0].startswith("add256: unk__a == 256 not merged")


def test_expressions_of_invented_dims_and_named_graphs_are_left_alone():
    # a == 2*b cannot be one symbol (a class is a set of symbols); a graph of named dims is unchanged
    u = _unify([Node("add", "Add", inputs=("x", "y"), outputs=("z",))],
               {"x": (A,), "y": (2 * B,), "z": (2 * B,)}, ["x", "y"])
    assert u.merges == {}
    shapes = {"x": ("batch", "seq"), "y": ("batch", "seq"), "z": ("batch", "seq")}
    u = _unify([Node("add", "Add", inputs=("x", "y"), outputs=("z",))], shapes, ["x", "y"])
    assert u.merges == {} and _shape(u, "z") == (dim("batch"), dim("seq"))


# ---- a whole graph: every dim unknown against the same graph with named dims -------------------------

HIDDEN = 8


def _mlp(named: bool):
    """x -> LayerNorm -> MatMul [8, 32] -> Add bias -> Gelu -> MatMul [32, 8] -> Add x; named: x is
    [batch, seq, 8] and shape inference runs; unknown: every tensor's dims are unnamed (no inference)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("g", (HIDDEN,)), ("b", (HIDDEN,)), ("w1", (HIDDEN, 32)), ("b1", (32,)),
                          ("w2", (32, HIDDEN)))]
    mk = helper.make_node
    nodes = [mk("LayerNormalization", ["x", "g", "b"], ["ln"], name="ln", axis=-1),
             mk("MatMul", ["ln", "w1"], ["h1"], name="mm1"), mk("Add", ["h1", "b1"], ["h2"], name="add1"),
             mk("Gelu", ["h2"], ["h3"], name="gelu"), mk("MatMul", ["h3", "w2"], ["h4"], name="mm2"),
             mk("Add", ["h4", "x"], ["y"], name="res")]
    dims = ["batch", "seq", HIDDEN] if named else [None, None, None]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], inits)
    if not named:
        graph.value_info.extend(helper.make_tensor_value_info(t, TensorProto.FLOAT, [None] * 3)
                                for t in ("ln", "h1", "h2", "h3", "h4"))
    light, weights = split_weights(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    return to_graph(infer_shapes(light) if named else light, weights)


def test_an_unknown_graph_prices_as_its_named_twin_up_to_the_names():
    named, unknown = _mlp(named=True), _mlp(named=False)
    # x's dims name the classes; its hidden dim, ln's and the others' are proven 8 (LayerNorm's scale,
    # the MatMul's contracted dim), h1's and h2's last dims 32: 3 of x + 3 * 6 tensors = 21 dims, 2 left
    assert sorted(s.name for s in unknown.free_symbols()) == ["unk__x_0", "unk__x_1"]
    assert len(unknown.dim_merges) == 21 - 2 and unknown.dim_merges["unk__h2_2"] == 32
    hw = hwdesc.load("h100-sxm")
    rn, ru = estimate(named, hw, roofline=True), estimate(unknown, hw, roofline=True)
    assert len(ru.kernels) == len(rn.kernels)  # the same fusions: shapes are provably equal again
    rename = {dim("batch"): dim("unk__x_0"), dim("seq"): dim("unk__x_1")}
    for key in ("bound_s", "estimate_s", "flops", "dram_bytes"):
        assert sympy.sympify(rn.totals[key]).xreplace(rename) == ru.totals[key], key
    assert "unk__x_0 <- 6: unk__ln_0, unk__h1_0, unk__h2_0 (+3 more)" in explain(ru)
    assert "merged dims" not in explain(rn)


def test_binding_a_merged_name_says_what_replaced_it():
    with pytest.raises(EstimateError, match=r"no dim 'unk__h1_0' \(the graph proves it equal to unk__x_0"):
        estimate(_mlp(named=False), hwdesc.load("h100-sxm"), dims={"unk__h1_0": 4}, roofline=True)
