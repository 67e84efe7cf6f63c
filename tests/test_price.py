"""Bounds and estimates against hand arithmetic on h100-sxm and b200."""

import math

import pytest
import sympy

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.pricing.price import dominant, price
from onnxutil import matmul_model


def run(model, arch="h100-sxm", **kw):
    return estimate(import_model(model), hwdesc.load(arch), roofline=True, **kw)


def test_square_bf16_matmul_is_compute_bound_on_h100():
    r = run(matmul_model(4096, 4096, 4096))
    (k,) = r.kernels
    bound = 2 * 4096**3 / 989.4e12  # 138.9 us: one multiply-add per (m, n, k) at the dense bf16 peak
    assert math.isclose(float(k.timing.bound_s), bound, rel_tol=1e-9)
    assert math.isclose(bound, 138.9e-6, rel_tol=1e-3)
    assert k.timing.limiter == "compute"
    # estimate: achievable tensor fraction of the descriptor
    assert math.isclose(float(k.timing.estimate_s), bound / hwdesc.load("h100-sxm").efficiency["tensor"])


def test_gemv_bf16_is_memory_bound_on_h100():
    r = run(matmul_model(1, 4096, 4096, weight=True))
    (k,) = r.kernels
    bound = 2 * (4096 + 4096**2 + 4096) / 3.35e12  # 10.0 us: a, W and y moved once, 2 bytes each
    assert math.isclose(float(k.timing.bound_s), bound, rel_tol=1e-9)
    assert math.isclose(bound, 10.0e-6, rel_tol=1e-2)
    assert k.timing.limiter == "memory"
    assert float(r.totals["weight_bytes"]) == 2 * 4096 * 4096


def test_b200_bound_and_fp8_precision():
    r = run(matmul_model(8192, 8192, 8192), arch="blackwell", precision="fp8")
    (k,) = r.kernels
    assert math.isclose(float(k.timing.bound_s), 2 * 8192**3 / 4500e12, rel_tol=1e-9)  # fp8 dense peak
    assert k.kernel.work.bytes_read == 2 * 8192 * 8192  # 1 byte per fp8 element, A and B


def test_fp32_graph_runs_on_cuda_cores_unless_tf32():
    m = matmul_model(1024, 1024, 1024, dtype=1)  # FLOAT
    r = run(m)
    assert math.isclose(float(r.kernels[0].timing.bound_s), 2 * 1024**3 / 66.9e12, rel_tol=1e-9)
    r = run(m, precision="tf32")
    assert math.isclose(float(r.kernels[0].timing.bound_s), 2 * 1024**3 / 494.7e12, rel_tol=1e-9)


def test_small_kernel_is_launch_limited():
    r = run(matmul_model(16, 16, 16))
    k = r.kernels[0]
    assert k.timing.limiter == "launch"
    assert float(k.timing.estimate_s) == pytest.approx(2.5e-6)
    assert float(k.timing.bound_s) < 1e-8  # the bound has no launch floor


def test_symbolic_matmul_limiter_is_undecided_until_bound():
    r = run(matmul_model("m", 4096, 4096))
    (k,) = r.kernels
    m = dim("m")
    assert sympy.simplify(k.kernel.work.total_flops - 2 * m * 4096 * 4096) == 0
    assert k.timing.limiter == "compute|memory"
    assert run(matmul_model("m", 4096, 4096), dims={"m": 8192}).kernels[0].timing.limiter == "compute"
    assert run(matmul_model("m", 4096, 4096), dims={"m": 8}).kernels[0].timing.limiter == "memory"


def test_fp4_on_hopper_is_an_error():
    from estimator.precision import PrecisionError

    with pytest.raises(PrecisionError, match="fp4"):
        run(matmul_model(64, 64, 64), precision="fp4")


def test_dominant_and_price_units():
    x = dim("x")
    assert dominant({"a": sympy.Integer(2), "b": sympy.Integer(1)}) == "a"
    assert dominant({"a": 2 * x, "b": x}) == "a"
    assert dominant({"a": x, "b": sympy.Integer(3)}) == "a|b"
    from estimator.cost.registry import Work

    hw = hwdesc.load("h100-sxm")
    t = price(Work({("sfu", "fp32"): 1e9}, 0, 0), hw)
    assert math.isclose(float(t.bound_s), 1e9 / hw.sfu_ops_per_s)
