from dataclasses import replace

import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError
from estimator.ir import Tensor, dim

CUDA32 = ("alu", "fp32")


def test_gather_reads_only_the_gathered_rows():
    # embedding lookup: table [128256, 4096] bf16 (a weight), ids [batch, seq] int64
    w = cost(op("Gather", [([128256, 4096], "bf16"), (["batch", "seq"], "int64")],
                [(["batch", "seq", 4096], "bf16")], weights=[0]))
    b, s = dim("batch"), dim("seq")
    assert w.flops == {}
    # ids (8 bytes each) + one 4096-wide bf16 row per token, NOT the 128256-row table
    assert sympy.expand(w.bytes_read - (8 * b * s + 2 * b * s * 4096)) == 0
    assert sympy.expand(w.bytes_written - 2 * b * s * 4096) == 0


def test_gather_elements_and_nd():
    w = cost(op("GatherElements", [([64, 1000], "fp32"), ([64, 5], "int64")], [([64, 5], "fp32")]))
    assert w.bytes_read == 8 * 64 * 5 + 4 * 64 * 5  # indices + the gathered elements
    assert w.bytes_written == 4 * 64 * 5
    w = cost(op("GatherND", [([16, 32, 64], "fp16"), ([10, 2], "int64")], [([10, 64], "fp16")]))
    assert w.bytes_read == 8 * 10 * 2 + 2 * 10 * 64  # 10 index pairs + 10 slices of 64


def test_scatter_out_of_place_and_reduction():
    data, idx, upd = ([1024, 256], "fp32"), ([16, 1], "int64"), ([16, 256], "fp32")
    w = cost(op("ScatterND", [data, idx, upd], [data]))
    assert w.flops == {}
    assert w.bytes_read == 4 * 1024 * 256 + 8 * 16 + 4 * 16 * 256  # data + indices + updates
    assert w.bytes_written == 4 * 1024 * 256  # NB: the out-of-place copy
    w = cost(op("ScatterElements", [data, ([16, 256], "int64"), upd], [data],
                attrs={"reduction": "add"}))
    assert w.flops == {CUDA32: 16 * 256}  # one add per update element


def test_concat_split_slice():
    k = (["batch", 8, "past_seq", 128], "fp16")
    v = (["batch", 8, 1, 128], "fp16")
    out = (["batch", 8, "past_seq + 1", 128], "fp16")
    w = cost(op("Concat", [k, v], [out], attrs={"axis": 2}))
    b, p = dim("batch"), dim("past_seq")
    assert sympy.expand(w.bytes_read - 2 * b * 8 * 128 * (p + 1)) == 0  # both inputs once
    assert sympy.expand(w.bytes_written - 2 * b * 8 * 128 * (p + 1)) == 0
    w = cost(op("Split", [([4096, 3072], "bf16"), ([3], "int64")],
                [([4096, 1024], "bf16")] * 3, consts=[1]))
    assert w.bytes_read == 2 * 4096 * 3072
    assert w.bytes_written == 3 * 2 * 4096 * 1024
    w = cost(op("Slice", [([4096, 3072], "bf16"), ([1], "int64"), ([1], "int64")],
                [([4096, 1024], "bf16")], consts=[1, 2]))
    assert w.bytes_read == 2 * 4096 * 1024  # only the slice is read
    assert w.bytes_written == 2 * 4096 * 1024


def test_transpose_copies_unless_only_unit_dims_move():
    w = cost(op("Transpose", [(["batch", "seq", 32, 128], "bf16")], [(["batch", 32, "seq", 128], "bf16")],
                attrs={"perm": (0, 2, 1, 3)}))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.bytes_read - 2 * b * s * 32 * 128) == 0  # a real copy
    assert sympy.expand(w.bytes_written - 2 * b * s * 32 * 128) == 0
    w = cost(op("Transpose", [([1, 64, 1, 32], "fp32")], [([64, 1, 32, 1], "fp32")],
                attrs={"perm": (1, 0, 3, 2)}))
    assert w.bytes_read == 0 and w.bytes_written == 0  # 64 and 32 keep their order: a view
    w = cost(op("Transpose", [([64, 32], "fp32")], [([32, 64], "fp32")]))  # default perm reverses
    assert w.bytes_read == 4 * 64 * 32


def test_read_input_write_output_family():
    # Expand a [1, 1, seq, seq] mask to [batch, 32, seq, seq]
    w = cost(op("Expand", [([1, 1, "seq", "seq"], "bool"), ([4], "int64")],
                [(["batch", 32, "seq", "seq"], "bool")], consts=[1]))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.bytes_read - s * s) == 0  # the input once; NB: re-reads hit L2
    assert sympy.expand(w.bytes_written - b * 32 * s * s) == 0
    w = cost(op("Pad", [([1, 3, 224, 224], "fp32"), ([8], "int64")], [([1, 3, 226, 226], "fp32")],
                consts=[1]))
    assert w.bytes_read == 4 * 3 * 224 * 224 and w.bytes_written == 4 * 3 * 226 * 226
    w = cost(op("Tile", [([2, 64], "fp16"), ([2], "int64")], [([8, 64], "fp16")], consts=[1]))
    assert w.bytes_read == 2 * 2 * 64 and w.bytes_written == 2 * 8 * 64
    w = cost(op("Trilu", [([2048, 2048], "fp32")], [([2048, 2048], "fp32")]))
    assert w.bytes_read == 4 * 2048 * 2048 and w.flops == {}


def test_plain_copies():
    x = ([1, 64, 32, 32], "fp16")
    y = ([1, 16, 64, 64], "fp16")
    for name, a, b in (("DepthToSpace", x, y), ("SpaceToDepth", y, x)):
        w = cost(op(name, [a], [b], attrs={"blocksize": 2}))
        assert w.bytes_read == 2 * 64 * 32 * 32 and w.bytes_written == 2 * 64 * 32 * 32
    w = cost(op("ReverseSequence", [([10, 4, 8], "fp32"), ([4], "int64")], [([10, 4, 8], "fp32")]))
    assert w.bytes_read == 4 * 320 + 8 * 4  # input + sequence_lens
    w = cost(op("NonZero", [([1000], "bool")], [([1, "unk__0"], "int64")]))
    assert sympy.expand(w.bytes_written - 8 * dim("unk__0")) == 0  # data-dependent count of int64 coords
    w = cost(op("Compress", [([100, 8], "fp32"), ([100], "bool")], [(["unk__1", 8], "fp32")]))
    assert w.bytes_read == 4 * 800 + 100


def test_topk_and_onehot():
    w = cost(op("TopK", [([32, 50000], "fp32"), ([1], "int64")], [([32, 8], "fp32"), ([32, 8], "int64")],
                consts=[1]))
    assert w.flops == {CUDA32: 32 * 50000 * 3}  # NB: log2(8) = 3 compares per element
    assert w.bytes_read == 4 * 32 * 50000
    assert w.bytes_written == 4 * 32 * 8 + 8 * 32 * 8  # values + int64 indices
    w = cost(op("TopK", [([32, 50000], "fp32"), ([1], "int64")], [([32, 1], "fp32"), ([32, 1], "int64")],
                consts=[1]))
    assert w.flops == {CUDA32: 32 * 50000}  # top-1 still compares every element once
    w = cost(op("OneHot", [([64], "int64"), ([], "int64"), ([2], "fp32")], [([64, 10], "fp32")], consts=[1]))
    assert w.bytes_read == 8 * 64 + 4 * 2  # indices + [off, on]
    assert w.bytes_written == 4 * 640


def test_unknown_shapes_raise():
    with pytest.raises(CostError):
        cost(op("Concat", [([4, 4], "fp32"), ([4, 4], "fp32")], [None]))  # output missing
    view = op("Gather", [([100, 8], "fp32"), ([4], "int64")], [([4, 8], "fp32")])
    view = replace(view, inputs=(view.inputs[0], Tensor("x1", None, "int64")))  # indices' rank unknown
    with pytest.raises(CostError):
        cost(view)
    with pytest.raises(CostError):
        cost(op("Transpose", [([4, 4, 4], "fp32")], [([4, 4, 4], "fp32")], attrs={"perm": (1, 0)}))
