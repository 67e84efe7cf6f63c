"""The tile model (estimator/tiling) against hand arithmetic: tiles, waves, padding, occupancy, split-K,
L2 re-reads and residency, attention tiles and decode splits, and the tile plan's place in estimate()."""

import math

import pytest
import sympy

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.pricing import attention as attn_model
from estimator.pricing import gemm as gemm_model
from estimator.pricing.menu import GemmTile, menu_for
from estimator.pricing.plan import hw_params, operand_bytes, tiling_supported
from estimator.pricing.residency import stack_hits
from estimator.report.table import to_json, to_table
from onnxutil import matmul_model

H100 = hwdesc.load("h100-sxm")
HOPPER = menu_for("hopper")
# Round efficiency constants so the arithmetic below stays by hand: full tensor peak, no fixed costs, and
# no epilogue / C-store / block-scale terms (optional keys; tests/test_tiling_output.py covers them).
OUTPUT_KEYS = ("epilogue_store", "dram_store", "block_scale", "block_scale_oob_s", "block_scale_straddle_s",
               "block_scale_store")
EFF = {**{k: v for k, v in H100.efficiency.items() if k not in OUTPUT_KEYS}, "tensor": 1.0, "dram": 1.0,
       "l2": 1.0, "launch_s": 0.0, "mem_latency_s": 0.0, "split_k_s": 0.0}
HW = gemm_model.Hw(132, 3.35e12, 12.39e12, 50 * 2**20, 233472, EFF)
T128x256 = GemmTile(128, 256, max_ctas_per_sm=1, cluster_m=2)


def bf16_gemm(m, n, k, **kw):
    return gemm_model.Gemm(1, m, n, k, 2, 2, 2, 989.4e12, 1.0,
                           dram_bytes=2 * (m * k + n * k + m * n), **kw)


def test_square_gemm_tiles_waves_and_machine_share():
    # 4096^3 bf16, 128x256 tiles, 132 SMs, one CTA per SM: 32 x 16 = 512 tiles = 4 waves, the last one
    # 512 - 3 * 132 = 116 of 132 SMs full (0.88), so 512 / (4 * 132) = 0.97 of the machine is used
    c = gemm_model.price_tile(bf16_gemm(4096, 4096, 4096), T128x256, False, 1, HOPPER, HW)
    assert c.ctas_per_sm == 1
    assert c.tiles == 32 * 16 == 512
    assert c.waves == 4
    assert 512 - 3 * 132 == 116 and round(116 / 132, 2) == 0.88
    assert c.wave_eff == pytest.approx(512 / (4 * 132)) and round(c.wave_eff, 2) == 0.97
    # compute: 4 waves x 64 k-steps (4096 / 64) x one 128x256x64 step at the per-SM peak
    step = 2 * 128 * 256 * 64 / (989.4e12 / 132)  # 0.5596 us
    assert c.t_compute == pytest.approx(4 * 64 * step)
    # = the roofline's 2 * 4096^3 / peak stretched by the unused share: 528 slots for 512 tiles
    assert c.t_compute == pytest.approx(2 * 4096**3 / 989.4e12 * 528 / 512)


def test_padding_and_last_wave():
    # M = 4097 pads to 33 tile rows: 33 x 16 = 528 tiles = exactly 4 full waves
    c = gemm_model.price_tile(bf16_gemm(4097, 4096, 4096), T128x256, False, 1, HOPPER, HW)
    assert (c.tiles, c.waves, c.wave_eff) == (528, 4, 1.0)
    # M = 4353 pads to 35 rows: 560 tiles = 5 waves, the last 32 of 132 SMs: 560 / 660 of the machine
    c = gemm_model.price_tile(bf16_gemm(4353, 4096, 4096), T128x256, False, 1, HOPPER, HW)
    assert (c.tiles, c.waves) == (560, 5)
    assert c.wave_eff == pytest.approx(560 / 660)


def test_occupancy_from_shared_memory_and_registers():
    # 128x256, bf16: one k-step stage = (128 + 256) * 64 * 2 = 49152 B; epilogue staging 32 KB;
    # 232448 B usable (228 KB - 1 KB reserved) / (2 stages + epilogue = 131072) = 1 CTA; its fp32
    # accumulator 128 * 256 * 4 = 128 KB of the 192 KB register budget: 1; stages (232448 - 32768) //
    # 49152 = 4
    assert gemm_model.occupancy(T128x256, HOPPER, HW, 2, 2, 2) == (1, 4, 64)
    # 64x128 (capped at 2 per SM): stage 192 * 64 * 2 = 24576 B, epilogue 64 * 128 * 2 = 16384 B;
    # 232448 // (49152 + 16384) = 3, registers 196608 // 32768 = 6, cap 2; stages (116224 - 16384)
    # // 24576 = 4
    assert gemm_model.occupancy(GemmTile(64, 128, 2), HOPPER, HW, 2, 2, 2) == (2, 4, 64)
    # fp8 operands: a stage still holds 128 bytes of K per row, i.e. 128 elements
    assert gemm_model.occupancy(T128x256, HOPPER, HW, 1, 1, 2)[2] == 128


def test_split_k_fills_the_machine_for_one_tile():
    # 128 x 128 x 8192: one 128x128 tile walks 128 k-steps alone; split 8 ways, 8 CTAs walk 16 each
    tile = GemmTile(128, 128, 1)
    one = gemm_model.price_tile(bf16_gemm(128, 128, 8192), tile, False, 1, HOPPER, HW)
    eight = gemm_model.price_tile(bf16_gemm(128, 128, 8192), tile, False, 8, HOPPER, HW)
    assert (one.ctas, eight.ctas) == (1, 8)
    assert eight.t_compute == pytest.approx(one.t_compute / 8)
    # the price: fp32 partials of every split written and read back: 2 * 8 * 128 * 128 * 4 B = 1 MiB
    assert eight.dram_extra - one.dram_extra == 2 * 8 * 128 * 128 * 4


def test_gemv_is_memory_bound():
    # m = 1 (a GEMV): whatever the tile, the weight (4096 x 4096 x 2 B = 32 MiB) streams from DRAM, and
    # with no fixed costs that is the whole time
    g = bf16_gemm(1, 4096, 4096)
    best = min(gemm_model.candidates(g, HOPPER, HW), key=lambda c: c.time)
    assert best.t_dram == pytest.approx(2 * (4096 + 4096 * 4096 + 4096) / 3.35e12)
    assert best.time == best.t_dram
    # with the fitted constants the plan is memory-bound and spreads the weight over more CTAs than the
    # 32 that 128-wide tiles of N would give (narrow tiles or split-K)
    (k,) = run(matmul_model(1, 4096, 4096, weight=True)).kernels
    assert k.kernel.tile.ctas > 4096 // 128 and k.timing.limiter == "memory"


def test_operands_spilling_l2_are_re_read():
    # 16384^3 bf16: A = B = 512 MiB, far past the usable L2 (50 MiB x l2_resident): B is streamed once
    # per panel of A rows; 16384^2 keeps both in L2 (1 MiB each at K = 32)
    big = gemm_model.price_tile(bf16_gemm(16384, 16384, 16384), T128x256, False, 1, HOPPER, HW)
    assert big.dram_extra > 0
    small = gemm_model.price_tile(bf16_gemm(16384, 16384, 32), T128x256, False, 1, HOPPER, HW)
    assert small.dram_extra == 0


def test_nvfp4_operands_carry_their_block_scales():
    # NVFP4: 4 bits per element plus one 1-byte e4m3 scale per 16 elements = 0.5 + 1/16 byte
    assert operand_bytes("fp4e2m1", menu_for("blackwell")) == 0.5 + 1 / 16
    assert operand_bytes("fp8e4m3", menu_for("blackwell")) == 1.0  # per-tensor scale: negligible
    assert operand_bytes("bf16", HOPPER) == 2.0


def test_lru_stack_distance():
    # x (10 B) warm; the kernel reads x and w: x hits when 10 <= capacity
    assert stack_hits([(["x", "w"], ["y"])], {"x": 10, "w": 5, "y": 3}, 12, warm=["x"]) == [{"x": True}]
    # two warm inputs: b was touched last (distance 5), a before it (10 + 5 = 15 > 12): only b hits
    assert stack_hits([(["a", "b"], ["y"])], {"a": 10, "b": 5, "y": 3}, 12, warm=["a", "b"]) == [{"b": True}]
    # a tensor written by kernel 0 and read by kernel 2 hits if it plus kernel 1's traffic fits
    acc = [([], ["t"]), (["u"], ["v"]), (["t"], ["w"])]
    assert stack_hits(acc, {"t": 4, "u": 4, "v": 4, "w": 1}, 12) == [{}, {}, {"t": True}]
    assert stack_hits(acc, {"t": 4, "u": 4, "v": 5, "w": 1}, 12) == [{}, {}, {}]


def run(model, arch="h100-sxm", **kw):
    return estimate(import_model(model), hwdesc.load(arch), **kw)


def test_bound_unchanged_without_residency():
    # test_price.py's hand bounds hold with tiling on: 2 * 4096^3 / 989.4e12 and the GEMV's bytes
    (k,) = run(matmul_model(4096, 4096, 4096)).kernels
    assert math.isclose(float(k.timing.bound_s), 2 * 4096**3 / 989.4e12, rel_tol=1e-9)
    assert k.kernel.tile.tile.startswith("128x256x64")
    assert float(k.timing.estimate_s) >= float(k.timing.bound_s)
    (k,) = run(matmul_model(1, 4096, 4096, weight=True)).kernels
    assert math.isclose(float(k.timing.bound_s), 2 * (4096 + 4096**2 + 4096) / 3.35e12, rel_tol=1e-9)


def test_warm_inputs_lower_the_bound_by_the_resident_activation():
    # a = [32768, 512] bf16 = 32 MiB fits in the 50 MiB L2: read from L2, so the DRAM term keeps only
    # W (512 x 32) and y (32768 x 32); every byte still crosses L2 at its peak
    a, w, y = 32768 * 512 * 2, 512 * 32 * 2, 32768 * 32 * 2
    (k,) = run(matmul_model(32768, 512, 32, weight=True), warm_inputs=True).kernels
    assert k.kernel.tile.resident_bytes_bound == a
    expected = max(2 * 32768 * 512 * 32 / 989.4e12, (w + y) / 3.35e12, (a + w + y) / H100.l2_bytes_per_s)
    assert math.isclose(float(k.timing.bound_s), expected, rel_tol=1e-9)
    (cold,) = run(matmul_model(32768, 512, 32, weight=True)).kernels
    assert math.isclose(float(cold.timing.bound_s), (a + w + y) / 3.35e12, rel_tol=1e-9)


def test_symbolic_m_keeps_ceilings():
    (k,) = run(matmul_model("m", 4096, 4096)).kernels
    plan = k.kernel.tile
    m = dim("m")
    assert plan.tile == "128x256x64"  # chosen as if m were 4096 (plan.SYMBOLIC_DIM_VALUE)
    assert sympy.sympify(plan.waves).has(sympy.ceiling) and m in sympy.sympify(plan.waves).free_symbols
    assert sympy.sympify(plan.waves).subs(m, 4096) == 4


def test_report_shows_tile_waves_and_utilization():
    r = run(matmul_model(4096, 4096, 4096))
    k = to_json(r)["kernels"][0]
    assert k["tile"] == "128x256x64" and k["waves"] == 4
    assert k["wave_eff"] == pytest.approx(512 / 528)
    # tensor_util = FLOPs / (estimate x peak)
    assert k["tensor_util"] == pytest.approx(2 * 4096**3 / (k["estimate_s"] * 989.4e12))
    assert "128x256x64" in to_table(r) and "4 (97%)" in to_table(r)


def test_causal_steps():
    # 4 Q tiles of 128 rows over 128-key steps: tile t sees t steps, 1 + 2 + 3 + 4 = 10
    assert attn_model.causal_steps(4, 128, 128, 0, 4) == 10
    # 64-key steps: 2 + 4 + 6 + 8 = 20
    assert attn_model.causal_steps(4, 128, 64, 0, 8) == 20
    # a cached prefix of 256 keys adds 2 steps to each of the 4 tiles
    assert attn_model.causal_steps(4, 128, 128, 256, 6) == 10 + 4 * 2


def _attn(**kw):
    base = dict(batch=1, heads=32, kv_heads=8, seq_q=2048, seq_kv=2048, dk=128, dv=128, causal=True,
                q_bytes=2.0, kv_bytes=2.0, peak=989.4e12, eff_unit=H100.efficiency["tensor"],
                sfu_ops_per_s=H100.sfu_ops_per_s, alu_ops_per_s=H100.cuda_flops_per_s["fp32"] / 2,
                decode=False, dram_bytes=0.0)
    return attn_model.Attn(**{**base, **kw})


def test_prefill_ctas_and_waves():
    # 32 heads x 2048 / 128 = 16 Q tiles = 512 CTAs; Q 128x128 + two K/V stages = 160 KB: 1 per SM
    c = attn_model.prefill(_attn(), menu_for("hopper").attention_tiles[0], hw_params(H100))
    assert (c.ctas, c.ctas_per_sm, c.waves) == (512, 1, 4)
    assert c.wave_eff == pytest.approx(512 / 528)


def test_decode_splits_kv_at_small_batch_and_shares_kv_across_groups():
    hw = hw_params(H100)
    a = _attn(seq_q=1, seq_kv=65536, causal=True, decode=True,
              dram_bytes=2 * 8 * 65536 * 128 * 2.0)
    best = min(attn_model.candidates(a, HOPPER, hw), key=lambda c: c.time)
    assert best.split > 1  # flash-decoding: 8 (sequence, KV head) CTAs alone would leave 124 SMs idle
    assert best.ctas == 1 * 8 * best.split  # one CTA per KV head: its 4 query heads share the K/V read
    # a group of 64 query heads per KV head is past the MMA kernel's 32: one CTA per query head
    wide = _attn(heads=128, kv_heads=2, seq_q=1, seq_kv=4096, decode=True, dram_bytes=1.0)
    assert all(c.ctas % 128 == 0 for c in attn_model.candidates(wide, HOPPER, hw))


def test_every_bundled_gpu_tiles_and_cpu_does_not():
    for arch in hwdesc.list_archs():
        assert tiling_supported(hwdesc.load(arch)), arch
    assert menu_for("cpu") is None


def test_blackwell_two_sm_tiles_and_fp4():
    (k,) = run(matmul_model(8192, 8192, 8192), arch="b200", precision="fp4").kernels
    assert k.kernel.tile is not None and k.kernel.tile.kind == "gemm"
    assert math.isclose(float(k.timing.bound_s), 2 * 8192**3 / 9000e12, rel_tol=1e-9)  # fp4 dense peak
    # a 256x256 tile on a CTA pair: 148 / 2 = 74 pair slots per wave
    g = gemm_model.Gemm(1, 8192, 8192, 8192, 0.5625, 0.5625, 2, 9000e12, 1.0, dram_bytes=0)
    pair = gemm_model.price_tile(g, GemmTile(256, 256, 1, sms=2, cluster_m=2), False, 1,
                                 menu_for("blackwell"), hw_params(hwdesc.load("b200")))
    assert pair.tiles == 32 * 32 and pair.waves == math.ceil(1024 / 74)


def test_library_default_is_the_tile_model_and_roofline_asks_for_the_roofline():
    graph = import_model(matmul_model(4096, 4096, 4096))
    (k,) = estimate(graph, H100).kernels  # as `estimate MODEL` prices: a tile plan per kernel
    assert k.kernel.tile is not None
    (k,) = estimate(graph, H100, roofline=True).kernels
    assert k.kernel.tile is None
    assert math.isclose(float(k.timing.estimate_s), 2 * 4096**3 / 989.4e12 / H100.efficiency["tensor"])
