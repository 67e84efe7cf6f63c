"""`estimate sass` on probe kernels compiled here (tests/data/sass/*.cu): tensor family, per-iteration
instruction counts against a hand count from each kernel's source, spills, TMA / TMEM, findings."""

import pytest
from sassutil import finding, hot_loops, kernel, needs_cuda_tools

pytest_plugins = ("sassfixtures",)  # the session fixtures `analysed` and `cubins`

pytestmark = needs_cuda_tools


@pytest.mark.parametrize("arch", ["sm_80", "h100-sxm"])
def test_fma_loop_unrolled_by_4(analysed, arch):
    k = kernel(analysed("fma", arch), "fma_loop")
    assert k["tensor"]["family"] is None
    # `#pragma unroll 4` over 2 fmaf per source iteration: the main loop holds 4 x 2 = 8 FFMA, the
    # remainder loop 1 x 2 = 2.
    assert sorted(lp["opcodes"].get("FFMA", 0) for lp in hot_loops(k)) == [2, 8]
    assert finding(k, "tensor_path")["text"].startswith("no tensor-core instructions")


def test_smem_exp_per_iteration(analysed):
    k = kernel(analysed("fma", "h100-sxm"), "smem_exp")
    (loop,) = hot_loops(k)
    ops = loop["opcodes"]
    # per source iteration (unroll 1): 1 LDG, 1 STS, 2 __syncthreads, 1 LDS, 1 exp2f
    assert (ops["LDG"], ops["STS"], ops["BAR"], ops["LDS"], ops["MUFU"]) == (1, 1, 2, 1, 1)
    assert loop["sfu"] == {"MUFU.EX2": 1}
    assert k["resources"]["static_smem_bytes"] == 1024 * 4  # float tile[1024], reserve subtracted on sm_90a
    assert k["resources"]["barriers"] == 1


@pytest.mark.parametrize("arch", ["sm_80", "h100-sxm"])
def test_spills_match_ptxas(analysed, cubins, arch):
    k = kernel(analysed("fma", arch), "pressure_lb")
    res = k["resources"]
    # __launch_bounds__(256, 8): 65536 / (256 * 8) = 32 registers for 48 live floats
    assert res["registers"] == 32
    assert res["spill_source"] == "ptxas" and res["spill_store_bytes"] > 0
    # the same bytes from the SASS alone: widths of the (*"SpillRefill"*) STL / LDL of the cubin
    path, _log = cubins("fma", "sm_80" if arch == "sm_80" else "sm_90a")
    from estimator.sass.analyse import analyse_file

    from_cubin = kernel(analyse_file(str(path)), "pressure_lb")["resources"]
    assert from_cubin["spill_source"] == "sass"
    assert (from_cubin["spill_store_bytes"], from_cubin["spill_load_bytes"]) == (
        res["spill_store_bytes"], res["spill_load_bytes"])
    spill = finding(k, "spills")
    assert spill["hot_loop_spill_bytes"] > 0 and "B of spill traffic per iteration" in spill["text"]


def test_local_array_is_not_a_spill(analysed):
    k = kernel(analysed("fma", "h100-sxm"), "local_array")
    res = k["resources"]
    assert res["stack_bytes"] == 32 * 4  # float v[32] on the stack
    assert res["spill_store_bytes"] == 0 and res["spill_instructions"] == 0 and res["local_instructions"] > 0
    assert finding(k, "stack")["text"].startswith("128 B stack frame without spills")


@pytest.mark.parametrize("arch", ["sm_80", "h100-sxm"])
def test_mma_sync_bf16(analysed, arch):
    k = kernel(analysed("mma_sync", arch), "mma_bf16")
    assert k["tensor"]["family"] == "mma.sync"
    (op,) = k["tensor"]["ops"]
    assert (op["opcode"], op["dtype"], op["accumulator"], op["shape"]) == (
        "HMMA.16816.F32.BF16", "bf16", "f32", [16, 8, 16])
    (loop,) = hot_loops(k)
    assert loop["tensor"] == {"HMMA.16816.F32.BF16": 1}  # one mma.sync per (not unrolled) k-step


def test_hmma_on_hopper_is_capped_from_the_descriptors(analysed):
    k = kernel(analysed("mma_sync", "h100-sxm"), "mma_bf16")
    f = finding(k, "tensor_path")
    # hwdesc/sm/sm_90.yaml mma.sync rate 2048 FLOP/clk/SM x h100-sxm 132 SMs x 1.98 GHz = 535.3 TFLOP/s,
    # out of the descriptor's dense bf16 peak 989.4 TFLOP/s -> 0.541
    assert f["fast_path"] == "wgmma"
    assert f["max_fraction_of_peak"] == pytest.approx(2048 * 132 * 1.98e9 / 989.4e12, abs=1e-3)
    assert "expect at most ~54% of the h100-sxm bf16 peak" in f["text"]
    a100 = kernel(analysed("mma_sync", "sm_80"), "mma_bf16")
    assert "max_fraction_of_peak" not in finding(a100, "tensor_path")  # mma.sync is sm_80's native path


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
def test_fp8_mma_sync_is_emulated_on_sm90a_and_sm100a(analysed, arch):
    k = kernel(analysed("mma_sync", arch), "mma_e4m3")
    # per k-step: 16 A + 8 B fp8 values per thread, unpacked 2 per F2FP -> 8 + 4 = 12; k32 = 2 x HMMA k16
    assert k["tensor"]["emulated_fp8"] == {"conversions": 12, "hmma": 2}
    (loop,) = hot_loops(k)
    assert loop["tensor"] == {"HMMA.16816.F32": 2} and loop["mix"]["conv"] == 12
    assert finding(k, "emulated_fp8")["text"].startswith("fp8 MMA emulated by 12 conversions + 2 HMMA")


def test_fp8_mma_sync_is_native_on_sm120(analysed):
    k = kernel(analysed("mma_sync", "rtx-5090"), "mma_e4m3")
    assert k["tensor"]["emulated_fp8"] is None
    assert [op["opcode"] for op in k["tensor"]["ops"]] == ["QMMA.16832.F32.E4M3.E4M3"]


def test_wgmma_tma(analysed):
    k = kernel(analysed("wgmma", "h100-sxm"), "wgmma_tma")
    assert k["tensor"]["family"] == "wgmma"
    (op,) = k["tensor"]["ops"]
    assert (op["opcode"], op["dtype"], op["shape"]) == ("HGMMA.64x64x16.F32.BF16", "bf16", [64, 64, 16])
    (loop,) = hot_loops(k)
    # per 64-wide k-tile: 64 / 16 = 4 wgmma; 2 TMA loads (A and B tiles, one elected thread each)
    assert loop["tensor"] == {"HGMMA.64x64x16.F32.BF16": 4}
    assert loop["tma"] == {"UTMALDG.2D": 2}
    kinds = sorted(lp["kind"] for lp in k["loops"])
    assert kinds == ["lane_serialization", "lane_serialization", "spin_wait", "trip"]
    assert (k["features"]["tma_loads"], k["features"]["tma_stores"]) == (2, 1)
    res = k["resources"]
    assert res["static_smem_bytes"] == 2 * 64 * 64 * 2 + 8  # two bf16 64x64 tiles + one mbarrier
    assert (res["launch_bounds_threads"], res["mbarriers"], res["param_bytes"]) == (128, 1, 3 * 128 + 4)


def test_setmaxnreg_and_cluster(analysed):
    result = analysed("wgmma", "h100-sxm")
    ws = kernel(result, "ws_knobs")
    # __launch_bounds__(384, 1): 65536 / 384 = 170.7 registers, rounded down to a multiple of 8 = 168
    assert ws["resources"]["registers"] == 168 and ws["resources"]["setmaxnreg"]
    assert ws["resources"]["cluster_dims"] == [2, 1, 1] and ws["occupancy"]["upper_bound"]
    assert finding(ws, "cluster")
    nolb = kernel(result, "ws_nolb")
    assert not nolb["resources"]["setmaxnreg"]
    assert finding(nolb, "setmaxnreg")["text"].startswith("setmaxnreg ignored by ptxas")
    assert not [f for f in ws["findings"] if f["kind"] == "setmaxnreg"]


def test_tcgen05(analysed):
    k = kernel(analysed("tcgen05", "b200"), "tc05_mma")
    assert k["tensor"]["family"] == "tcgen05"
    (op,) = k["tensor"]["ops"]
    # idesc = (1<<4 D f32) | (1<<7 A bf16) | (1<<10 B bf16) | (128>>3 << 17) | (128>>4 << 24) = 0x08200490
    assert op["idesc"] == "0x08200490"
    assert (op["opcode"], op["dtype"], op["accumulator"], op["shape"], op["cta_group"]) == (
        "UTCHMMA", "bf16", "f32", [128, 128, 16], 1)
    (loop,) = hot_loops(k)
    assert loop["tensor"] == {"UTCHMMA": 4} and loop["opcodes"]["UTCBAR"] == 1  # 4 MMAs + 1 commit / k-tile
    assert k["features"]["tcgen05"] and k["features"]["tcgen05_cta_group"] == 1 and k["features"]["tmem"] >= 1
    occ = k["occupancy"]
    # tcgen05.alloc of 128 columns: 512 / 128 = 4 CTAs/SM, below registers (32) and smem (6)
    assert (occ["tmem_columns"], occ["ctas_per_sm"], occ["limiter"]) == (128, 4, "tmem")
    assert finding(k, "tmem")["ctas_per_sm"] == 4


def test_block_scaled_fp4_on_sm120(analysed):
    k = kernel(analysed("sm120", "rtx-5090"), "mma_mxf4")
    (op,) = k["tensor"]["ops"]
    assert (op["opcode"], op["dtype"], op["shape"], op["block_scaled"]) == (
        "OMMA.SF.16864.F32.E2M1.E2M1.E8", "fp4", [16, 8, 64], True)
    (loop,) = hot_loops(k)
    assert loop["tensor"] == {"OMMA.SF.16864.F32.E2M1.E2M1.E8": 1}
    assert "max_fraction_of_peak" not in finding(k, "tensor_path")  # mma.sync is sm_120's tensor path


def test_block_and_dynamic_smem_change_occupancy(analysed):
    k = kernel(analysed("sm120", "rtx-5090", block=256, dynamic_smem=40 * 1024), "mma_mxf4")
    occ = k["occupancy"]
    # 256 threads: regs 32*32 = 1024/warp -> 16 warps/partition x 4 / 8 = 8; warps 48 / 8 = 6;
    # smem roundup(40960 + 1024, 128) = 41984 -> 102400 // 41984 = 2
    assert occ["limits"]["registers"] == 8 and occ["limits"]["warps"] == 6
    assert (occ["ctas_per_sm"], occ["limiter"], occ["block_source"]) == (2, "shared_memory", "--block")


@pytest.mark.parametrize("arch,fast,fraction", [
    # 2048 FLOP/clk/SM (hwdesc/sm) x 132 SMs x 1.98 GHz / 989.4 TFLOP/s (h100-sxm.yaml dense bf16)
    ("h100-sxm", "wgmma", 2048 * 132 * 1.98e9 / 989.4e12),
    # the same rate x b200.yaml's 148 SMs x its clock_hz / its dense bf16 peak
    ("b200", "tcgen05", None),
])
def test_readme_gemm_example(analysed, arch, fast, fraction):
    import hwdesc

    k = kernel(analysed("gemm_bf16", arch), "gemm_bf16_tn")
    (loop,) = hot_loops(k)
    ops = loop["opcodes"]
    # per k-tile (tests/data/sass/gemm_bf16.cu header): 4 x 8 x 2 = 64 HMMA, (4 + 4) x 2 = 16 LDSM,
    # 4 + 4 = 8 LDGSTS
    assert (ops["HMMA"], ops["LDSM"], ops["LDGSTS"]) == (64, 16, 8)
    assert k["resources"]["static_smem_bytes"] == 2 * (128 + 128) * 32 * 2
    f = finding(k, "tensor_path")
    if fraction is None:
        hw = hwdesc.load(arch)
        fraction = 2048 * hw.sm_count * hw.clock_hz / hw.tensor_flops_per_s["bf16"]
    assert f["fast_path"] == fast and f["max_fraction_of_peak"] == pytest.approx(fraction, abs=1e-3)
    assert k["occupancy"]["limiter"] == "registers"


def test_tcgen05_cta_pair_fp8(analysed):
    k = kernel(analysed("tcgen05", "b200"), "tc05_pair_fp8")
    (op,) = k["tensor"]["ops"]
    # idesc = (1<<4 D f32) | (A, B format 0 = e4m3) | (128>>3 << 17) | (256>>4 << 24); K = 256 bits / 8 = 32
    assert (op["opcode"], op["dtype"], op["shape"], op["cta_group"]) == (
        "UTCQMMA.2CTA", "fp8", [256, 128, 32], 2)
    (loop,) = hot_loops(k)
    assert loop["tensor"] == {"UTCQMMA.2CTA": 2}  # 2 k32 steps per 64-byte k-tile
    assert k["features"]["tcgen05_cta_group"] == 2 and k["resources"]["cluster_dims"] == [2, 1, 1]
    occ = k["occupancy"]
    assert (occ["tmem_columns"], occ["limits"]["tmem"], occ["upper_bound"]) == (256, 512 // 256, True)
    assert "2-CTA" in finding(k, "tensor_path")["text"]
