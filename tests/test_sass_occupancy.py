"""Occupancy: the cuda_occupancy.h rule with hwdesc/sm constants, by hand and against ptxas' own
`__launch_bounds__` register caps (12 block configurations x 4 archs, tests/data/sass/lbprobe.cu)."""

import pytest
from sassutil import needs_cuda_tools

from estimator.errors import UserError
from estimator.sass import elf
from estimator.sass.limits import load_sm, resolve, runs_on
from estimator.sass.occupancy import max_regs_for, occupancy

pytest_plugins = ("sassfixtures",)  # the session fixtures `analysed` and `cubins`


def test_registers_limit_by_hand():
    lim = load_sm("sm_90")
    occ = occupancy(lim, threads=128, regs=58, static_smem=16392, barriers=1)
    # regs/warp = roundup(58 * 32 = 1856, 256) = 2048; 16384 / 2048 = 8 warps per sub-partition;
    # 8 * 4 partitions / 4 warps per CTA = 8 CTAs
    assert occ.limits["registers"] == 8
    # smem = roundup(16392 + 1024 reserve, 128) = 17536; 233472 // 17536 = 13
    assert occ.smem_per_cta_bytes == 17536 and occ.limits["shared_memory"] == 13
    assert occ.limits["warps"] == 64 // 4 and occ.limits["barriers"] == 32 * 2 // 1
    assert (occ.ctas_per_sm, occ.limiter, occ.warps_per_sm) == (8, "registers", 32)
    assert occ.occupancy == 32 / 64


def test_shared_memory_limit_and_optin():
    lim = load_sm("sm_90")
    occ = occupancy(lim, threads=256, regs=32, dynamic_smem=100 * 1024)
    # roundup(102400 + 1024, 128) = 103424; 233472 // 103424 = 2
    assert (occ.ctas_per_sm, occ.limiter) == (2, "shared_memory")
    too_big = occupancy(lim, threads=256, regs=32, dynamic_smem=232448 + 1)  # over the 227 KB opt-in
    assert too_big.ctas_per_sm == 0


def test_sm120_has_1536_threads():
    lim = load_sm("sm_120a")
    occ = occupancy(lim, threads=256, regs=16)
    assert occ.limits["warps"] == 48 // 8 and occ.ctas_per_sm == 6  # 1536 threads = 48 warps
    assert occupancy(lim, threads=256, regs=256).ctas_per_sm == 0  # > 255 registers cannot launch


def test_tmem_bound_on_blackwell():
    lim = load_sm("sm_100")
    occ = occupancy(lim, threads=128, regs=32, tmem_columns=256)
    assert (occ.limits["tmem"], occ.ctas_per_sm, occ.limiter) == (512 // 256, 2, "tmem")
    assert "tmem" not in occupancy(load_sm("sm_90"), threads=128, regs=32, tmem_columns=256).limits


def test_ptxas_style_caps_by_hand():
    lim = load_sm("sm_90")
    # 256 x 3 CTAs: 80 regs -> 2560/warp -> 6 per partition * 4 / 8 warps = 3; 88 -> 2816 -> 5 * 4 / 8 = 2
    assert max_regs_for(lim, 256, 3) == 80
    assert max_regs_for(lim, 384, 1) == 168  # 65536 / 384 = 170.7 -> 168


def test_bad_block_and_unknown_sm():
    with pytest.raises(UserError, match="block size"):
        occupancy(load_sm("sm_90"), threads=2048, regs=32)
    with pytest.raises(UserError, match="no per-SM limits for 'sm_75'"):
        load_sm("sm_75")


def test_arch_resolution_and_compatibility():
    t = resolve("h100-sxm")
    assert (t.sm, t.limits.name, t.hw.name) == ("sm_90a", "sm_90", "h100-sxm")
    assert resolve("b300").sm == "sm_103a" and resolve("rtx-5090").sm == "sm_120a"
    assert resolve("sm_100a").hw is None
    assert runs_on("sm_90a", "sm_90a") and runs_on("sm_90", "sm_90a") and not runs_on("sm_80", "sm_90a")
    assert runs_on("sm_100", "sm_103a") and not runs_on("sm_100a", "sm_103a")
    with pytest.raises(UserError, match="unknown GPU"):
        resolve("h900")


LB_CONFIGS = [(256, 3), (128, 5), (96, 9), (384, 2), (256, 4), (128, 8), (256, 6), (64, 12), (128, 12),
              (320, 3), (32, 24), (1024, 1)]


@needs_cuda_tools
@pytest.mark.parametrize("sm", ["sm_80", "sm_90a", "sm_100a", "sm_120a"])
def test_occupancy_matches_ptxas_launch_bounds(cubins, sm):
    path, _ = cubins("lbprobe", sm)
    module = elf.read(path.read_bytes())
    lim = load_sm(sm)
    assert len(module.kernels) == len(LB_CONFIGS) >= 10
    for threads, ctas in LB_CONFIGS:
        regs = module.kernels[f"lb_{threads}_{ctas}"].registers
        # ptxas chose the most registers that let `ctas` CTAs co-reside; the formula agrees exactly
        assert regs == max_regs_for(lim, threads, ctas), (sm, threads, ctas, regs)
        assert occupancy(lim, threads, regs).limits["registers"] >= ctas
        assert occupancy(lim, threads, regs + 8).limits["registers"] < ctas
