"""The block-scaled GEMM as the library runs it on Hopper (estimator/pricing/pick.py, gemm._edge): the tile
DeepGEMM's get_best_gemm_config sets from the shape (hwdesc/tiles/hopper.yaml `block_scaled`), and the
k-step cost of a partial M tile, against hand arithmetic."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import hwdesc
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.pricing import gemm as gemm_model
from estimator.pricing import pick, quant
from estimator.pricing.menu import GemmTile, menu_for, parse
from estimator.study.sweep import Sweeper
from hwdesc import HwdescError
from passes import DEFAULT_STRATEGY, pipeline_for

HOPPER = menu_for("hopper")
TILES = HOPPER.block_scaled.tiles
NO_FIXED = {"tensor": 1.0, "dram": 1.0, "l2": 1.0, "l2_resident": 0.75, "launch_s": 0.0, "mem_latency_s": 0.0,
            "split_k_s": 0.0}


def hw(**eff):
    return gemm_model.Hw(132, 3.35e12, 12.39e12, 50 * 2**20, 233472, {**NO_FIXED, **eff}, 66.9e12)


def fp8(m, n, k, scale_block=128):
    return gemm_model.Gemm(1, m, n, k, 1, 1, 2, 1978.9e12, 1.0, dram_bytes=m * k + n * k + 2 * m * n,
                           scale_block=scale_block)


def chosen(m, n):
    runs = pick.picked(1, m, n, TILES, 132, HOPPER.block_scaled.swap_below_m)
    (won,) = [(t.m, t.n, swap) for (t, swap), ok in runs.items() if ok]
    return won


def test_hopper_block_scaled_menu_is_deepgemms():
    # block M 64 and 128, block N 16..128 in steps of 8 (15 values each), one CTA per SM, no cluster
    assert sorted({t.m for t in TILES}) == [64, 128]
    assert sorted({t.n for t in TILES}) == list(range(16, 129, 8))
    assert len(TILES) == 2 * 15
    assert all(t.max_ctas_per_sm == 1 and t.cluster_m == 1 for t in TILES)
    assert (HOPPER.block_scaled.pick, HOPPER.block_scaled.swap_below_m) == ("waves", 32)


def test_block_m_covers_the_dim_it_spans():
    # the smallest of {64, 128} at or above the dim, else the largest
    assert [pick.covering_m(m, TILES) for m in (1, 64, 65, 128, 129, 4096)] == [64, 64, 128, 128, 128, 128]
    assert list(pick.covering_m(np.array([64, 65]), TILES)) == [64, 128]


def test_fewest_waves_then_fullest_last_wave():
    # M 129, N 4096: 2 m-tiles of 128; N 64 gives 2 x 64 = 128 tiles (1 wave, 128 in it); N 56 gives
    # 2 x ceil(4096 / 56) = 148 (2 waves); N 128 gives 64 tiles (1 wave, only 64 in it): N 64 wins
    assert chosen(129, 4096) == (128, 64, False)
    # M 2048: 16 m-tiles; only N 128 stays at 4 waves (16 x 32 = 512 <= 4 x 132 = 528; N 120: 16 x 35 = 560)
    assert chosen(2048, 4096) == (128, 128, False)
    # M 1025: 9 m-tiles, 3 waves at best (9 x 32 = 288 > 264); the fullest last wave at 3 waves:
    # N 96: 9 x 43 = 387, 123 in the last (N 104: 9 x 40 = 360, 96; N 88: 9 x 47 = 423, 4 waves)
    assert chosen(1025, 4096) == (128, 96, False)
    # M 64 takes block M 64: 1 m-tile x ceil(4096 / 32) = 128 tiles at N 32 (N 24: 171 tiles, 2 waves)
    assert chosen(64, 4096) == (64, 32, False)


def test_small_m_swaps_and_takes_the_smallest_n():
    # M 5 < 32: A and B swap, the tile's M spans N = 4096 (block M 128), its N the 5 tokens: every N
    # gives 32 x 1 = 32 tiles, so the tie goes to the smallest, 16
    assert chosen(5, 4096) == (128, 16, True)


def test_arrays_of_points_mark_one_tile_per_point():
    m = np.array([129, 2048, 5])
    runs = pick.picked(1, m, np.array([4096, 4096, 4096]), TILES, 132, 32)
    won = np.sum([ok for ok in runs.values()], axis=0)
    assert list(won) == [1, 1, 1]
    assert list(runs[(GemmTile(128, 64), False)]) == [True, False, False]
    assert list(runs[(GemmTile(128, 16), True)]) == [False, False, True]


def test_candidates_are_the_picked_tile_only():
    h = hw(block_scale=0.25)
    cands = gemm_model.candidates(fp8(129, 4096, 4096), HOPPER, h)
    assert [(c.tile.m, c.tile.n, c.swap, c.split) for c in cands] == [(128, 64, False, 1)]
    # a per-tensor fp8 GEMM of the same shape keeps the family's menu and timing choice
    assert len(gemm_model.candidates(fp8(129, 4096, 4096, scale_block=0), HOPPER, h)) > 1
    # arrays: the tiles the library does not run at a point are infinitely slow there
    arr = gemm_model.candidates(fp8(np.array([129.0, 2048.0]), 4096, 4096), HOPPER, h)
    fastest = np.min(np.stack([c.time for c in arr]), axis=0)
    for point, m in enumerate((129, 2048)):
        (alone,) = gemm_model.candidates(fp8(m, 4096, 4096), HOPPER, h)
        assert fastest[point] == pytest.approx(alone.time)


def test_a_partial_m_tile_pays_per_padded_row_and_k_step():
    # M 129 in 128x64 tiles: the second m-tile has 2 x 128 - 129 = 127 padded rows in each of its
    # 4096 / 64 = 64 CTAs; K 4096 is 32 k-steps of 128: 32 x 127 x 64 x 2e-11 s = 5.2019 us more
    tile = GemmTile(128, 64)
    base = gemm_model.price_tile(fp8(129, 4096, 4096), tile, False, 1, HOPPER, hw(block_scale=0.25))
    edge = gemm_model.price_tile(fp8(129, 4096, 4096), tile, False, 1, HOPPER,
                                 hw(block_scale=0.25, block_scale_oob_s=2e-11))
    assert edge.t_compute - base.t_compute == pytest.approx(32 * 127 * 64 * 2e-11)
    assert 32 * 127 * 64 * 2e-11 == pytest.approx(5.2019e-6, rel=1e-4)
    # a full last tile (M 256) and a per-tensor GEMM pay nothing
    for g in (fp8(256, 4096, 4096), fp8(129, 4096, 4096, scale_block=0)):
        a = gemm_model.price_tile(g, tile, False, 1, HOPPER, hw(block_scale=0.25))
        b = gemm_model.price_tile(g, tile, False, 1, HOPPER, hw(block_scale=0.25, block_scale_oob_s=2e-11))
        assert a.t_compute == b.t_compute


def test_the_block_scaled_kernel_stores_c_at_its_own_dram_share():
    # 4096 x 65536 x 256: C is 4096 x 65536 x 2 B = 536.9 MB, stored at block_scale_store (0.4) of
    # 3.35 TB/s, not at dram_store (0.8): 536.9e6 / (0.4 x 3.35e12) - 536.9e6 / (0.8 x 3.35e12) = 200.3 us
    g, tile = fp8(4096, 65536, 256), GemmTile(128, 128)
    own = gemm_model.price_tile(g, tile, False, 1, HOPPER, hw(block_scale=0.25, dram_store=0.8,
                                                              block_scale_store=0.4))
    plain = gemm_model.price_tile(g, tile, False, 1, HOPPER, hw(block_scale=0.25, dram_store=0.8))
    c_bytes = 4096 * 65536 * 2
    assert own.t_dram - plain.t_dram == pytest.approx(c_bytes / (0.4 * 3.35e12) - c_bytes / (0.8 * 3.35e12))
    assert own.t_dram - plain.t_dram == pytest.approx(200.3e-6, rel=1e-3)
    # a per-tensor GEMM keeps dram_store
    per_tensor = fp8(4096, 65536, 256, scale_block=0)
    both = hw(dram_store=0.8, block_scale_store=0.4)
    assert (gemm_model.price_tile(per_tensor, tile, False, 1, HOPPER, both).t_dram
            == gemm_model.price_tile(per_tensor, tile, False, 1, HOPPER, hw(dram_store=0.8)).t_dram)


def _menu(block_scaled):
    raw = {"family": "x", "mma": "m", "gemm": {
        "k_bytes": 128, "min_stages": 2, "max_stages": 8, "smem_reserved_bytes": 0, "epilogue_smem_bytes": 0,
        "accumulator_bytes_per_sm": 196608, "split_k": [1], "tiles": [{"m": 128, "n": 128}],
        "block_scaled": block_scaled},
        "attention": {"tiles": [{"q": 128, "kv": 128, "max_head_dim": 128}], "decode_kv": 128,
                      "decode_mma": [{"kv_bytes": [2], "q_rows": 16, "max_ctas_per_sm": 1}],
                      "decode_splits": [1], "decode_ctas_per_sm": 1, "decode_max_group": 8}}
    return parse(raw, "test.yaml")


def test_menu_expands_n_lists_and_checks_the_pick():
    bs = {"split_k": [1], "promote": True, "source": "s", "pick": "waves",
          "tiles": [{"m": 64, "n": [16, 24]}, {"m": 128, "n": 32}]}
    tiles = _menu(bs).block_scaled.tiles
    assert [(t.m, t.n) for t in tiles] == [(64, 16), (64, 24), (128, 32)]
    with pytest.raises(HwdescError, match="pick"):
        _menu({**bs, "pick": "fastest"})
    with pytest.raises(HwdescError, match="needs its `tiles`"):
        _menu({k: v for k, v in bs.items() if k != "tiles"})
    assert _menu({"split_k": [1], "promote": True, "source": "s"}).block_scaled.tiles == ()


def test_a_tile_straddling_two_weight_scale_blocks():
    # N 40 does not divide the 128-column weight-scale block: at most 6 stages (DeepGEMM's {6, 5, 4};
    # shared memory alone would hold (233472 - 1024 - 128 x 40 x 2) // ((128 + 40) x 128) = 10, capped at
    # the menu's 8), and `block_scale_straddle_s` more per k-step. M 2048 x N 4096 in 128x40:
    # 16 x ceil(4096 / 40) = 16 x 103 = 1648 tiles = 13 waves of 132, 32 k-steps: 13 x 32 x 1e-7 s more
    g, h = fp8(2048, 4096, 4096), hw(block_scale=0.25)
    straddling = hw(block_scale=0.25, block_scale_straddle_s=1e-7)
    base = gemm_model.price_tile(g, GemmTile(128, 40), False, 1, HOPPER, h)
    more = gemm_model.price_tile(g, GemmTile(128, 40), False, 1, HOPPER, straddling)
    assert (base.stages, base.waves) == (6, 13)
    assert more.t_compute - base.t_compute == pytest.approx(13 * 32 * 1e-7)
    # N 32 divides it: (232448 - 8192) // (160 x 128) = 10 stages fit, the menu's 8 run; no extra
    whole = gemm_model.price_tile(g, GemmTile(128, 32), False, 1, HOPPER, straddling)
    assert whole.stages == 8
    assert whole.t_compute == gemm_model.price_tile(g, GemmTile(128, 32), False, 1, HOPPER, h).t_compute


def _block_fp8_model(n, k):
    """x[m, k] (bf16, m free) -> QuantizeLinear to e4m3 with 1 x 128 scales -> MatMul with an e4m3
    weight [k, n] (an external initializer: no bytes)."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT8E4M3FN, dims=[k, n],
                    data_location=TensorProto.EXTERNAL)
    for key, val in (("location", "w.bin"), ("offset", "0"), ("length", "1")):
        entry = w.external_data.add()
        entry.key, entry.value = key, val
    info = helper.make_tensor_value_info
    inputs = [info("x", TensorProto.BFLOAT16, ["m", k]), info("x_scale", TensorProto.FLOAT, ["m", k // 128])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize", axis=1,
                              block_size=128, output_dtype=TensorProto.FLOAT8E4M3FN),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="gemm")]
    graph = helper.make_graph(nodes, "fp8", inputs, [info("y", TensorProto.BFLOAT16, ["m", n])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_a_sweep_over_m_prices_each_point_as_dim_does():
    # the pick changes with M (swap-AB, block M 64 / 128, block N by waves): arrays of points take, at
    # each point, exactly the tile and price --dim takes
    h100 = hwdesc.load("h100-sxm")
    graph = import_model(_block_fp8_model(4096, 4096))

    def run(dims):
        return estimate(graph, h100, pipeline=pipeline_for(DEFAULT_STRATEGY), dims=dims)

    ms = [5, 64, 65, 129, 256, 1025, 2048, 4097]
    pts = Sweeper(run).evaluate({"m": np.array(ms)})
    for i, m in enumerate(ms):
        assert pts.estimate_s[i] == pytest.approx(float(run({"m": m}).totals["estimate_s"]), rel=1e-9)
    tiles = {m: next(k.kernel.tile.tile for k in run({"m": m}).kernels if k.kernel.name == "gemm")
             for m in (5, 129, 2048)}
    assert tiles == {5: "16x128x128 swapAB scales1x128", 129: "128x64x128 scales1x128",
                     2048: "128x128x128 scales1x128"}


def _h100_with(**eff):
    from dataclasses import replace
    from types import MappingProxyType

    h100 = hwdesc.load("h100-sxm")
    return replace(h100, efficiency=MappingProxyType({**h100.efficiency, **eff}))


def _quant_kernel(result):
    return next(k for k in result.kernels if k.kernel.name == "quantize")


def test_block_quantization_runs_latency_bound_rounds():
    # x [4096, 8192] in 1 x 128 groups: 4096 x 64 = 262144 groups over 132 SMs x 64 warps = 8448 warps:
    # ceil(31.03) = 32 rounds; the 31 after the first at 1.8 us = 55.8 us, above the streaming time
    # (64 MiB of bf16 read, 32 MiB of e4m3 and 1 MiB of scales written: ~37 us at 0.822 x 3.35 TB/s)
    graph = import_model(_block_fp8_model(4096, 8192))
    kernel = next(k for k in run_lowered(graph) if k.name == "quantize")
    # M is free in the graph: ceiling(64 m / 8448) = ceiling(m / 132)
    rounds = quant.block_quant_rounds(graph, kernel, 132, 64)
    assert rounds.subs({s: 4096 for s in rounds.free_symbols}) == 32
    h = _h100_with(block_quant_round_s=1.8e-6)
    r = estimate(graph, h, pipeline=pipeline_for(DEFAULT_STRATEGY), dims={"m": 4096})
    fixed = h.efficiency["launch_s"] + h.efficiency["mem_latency_s"]
    assert float(_quant_kernel(r).timing.estimate_s) == pytest.approx(fixed + 31 * 1.8e-6)
    # one round (M 1: 64 groups) adds nothing to the streaming kernel
    small = [estimate(graph, hh, pipeline=pipeline_for(DEFAULT_STRATEGY), dims={"m": 1})
             for hh in (h, _h100_with())]
    times = [float(_quant_kernel(r).timing.estimate_s) for r in small]
    assert times[0] == times[1]


def run_lowered(graph):
    from estimator.kernel import CostCache, lower
    from passes import Pipeline

    lowered = Pipeline.parse(pipeline_for(DEFAULT_STRATEGY)).run(graph)
    return lower(lowered, CostCache(lowered)).kernels


def test_block_quant_menu_entry_is_checked():
    assert HOPPER.block_quant_warps_per_sm == 64  # TensorRT-LLM: 8 blocks of 256 threads per SM
    assert menu_for("blackwell").block_quant_warps_per_sm == 0  # no such kernel described: a stream
    with pytest.raises(HwdescError, match="block_quant"):
        _menu_with_quant({"warps_per_sm": 64})  # no source


def _menu_with_quant(block_quant):
    raw = {"family": "x", "mma": "m", "block_quant": block_quant, "gemm": {
        "k_bytes": 128, "min_stages": 2, "max_stages": 8, "smem_reserved_bytes": 0, "epilogue_smem_bytes": 0,
        "accumulator_bytes_per_sm": 196608, "split_k": [1], "tiles": [{"m": 128, "n": 128}]},
        "attention": {"tiles": [{"q": 128, "kv": 128, "max_head_dim": 128}], "decode_kv": 128,
                      "decode_mma": [{"kv_bytes": [2], "q_rows": 16, "max_ctas_per_sm": 1}],
                      "decode_splits": [1], "decode_ctas_per_sm": 1, "decode_max_group": 8}}
    return parse(raw, "test.yaml")
