"""Dtypes exactly as the graph says: QuantizeLinear/DequantizeLinear `output_dtype` (opset 21+), the
zero point's type, NVFP4 block scales in the bytes; the consuming GEMM priced at that dtype's rate."""

import math
from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model

M = K = N = 8192


def q_matmul(output_dtype: int | None, zero_point: int | None = None, block_size: int = 0):
    """x (bf16) -> QuantizeLinear -> MatMul with a weight input of the quantized type."""
    wtype = output_dtype or zero_point or T.UINT8
    x = helper.make_tensor_value_info("x", T.BFLOAT16, [M, K])
    w = helper.make_tensor_value_info("w", wtype, [K, N])
    y = helper.make_tensor_value_info("y", T.FLOAT, [M, N])
    inits = [numpy_helper.from_array(np.array(1.0, dtype=np.float32), "s")]
    q_in = ["x", "s"]
    if zero_point is not None:
        inits.append(helper.make_tensor("zp", zero_point, [], [0]))
        q_in.append("zp")
    attrs = {"output_dtype": output_dtype} if output_dtype else {}
    if block_size:
        attrs["block_size"] = block_size
    nodes = [helper.make_node("QuantizeLinear", q_in, ["xq"], name="q", **attrs),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "q_mm", [x, w], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def test_output_dtype_fp4_types_the_quantized_tensor():
    g = import_model(q_matmul(T.FLOAT4E2M1))
    assert g.tensors["xq"].dtype == "fp4e2m1"  # onnxruntime's inference alone says uint8


def test_zero_point_type_without_output_dtype():
    assert import_model(q_matmul(None, zero_point=T.INT8)).tensors["xq"].dtype == "int8"
    assert import_model(q_matmul(None)).tensors["xq"].dtype == "uint8"  # the spec's default


@pytest.mark.parametrize("tiling", [False, True])
def test_fp4_quantize_feeding_matmul_on_b300_is_priced_at_the_fp4_rate(tiling):
    b300 = hwdesc.load("b300")
    r = estimate(import_model(q_matmul(T.FLOAT4E2M1)), b300, roofline=not tiling)
    mm = next(p for p in r.kernels if p.kernel.name == "mm")
    assert dict(mm.kernel.work.flops) == {("tensor", "fp4e2m1"): 2 * M * N * K}
    compute = 2 * M * N * K / 14000e12  # 1.1e12 FLOPs at b300's dense fp4 peak = 78.5 us
    assert float(mm.timing.compute_s) == pytest.approx(compute, rel=1e-9)
    assert float(mm.timing.bound_s) == pytest.approx(compute, rel=1e-9)  # compute-bound at fp4
    # at the int8 rate (150 TOPS) it would be 7.3 ms: 93x slower
    assert float(mm.timing.estimate_s) < 2 * M * N * K / 150e12 / 10


def test_nvfp4_quantize_writes_values_and_block_scales():
    r = estimate(import_model(q_matmul(T.FLOAT4E2M1)), hwdesc.load("b300"), roofline=True)
    q = next(p for p in r.kernels if p.kernel.name == "q").kernel.work
    # reads x (bf16, 2 B; the scalar per-tensor scale is a constant folded into the kernel's arguments);
    # writes fp4 values (1/2 B) + an e4m3 scale per 16
    assert q.bytes_read == M * K * 2
    assert q.bytes_written == M * K // 2 + M * K // 16 * 1
    assert math.isclose(float(q.flops[("alu", "fp32")]), 4 * M * K)  # 3 quantize ops + 1 amax op


def test_fp8_gemms_run_at_their_own_tensor_efficiency():
    from estimator.pricing.plan import unit_efficiency

    h100 = hwdesc.load("h100-sxm")
    assert unit_efficiency(h100, ("tensor", "fp8e4m3")) == h100.efficiency["tensor_fp8"]
    assert unit_efficiency(h100, ("tensor", "bf16")) == h100.efficiency["tensor"]
    assert unit_efficiency(h100, ("cuda", "fp32")) == h100.efficiency["cuda"]
    # a compute-bound fp8 GEMM: each k-step's MMA time is 2 * rows * cols * tile_k / (peak/SM * eff), so
    # the same tile at tensor_fp8 instead of tensor takes tensor / tensor_fp8 as long
    from estimator.pricing import gemm as gemm_model
    from estimator.pricing.menu import menu_for
    from estimator.pricing.plan import hw_params

    menu, hwp = menu_for("hopper"), hw_params(h100)
    # without the epilogue's C store (the same time at either efficiency) the ratio is the MMA's alone
    hwp = replace(hwp, eff={k: v for k, v in hwp.eff.items() if k != "epilogue_store"})
    tile = menu.gemm_tiles[0]
    times = [gemm_model.price_tile(gemm_model.Gemm(1, 8192, 8192, 8192, 1.0, 1.0, 2.0, 1979e12, e), tile,
                                   False, 1, menu, hwp).t_compute
             for e in (h100.efficiency["tensor"], h100.efficiency["tensor_fp8"])]
    assert times[1] / times[0] == pytest.approx(h100.efficiency["tensor"] / h100.efficiency["tensor_fp8"])
