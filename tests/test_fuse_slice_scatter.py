"""fuse-slice-scatter on a graph built in code: torch's export of `buf = new_empty(...);
buf[..., :16] = a; buf[..., 16:] = b` (DeepSeek-V3's key assembly), which is one concat."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from passes import fuse_slice_scatter, pipeline_for
from passes.pipeline import Pipeline

H100 = hwdesc.load("h100-sxm")
PERM = [3, 1, 2, 0]  # ScatterND writes leading rows: the last axis moved to the front and back


def _model(rows_b: int = 8) -> onnx.ModelProto:
    """a [2, 4, 8, 16] and b [2, 4, 8, rows_b] written into a zero [2, 4, 8, 24] buffer."""
    inits = [numpy_helper.from_array(np.array([2, 4, 8, 24], np.int64), "shape"),
             numpy_helper.from_array(np.arange(16, dtype=np.int64).reshape(16, 1), "idx_a"),
             numpy_helper.from_array(np.arange(16, 16 + rows_b, dtype=np.int64).reshape(rows_b, 1), "idx_b")]
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
        helper.make_node("Transpose", ["zeros"], ["zeros_t"], perm=PERM),
        helper.make_node("Transpose", ["a"], ["a_t"], perm=PERM),
        helper.make_node("ScatterND", ["zeros_t", "idx_a", "a_t"], ["s1"]),
        helper.make_node("Transpose", ["s1"], ["buf1"], perm=PERM),  # the perm is its own inverse
        helper.make_node("Transpose", ["buf1"], ["buf1_t"], perm=PERM),
        helper.make_node("Transpose", ["b"], ["b_t"], perm=PERM),
        helper.make_node("ScatterND", ["buf1_t", "idx_b", "b_t"], ["s2"]),
        helper.make_node("Transpose", ["s2"], ["out"], perm=PERM),
    ]
    graph = helper.make_graph(
        nodes, "slice_scatter",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4, 8, 16]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 4, 8, rows_b])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4, 8, 24])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_slice_scatter_chain_is_one_concat_kernel():
    result = estimate(import_model(_model()), H100, pipeline=pipeline_for("tensorrt"), roofline=True)
    assert len(result.kernels) == 1
    assert result.kernels[0].kernel.kind == "movement"
    # reads a (2*4*8*16*4 = 4096 bytes) and b (2*4*8*8*4 = 2048) once, writes out (2*4*8*24*4 = 6144)
    assert float(result.totals["dram_bytes"]) == 4096 + 2048 + 6144


def test_unfused_chain_copies_the_buffer_per_write():
    # none: 2 update transposes (r+w 4096*2, 2048*2), 2 ScatterND (each its buffer, its update and its
    # result), 3 buffer transposes (r+w 6144*2 each): far more than the concat's 12,288 bytes
    result = estimate(import_model(_model()), H100, pipeline=pipeline_for("none"), roofline=True)
    assert float(result.totals["dram_bytes"]) > 3 * (4096 + 2048 + 6144)


def test_partial_cover_is_a_near_miss():
    result = fuse_slice_scatter.fuse_slice_scatter(
        Pipeline.parse("canonicalize").run(import_model(_model(rows_b=4))))
    assert not result.modified  # 16 + 4 rows of 24: not a concat
    assert any("near miss (slice_scatter): the writes cover 20 of 24" in r.reason for r in result.refusals)


def test_no_scatter_no_change():
    graph = import_model(helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]),
        opset_imports=[helper.make_opsetid("", 18)], ir_version=9))
    assert not fuse_slice_scatter.fuse_slice_scatter(graph).modified
