"""Pass infrastructure and dead-code elimination."""

import pytest
from onnx import TensorProto, helper

from estimator.frontends.onnx_import import import_model
from passes import Pipeline, PipelineError, available_passes
from passes.dce import dce


def two_branch_model():
    # x -> relu -> y (output); x -> neg -> unused (dead)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="relu"),
        helper.make_node("Neg", ["x"], ["unused"], name="neg"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 18)]
    )


def test_dce_removes_dead_node_without_mutating_input():
    g = import_model(two_branch_model())
    result = dce(g)
    assert result.modified
    assert [n.name for n in result.graph.topo_nodes()] == ["relu"]
    assert "unused" not in result.graph.tensors
    assert len(g) == 2  # the input graph is untouched


def test_dce_on_live_graph_is_unmodified():
    g = dce(import_model(two_branch_model())).graph
    again = dce(g)
    assert not again.modified and again.graph is g


def test_pipeline_round_trips_and_rejects_unknown_passes():
    assert "dce" in available_passes()
    assert str(Pipeline.parse("dce")) == "dce"
    assert str(Pipeline.parse(" dce , dce ")) == "dce,dce"
    assert str(Pipeline.parse("")) == ""
    with pytest.raises(PipelineError, match="unknown pass 'fuse-magic'"):
        Pipeline.parse("dce,fuse-magic")


def test_pipeline_reports_each_pass():
    seen = []
    Pipeline.parse("dce,dce").run(
        import_model(two_branch_model()), after=lambda n, r: seen.append((n, r.modified))
    )
    assert seen == [("dce", True), ("dce", False)]
