"""Blackwell mechanisms in the tile model, against hand arithmetic: TMEM columns bounding tiles and CTAs,
2-CTA tcgen05 tiles, the persistent (stream-K) scheduler, the two-partition L2, and sm_100 vs sm_120
menus kept apart (hwdesc/tiles/blackwell.yaml, blackwell-rtx.yaml; estimator/pricing/)."""

import math
from dataclasses import replace

import pytest

import hwdesc
from estimator.pricing import gemm as gemm_model
from estimator.pricing import tmem as tmem_model
from estimator.pricing.l2 import effective_l2_bytes_per_s
from estimator.pricing.menu import GemmTile, menu_for, parse
from estimator.pricing.plan import hw_params
from hwdesc import HwdescError

BW = menu_for("blackwell")
RTX = menu_for("blackwell-rtx")
HOPPER = menu_for("hopper")
B200 = hwdesc.load("b200")
# Round constants so the arithmetic stays by hand: full tensor peak, no fixed costs.
EFF = {**B200.efficiency, "tensor": 1.0, "dram": 1.0, "l2": 1.0, "launch_s": 0.0, "mem_latency_s": 0.0,
       "split_k_s": 0.0}
HW = gemm_model.Hw(148, 7.7e12, 13.89e12, 132644864, 233472, EFF)
PEAK = 2250e12  # B200 dense bf16


def bf16(m, n, k):
    return gemm_model.Gemm(1, m, n, k, 2, 2, 2, PEAK, 1.0, dram_bytes=2 * (m * k + n * k + m * n))


# ---- TMEM ------------------------------------------------------------------------------------------

def test_tmem_figures_in_the_menu():
    assert (BW.tmem.lanes, BW.tmem.columns, BW.tmem.min_alloc_columns, BW.tmem.accumulator_buffers) \
        == (128, 512, 32, 2)
    assert 128 * 512 * 4 == BW.accumulator_bytes_per_sm == 262144  # 256 KB of 32-bit cells


def test_tmem_columns_per_cta_and_ctas_per_sm():
    t = BW.tmem
    # 128x256 fp32 accumulator: 256 columns, double-buffered 512 = the whole TMEM: 1 CTA per SM
    assert tmem_model.columns_per_cta(GemmTile(128, 256), t) == 2 * 256 == 512
    assert tmem_model.ctas_per_sm(GemmTile(128, 256), t) == 512 // 512 == 1
    # 2-CTA 256x256: 128 rows per SM, the same 2 x 256 columns on each SM of the pair
    assert tmem_model.columns_per_cta(GemmTile(256, 256, sms=2), t) == 512
    # 128x128: 2 x 128 = 256 columns: 2 CTAs; 64x64: 128 columns: 4 (an M = 64 tile holds all lanes' columns)
    assert tmem_model.ctas_per_sm(GemmTile(128, 128), t) == 512 // 256 == 2
    assert tmem_model.ctas_per_sm(GemmTile(64, 64), t) == 512 // 128 == 4
    # 64x8: 2 x 8 = 16 columns, allocated as the minimum 32: 16 CTAs
    assert tmem_model.columns_per_cta(GemmTile(64, 8), t) == 32
    assert tmem_model.ctas_per_sm(GemmTile(64, 8), t) == 512 // 32 == 16
    # 128x384 (N = 384): two buffers need 768 > 512 columns, so one: 384, allocated as 512
    assert tmem_model.buffers(GemmTile(128, 384), t) == 1
    assert tmem_model.columns_per_cta(GemmTile(128, 384), t) == 512


def test_tiles_whose_accumulators_do_not_fit_are_not_offered():
    t = BW.tmem
    assert not tmem_model.fits(GemmTile(256, 128), t)  # 256 rows on one SM: only 128 lanes
    assert not tmem_model.fits(GemmTile(128, 1024), t)  # 1024 columns > 512
    assert gemm_model.occupancy(GemmTile(256, 128), BW, HW, 2, 2, 2) is None
    assert gemm_model.occupancy(GemmTile(128, 1024), BW, HW, 2, 2, 2) is None
    # the same 256 rows over a CTA pair fit (128 per SM)
    assert gemm_model.occupancy(GemmTile(256, 128, sms=2), BW, HW, 2, 2, 2) is not None
    # every menu tile fits
    assert all(tmem_model.fits(tile, t) for tile in BW.gemm_tiles)


def test_tmem_caps_co_resident_ctas():
    # 128x128 allowed 4 per SM by its cap: shared memory (stage (128+128) * 64 * 2 = 32768 B, 2 stages +
    # 32 KB epilogue = 98304 B) allows 232448 // 98304 = 2, TMEM 512 // 256 = 2
    tile = GemmTile(128, 128, max_ctas_per_sm=4)
    assert gemm_model.occupancy(tile, BW, HW, 2, 2, 2)[0] == 2
    # 64x32 capped at 8: smem (96 * 64 * 2 = 12288 B stage, 2 x 12288 + 64 * 32 * 2 = 28672 B) allows 8,
    # TMEM (2 x 32 = 64 columns) 512 // 64 = 8; at N = 128 TMEM (256 columns) allows only 2
    assert gemm_model.occupancy(GemmTile(64, 32, max_ctas_per_sm=8), BW, HW, 2, 2, 2)[0] == 8
    assert tmem_model.ctas_per_sm(GemmTile(64, 128), BW.tmem) == 2
    # Hopper's accumulators are registers: the byte budget, not TMEM (128x128: 196608 // 65536 = 3)
    assert HOPPER.tmem is None
    assert gemm_model.occupancy(tile, HOPPER, HW, 2, 2, 2)[0] == 2  # smem: 2; registers 3; cap 4


# ---- 2-CTA tiles -----------------------------------------------------------------------------------

def test_two_cta_tile_halves_each_sms_share_and_its_slots():
    pair = GemmTile(256, 256, sms=2, cluster_m=2)
    one = GemmTile(128, 256, cluster_m=2)
    # per SM a 256x256 pair tile stages (256 + 256) * 64 * 2 / 2 = 32768 B a k-step: the 128x256 1-SM
    # tile stages (128 + 256) * 64 * 2 = 49152 B for the same 128 rows of MMA work per SM
    cpsm, stages, tile_k = gemm_model.occupancy(pair, BW, HW, 2, 2, 2)
    assert (cpsm, tile_k) == (1, 64)
    assert stages == min(8, int((232448 - 32768) // 32768)) == 6
    assert gemm_model.occupancy(one, BW, HW, 2, 2, 2)[1] == int((232448 - 32768) // 49152) == 4
    # 8192^3: 32 x 32 = 1024 pair tiles on 148 / 2 = 74 pair slots (plain waves: ceil(1024 / 74) = 14)
    c = gemm_model.price_tile(bf16(8192, 8192, 8192), pair, False, 1, BW, HW)
    assert math.ceil(1024 / 74) == 14
    assert (c.tiles, c.waves) == (1024, 14)
    # one k-step of the pair: 2 * 256 * 256 * 64 FLOPs on two SMs' peak
    step = 2 * 256 * 256 * 64 / (2 * PEAK / 148)
    assert c.t_compute == pytest.approx(14 * 128 * step)  # 8192 / 64 = 128 k-steps per tile


# ---- persistent scheduler (stream-K tail) -----------------------------------------------------------

def test_stream_k_spreads_the_last_wave_over_every_slot():
    pair = GemmTile(256, 256, sms=2, cluster_m=2)
    g = bf16(8192, 8192, 8192)
    c = gemm_model.price_tile(g, pair, False, 1, BW, HW, stream_k=True)
    assert c.stream_k and c.name == "256x256x64 streamK"
    # 1024 tiles = 13 full waves of 74 (962 tiles) + 62 left; their 62 * 128 = 7936 k-steps over 74
    # slots: ceil(7936 / 74) = 108 each, instead of one more whole wave of 128
    assert 1024 - 13 * 74 == 62 and math.ceil(62 * 128 / 74) == 108
    step = 2 * 256 * 256 * 64 / (2 * PEAK / 148)
    assert c.t_compute == pytest.approx((13 * 128 + 108) * step)
    assert c.waves == 14
    assert c.wave_eff == pytest.approx(1024 * 128 / (74 * (13 * 128 + 108)))
    # the fixup: up to one fp32 256x256 partial per slot, written and read back
    plain = gemm_model.price_tile(g, pair, False, 1, BW, HW)
    assert c.dram_extra - plain.dram_extra == 2 * 74 * 256 * 256 * 4
    assert c.time < plain.time


def test_no_tail_means_the_plain_kernel():
    # 256x256 pair tiles over M = 256 * 37, N = 256 * 4: 148 tiles = exactly 2 waves of 74 slots: no tail,
    # no fixup, the same time as the data-parallel kernel
    pair = GemmTile(256, 256, sms=2, cluster_m=2)
    g = bf16(256 * 37, 256 * 4, 4096)
    sk = gemm_model.price_tile(g, pair, False, 1, BW, HW, stream_k=True)
    dp = gemm_model.price_tile(g, pair, False, 1, BW, HW)
    assert sk.tiles == 148 and sk.waves == dp.waves == 2
    assert sk.t_compute == pytest.approx(dp.t_compute) and sk.dram_extra == dp.dram_extra


def test_stream_k_only_on_the_persistent_menu():
    g = bf16(8192, 8192, 8192)
    assert BW.scheduler == "persistent"
    assert any(c.stream_k for c in gemm_model.candidates(g, BW, HW))
    for menu in (HOPPER, RTX, menu_for("ampere")):
        assert menu.scheduler == "waves"
        assert not any(c.stream_k for c in gemm_model.candidates(g, menu, HW))


def test_stream_k_on_arrays_equals_the_scalar_price():
    # the sweep path (numpy arrays of points) prices stream-K elementwise as --dim does
    import numpy as np

    pair = GemmTile(256, 256, sms=2, cluster_m=2)
    ms = np.array([2048.0, 8192.0, 8192.0 + 256])
    arr = gemm_model.price_tile(gemm_model.Gemm(1, ms, 8192, 4096, 2, 2, 2, PEAK, 1.0,
                                                dram_bytes=2 * (ms * 4096 + 8192 * 4096 + ms * 8192)),
                                pair, False, 1, BW, HW, stream_k=True)
    for i, m in enumerate(ms):
        one = gemm_model.price_tile(bf16(int(m), 8192, 4096), pair, False, 1, BW, HW, stream_k=True)
        assert arr.time[i] == pytest.approx(one.time, rel=1e-12)


# ---- the two-partition L2 --------------------------------------------------------------------------

def test_l2_partitions_on_the_two_die_blackwells_only():
    for arch in ("b200", "gb200", "b300"):
        hw = hwdesc.load(arch)
        assert hw.l2_partitions == 2 and hw.l2_cross_partition_bytes_per_s == 10e12
        # half of the L2 bytes cross the 10 TB/s link: it carries up to 10 / 0.5 = 20 TB/s of L2 traffic,
        # more than the L2's own figure, so the L2 figure stands
        assert effective_l2_bytes_per_s(hw) == min(hw.l2_bytes_per_s, 10e12 / 0.5) == hw.l2_bytes_per_s
    for arch in ("h100-sxm", "h200", "rtx-5090", "rtx-pro-6000", "a100"):
        hw = hwdesc.load(arch)
        assert hw.l2_partitions is None
        assert effective_l2_bytes_per_s(hw) == hw.l2_bytes_per_s


def test_a_slow_link_limits_the_l2_the_sms_see():
    # a 6 TB/s link: half the traffic crosses it, so 6 / 0.5 = 12 TB/s < 13.89 TB/s of L2
    hw = replace(B200, l2_cross_partition_bytes_per_s=6e12)
    assert effective_l2_bytes_per_s(hw) == pytest.approx(12e12)
    assert hw_params(hw).l2_bytes_per_s == pytest.approx(12e12)
    # three partitions: 2/3 of the traffic crosses: 6 / (2/3) = 9 TB/s
    assert effective_l2_bytes_per_s(replace(hw, l2_partitions=3)) == pytest.approx(9e12)


def test_partitions_need_their_link_figure(tmp_path):
    text = (hwdesc.bundled_dir() / "b200.yaml").read_text()
    start = text.index("l2_cross_partition_bytes_per_s:")
    end = text.index("smem_bytes_per_sm:")
    path = tmp_path / "two-die.yaml"
    path.write_text(text[:start] + text[end:])
    with pytest.raises(HwdescError, match="l2_cross_partition_bytes_per_s"):
        hwdesc.load(str(path))


# ---- sm_100 vs sm_120 ------------------------------------------------------------------------------

def test_datacenter_and_rtx_blackwell_are_apart():
    by_cc = {hwdesc.load(a).compute_capability: hwdesc.load(a).family
             for a in ("b200", "gb200", "b300", "rtx-5090", "rtx-pro-6000")}
    assert by_cc == {"10.0": "blackwell", "10.3": "blackwell", "12.0": "blackwell-rtx"}
    # sm_100/sm_103: tcgen05 with TMEM, 2-CTA tiles, persistent; sm_120: mma.sync, registers, waves
    assert BW.tmem is not None and any(t.sms == 2 for t in BW.gemm_tiles)
    assert RTX.tmem is None and all(t.sms == 1 for t in RTX.gemm_tiles)
    assert RTX.scheduler == "waves" and "no tcgen05" in RTX.mma
    # sm_120's 100 KB of shared memory: a 128x256 bf16 tile (stage (128 + 256) * 32 * 2 = 24576 B) fits
    # (102400 - 1024 - 16384) // 24576 = 3 stages of 32 bf16 K (64-byte rows); one CTA by smem
    # (101376 // (2 * 24576 + 16384) = 1)
    rtx = hwdesc.load("rtx-5090")
    assert rtx.smem_bytes_per_sm == 102400
    rtx_hw = replace(HW, smem_bytes_per_sm=rtx.smem_bytes_per_sm)
    assert gemm_model.occupancy(GemmTile(128, 256), RTX, rtx_hw, 2, 2, 2) == (1, 3, 32)


def test_a_pair_tile_needs_tensor_memory():
    raw = {"family": "x", "mma": "m", "gemm": {
        "k_bytes": 64, "min_stages": 2, "max_stages": 4, "smem_reserved_bytes": 0, "epilogue_smem_bytes": 0,
        "accumulator_bytes_per_sm": 131072, "split_k": [1],
        "tiles": [{"m": 256, "n": 128, "sms": 2}]},
        "attention": {"tiles": [{"q": 64, "kv": 64, "max_head_dim": 128}],
                      "decode_mma": [{"kv_bytes": [2], "q_rows": 8, "max_ctas_per_sm": 1}],
                      "decode_kv": 64, "decode_splits": [1], "decode_ctas_per_sm": 1, "decode_max_group": 8}}
    with pytest.raises(HwdescError, match="needs `tmem`"):
        parse(raw, "x.yaml")
    raw["gemm"]["scheduler"] = "persistent"
    raw["gemm"]["tiles"] = [{"m": 128, "n": 128}]
    with pytest.raises(HwdescError, match="scheduler_source"):
        parse(raw, "x.yaml")
    raw["gemm"]["scheduler"] = "greedy"
    with pytest.raises(HwdescError, match="scheduler"):
        parse(raw, "x.yaml")


def test_k_step_counts_data_not_block_scales():
    # 128 bytes of K per stage: bf16 64 elements, fp8 128, NVFP4 256 (0.5 B + 1/16 B of e4m3 scale each:
    # the scales ride beside the data, so the stage holds 256 * 0.5625 = 144 B per row)
    tile = GemmTile(128, 256)
    assert gemm_model.occupancy(tile, BW, HW, 2, 2, 2)[2] == 128 // 2 == 64
    assert gemm_model.occupancy(tile, BW, HW, 1, 1, 2)[2] == 128 // 1 == 128
    nvfp4 = 0.5 + 1 / 16
    cpsm, stages, tile_k = gemm_model.occupancy(tile, BW, HW, nvfp4, nvfp4, 2)
    assert tile_k == int(128 / 0.5) == 256
    # stage (128 + 256) * 256 * 0.5625 = 55296 B: (232448 - 32768) // 55296 = 3 stages
    assert stages == int((232448 - 32768) // ((128 + 256) * 256 * nvfp4)) == 3


# ---- NVFP4: the sm_100 block-scaled kernel ---------------------------------------------------------

NVFP4 = 0.5 + 1 / 16  # bytes per element: an fp4 value and its share of the e4m3 scale per 16


def nvfp4(m, n, k):
    return gemm_model.Gemm(1, m, n, k, NVFP4, NVFP4, 2, 9000e12, 1.0,
                           dram_bytes=NVFP4 * (m + n) * k + 2 * m * n, scale_block=16)


def test_nvfp4_kernel_menu_no_split_k_no_stream_k():
    scaled = BW.block_scaled
    assert scaled is not None and not scaled.promote and not scaled.stream_k and scaled.split_k == (1,)
    # CTA tiles 128 x {64, 128, 256} on one SM or a pair (256 rows over 2 SMs)
    assert {(t.m, t.n, t.sms) for t in scaled.tiles} == {(m * s, n, s) for m in (128,) for s in (1, 2)
                                                         for n in (64, 128, 256)}
    cands = gemm_model.candidates(nvfp4(1, 128, 16384), BW, HW)
    assert cands and all(c.split == 1 and not c.stream_k and c.tile in scaled.tiles for c in cands)
    assert HOPPER.block_scaled.stream_k  # the default: Hopper's block-scaled kernel as it was


def test_nvfp4_k_step_floor_is_the_scale_copy_into_tmem():
    # m = 1, n = 128, k = 16384 on the 128 x 128 tile, one CTA: 16384 / 256 = 64 k-steps of
    #   MMA   2 * 128 * 128 * 256 / (9000e12 / 148)  = 1.37954e-7 s   (full peak, no load floor)
    #   floor: the scale factors' copy into TMEM and the MMA that reads them, a chain per k-step
    #          = block_scale_step_s = 3e-7 s  >  the MMA: the k-loop runs at the floor
    hw = replace(HW, eff={**EFF, "block_scale_step_s": 3e-7})
    c = gemm_model.price_tile(nvfp4(1, 128, 16384), GemmTile(128, 128), False, 1, BW, hw)
    t_mma = 2 * 128 * 128 * 256 / (9000e12 / 148)
    assert c.tile_k_elems == 256 and c.waves == 1
    assert c.t_compute == pytest.approx(64 * 3e-7)
    # a floor under the MMA's time is hidden by it; absent, the k-step is the MMA's alone
    low = replace(HW, eff={**EFF, "block_scale_step_s": 1e-7})
    assert gemm_model.price_tile(nvfp4(1, 128, 16384), GemmTile(128, 128), False, 1, BW, low).t_compute \
        == pytest.approx(64 * t_mma)
    absent = replace(HW, eff={k: v for k, v in EFF.items() if k != "block_scale_step_s"})
    assert gemm_model.price_tile(nvfp4(1, 128, 16384), GemmTile(128, 128), False, 1, BW, absent).t_compute \
        == pytest.approx(64 * t_mma)
    # a GEMM without block scales never pays it
    plain = replace(nvfp4(1, 128, 16384), scale_block=0)
    assert gemm_model.price_tile(plain, GemmTile(128, 128), False, 1, BW, hw).t_compute \
        == pytest.approx(64 * t_mma)


def test_nvfp4_quantize_kernel_bytes_on_a_small_shape():
    # the activation's fp4 quantize (TensorRT-LLM fp4_quantize) of x[16, 4096] bf16: reads 16 * 4096 * 2
    # = 131072 B (its per-tensor scale is a constant of the graph), writes 16 * 4096 / 2 = 32768 B of fp4
    # and 16 * 4096 / 16 = 4096 B of e4m3 scales; 3 + 1 CUDA ops per element (quantize, each block's amax)
    from estimator.calibration import kernel_graphs
    from estimator.calibration.validate_kernels import price
    from estimator.frontends.onnx_import import import_model
    from estimator.kernel import CostCache, lower

    model, dtypes = kernel_graphs.nvfp4_gemm(16, 4096, 4096)
    graph = kernel_graphs.retype(import_model(model), ("xq",), "fp4e2m1")
    quant = lower(graph, CostCache(graph)).kernels[0]
    assert quant.op == "QuantizeLinear"
    assert (quant.work.bytes_read, quant.work.bytes_written) == (16 * 4096 * 2, 32768 + 4096)
    assert sum(quant.work.flops.values()) == 4 * 16 * 4096
    # the GEMM runs the block-scaled kernel, labelled so
    bound, est = price(model, B200, dtypes, True)
    assert 0 < bound < est


def test_streaming_kernels_floor_at_min_kernel_s():
    # a 4 KB elementwise kernel: its fixed part is the larger of the fitted launch + pipeline fill and
    # min_kernel_s (the framework-launched streaming kernel's floor): B200's GEMM fit 1.54 + 0.507 =
    # 2.05 us is below its floor, H100's 1.8 + 0.83 = 2.63 us above its 2.5 us (its price unchanged)
    from estimator.pricing.plan import stream_time

    h100 = hwdesc.load("h100-sxm")
    b200_fixed = stream_time({}, 4096, 0, B200)[3]
    assert B200.efficiency["launch_s"] + B200.efficiency["mem_latency_s"] == pytest.approx(2.047e-6)
    assert b200_fixed == B200.efficiency["min_kernel_s"] > 2.047e-6
    assert h100.efficiency["min_kernel_s"] == 2.5e-6
    assert stream_time({}, 4096, 0, h100)[3] == pytest.approx(1.8e-6 + 8.3e-7)
    # a bigger floor than the fixed part in the descriptor is the floor; none: the fixed part
    low = {**B200.efficiency, "min_kernel_s": 1e-6}
    assert stream_time({}, 4096, 0, replace(B200, efficiency=low))[3] == pytest.approx(2.047e-6)
