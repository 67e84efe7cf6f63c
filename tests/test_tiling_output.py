"""The GEMM tile model's wave, output and block-scale mechanisms (estimator/pricing/gemm.py) against hand
arithmetic: the last wave spread breadth-first over the SMs, per-wave DRAM re-reads of a long-K GEMM,
the epilogue's C-tile store after the mainloop, C stored at `dram_store`, and the block-scaled fp8 GEMM
(no split-K, a promotion per 128-K block on Hopper) read off a block-wise QuantizeLinear."""

from dataclasses import replace
from types import MappingProxyType

import pytest
from onnx import TensorProto, helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.kernel import CostCache, lower
from estimator.pricing import gemm as gemm_model
from estimator.pricing.menu import GemmTile, menu_for
from estimator.pricing.problem import gemm_of_kernel
from passes import DEFAULT_STRATEGY, Pipeline, pipeline_for

H100 = hwdesc.load("h100-sxm")
HOPPER = menu_for("hopper")
OUTPUT_KEYS = ("epilogue_store", "dram_store", "block_scale", "block_scale_oob_s", "block_scale_straddle_s",
               "block_scale_store")
# Round constants (full peaks, no fixed costs) and the output-path terms off unless a test sets them.
BASE = {**{k: v for k, v in H100.efficiency.items() if k not in OUTPUT_KEYS}, "tensor": 1.0, "dram": 1.0,
        "l2": 1.0, "launch_s": 0.0, "mem_latency_s": 0.0, "split_k_s": 0.0}
T128x256 = GemmTile(128, 256, max_ctas_per_sm=1, cluster_m=2)
T64x128 = GemmTile(64, 128, max_ctas_per_sm=2, cluster_m=2)
STEP_128x256 = 2 * 128 * 256 * 64 / (989.4e12 / 132)  # one bf16 128x256x64 k-step at the SM's peak: 0.5596 us


def hw(**eff):
    return gemm_model.Hw(132, 3.35e12, 12.39e12, 50 * 2**20, 233472, {**BASE, **eff}, 66.9e12)


def bf16_gemm(m, n, k, **kw):
    return gemm_model.Gemm(1, m, n, k, 2, 2, 2, 989.4e12, 1.0, dram_bytes=2 * (m * k + n * k + m * n), **kw)


def test_fewer_ctas_than_sms_run_one_per_sm():
    # 640 x 1536 in 64x128 tiles: 10 x 12 = 120 CTAs, two fit per SM (264 slots) but the block scheduler
    # gives each of the 120 its own SM: a k-step is one CTA's 2 * 64 * 128 * 64 / (989.4e12 / 132)
    # = 0.1399 us, not the 0.2798 us of two sharing an SM; K = 4096 is 64 k-steps.
    c = gemm_model.price_tile(bf16_gemm(640, 1536, 4096), T64x128, False, 1, HOPPER, hw())
    assert (c.ctas_per_sm, c.ctas, c.waves) == (2, 120, 1)
    one = 2 * 64 * 128 * 64 / (989.4e12 / 132)
    assert c.t_compute == pytest.approx(64 * one)


def test_last_wave_leftover_spread_breadth_first():
    # 1920 x 1536: 30 x 12 = 360 CTAs over 264 slots = 2 waves; the first runs two per SM (0.2798 us a
    # k-step), the last holds 360 - 264 = 96 CTAs, one per SM: 64 x (2 x 0.1399 + 0.1399) us
    c = gemm_model.price_tile(bf16_gemm(1920, 1536, 4096), T64x128, False, 1, HOPPER, hw())
    assert (c.ctas, c.waves) == (360, 2)
    one = 2 * 64 * 128 * 64 / (989.4e12 / 132)
    assert c.t_compute == pytest.approx(64 * (2 * one + one))


def test_long_k_rereads_once_per_wave():
    # 3328 x 2560 x 65536 bf16 in 128x256 tiles: 26 x 10 tiles; A (436 MB) + B (336 MB) are far above the
    # usable L2 (50 MiB x 0.752). A panel of 128 A rows is 128 x 65536 x 2 = 16.8 MB, so the panel walk
    # keeps one row (B re-read 25 times) or one column (A re-read 9 times). A wave of 132 CTAs in lockstep
    # covers all 10 tile columns x ceil(132 / 10) = 14 tile rows: A once, B once per wave (2 waves),
    # i.e. B's 2560 x 65536 x 2 bytes once more.
    g = bf16_gemm(3328, 2560, 65536)
    assert gemm_model._dram_extra(g, 128, 256, 26, 10, 132, hw()) == 2560 * 65536 * 2


def test_operands_fitting_l2_are_not_reread():
    # 1024 x 1024 x 4096 bf16: A + B = 16 MiB fit in 50 MiB x 0.752: no re-reads, whatever the waves
    g = bf16_gemm(1024, 1024, 4096)
    assert gemm_model._dram_extra(g, 128, 128, 8, 8, 132, hw()) == 0


def test_epilogue_stores_after_each_wave():
    # 4096^2 x 64: 512 tiles of 128x256, 4 waves of one k-step; each wave ends with a 128 x 256 x 2 =
    # 64 KiB C tile stored at 0.5 x 12.39e12 / 132 B/s = 46.93 GB/s per SM: 1.3964 us
    c = gemm_model.price_tile(bf16_gemm(4096, 4096, 64), T128x256, False, 1, HOPPER, hw(epilogue_store=0.5))
    epilogue = 128 * 256 * 2 / (0.5 * 12.39e12 / 132)
    assert epilogue == pytest.approx(1.3964e-6, rel=1e-4)
    assert c.t_compute == pytest.approx(4 * (STEP_128x256 + epilogue))
    # without the key there is no epilogue term
    plain = gemm_model.price_tile(bf16_gemm(4096, 4096, 64), T128x256, False, 1, HOPPER, hw())
    assert plain.t_compute == pytest.approx(4 * STEP_128x256)


def test_c_is_stored_at_dram_store():
    # 4096^2 x 1024 bf16, A and B (8 MiB each) fit in L2 and are read once at 3.35e12 B/s; C (32 MiB)
    # is stored at half of it
    mib8, mib32 = 2 * 4096 * 1024, 2 * 4096 * 4096
    c = gemm_model.price_tile(bf16_gemm(4096, 4096, 1024), T128x256, False, 1, HOPPER, hw(dram_store=0.5))
    assert c.dram_extra == 0
    assert c.t_dram == pytest.approx(2 * mib8 / 3.35e12 + mib32 / (0.5 * 3.35e12))


def fp8_gemm_model(m, n, k, block):
    """x (bf16) -> QuantizeLinear to e4m3 (1 x `block` scales, or one per-tensor scale) -> MatMul with an
    e4m3 weight: the graph `estimate validate kernels` prices the H100 fp8 rows with, written here whole."""
    def external(name, dims, dtype):
        t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
        for key, val in (("location", "w.bin"), ("offset", "0"), ("length", "1")):
            entry = t.external_data.add()
            entry.key, entry.value = key, val
        return t

    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [m, k])
    y = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])
    scale = external("x_scale", [m, k // block] if block else [], TensorProto.FLOAT)
    attrs = {"axis": 1, "block_size": block} if block else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize",
                              output_dtype=TensorProto.FLOAT8E4M3FN, **attrs),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="gemm")]
    weight = external("w", [k, n], TensorProto.FLOAT8E4M3FN)
    graph = helper.make_graph(nodes, "fp8", [x], [y], [scale, weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def gemm_spec(model):
    graph = Pipeline.parse(pipeline_for(DEFAULT_STRATEGY)).run(import_model(model))
    (kernel,) = [k for k in lower(graph, CostCache(graph)).kernels if k.kind == "matmul"]
    return gemm_of_kernel(graph, kernel)


def test_block_quantized_operand_makes_a_block_scaled_gemm():
    assert gemm_spec(fp8_gemm_model(256, 1024, 4096, 128)).scale_block == 128
    assert gemm_spec(fp8_gemm_model(256, 1024, 4096, 0)).scale_block == 0  # per-tensor scale


def fp8(m, n, k, **kw):
    return gemm_model.Gemm(1, m, n, k, 1, 1, 2, 1978.9e12, 1.0, dram_bytes=m * k + n * k + 2 * m * n, **kw)


def test_block_scaled_gemm_on_hopper_promotes_every_block_without_split_k():
    # Hopper's block-scaled kernel offers split-K 1 only (hwdesc/tiles/hopper.yaml block_scaled)
    h = hw(block_scale=0.25)
    assert {c.split for c in gemm_model.candidates(fp8(64, 512, 65536, scale_block=128), HOPPER, h)} == {1}
    assert len({c.split for c in gemm_model.candidates(fp8(64, 512, 65536), HOPPER, h)}) > 1
    # 4096^2 x 4096 fp8 in 128x256 tiles: tile_k = 128 bytes = 128 elements = one scale block per k-step,
    # 512 tiles = 4 waves of 32 k-steps, each an MMA of 2 * 128 * 256 * 128 / (1978.9e12 / 132) = 0.5596 us
    # then a promotion of 2 x 128 x 256 FLOPs at 0.25 x 66.9e12 / 132 = 126.7 GFLOP/s: 0.5173 us
    c = gemm_model.price_tile(fp8(4096, 4096, 4096, scale_block=128), T128x256, False, 1, HOPPER, h)
    step = 2 * 128 * 256 * 128 / (1978.9e12 / 132)
    promote = 2 * 128 * 256 / (0.25 * 66.9e12 / 132)
    assert promote == pytest.approx(0.5173e-6, rel=1e-3)
    assert c.t_compute == pytest.approx(4 * 32 * (step + promote))
    per_tensor = gemm_model.price_tile(fp8(4096, 4096, 4096), T128x256, False, 1, HOPPER, h)
    assert per_tensor.t_compute == pytest.approx(4 * 32 * step)


def test_blackwell_block_scaled_mma_pays_no_promotion():
    # tcgen05 takes the scales in the MMA (`block_scaled.promote: false` in hwdesc/tiles/blackwell.yaml):
    # the CUDA-core promotion fraction does not enter the price (its kernel's own tiles and k-step floor
    # do: tests/test_blackwell_tiles.py)
    bw = menu_for("blackwell")
    assert not bw.block_scaled.promote
    times = [min(c.time for c in gemm_model.candidates(fp8(4096, 4096, 4096, scale_block=128), bw,
                                                       hw(block_scale=f)))
             for f in (0.25, 0.9)]
    assert times[0] == times[1]
    assert gemm_model._promotion(fp8(4096, 4096, 4096, scale_block=128), 128, 128, 128, bw,
                                 hw(block_scale=0.25)) == 0.0


def test_plans_of_alike_gemms_keep_their_scaling_apart():
    # the same MatMul shapes fed by a block-wise and by a per-tensor quantize are planned apart (the
    # plan cache sees the producer), and the block-scaled one is slower on Hopper
    h100 = replace(H100, efficiency=MappingProxyType({**H100.efficiency, "block_scale": 0.25}))
    times = []
    for block in (128, 0):
        graph = import_model(fp8_gemm_model(2048, 4096, 4096, block))
        r = estimate(graph, h100, pipeline=pipeline_for(DEFAULT_STRATEGY))
        (k,) = [k for k in r.kernels if k.kernel.name == "gemm"]
        times.append(float(k.timing.estimate_s))
    assert times[0] > times[1]
