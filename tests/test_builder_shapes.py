"""The bundled builder's own shapes (models/_shapes.py): equal to onnxruntime's symbolic inference tensor by
tensor, and the importer skips that inference only for a model so marked with every node output shaped."""

import onnx
import pytest
import sympy
from onnx import TensorProto, helper

import models
from estimator.frontends import onnx_import
from models import _shapes
from models._builder import GraphBuilder


def _graphs(name):
    """(graph from onnxruntime's inference, graph from the builder's value_info) of one bundled model."""
    model = models.MODELS[name].build()
    light, weights = onnx_import.split_weights(model)
    bare = onnx.ModelProto()
    bare.CopyFrom(light)
    del bare.graph.value_info[:]
    return onnx_import.to_graph(onnx_import.infer_shapes(bare), weights), onnx_import.to_graph(light, weights)


@pytest.mark.parametrize("name", ["llama-tiny", "llama-tiny-decode", "llama-3-8b-decode"])
def test_builder_shapes_equal_onnxruntimes(name):
    inferred, built = _graphs(name)
    assert set(built.tensors) == set(inferred.tensors)
    assert [n for n in built.tensors if built.tensors[n] != inferred.tensors[n]] == []
    assert [built.node(n) for n in built.nx.nodes] == [inferred.node(n) for n in inferred.nx.nodes]


def test_marked_model_skips_the_external_inference(monkeypatch):
    model = models.MODELS["llama-tiny"].build()
    assert onnx_import.builder_shaped(model)

    def refuse(_):
        raise AssertionError("infer_shapes ran")

    monkeypatch.setattr(onnx_import, "infer_shapes", refuse)
    graph = onnx_import.import_model(model)
    assert graph.tensors["logits"].shape == (sympy.Symbol("batch", integer=True, positive=True),
                                             sympy.Symbol("seq", integer=True, positive=True), 256)


def test_a_missing_shape_or_an_unknown_op_goes_through_inference():
    model = models.MODELS["llama-tiny"].build()
    del model.graph.value_info[0]
    assert not onnx_import.builder_shaped(model)  # marked, but one node output has no shape
    assert not onnx_import.builder_shaped(models.MODELS["resnet50"].build())  # Conv: no rule, not marked
    assert onnx_import.builder_shaped(models.MODELS["llama-tiny-decode"].build())


def _known(*dims):
    return _shapes.Known(TensorProto.FLOAT, tuple(_shapes.dim_expr(d) for d in dims))


def _const(values):
    import numpy as np

    return _shapes.known_array(np.array(values, dtype=np.int64))


def test_rules_worked_by_hand():
    batch, seq, past = (_shapes.dim_expr(n) for n in ("batch", "seq", "past_seq"))
    # repeat_kv's Reshape: [batch, 8, 4, seq, 128] to [0, 32, -1, 128];
    # -1 = batch*8*4*seq*128 / (batch*32*128) = seq
    reshape = helper.make_node("Reshape", ["x", "s"], ["y"])
    (out,) = _shapes.infer(reshape, [_known("batch", 8, 4, "seq", 128), _const([0, 32, -1, 128])])
    assert out.shape == (batch, 32, seq, 128)
    # Range(past_seq, past_seq + 1, 1): ceil((past_seq + 1 - past_seq) / 1) = 1 position
    rng = helper.make_node("Range", ["a", "b", "c"], ["y"])
    start, limit = (_shapes.Known(TensorProto.INT64, (), (v,)) for v in (past, past + 1))
    (out,) = _shapes.infer(rng, [start, limit, _const(1)])
    assert out.shape == (1,)
    (out,) = _shapes.infer(rng, [_shapes.Known(TensorProto.INT64, (), (sympy.Integer(0),)),
                                 _shapes.Known(TensorProto.INT64, (), (seq,)), _const(1)])
    assert out.shape == (seq,)  # ceil((seq - 0) / 1)
    # rotate_half's second Slice of a 128-wide head: [64, INT64_MAX) clamps to 128 - 64 = 64
    sl = helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])
    (out,) = _shapes.infer(sl, [_known("batch", 32, "seq", 128), _const([64]), _const([_shapes.INT64_MAX]),
                                _const([-1])])
    assert out.shape == (batch, 32, seq, 64)
    # the scores plus the [seq, seq] mask broadcast to [batch, 32, seq, seq]; a symbolic Slice is refused
    add = helper.make_node("Add", ["a", "b"], ["y"])
    assert _shapes.infer(add, [_known("batch", 32, "seq", "seq"), _known("seq", "seq")])[0].shape == (
        batch, 32, seq, seq)
    with pytest.raises(_shapes.UnshapedError):
        _shapes.infer(sl, [_known("batch", "seq"), _const([0]), _const([4]), _const([1])])


def test_a_dim_text_outside_the_rules_leaves_the_model_unmarked():
    b = GraphBuilder("m", "external")
    x = b.input("x", TensorProto.FLOAT, ["batch", "min(past_seq, 128)"])
    b.output(b.op("Relu", x), "y", TensorProto.FLOAT, ["batch", "min(past_seq, 128)"])
    model = b.model("doc")
    assert not onnx_import.builder_shaped(model) and len(model.graph.value_info) == 0


def test_a_dim_the_rules_cannot_name_leaves_the_node_unshaped():
    seq = _shapes.dim_expr("seq")
    # [batch, seq, 3] to [0, -1, 2]: -1 = batch*seq*3 / (batch*2) = 3*seq/2, not an integer for every seq
    with pytest.raises(_shapes.UnshapedError):
        _shapes.infer(helper.make_node("Reshape", ["x", "s"], ["y"]),
                      [_known("batch", "seq", 3), _const([0, -1, 2])])
    # Range(0, seq, 2): ceil(seq / 2) positions, which sympy keeps as a ceiling
    start, limit = (_shapes.Known(TensorProto.INT64, (), (v,)) for v in (sympy.Integer(0), seq))
    with pytest.raises(_shapes.UnshapedError):
        _shapes.infer(helper.make_node("Range", ["a", "b", "c"], ["y"]), [start, limit, _const(2)])
