"""A CPU descriptor for the validation tests: this host measured once per test process (quick settings),
and a fixed hand-written one for tests that must not depend on the machine."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import yaml


@functools.cache
def quick_host_yaml() -> Path:
    """This host, calibrated once per test process with host_bench.QUICK (a few seconds)."""
    from estimator.truth import host, host_bench

    return host.calibrate(Path(tempfile.mkdtemp(prefix="test-host-")) / "host.yaml", host_bench.QUICK)


def _fig(value, source="test figure"):
    return {"value": value, "source": source}


def fixed_cpu() -> dict:
    """A made-up 2-core CPU: 200 GFLOP/s fp32, 100 GB/s, 10 G SFU ops/s, 0.5 us per op."""
    return {
        "schema_version": 1, "name": "test-cpu", "display_name": "Test CPU", "family": "cpu",
        "compute_capability": None,
        "sm_count": _fig(2), "clock_hz": _fig(3.0e9),
        "tensor_flops_per_s": {},
        "cuda_flops_per_s": {"fp32": _fig(200e9), "fp16": _fig(200e9), "fp64": _fig(100e9)},
        "sfu_ops_per_s": _fig(10e9),
        "dram_bytes_per_s": _fig(100e9), "dram_bytes": _fig(16e9), "l2_bytes": _fig(32 * 2**20),
        "smem_bytes_per_sm": _fig(32 * 1024),
        "nvlink_bytes_per_s": {"value": None, "source": "none"},
        "efficiency": {"tensor": _fig(1.0), "cuda": _fig(0.8), "sfu": _fig(0.5), "dram": _fig(0.5),
                       "min_kernel_s": _fig(1e-8), "op_overhead_s": _fig(5e-7)},
    }


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
