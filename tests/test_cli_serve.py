"""The serving CLI mode (estimator/cli/serve.py), in-process, on llama-tiny and small graphs."""

import json

from onnx import TensorProto, helper

from tests.cliutil import assert_one_error_line, cli


def test_tp_not_dividing_heads_is_one_error_line(capsys):
    code, _, err = cli(capsys, "--model", "llama-tiny", "--tp", "3")
    assert_one_error_line(code, err, "q_proj/MatMul: 4 query heads are not divisible by --tp 3")


def test_serve_with_a_missing_key_is_one_error_line(capsys):
    code, _, err = cli(capsys, "--model", "llama-tiny", "--serve", "isl=128,osl=16")
    assert_one_error_line(code, err, "missing key concurrency")


def test_pp_beyond_the_layers_is_one_error_line(capsys):
    code, _, err = cli(capsys, "--model", "llama-tiny-decode", "--pp", "5")
    assert_one_error_line(code, err, "--pp 5 is larger than the layer count (2 layers)")


def test_collective_without_group_size_is_one_error_line(capsys, tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    node = helper.make_node("AllReduce", ["x"], ["y"], name="ar", domain="com.microsoft")
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)],
    )
    path = tmp_path / "ar.onnx"
    path.write_bytes(model.SerializeToString())
    code, _, err = cli(capsys, str(path))
    assert_one_error_line(code, err, "group_size")


def test_tp_table_and_explain_list_the_sharding(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny-decode", "--tp", "2", "--explain")
    assert code == 0
    assert "sharding decisions (--tp 2):" in out
    assert "row-parallel /model/layers.0/self_attn/o_proj/MatMul + AllReduce" in out
    assert "AllReduce" in out.split("sharding decisions")[0]  # the collectives are kernels of the table


def test_fusion_none_still_shards(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny-decode", "--tp", "2", "--fusion", "none", "--json")
    data = json.loads(out)
    assert code == 0 and data["parallel"]["tp"] == 2
    assert sum(1 for k in data["kernels"] if k["kind"] == "communication") == 2 * 2 + 1 + 1  # AR x5, AG


def test_serve_json_has_the_serve_object(capsys):
    code, out, _ = cli(
        capsys,
        "--model",
        "llama-tiny",
        "--tp",
        "2",
        "--serve",
        "isl=64,osl=8,concurrency=4",
        "--json",
        "--roofline",
    )
    assert code == 0
    serve = json.loads(out)["serve"]
    for key in (
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "tokens_per_s_per_user",
        "admitted_concurrency",
        "kv_capacity_tokens",
        "fits",
        "memory_per_gpu_bytes",
    ):
        assert key in serve
    assert serve["admitted_concurrency"] == 4 and serve["fits"] is True
    assert serve["tpot_s"] > 0 and serve["ttft_s"] > 0
    assert serve["tokens_per_s_per_gpu"] == serve["tokens_per_s"] / 2


def test_serve_text_defines_tpot(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--serve", "isl=64,osl=8,concurrency=2", "--roofline")
    assert code == 0
    assert "TPOT = (E2E - TTFT) / (osl - 1)" in out and "memory per GPU" in out and "TTFT" in out


def test_kv_precision_fp8_halves_the_kv_per_token(capsys):
    args = ("--model", "llama-tiny", "--memory", "--precision", "bf16", "--json", "--roofline")
    _, out16, _ = cli(capsys, *args)
    code, out8, _ = cli(capsys, *args, "--kv-precision", "fp8")
    assert code == 0
    kv16 = json.loads(out16)["memory"]["kv_per_token"]
    assert kv16 == 2 * 2 * 2 * 16 * 2  # (k, v) x 2 layers x 2 kv heads x head_dim 16 x bf16
    assert json.loads(out8)["memory"]["kv_per_token"] == kv16 / 2


def test_tp_list_sweep_prints_the_pareto_front_and_plots(capsys, tmp_path):
    plot = tmp_path / "pareto.png"
    code, out, _ = cli(
        capsys,
        "--model",
        "llama-tiny",
        "--tp",
        "1,2",
        "--serve",
        "isl=64,osl=8,concurrency=1",
        "--sweep",
        "concurrency=1,4",
        "--plot",
        str(plot),
        "--roofline",
    )
    assert code == 0 and plot.stat().st_size > 0
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("1", "4"), ("2", "1"), ("2", "4")]
    assert any(r[-1] == "*" for r in rows)  # at least one point on the front
