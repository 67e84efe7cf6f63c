"""`estimate profile`: joins and comparisons that say what they are (issue 26). A profile of another
program is refused with its match score, a comparison across two devices (another GPU, a CPU run against
a GPU estimate, a 40 GB A100 against the 80 GB descriptor) says so, a GPU named only by its compute
capability maps to its descriptor, launch latency leaves out queueing, and long kernel names wrap
instead of being cut where they differ."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cliutil import assert_one_error_line, cli
from onnx import TensorProto, helper
from test_profile_join import _iteration, _model

from estimator.profile import synthetic, timeline
from estimator.profile.names import normalise
from estimator.profile.record import MeasuredKernel

DATA = Path(__file__).parent / "data" / "profiles"
NVFUSER = str(DATA / "nsys_export_h100_nvfuser_matmul.sqlite")
US = 1e-6


def _chain(tmp_path: Path, layers: int = 24) -> str:
    """`layers` x (MatMul, Add) on fp32 [64, 256]: 48 kernels unfused."""
    f = TensorProto.FLOAT
    nodes, x = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [x, "w"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", "b"], [f"a{i}"], name=f"add{i}")]
        x = f"a{i}"
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", f, [64, 256]),
                           helper.make_tensor_value_info("w", f, [256, 256]),
                           helper.make_tensor_value_info("b", f, [64, 256])],
                          [helper.make_tensor_value_info(x, f, [64, 256])])
    path = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


def test_an_unrelated_capture_is_refused_with_its_match_score(tmp_path, capsys):
    # the nvFuser capture's 19 kernels against a model of 48: at most 19 of the 48 kernels can receive
    # a record, so coverage <= 19 / 48 = 0.40 and the score (coverage x order x kinds) is below 0.5
    model = _chain(tmp_path)
    code, _, err = cli(capsys, "profile", NVFUSER, "--model", model)
    assert_one_error_line(code, err, "does not look like a run of")
    assert "match score 0." in err and "--force-join" in err and "of the model's 48 kernels" in err
    code, out, err = cli(capsys, "profile", NVFUSER, "--model", model, "--force-join", "--json")
    assert code == 0, err
    match = json.loads(out)["join"]["match"]
    assert match["coverage"] <= 19 / 48 and match["score"] < match["threshold"] == 0.5


def test_the_model_s_own_capture_still_joins(tmp_path, capsys):
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 100, 20, 5) + _iteration(2_000_000, 110, 22, 5))
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path))
    assert code == 0, err
    assert "join match score 1.00 (coverage 1.00 x order 1.00 x kinds 1.00" in out


def test_a_profile_of_another_gpu_warns(tmp_path, capsys):
    code, out, err = cli(capsys, "profile", NVFUSER, "--arch", "b200", "--top", "1")
    assert code == 0, err
    assert ("warning: the profile ran on NVIDIA H100 80GB HBM3 (h100-sxm), but is priced for b200: the "
            "comparison mixes two GPUs") in out
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 100, 20, 5))
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--arch", "b200", "--json")
    v = json.loads(out)["estimate"]["validation"]
    assert any("mixes two GPUs" in w for w in v["warnings"])


def test_a_cpu_measurement_against_a_gpu_estimate_says_so():
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.report import validation as validate_report
    from estimator.truth.ort_runner import NodeTime
    from estimator.truth.validate import measured_validation
    from passes import pipeline_for

    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"], name="add")], "one",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    result = estimate(import_model(model), hwdesc.load("h100-sxm"), pipeline=pipeline_for("none"),
                      roofline=True)
    v = measured_validation(result, model, [NodeTime("add", "Add", 10 * US)], wall_s=[20 * US],
                            profile_runs=1, ep="cpu")
    (w,) = v.warnings
    assert w.startswith("a CPU measurement (onnxruntime CPU provider) compared with a GPU estimate "
                        "(h100-sxm)")
    lines = validate_report.to_table(v).splitlines()
    assert lines[1] == f"warning: {w}"  # right under the header, above the error it qualifies
    assert validate_report.to_json(v)["validation"]["warnings"] == [w]


def test_ncu_csv_of_compute_capability_12_maps_to_the_rtx_5090(capsys):
    code, out, err = cli(capsys, "profile", str(DATA / "ncu_details_rtx5090_cublas_gemv.csv"), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["arch"] == "rtx-5090"
    source = doc["arch_source"]
    assert "compute capability 12.0 -> rtx-5090" in source and "rtx-pro-6000" in source


def test_a100_40gb_profile_warns_it_is_not_the_80gb_descriptor(capsys):
    path = str(DATA / "nsys_export_a100_saxpy_schema2.9_trimmed.sqlite")
    code, out, err = cli(capsys, "profile", path, "--json")
    doc = json.loads(out)
    assert doc["arch"] == "a100"
    # TARGET_INFO_GPU: totalMemory 42,297,524,224 B, memoryBandwidth 1.5552e12 B/s; the descriptor 80e9 B
    # at 2.039e12 B/s: both differ by more than 15 %
    (w,) = doc["warnings"]
    assert "memory 42.3 GB vs 80 GB" in w and "DRAM bandwidth 1.56 TB/s vs 2.04 TB/s" in w


def test_launch_latency_leaves_out_kernels_queued_behind_others():
    def k(start, dur, launch):
        return MeasuredKernel("k", normalise("k"), "other", dur * US, start_s=start * US,
                              launch_s=launch * US, stream=7, device=0)

    # [0, 10] launched at -5 (latency 5); [10, 20] launched at 1 and [20, 30] at 2 waited in the queue
    # for the kernel ahead of them (9 and 18 us): queueing, not launch latency
    t = timeline.build([k(0, 10, -5), k(10, 10, 1), k(20, 10, 2)])
    assert t.launch_latency_min_s == pytest.approx(5 * US)
    assert t.launch_latency_median_s == pytest.approx(5 * US)


def test_two_gpu_trimmed_capture_launch_latency_and_distinct_kernel_names(capsys):
    path = str(DATA / "nsys_export_h100_2gpu_1s_trimmed.sqlite")
    code, out, err = cli(capsys, "profile", path, "--json")
    tl = json.loads(out)["timeline"]
    assert tl["launch_latency_median_s"] < 100 * US  # 421 ms when queueing counted
    code, out, err = cli(capsys, "profile", path, "--top", "3")
    table = out.split("top 3 of")[1]
    # two cuBLAS GEMMs that differ only in their middle (tile 64x256x8 vs 128x128x8) print apart
    assert "tilesize64x256x8_stage3" in table and "tilesize128x128x8_stage3" in table
    assert all(len(line.split("  ")[0]) <= 48 for line in table.splitlines()[2:])
