"""Multi-head latent attention (DeepSeek's MLA) decode as the engines run it: one tensor-core kernel over
the latent cache shared by every head (FlashMLA, TensorRT-LLM's MLA generation kernels).

In the absorbed form (models/decoder_attention.py _mla_absorbed) the query is already projected into the
latent space: H query heads of dk = kv_lora_rank + rope (576) attend to ONE cached latent row per token,
V being its first dv = kv_lora_rank (512) columns. The kernel puts `q_rows` query heads of one sequence
on the MMA's M side (a head block: 64 on Hopper's wgmma, 128 on Blackwell's tcgen05; fewer heads are
padded) and walks the cache in `kv_block`-token pages; the engine's scheduler metadata splits each
sequence's pages over the SMs so that every SM gets the same number of (head block, page) items. Per item
the SM runs the two MMAs, 2 * q_rows * kv_block * (dk + dv) FLOPs, and reads the page once from DRAM
(every head block after the first finds it in L2). So the arithmetic intensity is ~ H x the per-head
kernel's, and a 128-head decode is compute-bound on tensor cores.

    items      = batch * ceil(H / q_rows) * ceil(seq_kv / kv_block)
    t_compute  = ceil(items / SMs) * 2 * q_rows * kv_block * (dk + dv) / (peak / SMs * mla_tensor)
    t_memory   = dram_bytes / (dram_bytes_per_s * mla_dram)
    estimate   = fixed + max(t_compute, t_memory) + (1 - mla_overlap) * min(t_compute, t_memory)
    fixed      = launch_s + mem_latency_s + mla_decode_s + mla_decode_seq_s * batch
                 + mla_decode_row_s * batch * H

`mla_overlap`: the share of the shorter of MMA and page stream hidden under the longer (the producer
warps' TMA loads of the next page run under the consumers' MMAs; the softmax between the two MMAs
serializes a part). `fixed`: the op's launch and its companion work (the scheduler-metadata kernel, the
split combine: per sequence; RoPE on the query's rope part and its store into the query buffer, the
output's per-row combine: per query row). Which MMA dtype an fp8 cache runs (`fp8_mma`) and the tile
shape are the family's kernel facts (estimator/pricing/mla_moe.yaml); the constants are fitted per family
(hwdesc/families/*.yaml, efficiency.mla_*; tools: estimate validate kernels --tables mla_generation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from estimator import symmath as sm

# the absorbed BMM's recognition and the engine's fp8 kind are read below pricing too (the precision pass)
from estimator.cost.mla_bmm import (  # noqa: F401
    BMM_ACTIVATION_BLOCK,
    KERNELS_FILE,
    absorbed_bmm,
    bmm_fp8_kind,
    kernels_file,
)

MLA_KEYS = ("mla_decode_s", "mla_decode_seq_s", "mla_decode_row_s", "mla_overlap", "mla_tensor", "mla_dram")


@dataclass(frozen=True)
class MlaDecodeKernel:
    q_rows: int  # query heads per CTA (the MMA's M side)
    kv_block: int  # cached tokens per page
    fp8_mma: bool  # an fp8 cache multiplies in fp8 (else widened to bf16)


def family_kernels(family: str) -> dict:
    """The family's entry of mla_moe.yaml ({} when it lists none)."""
    raw = kernels_file()
    return raw.get(family) if isinstance(raw.get(family), dict) else {}


def decode_kernel(family: str, eff: dict) -> MlaDecodeKernel | None:
    """The family's MLA decode kernel, None without one or without its fitted constants."""
    raw = family_kernels(family).get("mla_decode")
    if raw is None or not all(k in eff for k in MLA_KEYS):
        return None
    return MlaDecodeKernel(int(raw["q_rows"]), int(raw["kv_block"]), bool(raw["fp8_mma"]))


def _known(x: Any, value: int) -> bool:
    try:
        return bool(sm.num(x) == value) if not hasattr(x, "shape") else bool((x == value).all())
    except TypeError:
        return False


def is_latent(kv_heads: Any, dk: Any, dv: Any) -> bool:
    """Latent attention: one cached row per token shared by every query head, V a prefix of it (dv < dk,
    provably). A grouped-query or multi-query kernel has dv == dk."""
    if not _known(kv_heads, 1):
        return False
    try:
        gap = sm.num(dk - dv)
        return bool((gap > 0).all()) if hasattr(gap, "shape") else bool(gap > 0)
    except TypeError:
        return False


@dataclass(frozen=True)
class MlaDecodeTime:
    name: str
    ctas: Any
    waves: Any
    wave_eff: Any
    compute: Any
    memory: Any
    fixed: Any
    time: Any
    mma_dtype: str


def mma_dtype(q_bytes: float, kv_bytes: float) -> str:
    """The MMAs run in fp8 when the query and the cache both are (TensorRT-LLM quantizes the query of an
    fp8-cache MLA decode where the family's kernel has fp8 MMAs, `fp8_mma`, see quantizes_query); an fp8
    cache under a bf16 query is widened to bf16 in shared memory."""
    return "fp8" if kv_bytes <= 1 and q_bytes <= 1 else "bf16"


def quantizes_query(family: str) -> bool:
    """Whether the family's MLA decode kernel quantizes a bf16 query to fp8 over an fp8 cache."""
    raw = family_kernels(family).get("mla_decode")
    return bool(raw and raw.get("fp8_mma"))


def decode_time(batch: Any, heads: Any, seq_kv: Any, dk: Any, dv: Any, q_bytes: float, kv_bytes: float,
                dram_bytes: Any, sm_count: int, dram_bytes_per_s: float, peaks: dict, eff: dict,
                k: MlaDecodeKernel) -> MlaDecodeTime:
    """The MLA decode kernel's time (module docstring), over any number type of estimator/symmath.py."""
    mma = mma_dtype(q_bytes, kv_bytes)
    peak = peaks[mma]
    head_blocks = sm.ceil_div(heads, k.q_rows)
    items = batch * head_blocks * sm.ceil_div(seq_kv, k.kv_block)
    per_sm = sm.ceil_div(items, sm_count)
    compute = per_sm * 2 * k.q_rows * k.kv_block * (dk + dv) / (peak / sm_count * eff["mla_tensor"])
    memory = dram_bytes / (dram_bytes_per_s * eff["mla_dram"])
    fixed = (eff["launch_s"] + eff["mem_latency_s"] + eff["mla_decode_s"] + eff["mla_decode_seq_s"] * batch
             + eff["mla_decode_row_s"] * batch * heads)
    time = (fixed + sm.maximum(compute, memory)
            + (1 - eff["mla_overlap"]) * sm.minimum(compute, memory))
    ctas = batch * head_blocks
    wave_eff = items / (sm.maximum(per_sm, 1) * sm_count)
    return MlaDecodeTime(f"mla decode {k.q_rows}x{k.kv_block} {mma}", ctas, per_sm, wave_eff, compute, memory,
                         fixed, time, mma)


# ---- the absorbed-weight BMMs (mla_gen_pre / mla_gen_post) ----------------------------------------------
#
# Around the decode kernel the engine runs two batched GEMMs over the heads, one weight matrix per head:
# q_nope [H, t, 128] x W_UK [H, 128, 512] and the context [H, t, 512] x W_UV [H, 512, 128]. The tokens are
# the MMA's M side (TensorRT-LLM permutes [t, H, d] to [H, t, d] on the way: the strided view for cuBLAS,
# the quantize kernel's permute for fp8), so one token still fills a whole block_m-row tile:
#
#     ctas      = H * ceil(t / block_m) * ceil(N / block_n)
#     waves     = ceil(ctas / SMs)
#     estimate  = fixed + max(waves * (wave_s + tile_mma), dram_bytes / (dram_bytes_per_s * dram))
#     tile_mma  = 2 * block_m * block_n * K / (peak / SMs)        (the padded tile's MMAs on one SM)
#     fixed     = launch_s + mem_latency_s + bmm_s
#
# K is 128 or 512, one to four 128-deep K blocks: a CTA's load -> MMA -> store chain is short and not
# hidden behind a long main loop, so a wave costs its latency (`wave_s`) at small t, and the output
# stream (t x H x N bf16) bounds it at large t. The library and its tile are the family's kernel facts
# (mla_moe.yaml mla_bmm); the constants (bmm_s, wave_s, dram) are fitted per family and per library
# (hwdesc/families/*.yaml efficiency.mla_bmm_*, estimate calibrate --mla-moe mla_bmm).

BMM_KEYS = {False: ("mla_bmm_s", "mla_bmm_wave_s", "mla_bmm_dram"),
            True: ("mla_bmm_fp8_s", "mla_bmm_fp8_wave_s", "mla_bmm_fp8_dram")}
SYMBOLIC_ROWS = 4096  # the tokens a free dim's tile is chosen at (as pricing/plan.py SYMBOLIC_DIM_VALUE)


@dataclass(frozen=True)
class MlaBmmKernel:
    library: str  # "cublas" (a fixed tile) or "deepgemm" (DeepGEMM's own block_n pick)
    block_m: int  # token rows per tile (DeepGEMM: 64 up to 64 tokens, else this)
    block_n: int  # output columns per tile (DeepGEMM: the widest candidate)


@dataclass(frozen=True)
class MlaBmmTime:
    name: str
    ctas: Any
    waves: Any
    wave_eff: Any
    compute: Any  # waves * (wave_s + tile_mma)
    memory: Any
    fixed: Any
    time: Any


def bmm_kernel(family: str, block_scaled: bool, eff: dict) -> MlaBmmKernel | None:
    """The family's absorbed-BMM kernel (block-scaled fp8 or bf16), None without one or its constants."""
    raw = (family_kernels(family).get("mla_bmm") or {}).get("fp8_block" if block_scaled else "bf16")
    if raw is None or not all(k in eff for k in BMM_KEYS[block_scaled]):
        return None
    return MlaBmmKernel(str(raw["library"]), int(raw["block_m"]), int(raw["block_n"]))


def _choice_rows(m: Any) -> Any:
    """The tokens a tile is chosen at: the point's own (numbers, arrays), SYMBOLIC_ROWS for a free dim."""
    if isinstance(m, np.ndarray) or sm.numeric(m):
        return m
    return SYMBOLIC_ROWS


def deepgemm_tile(m: Any, n: int, groups: Any, sm_count: int, k: MlaBmmKernel) -> tuple[Any, Any]:
    """DeepGEMM's pick (deep_gemm jit get_best_gemm_config, StridedBatched, no swap-AB): block_m 64 when M
    <= 64 else 128; block_n among 16, 24, ..., 128: the fewest waves, then the fullest last wave, then the
    narrower. A documented library rule, on numbers and arrays alike."""
    m = np.asarray(_choice_rows(m))
    groups = np.asarray(_choice_rows(groups))
    bm = np.where(m <= 64, 64, k.block_m)
    best_w = best_u = best_n = None
    for bn in range(16, k.block_n + 1, 8):
        ctas = -(-m // bm) * -(-n // bn) * groups
        waves = -(-ctas // sm_count)
        util = np.where(ctas % sm_count == 0, sm_count, ctas % sm_count)
        if best_n is None:
            best_w, best_u, best_n = waves, util, np.full(np.shape(waves), bn)
            continue
        win = (waves < best_w) | ((waves == best_w) & (util > best_u))
        best_w, best_u = np.where(win, waves, best_w), np.where(win, util, best_u)
        best_n = np.where(win, bn, best_n)
    if best_n.ndim == 0:
        return int(bm), int(best_n)
    return bm, best_n


def bmm_time(groups: Any, m: Any, n: Any, kdim: Any, peak: float, dram_bytes: Any, sm_count: int,
             dram_bytes_per_s: float, eff: dict, k: MlaBmmKernel, block_scaled: bool) -> MlaBmmTime:
    """The absorbed BMM's time (the block comment above), over numbers, arrays of points or sympy."""
    s_key, wave_key, dram_key = BMM_KEYS[block_scaled]
    if k.library == "deepgemm":
        bm, bn = deepgemm_tile(m, int(sm.num(n)), groups, sm_count, k)
    else:
        bm, bn = k.block_m, k.block_n
    ctas = groups * sm.ceil_div(m, bm) * sm.ceil_div(n, bn)
    waves = sm.ceil_div(ctas, sm_count)
    tile_mma = 2 * bm * bn * kdim / (peak / sm_count)
    compute = waves * (eff[wave_key] + tile_mma)
    memory = dram_bytes / (dram_bytes_per_s * eff[dram_key])
    fixed = eff["launch_s"] + eff["mem_latency_s"] + eff[s_key]
    time = fixed + sm.maximum(compute, memory)
    wave_eff = ctas / (sm.maximum(waves, 1) * sm_count)
    label = f"{bm}x{bn}" if isinstance(bm, int) and isinstance(bn, int) else k.library
    return MlaBmmTime(f"mla bmm {k.library} {label}", ctas, waves, wave_eff, compute, memory, fixed, time)
