"""Theoretical occupancy: CTAs per SM from registers, shared memory, warps, barriers and TMEM.

The rule of CUDA's `cuda_occupancy.h` (cudaOccMaxActiveBlocksPerMultiprocessor), with the per-SM
constants of hwdesc/sm/<sm>.yaml (reference/sass.md s.8):
    warps    = ceil(threads / 32)
    regs/warp = roundup(regs * 32, reg_alloc_unit_per_warp)            # 256 -> 8 registers per thread
    by regs  = floor(floor(regs_per_sm / sub_partitions / regs_per_warp) * sub_partitions / warps)
    by warps = floor(warps_per_sm / warps);  by CTAs = ctas_per_sm
    smem/CTA = roundup(static + dynamic + reserved, smem_alloc_unit)  # reserved = 1 KB per block
    by smem  = floor(smem_bytes_per_sm / smem_per_cta)               # the largest carveout
    by barriers (cc >= 9, named barriers > 0) = floor(ctas_per_sm * barrier_factor / barriers)
    by TMEM (tcgen05) = floor(tmem_columns_per_sm / columns)          # NB: an upper bound; columns known
                                                                       # only when given (--tmem-cols)
The smallest wins and is named. NB: clusters need the GPC layout (cudaOccupancyMaxActiveClusters needs a
device), so with cluster dims the CTAs/SM is an upper bound; the virtual-resource limit of cc 10-12 is not
visible in the cubin and is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimator.errors import UserError
from estimator.sass.limits import SmLimits


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _roundup(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int
    warps_per_sm: int
    occupancy: float  # warps / max warps per SM
    limiter: str  # registers | shared_memory | warps | ctas | barriers | tmem
    limits: dict[str, int] = field(default_factory=dict)  # resource -> CTAs/SM it allows
    smem_per_cta_bytes: int = 0
    regs_per_cta: int = 0


def occupancy(
    lim: SmLimits,
    threads: int,
    regs: int,
    static_smem: int = 0,
    dynamic_smem: int = 0,
    barriers: int = 0,
    tmem_columns: int | None = None,
) -> Occupancy:
    """CTAs per SM of a kernel with `threads` per block and `regs` per thread on the SM of `lim`."""
    if threads < 1 or threads > 1024:
        raise UserError(f"block size must be 1..1024 threads, got {threads}")
    warps = _ceil_div(threads, 32)
    limits: dict[str, int] = {}
    regs_per_warp = _roundup(max(regs, 1) * 32, lim.reg_alloc_unit_per_warp)
    per_partition = lim.regs_per_sm // lim.sub_partitions
    if (
        regs > lim.regs_per_thread_max
        or regs_per_warp * _roundup(warps, lim.sub_partitions) > lim.regs_per_sm
    ):
        limits["registers"] = 0
    else:
        limits["registers"] = (per_partition // regs_per_warp) * lim.sub_partitions // warps
    limits["warps"] = lim.warps_per_sm // warps
    limits["ctas"] = lim.ctas_per_sm
    smem = _roundup(static_smem + dynamic_smem + lim.smem_reserved_bytes_per_block, lim.smem_alloc_unit_bytes)
    if smem > lim.smem_bytes_per_block_optin + lim.smem_reserved_bytes_per_block:
        limits["shared_memory"] = 0
    else:
        limits["shared_memory"] = lim.smem_bytes_per_sm // smem
    if lim.sm_number >= 90 and barriers > 0:
        limits["barriers"] = lim.ctas_per_sm * lim.barrier_factor // barriers
    if tmem_columns and lim.tmem_columns_per_sm:
        limits["tmem"] = lim.tmem_columns_per_sm // tmem_columns
    ctas = min(limits.values())
    # Name the tightest resource; among ties prefer the one a kernel author controls.
    order = ("registers", "shared_memory", "tmem", "barriers", "warps", "ctas")
    limiter = min((k for k in order if k in limits), key=lambda k: (limits[k], order.index(k)))
    return Occupancy(
        ctas_per_sm=ctas,
        warps_per_sm=ctas * warps,
        occupancy=ctas * warps / lim.warps_per_sm,
        limiter=limiter,
        limits=limits,
        smem_per_cta_bytes=smem,
        regs_per_cta=regs_per_warp * warps,
    )


def max_regs_for(lim: SmLimits, threads: int, ctas: int) -> int:
    """The most registers per thread (a multiple of 8) that still fit `ctas` CTAs of `threads` per SM.

    This is what ptxas does for `__launch_bounds__(threads, ctas)`; 0 when even 8 registers do not fit.
    """
    best = 0
    for regs in range(8, lim.regs_per_thread_max + 1, 8):
        if occupancy(lim, threads, regs).limits["registers"] >= ctas:
            best = regs
    return best
