"""The CLI contract: JSON fields, exit codes, one-line errors for bad input."""

import json

import onnx
import pytest
from cliutil import assert_one_error_line, cli
from onnx import TensorProto, helper

from onnxutil import gpt_block_model, matmul_model


def save(model, tmp_path, name="m.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def test_json_contract(capsys, tmp_path):
    path = save(gpt_block_model(), tmp_path)
    code, out, _ = cli(capsys, path, "--arch", "blackwell", "--json", "--dim", "batch=2", "--dim", "seq=64",
                       "--fusion", "none")
    assert code == 0
    doc = json.loads(out)
    assert doc["fusion"] == "none"
    assert doc["arch"] == "b200" and doc["precision"] == "graph"
    assert doc["dims"] == {"batch": 2, "seq": 64}
    assert set(doc["total"]) >= {"bound_s", "estimate_s", "flops", "dram_bytes", "kernels"}
    assert doc["total"]["kernels"] == len(doc["kernels"]) == 22
    for k in doc["kernels"]:
        assert set(k) >= {"name", "nodes", "kind", "flops", "dram_bytes", "bound_s", "estimate_s", "limiter"}
        assert isinstance(k["bound_s"], float) and k["estimate_s"] >= k["bound_s"]
        assert k["limiter"] in ("compute", "memory", "launch")
    assert doc["uncosted"] == []
    assert sum(k["estimate_s"] for k in doc["kernels"]) == pytest.approx(doc["total"]["estimate_s"])


def test_default_fusion_is_tensorrt(capsys, tmp_path):
    path = save(gpt_block_model(), tmp_path)
    code, out, _ = cli(capsys, path, "--json", "--dim", "batch=2", "--dim", "seq=64")
    doc = json.loads(out)
    assert doc["fusion"] == "tensorrt"
    # ln; q, k, v; attention; o + residual; fc1 + GELU; fc2 + residual
    kinds = [k["kind"] for k in doc["kernels"]]
    assert kinds == ["norm", "matmul", "matmul", "matmul", "attention", "matmul", "matmul", "matmul"]
    assert {"qk", "scale_scores", "softmax", "pv"} <= set(doc["kernels"][4]["nodes"])


def test_json_with_free_dims_holds_expressions(capsys, tmp_path):
    path = save(gpt_block_model(), tmp_path)
    code, out, _ = cli(capsys, path, "--json", "--dim", "batch=1")
    doc = json.loads(out)
    assert doc["dims"] == {"batch": 1, "seq": None}
    assert isinstance(doc["total"]["bound_s"], str) and "seq" in doc["total"]["bound_s"]


def test_table_and_symbolic(capsys, tmp_path):
    path = save(gpt_block_model(), tmp_path)
    code, out, _ = cli(capsys, path, "--dim", "batch=1", "--dim", "seq=512", "--top", "5")
    assert code == 0 and "top 5 of" in out and "by limiter" in out and "by kind" in out
    code, out, _ = cli(capsys, path, "--symbolic")
    assert code == 0 and "bound_s = " in out and "seq" in out and "batch" in out


def test_list_archs(capsys):
    code, out, _ = cli(capsys, "--list-archs")
    assert code == 0
    for name in (
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
        "gb200",
        "b300",
        "rtx-5090",
        "rtx-pro-6000",
        "a100",
    ):
        assert name in out
    assert "989" in out  # h100 bf16 TFLOP/s


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["/nonexistent/model.onnx"], "no such file"),
        (["--arch", "h900"], "h900"),
        (["--dim", "seq"], "NAME=VALUE"),
        (["--dim", "seq=abc"], "integer"),
        (["--dim", "seq=0"], "positive"),
        (["--dim", "sq=4"], "no dim 'sq'"),
        (["--fusion", "magic"], "fusion"),
        (["--precision", "fp4"], "fp4"),
        (["--precision", "int3"], "invalid choice"),
        (["--pipeline", "nope"], "unknown pass"),
        (["--top", "0"], "--top"),
    ],
)
def test_bad_flags(capsys, tmp_path, argv, fragment):
    path = save(matmul_model(64, 64, 64), tmp_path)
    argv = [a for a in argv if a.startswith("/")] or [path, *argv]
    code, _, err = cli(capsys, *argv)
    assert_one_error_line(code, err, fragment)


def test_no_model_is_a_usage_error(capsys):
    code, _, err = cli(capsys)
    assert_one_error_line(code, err, "no model")


def test_not_onnx_and_truncated(capsys, tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf at all \xff\xfe" * 10)
    assert_one_error_line(*cli(capsys, str(junk))[::2], "ONNX")
    good = matmul_model(64, 64, 64).SerializeToString()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(good[: len(good) // 2])
    assert_one_error_line(*cli(capsys, str(cut))[::2], "")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert_one_error_line(*cli(capsys, str(empty))[::2], "empty")
    assert_one_error_line(*cli(capsys, str(tmp_path))[::2], "directory")


def test_cyclic_graph(capsys, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Relu", ["a"], ["b"], name="n2"),
        helper.make_node("Relu", ["a"], ["y"], name="n3"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "cyc", [x], [y]), opset_imports=[helper.make_opsetid("", 18)]
    )
    path = tmp_path / "cyc.onnx"
    path.write_bytes(model.SerializeToString())
    assert_one_error_line(*cli(capsys, str(path))[::2], "cycle")


def _unknown_op_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("FancyOp", ["a"], ["y"], name="fancy", domain="custom.domain"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom.domain", 1)],
    )


def test_unknown_op_is_uncosted_and_strict_fails(capsys, tmp_path):
    path = save(_unknown_op_model(), tmp_path)
    code, out, _ = cli(capsys, path, "--json", "--dim", "batch=4")
    doc = json.loads(out)
    assert code == 0
    assert doc["uncosted"] == [
        {
            "node": "fancy",
            "op": "custom.domain.FancyOp",
            "reason": "no cost function for custom.domain.FancyOp",
        }
    ]
    code, out, _ = cli(capsys, path, "--dim", "batch=4")
    assert "uncosted (1 nodes" in out
    code, _, err = cli(capsys, path, "--strict", "--dim", "batch=4")
    assert_one_error_line(code, err, "--strict")


def test_old_and_future_opsets(capsys, tmp_path):
    m = matmul_model(8, 8, 8)
    m.opset_import[0].version = 9
    assert_one_error_line(*cli(capsys, save(m, tmp_path))[::2], "opset 9")
    m.opset_import[0].version = 99
    assert_one_error_line(*cli(capsys, save(m, tmp_path, "f.onnx"))[::2], "opset 99")
