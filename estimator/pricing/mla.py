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

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from estimator import symmath as sm

KERNELS_FILE = Path(__file__).with_name("mla_moe.yaml")
MLA_KEYS = ("mla_decode_s", "mla_decode_seq_s", "mla_decode_row_s", "mla_overlap", "mla_tensor", "mla_dram")


@dataclass(frozen=True)
class MlaDecodeKernel:
    q_rows: int  # query heads per CTA (the MMA's M side)
    kv_block: int  # cached tokens per page
    fp8_mma: bool  # an fp8 cache multiplies in fp8 (else widened to bf16)


@functools.lru_cache(maxsize=1)
def kernels_file() -> dict:
    """mla_moe.yaml, read once."""
    return yaml.safe_load(KERNELS_FILE.read_text(encoding="utf-8")) or {}


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


def bmm_fp8_kind(family: str) -> str:
    """How the family's engine runs the absorbed BMMs with fp8 weights: "block_scaled" (quantize the
    activation per 1 x 128 block, then a block-scaled fp8 BMM) or "dequant_bf16" (bf16 BMM on weights
    dequantized at load); mla_moe.yaml."""
    return (kernels_file().get("mla_bmm_fp8") or {}).get(family, "block_scaled")


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
