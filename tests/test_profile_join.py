"""`estimate profile FILE --model ...`: measured kernels joined to the estimator's kernels, reported
through validate_report (the report of `--validate`)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from cliutil import cli
from onnx import TensorProto, helper

from estimator.profile import synthetic
from estimator.profile.synthetic import Launch

US = 1000  # ns


def _model(tmp_path: Path) -> str:
    """y = softmax(x @ w) + b, fp32, x [64, 4096], w [4096, 4096]: three kernels unfused (mm, sm, add)."""
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Softmax", ["h"], ["p"], name="sm", axis=-1),
            helper.make_node("Add", ["p", "b"], ["y"], name="add"),
        ],
        "tiny",
        [
            helper.make_tensor_value_info("x", f, [64, 4096]),
            helper.make_tensor_value_info("w", f, [4096, 4096]),
            helper.make_tensor_value_info("b", f, [64, 4096]),
        ],
        [helper.make_tensor_value_info("y", f, [64, 4096])],
    )
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    return str(path)


def _iteration(t0: int, mm: int, sm: int, add: int, nvtx: bool = False, copy: int = 0) -> list[Launch]:
    names = [
        ("nvjet_sss_128x64_64x4_1x1_v_bz_NNN", mm, "MatMul.0(mm)"),
        ("void cunn_SoftMaxForward<4, float>(float*, const float*, int)", sm, "Softmax.1(sm)"),
        ("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>(int)", add, "Add.2(add)"),
    ]
    if copy:
        names.insert(2, ("void at::native::direct_copy_kernel_cuda(int)", copy, None))
    out, t = [], t0
    for name, dur, label in names:
        out.append(Launch(name, t, dur * US, launch_ns=t - 5 * US, nvtx=label if nvtx else None))
        t += dur * US + 2 * US
    return out


def test_join_by_order_averages_iterations_and_keeps_unjoined_time(tmp_path, capsys):
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 100, 20, 5, copy=3) + _iteration(2_000_000, 110, 22, 5))
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert {k: doc["join"][k] for k in ("strategy", "iterations")} == {"strategy": "order", "iterations": 2}
    # both iterations cover the 3 kernels, each record takes the next kernel, every name gives its kind
    match = doc["join"]["match"]
    assert (match["coverage"], match["order"], match["kinds"], match["score"]) == (1.0, 1.0, 1.0, 1.0)
    measured = {k["name"]: k.get("measured_s") for k in doc["estimate"]["kernels"]}
    assert measured["mm"] == pytest.approx((100 + 110) / 2 * 1e-6)  # mean over the two iterations
    assert measured["sm"] == pytest.approx((20 + 22) / 2 * 1e-6)
    assert measured["add"] == pytest.approx(5e-6)
    v = doc["estimate"]["validation"]
    # the copy kernel matches no estimated kernel: its 3 us over 2 iterations is shown, not dropped
    assert v["unjoined_s"] == pytest.approx(1.5e-6)
    assert v["unjoined_nodes"] == [
        {"node": "direct_copy_kernel_cuda", "op": "copy", "measured_s": pytest.approx(1.5e-6)}
    ]
    assert v["source"].startswith("nsys-sqlite ")
    assert set(doc) >= {
        "profile",
        "arch",
        "arch_source",
        "by_kind",
        "bottlenecks",
        "timeline",
        "kernels",
        "join",
        "estimate",
    }
    assert doc["arch"] == "h100-sxm" and doc["profile"]["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    # the joined kernels' fractions of peak come from the estimator's Work over the measured time
    mm = next(k for k in doc["kernels"] if k["short"].startswith("nvjet"))
    assert mm["sources"]["dram"] == "work" and mm["dram"] is not None


def test_join_by_nvtx_flags_a_kernel_faster_than_its_bound(tmp_path, capsys):
    # fp32 mm on H100 CUDA cores: 2 * 64 * 4096 * 4096 FLOPs / 66.9e12 FLOP/s = 32 us > the 10 us measured
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 10, 20, 5, nvtx=True))
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--top", "5")
    assert code == 0, err
    assert "against the estimate (join by node):" in out
    assert "model errors: 1 kernel(s) measured below their bound" in out
    row = next(line for line in out.splitlines() if line.startswith("!"))
    assert "mm" in row and "MatMul" in row
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--json")
    errors = json.loads(out)["estimate"]["validation"]["model_errors"]
    assert [e["kernels"] for e in errors] == [["mm"]] and errors[0]["measured_s"] == pytest.approx(10e-6)


@pytest.fixture(scope="module")
def gpt2_profile(tmp_path_factory):
    """An onnxruntime CPU profile of gpt2-small at seq 128 (3 runs), made here."""
    import models
    from estimator.truth import ort_runner
    from estimator.truth.validate import make_inputs, name_nodes

    spec = models.MODELS["gpt2-small"]
    model = spec.build()
    name_nodes(model)
    dims = {**spec.default_dims, "seq": 128}
    tmp = tmp_path_factory.mktemp("ort")
    sess = ort_runner.session(model.SerializeToString(), "cpu", "disable_all", profile_prefix=str(tmp / "p"))
    feeds = make_inputs(model, dims)
    for _ in range(3):
        ort_runner.run_once(sess, feeds)
    path = tmp / "gpt2_cpu.json"
    shutil.move(sess.end_profiling(), path)
    return str(path), model, dims


def test_onnxruntime_cpu_profile_joins_and_reports_as_validate(gpt2_profile, capsys):
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.report import validation as validate_report
    from estimator.truth import ort_runner
    from estimator.truth.validate import measured_validation
    from passes import pipeline_for

    path, model, dims = gpt2_profile
    args = ("profile", path, "--model", "gpt2-small", "--dim", "seq=128", "--arch", "h100-sxm")
    code, out, err = cli(capsys, *args, "--json")
    assert code == 0, err
    v = json.loads(out)["estimate"]["validation"]
    assert v["joined_share"] >= 0.95 and v["runs"] == 3

    # --validate's own path on the same run: onnxruntime's profile parser, the per-node medians, the
    # join, and the run times of the profile's model_run events (no profiler overhead to subtract)
    events = json.loads(Path(path).read_text())
    medians = ort_runner.parse_profile(events).medians()
    wall = [e["dur"] / 1e6 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    result = estimate(import_model(model), hwdesc.load("h100-sxm"), dims=dims,
                      pipeline=pipeline_for("none"), roofline=True)
    reference = measured_validation(result, model, medians, wall_s=wall, profile_runs=len(wall), ep="cpu")
    code, table, err = cli(capsys, *args, "--top", "15")
    assert table.split("against the estimate (join by node):\n")[1].rstrip("\n") == validate_report.to_table(
        reference, 15
    )
    ref = validate_report.to_json(reference)["validation"]
    assert {k: v[k] for k in ("executed_nodes", "unjoined_count", "model_errors")} == {
        k: ref[k] for k in ("executed_nodes", "unjoined_count", "model_errors")
    }
    assert v["joined_s"] == pytest.approx(ref["joined_s"]) and v["profiled_s"] == pytest.approx(
        ref["profiled_s"]
    )


def test_summary_table_is_compared_in_total_and_second_device_is_unjoined(tmp_path, capsys):
    data = Path(__file__).parent / "data" / "profiles" / "nsys_cuda_gpu_kern_sum_rtx5090_projector.csv"
    code, out, err = cli(capsys, "profile", str(data), "--model", _model(tmp_path), "--arch", "rtx-5090",
                         "--json")
    doc = json.loads(out)
    v = doc["estimate"]["validation"]
    assert doc["join"]["strategy"] == "none" and v["joined_s"] == 0.0
    assert v["unjoined_s"] == pytest.approx((33696 + 1792) * 1e-9)  # both rows, shown not dropped
    assert any("no launch order" in n for n in v["notes"])
    # the same iteration on two GPUs: device 0 joins, device 1's kernels (125 us) are unjoined
    path = str(tmp_path / "two.sqlite")
    one = _iteration(1_000_000, 100, 20, 5)
    synthetic.write(path, one + [replace(la, device=1) for la in one])
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--json")
    v = json.loads(out)["estimate"]["validation"]
    assert v["joined_s"] == pytest.approx(125e-6) and v["unjoined_s"] == pytest.approx(125e-6)
    assert any("2 devices in the profile" in n for n in v["notes"])
