"""tools/nsys_capture.py (gpu_check's Nsight Systems leg) without a GPU: the nsys command line, and the
path from an export to the joined report on a synthetic capture."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from test_profile_join import _iteration, _model

from estimator.profile import synthetic
from tools import nsys_capture


def test_command_exports_sqlite_and_traces_cuda_and_nvtx(tmp_path):
    cmd = nsys_capture.command(tmp_path / "cap", Path("r.py"), Path("m.onnx"), Path("f.npz"), 5)
    assert cmd[:2] == ["nsys", "profile"] and "--export=sqlite" in cmd and "--trace=cuda,nvtx" in cmd
    assert cmd[cmd.index("-o") + 1] == str(tmp_path / "cap") and cmd[-4:] == ["r.py", "m.onnx", "f.npz", "5"]


def test_warm_up_left_out_and_joined(tmp_path):
    # a warm-up iteration (mm 500 us) outside the "timed_runs" range, then two timed iterations
    warm = _iteration(1_000_000, 500, 20, 5)
    timed = [replace(launch, nvtx="timed_runs") for launch in
             _iteration(2_000_000, 100, 20, 5) + _iteration(3_000_000, 120, 20, 5)]
    path = tmp_path / "capture.sqlite"
    synthetic.write(str(path), warm + timed)
    model = onnx.load(_model(tmp_path))
    a = nsys_capture.joined(path, model, "h100-sxm", {})
    assert len(a.profile.kernels) == 6 and a.joined.strategy == "order" and a.joined.iterations == 2
    kernels = a.validation.result.kernels
    mm = next(m for m in a.validation.matches if kernels[m.kernels[0]].kernel.name == "mm")
    assert mm.measured_s == pytest.approx((100 + 120) / 2 * 1e-6)  # the 500 us warm-up is not in it
    assert "joined 100% of kernel time" in nsys_capture.summary_line(a)
