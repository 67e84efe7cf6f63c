"""--arch host: the cached CPU descriptor, its resolution, the schema's cpu family and op_overhead_s."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hostutil import fixed_cpu, quick_host_yaml, write_yaml

import hwdesc
from estimator.cli.main import main
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.truth import host, host_bench
from estimator.truth.host_bench import HostFigures, Rate
from hwdesc import HwdescError
from onnxutil import matmul_model


def _no_calibration(*_args, **_kwargs):
    raise AssertionError("must not calibrate")


# --- resolution and cache -------------------------------------------------------------------------


def test_cache_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert host.cache_path() == tmp_path / "xdg" / "gpu-estimator" / "host.yaml"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert host.cache_path() == tmp_path / "home" / ".cache" / "gpu-estimator" / "host.yaml"


def test_other_archs_pass_through(monkeypatch):
    monkeypatch.setattr(host, "calibrate", _no_calibration)
    assert host.resolve_arch("h100-sxm") == "h100-sxm"
    assert host.resolve_arch("my/host.yaml") == "my/host.yaml"


def test_host_calibrates_once_then_reads_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    def fake(path, settings=None):
        calls.append(path)
        Path(path).parent.mkdir(parents=True)
        return write_yaml(Path(path), fixed_cpu())

    monkeypatch.setattr(host, "calibrate", fake)
    first = host.resolve_arch("host")
    assert first == str(tmp_path / "gpu-estimator" / "host.yaml") and len(calls) == 1
    assert host.resolve_arch("HOST") == first and len(calls) == 1  # cached: no second measurement
    assert hwdesc.load(first).name == "test-cpu"


def test_hwdesc_itself_never_calibrates(monkeypatch):
    monkeypatch.setattr(host, "calibrate", _no_calibration)
    with pytest.raises(HwdescError, match="unknown GPU 'host'"):
        hwdesc.load("host")  # data only: the CLI resolves "host" through estimator.truth.host first


@pytest.fixture
def cached_test_cpu(monkeypatch, tmp_path):
    """The fixed test CPU as the cached host descriptor; calibrating would fail the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "gpu-estimator").mkdir()
    write_yaml(tmp_path / "gpu-estimator" / "host.yaml", fixed_cpu())
    monkeypatch.setattr(host, "calibrate", _no_calibration)


def test_cli_arch_host_uses_the_cached_descriptor(cached_test_cpu, capsys):
    assert main(["--model", "llama-tiny", "--arch", "host", "--top", "3"]) == 0
    assert "Test CPU (test-cpu)" in capsys.readouterr().out


def test_sweep_resolves_arch_host_beside_a_gpu(cached_test_cpu, capsys):
    assert main(["--model", "llama-tiny", "--arch", "host,h100-sxm", "--sweep", "seq=64,128"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.split()[1:2] == ["64"]]
    assert rows == ["test-cpu", "h100-sxm"]


def test_cli_calibrate_host_writes_the_path(monkeypatch, tmp_path, capsys):
    written = []

    def fake(path, settings=None):
        written.append(path)
        return write_yaml(Path(path), fixed_cpu())

    monkeypatch.setattr(host, "calibrate", fake)
    assert main(["--calibrate-host", str(tmp_path / "me.yaml")]) == 0
    assert written == [str(tmp_path / "me.yaml")]
    assert "wrote" in capsys.readouterr().out


def test_estimate_calibrate_host(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(host, "calibrate", lambda path, settings: write_yaml(Path(path), fixed_cpu()))
    assert main(["calibrate", "--host", str(tmp_path / "h.yaml"), "--quick"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'h.yaml'}" in out
    assert "fp32 FLOP/s   2.000e+11" in out and "per-op cost   0.50 us" in out


# --- the descriptor text ----------------------------------------------------------------------------


def _figures() -> HostFigures:
    return HostFigures(
        cpus=2, fp32_flops=Rate(220e9, 165e9, "MatMul"), cache_bytes_per_s=Rate(150e9, 75e9, "Add"),
        dram_bytes_per_s=Rate(40e9, 30e9, "big Add"), sfu_ops_per_s=Rate(16e9, 4e9, "Exp"),
        chain_bytes_per_s=60e9, op_overhead_s=4e-7, llc_bytes=32 * 2**20)


def test_descriptor_yaml_round_trips_through_the_schema(tmp_path):
    path = tmp_path / "host.yaml"
    path.write_text(host.descriptor_yaml(_figures(), host_bench.FULL))
    hw = hwdesc.load(str(path))
    assert hw.family == "cpu" and hw.compute_capability == "none" and dict(hw.tensor_flops_per_s) == {}
    assert hw.cuda_flops_per_s["fp32"] == 220e9 and hw.cuda_flops_per_s["fp64"] == 110e9  # half the lanes
    assert hw.efficiency["cuda"] == pytest.approx(165 / 220)  # best pooled / peak
    assert hw.efficiency["sfu"] == pytest.approx(4 / 16)
    assert hw.dram_bytes_per_s == 150e9  # the cache-resident peak: a bound must not be beaten
    assert hw.efficiency["dram"] == pytest.approx(60 / 150)  # ops run back to back / the single-op peak
    assert hw.efficiency["op_overhead_s"] == 4e-7
    assert hw.l2_bytes == 32 * 2**20 and hw.sm_count == 2
    assert "30.0 GB/s" in path.read_text()  # DRAM streaming, kept in the note


def test_quick_calibration_of_this_host():
    hw = hwdesc.load(str(quick_host_yaml()))
    assert hw.family == "cpu" and hw.name == "host"
    assert 1e9 < hw.cuda_flops_per_s["fp32"] < 1e14  # a CPU: GFLOP/s to tens of TFLOP/s
    assert 1e9 < hw.dram_bytes_per_s < 1e13
    assert 1e8 < hw.sfu_ops_per_s < 1e13
    assert 0 < hw.efficiency["op_overhead_s"] < 1e-4
    for key in ("cuda", "sfu", "dram"):
        assert 0 < hw.efficiency[key] <= 1


# --- schema: the cpu family ----------------------------------------------------------------------------


def test_cpu_family_allows_no_tensor_cores_and_no_compute_capability(tmp_path):
    hw = hwdesc.load(str(write_yaml(tmp_path / "c.yaml", fixed_cpu())))
    assert dict(hw.tensor_flops_per_s) == {} and hw.compute_capability == "none"


def test_a_gpu_still_needs_tensor_cores_and_a_compute_capability(tmp_path):
    # (a GPU takes its efficiency constants from its family file, hwdesc/families/hopper.yaml)
    data = {**{k: v for k, v in fixed_cpu().items() if k != "efficiency"}, "family": "hopper"}
    with pytest.raises(HwdescError, match="compute_capability"):
        hwdesc.load(str(write_yaml(tmp_path / "g.yaml", data)))
    data["compute_capability"] = "9.0"
    with pytest.raises(HwdescError, match="tensor_flops_per_s: must list at least one entry"):
        hwdesc.load(str(write_yaml(tmp_path / "g.yaml", data)))


def test_op_overhead_is_optional_and_bounded(tmp_path):
    data = fixed_cpu()
    del data["efficiency"]["op_overhead_s"]
    assert "op_overhead_s" not in hwdesc.load(str(write_yaml(tmp_path / "a.yaml", data))).efficiency
    data["efficiency"]["op_overhead_s"] = {"value": 2e-3, "source": "a unit mistake"}
    with pytest.raises(HwdescError, match="efficiency.op_overhead_s: must be in"):
        hwdesc.load(str(write_yaml(tmp_path / "b.yaml", data)))


# --- price: op_overhead_s is in the estimate only -------------------------------------------------------


def test_op_overhead_adds_to_the_estimate_not_the_bound(tmp_path):
    hw = hwdesc.load(str(write_yaml(tmp_path / "c.yaml", fixed_cpu())))
    (k,) = estimate(import_model(matmul_model(256, 256, 256, dtype=1)), hw, roofline=True).kernels  # fp32
    compute = 2 * 256**3 / 200e9  # 167.8 us: one multiply-add per (m, n, k) at the fp32 peak
    memory = 3 * 256 * 256 * 4 / 100e9  # 7.9 us: a, b and y once
    assert math.isclose(float(k.timing.bound_s), max(compute, memory), rel_tol=1e-9)
    assert math.isclose(float(k.timing.estimate_s), compute / 0.8 + 5e-7, rel_tol=1e-9)
    assert k.timing.limiter == "compute"
