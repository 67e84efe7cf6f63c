"""The tile-level model of a fused attention kernel: FlashAttention for prefill, flash-decoding (split-KV)
for decode.

Prefill: one CTA per (sequence, query head, Q tile of `q` rows); it walks the keys in steps of `kv`,
skipping the steps a causal mask hides entirely (Q tile t sees past + t * q keys). Per step the SM does
the two MMAs (2 * q * kv * (dk + dv) FLOPs) and the online softmax (one exp per score on the SFU and ~4
FP32 ops per score: separate pipes, so the slower of the two); `softmax_overlap` is the fraction of the
shorter of MMA and softmax hidden under the longer (FlashAttention-3 ping-pongs two warpgroups; 0 would
be fully serial; a tile with `exp2_fma_ops` moves the share of its exps to the FMA pipe that balances
the two, as FlashAttention-4 does on sm_100: _softmax_time); the rescale of the O accumulator (q x dv
multiplies per step) waits for the P.V product and is not hidden; `attention_step_s` a step's synchronization:

    t_step     = max(t_mma, t_softmax) + (1 - softmax_overlap) * min(t_mma, t_softmax) + t_rescale
                 + attention_step_s
    t_steps    = (steps / slots + steps of the longest CTA) * t_step      (causal: greedy scheduling of
                 unequal CTAs; without a mask every CTA is equal: waves * steps per CTA * t_step)
    t_overhead = ceil(ctas / slots) * attention_cta_s                    (a CTA's fixed cost: its Q load,
                 O store and the dependent round trips before its first step, paid wave after wave)
    estimate   = fixed_s + t_overhead + max(t_steps, t_dram, t_l2)

Decode (one query row per head, over a KV cache): one CTA per (sequence, KV head, KV split); the query
heads sharing a KV head (grouped-query attention) ride in one CTA on the MMA's N side, so K and V are
read once per KV head. A group of one runs a CUDA-core kernel (no MMA tile, several CTAs per SM); a
group past the MMA kernel's `decode_max_group` falls back to it with one CTA per query head (each
re-reading K/V through L2); a kernel's `max_group` caps the query heads per CTA (more CTAs per KV head,
re-reading K/V from L2), and it reads the paged cache in whole `page_tokens` pages. Splitting the keys
over more CTAs fills the machine at small batch x heads (flash-decoding) at the price of a combine (fp32
partials, `attention_split_s`). The first wave's CTA cost (t_cta = attention_decode_cta_s * cta_cost) is
exposed; after it the SMs drift apart and a CTA's fixed cost overlaps the others' K/V streams. A kernel
with `row_cost` (the bf16 mma.sync kernel: query heads on M in 16-row fragments) adds
attention_decode_row_s per padded Q row x dk to t_cta (its Q load and O epilogue grow with the tile;
NB: one linear figure, fitted on the H100 table's group x head_dim trend):

    estimate   = fixed_s + t_cta + max((waves - 1) * t_cta + waves * steps * t_step, t_dram, t_l2)

The L2 term counts DRAM's bytes plus the K/V re-reads at `attention_l2` of the L2 rate (l2_fraction);
the DRAM term the kernel's bytes at `attention_dram` of the DRAM rate (dram_fraction, else `dram`).
An MMA kernel's smem tiles and MMAs are those of the head dim it is built for (`head_dims`, the next one
up). Where the menu has the framework's launch rule (`decode_launch`, see decode_launch.py), the grouped
kernel runs at the library's split, not the cheapest one, a small grid on a 16-bit cache runs the
per-head kernel as the library does, and the per-head kernel runs at the library's block size (its
co-resident CTAs per SM: the wave size) and multi-block split. A split decode pays the combine: combine_s.

fixed_s = launch_s + mem_latency_s + attention_prefill_s (or attention_decode_s): the launch, the
pipeline fill, and the fixed cost of a framework's attention op beyond its main kernel (scheduling
metadata, the companion kernels' launches).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from estimator import symmath as sm
from estimator.pricing import decode_launch
from estimator.pricing.gemm import Hw
from estimator.pricing.menu import AttentionTile, FamilyMenu, decode_kernel

SOFTMAX_ALU_OPS = 4  # per score: scale, running max, subtract, rescale-and-sum (as cost/attention.py)
# Per O accumulator element per kv step: the multiply by exp(m_old - m_new) of FlashAttention's online
# softmax. Per score it is dv / kv ops, so a kv-64 tile (head dim > 128) pays 4 per score at dv 256 and
# a kv-128 tile 1 at dv 128: the H100 context table's long-sequence time per score grows faster than
# the MMA's share from hd 128 to 256 (bf16 10.2 -> 19.3e-13 s, fp8 7.3 -> 12.8e-13 s per score).
RESCALE_OPS = 1
# Per 8-bit K/V element widened on CUDA cores: byte permute, e4m3 -> f16x2 convert (half an instruction
# per element), f16 -> f32 convert, scale multiply: 4 counted; efficiency.attention_dequant_ops (fitted on
# the H100 decode table by estimate calibrate --decode) where the descriptor has it (the per-head kernel's
# fp8 rows at long contexts stream ~19-20e9 K/V elements/s per SM at small and large grids alike,
# compute-bound, where the count alone gives about twice that; fitted: 5.9). NB: one figure for the
# whole widening; an MMA decode kernel feeds fp8 K/V to the MMA as they are (fp8 MMA with the query
# quantized), so it pays none of this.
DEQUANT_OPS = 4
FP32_BYTES = 4


@dataclass(frozen=True)
class Attn:
    """One attention core as the tile model sees it. `seq_kv` = past + new keys; causal is bottom-right
    aligned (query i sees past + i + 1 keys). Bytes per element of Q/O and of K/V."""

    batch: Any
    heads: Any
    kv_heads: Any
    seq_q: Any
    seq_kv: Any
    dk: Any
    dv: Any
    causal: bool
    q_bytes: float
    kv_bytes: float
    peak: float  # MMA FLOP/s of the whole GPU at the math dtype
    eff_unit: float
    sfu_ops_per_s: float
    alu_ops_per_s: float  # CUDA-core instructions per second (the FLOP peak / 2)
    decode: bool = False
    dram_bytes: Any = 0  # the kernel's minimum DRAM traffic (Work.dram_bytes, residency applied)


@dataclass(frozen=True)
class AttnChoice:
    name: str
    ctas: Any
    ctas_per_sm: int
    waves: Any
    wave_eff: Any
    t_compute: Any
    t_dram: Any
    t_l2: Any
    time: Any
    split: int = 1
    t_overhead: Any = 0.0  # the per-CTA costs outside the max (in t_compute too)
    # decode: the CTAs' chain (the max's first term) is mostly latency (later waves' CTA costs and K/V
    # steps at the load pipeline's pace), not math; a bool, an array of points, or False where undecidable
    chain_latency: Any = False


def _softmax_time(scores: Any, alu: Any, sfu_rate: float, alu_rate: float, emulated_ops: int) -> Any:
    """The softmax's exps on the SFU (MUFU.EX2) and its other ops on the FP32 pipe, separate pipes fed by
    interleaved warps: the slower of the two. A kernel that computes a share f of its exps in software
    on the FMA pipe (`emulated_ops` instructions each: FlashAttention-4 on sm_100, a Cody-Waite range
    reduction and a degree-3 polynomial) takes the f that balances the pipes,
        (1 - f) * scores / sfu_rate = (alu + f * emulated_ops * scores) / alu_rate,
    clipped to [0, 1] (f = 0 where the FP32 pipe is the slower already)."""
    t_sfu, t_alu = scores / sfu_rate, alu / alu_rate
    if not emulated_ops:
        return sm.maximum(t_sfu, t_alu)
    share = sm.minimum(1, sm.maximum(0, (t_sfu - t_alu) / (t_sfu + emulated_ops * scores / alu_rate)))
    return sm.maximum((1 - share) * t_sfu, t_alu + share * emulated_ops * scores / alu_rate)


def _step_time(a: Attn, rows: Any, kv: int, score_rows: Any, cpsm: Any, hw: Hw, mma: bool = True,
               emulated_ops: int = 0) -> Any:
    """One kv step of one CTA on an SM it shares with cpsm - 1 others: the two products for `rows`
    (padded) query rows, on tensor cores (`mma`) or as CUDA-core FMAs, the softmax for `score_rows` real
    ones (a share of its exps emulated on the FMA pipe where the tile says, _softmax_time), and with an
    8-bit K/V cache one convert per K/V element."""
    eff = hw.eff
    slots = hw.sm_count * cpsm  # a CTA gets 1 / slots of the GPU's throughput
    flops = 2 * rows * kv * (a.dk + a.dv)
    if mma:
        t_mma = flops / (a.peak * a.eff_unit / slots)
    else:
        t_mma = flops / (2 * a.alu_ops_per_s * eff["cuda"] / slots)
    scores = score_rows * kv
    alu = SOFTMAX_ALU_OPS * scores
    if not mma and a.kv_bytes < a.q_bytes:  # a CUDA-core kernel widens every 8-bit K/V element itself
        alu = alu + eff.get("attention_dequant_ops", DEQUANT_OPS) * kv * (a.dk + a.dv)
    # exp on the SFU (MUFU) and the rest on the FP32 pipe: separate pipes fed by interleaved warps
    t_soft = _softmax_time(scores, alu, a.sfu_ops_per_s * eff["sfu"] / slots,
                           a.alu_ops_per_s * eff["cuda"] / slots, emulated_ops)
    hidden = eff["softmax_overlap"]
    # The online softmax rescales the O accumulator (score_rows x dv) once per step; it waits for the
    # P.V product that writes those registers, so it is serial with the MMAs (not hidden by ping-pong).
    t_rescale = RESCALE_OPS * score_rows * a.dv / (a.alu_ops_per_s * eff["cuda"] / slots)
    return (sm.maximum(t_mma, t_soft) + (1 - hidden) * sm.minimum(t_mma, t_soft) + t_rescale
            + eff["attention_step_s"])


def _smem_ctas(q_rows: Any, kv: int, cap: int, a: Attn, hw: Hw) -> Any:
    """Co-resident CTAs: a Q tile plus two stages of K and V tiles in shared memory, at most `cap`."""
    per_cta = q_rows * a.dk * a.q_bytes + 2 * kv * (a.dk + a.dv) * a.kv_bytes
    return sm.maximum(1, sm.minimum(cap, sm.floor(hw.smem_bytes_per_sm / per_cta)))


def causal_steps(q_tiles: Any, q: int, kv: int, past: Any, kv_steps: Any) -> Any:
    """kv steps summed over the Q tiles of one (sequence, head) under a causal mask: Q tile t (1-based)
    sees past + t * q keys, so sum_t ceil((past + t*q) / kv) ~= (past * T + q * T (T + 1) / 2) / kv
    plus half a step of rounding per tile when tiles and steps do not align; capped by T * kv_steps."""
    exact = (past * q_tiles + q * q_tiles * (q_tiles + 1) / 2) / kv
    if q % kv:
        exact = exact + q_tiles / 2
    return sm.minimum(exact, q_tiles * kv_steps)


def prefill(a: Attn, tile: AttentionTile, hw: Hw) -> AttnChoice:
    eff = hw.eff
    cpsm = _smem_ctas(tile.q, tile.kv, tile.max_ctas_per_sm, a, hw)
    slots = hw.sm_count * cpsm
    q_tiles = sm.ceil_div(a.seq_q, tile.q)
    kv_steps = sm.ceil_div(a.seq_kv, tile.kv)
    bh = a.batch * a.heads
    ctas = bh * q_tiles
    waves = sm.ceil(ctas / slots)
    t_step = _step_time(a, tile.q, tile.kv, tile.q, cpsm, hw, emulated_ops=tile.exp2_fma_ops)
    t_overhead = waves * eff["attention_cta_s"]
    if a.causal:  # greedy list scheduling of unequal CTAs: the busiest SM's share plus one longest CTA
        steps = bh * causal_steps(q_tiles, tile.q, tile.kv, a.seq_kv - a.seq_q, kv_steps)
        t_steps = (steps / slots + kv_steps) * t_step
    else:
        steps = ctas * kv_steps
        t_steps = waves * kv_steps * t_step
    t_compute = t_overhead + t_steps
    # Every CTA streams its K/V steps through L2; K and V reach DRAM once (Work's bytes).
    l2 = steps * tile.kv * (a.dk + a.dv) * a.kv_bytes + a.dram_bytes
    t_l2 = l2 / (hw.l2_bytes_per_s * l2_fraction(eff))
    t_dram = a.dram_bytes / (hw.dram_bytes_per_s * dram_fraction(eff))
    time = fixed_s(hw, False) + t_overhead + sm.maximum(t_steps, t_dram, t_l2)
    return AttnChoice(f"{tile.q}x{tile.kv}", ctas, cpsm, waves, ctas / (waves * slots), t_compute, t_dram,
                      t_l2, time, t_overhead=t_overhead)


def decode(a: Attn, menu: FamilyMenu, split: int, hw: Hw, grouped: bool) -> AttnChoice:
    """Flash-decoding with `split` KV splits; `grouped`: the MMA kernel for a query group > 1."""
    eff = hw.eff
    group = a.heads / a.kv_heads
    kv = menu.decode_kv
    kv_ctas, per_head, pad = a.kv_heads, 1, 0
    if not grouped:  # the per-head kernel: one CTA per query head, K/V re-read per head (from L2)
        kv_ctas, group = a.heads, 1
    if grouped:
        kernel = decode_kernel(menu, a.kv_bytes)
        if kernel.max_group:  # a group past the kernel's heads per CTA: more CTAs per KV head
            per_head = sm.ceil_div(group, kernel.max_group)
            group = sm.ceil_div(group, per_head)
            kv_ctas = a.kv_heads * per_head
        rows = kernel.q_rows * sm.ceil_div(group * a.seq_q, kernel.q_rows)
        # the kernel's own head dim (its smem tiles and MMAs); the DRAM bytes stay the real head's
        tile = replace(a, dk=_head_dim(a.dk, kernel.head_dims), dv=_head_dim(a.dv, kernel.head_dims))
        cpsm = _smem_ctas(rows, kv, kernel.max_ctas_per_sm, tile, hw)
        cta_cost = kernel.cta_cost
        pad = sm.ceil_div(a.seq_kv, kernel.page_tokens) * kernel.page_tokens - a.seq_kv
    else:
        rows, cpsm, cta_cost, tile = group * a.seq_q, _per_head_ctas(a, menu, hw), 1.0, a
    row_s = eff.get("attention_decode_row_s", 0.0) * rows * tile.dk if grouped and kernel.row_cost else 0.0
    slots = hw.sm_count * cpsm
    kv_steps = sm.ceil_div(a.seq_kv, kv)
    # an MMA kernel runs whole kv tiles; a CUDA-core one only the keys there are
    steps = sm.ceil(kv_steps / split) if grouped else a.seq_kv / (kv * split)
    ctas = a.batch * kv_ctas * split
    waves = sm.ceil(ctas / slots)
    t_math = _step_time(tile, rows, kv, group * a.seq_q, cpsm, hw, mma=grouped)
    t_step = sm.maximum(t_math, eff["mem_latency_s"] / 2)  # two K/V stages in flight per CTA
    t_cta = eff.get("attention_decode_cta_s", eff["attention_cta_s"]) * cta_cost + row_s
    t_stream = waves * steps * t_step
    # The MMA kernel reads K/V in whole pages (the last one padded) from DRAM, once per KV head; the
    # other CTAs of a KV head (a group past max_group) re-read them from L2.
    dram = a.dram_bytes + a.batch * a.kv_heads * pad * (a.dk + a.dv) * a.kv_bytes
    # fp32 partial O and log-sum-exp per split, written then read by the combine
    dram = dram + sm.where(split > 1, 2 * split * a.batch * a.heads * a.seq_q * (a.dv + 1) * FP32_BYTES, 0)
    # Every CTA streams its K/V through L2: once per KV head, or once per query head (per-head kernel).
    # The first read of a K/V byte is its DRAM fill (in `dram`); the L2 serves the re-reads on top.
    kv_l2 = a.batch * (kv_ctas - a.kv_heads) * (a.seq_kv + pad) * (a.dk + a.dv) * a.kv_bytes
    t_dram = dram / (hw.dram_bytes_per_s * dram_fraction(eff))
    t_l2 = (dram + kv_l2) / (hw.l2_bytes_per_s * l2_fraction(eff)) + far_reread_s(kv_l2, hw)
    # The first wave's fixed cost is exposed; a later wave's overlaps the other SMs' K/V streams (the
    # SMs drift apart after the first wave), so it counts only towards the CTAs' own chain.
    chain = (waves - 1) * t_cta + t_stream
    if grouped and kernel.persistent and split == 1:
        stage = kv * (tile.dk + tile.dv) * a.kv_bytes  # one K/V tile in smem: the next tile's prefetch
        ahead = sm.maximum(1, sm.minimum(kernel.max_ctas_per_sm, hw.smem_bytes_per_sm / stage))
        chain = _persistent_chain(ctas, slots, hw.sm_count * ahead, steps, t_step, t_cta)
    t_compute = t_cta + chain
    # the chain's math (the step's MMAs and softmax, not its synchronization): the rest is CTA costs,
    # step synchronization and load latency
    math_s = waves * steps * (t_math - eff["attention_step_s"])
    latency = 2 * math_s < chain  # with free dims a relation, decided where the tile is (plan.py)
    time = fixed_s(hw, True) + t_cta + sm.maximum(chain, t_dram, t_l2) + combine_s(eff, split)
    return AttnChoice(f"decode {'mma' if grouped else 'simt'} kv{kv}{_split_name(split)}", ctas, cpsm, waves,
                      ctas / (waves * slots), t_compute, t_dram, t_l2, time, split, t_overhead=t_cta,
                      chain_latency=latency)


def far_reread_s(kv_l2: Any, hw: Hw) -> Any:
    """The die-to-die leg of the decode kernels' K/V re-reads on a two-die L2 (B200: NV-HBI): a line is
    homed in one partition (estimator/pricing/l2.py), so of the CTAs re-reading one KV head's K/V
    (spread over both dies by the block scheduler) the share (P - 1) / P reads it from the far die's L2,
    through the link, after the far slice has served it: the link's time adds to the L2's,

        t = far_share * kv_l2 / l2_cross_partition_bytes_per_s

    at the descriptor's link figure (no fitted constant). Why in series, not overlapped: these kernels
    keep two K/V stages in flight per CTA, so a far line's link transfer lengthens each load rather than
    running beside the near ones (on the B200 rows re-reading K/V 64-128 times the estimate otherwise
    comes out 25-55 % fast, the one-re-read rows right). 0 on a single-die GPU."""
    if not hw.l2_link_bytes_per_s:
        return 0.0
    return hw.l2_far_share * kv_l2 / hw.l2_link_bytes_per_s


def _persistent_chain(ctas: Any, slots: Any, full: int, steps: Any, t_step: Any, t_cta: Any) -> Any:
    """The CTAs' chain of a persistent decode kernel (TensorRT-LLM's trtllm-gen generation FMHA on
    sm_100: where batch x KV-head CTAs leave no room for a KV split (numCtasPerSeqKv = 1) it turns the
    multi-CTA KV mode off and runs its persistent tile scheduler). One CTA per SM slot loops over the
    (sequence, KV head) tiles; its producer warp loads the next tile's Q and K/V while the current one
    finishes, so a tile's fixed cost overlaps the others' as far as smem holds the next tiles' K/V:
    `full` = SMs x min(max_ctas_per_sm, smem per SM / one K/V tile) (at least 1), whatever the CTAs'
    co-residency by smem (which also counts Q and two K/V stages per CTA):

        chain = (ceil(ctas / full) - 1) * t_cta + waves * steps * t_step

    against (waves - 1) * t_cta + waves * steps * t_step for a launch of one CTA per tile (waves =
    ceil(ctas / slots), slots = SMs x the CTAs smem allows): the same where smem allows full
    co-residency or the grid is one wave (ctas <= slots, where the library would rather split the keys:
    it splits only below SMs / 2 CTAs, and slots >= SMs). On the B200 table a head dim 128/256 tile (one
    CTA per SM by smem) costs ~1.2-1.7 us of SM time at step 1, about t_cta / 3, as at head dim 64
    (three CTAs per SM); a bf16 head dim 256 K/V tile (128 KiB) leaves room for 1.8 of them and runs
    in between (~1.5-2 us). NB: no constant of its own; the K/V steps keep their wave quantization (a
    continuous spread under-priced the head dim 64 rows by ~13 %)."""
    return (sm.ceil(ctas / full) - 1) * t_cta + sm.ceil(ctas / slots) * steps * t_step


def _per_head_dims(a: Attn) -> tuple | None:
    """(batch, heads, history, head dim) as numbers (arrays for table rows), or None with a free one."""
    dims = tuple(sm.num(d) for d in (a.batch, a.heads, a.seq_kv, a.dk))
    return dims if all(sm.numeric(d) for d in dims) else None


def _per_head_ctas(a: Attn, menu: FamilyMenu, hw: Hw) -> Any:
    """Co-resident CTAs of the per-head kernel: the launch rule's block size (decode_launch.py), else
    the menu's decode_ctas_per_sm."""
    dims = _per_head_dims(a)
    if menu.decode_launch is None or dims is None:
        return menu.decode_ctas_per_sm
    return decode_launch.per_head_launch(*dims, hw.sm_count, menu.decode_ctas_per_sm,
                                         max(menu.decode_splits))[0]


def _per_head_splits(a: Attn, menu: FamilyMenu, hw: Hw, split: Any) -> tuple:
    """The per-head kernel's splits to price: `split` when given, the launch rule's, else the menu's."""
    if split is not None:
        return (split,)
    dims = _per_head_dims(a)
    if menu.decode_launch is None or dims is None:
        return menu.decode_splits
    return (decode_launch.per_head_launch(*dims, hw.sm_count, menu.decode_ctas_per_sm,
                                          max(menu.decode_splits))[1],)


def _head_dim(d: Any, dims: tuple[int, ...]) -> Any:
    """The smallest of a kernel's head dims `dims` that holds `d` (d itself past them, or with none, or
    free: NB a free head dim is priced unpadded)."""
    if not dims or sm.is_sym(d):
        return d
    out = d
    for size in reversed(dims):
        out = sm.where(d <= size, size, out)
    return out


def _split_name(split: Any) -> str:
    if isinstance(split, np.ndarray):  # the library's split per row (calibration arrays)
        return " splitKV(library)"
    return f" splitKV{split}" if split > 1 else ""


def l2_fraction(eff: dict) -> float:
    """The share of the L2 rate an attention kernel's K/V stream reaches: `attention_l2` (fitted on the
    attention tables), else the GEMMs' `l2`. NB: one figure for the whole L2 path of these kernels (the
    H100 decode rows that re-read K/V from L2 once per query head reach ~6-6.8 TB/s, about half of the
    descriptor's 12.4 TB/s, where GEMM panels are fitted near all of it); the cause (load path, the
    two L2 partitions, many SMs reading the same lines at once) is not resolved."""
    return eff.get("attention_l2", eff["l2"])


def dram_fraction(eff: dict) -> float:
    """The share of the DRAM bandwidth an attention kernel's K/V stream reaches: `attention_dram` (fitted on
    the attention tables) where the descriptor has it, else the GEMMs' `dram`. A decode kernel streams
    each KV head's cache as long contiguous runs from many CTAs at once, which the GEMMs' figure (set by
    their weight streams at small M) need not describe: on B200 the decode rows reach ~6-7 TB/s of K/V
    (79-92 % of 7.7) where the GEMMs' fit is 0.73."""
    return eff.get("attention_dram", eff["dram"])


def split_s(eff: dict) -> float:
    """The fixed cost of a split-KV decode's combine (the partials' reduction after the last split):
    `attention_split_s` (fitted on the decode table), else the GEMMs' split-K `split_k_s`."""
    return eff.get("attention_split_s", eff["split_k_s"])


def combine_s(eff: dict, split: Any) -> Any:
    """The combine of `split` KV splits (0 for one): split_s plus `attention_split_each_s` per split. The
    last CTA of a sequence merges the partials one after another (TensorRT-LLM's XQA and masked-MHA
    multi-block modes), each a dependent load of a partial O tile and its row max and sum; fitted on the
    H100 decode table (batch 1, one KV head, fp8 hd 128: 12.5 -> 31.0 us from 23 to 91 splits at
    8K -> 128K keys, ~0.12 us per split once the K/V bytes are taken off). NB: one figure per split,
    whatever the tile's rows and head dim."""
    return sm.where(split > 1, split_s(eff) + eff.get("attention_split_each_s", 0.0) * split, 0.0)


def fixed_s(hw: Hw, decode: bool) -> float:
    """Launch, pipeline fill and the attention op's companion kernels (prefill or decode)."""
    eff = hw.eff
    op = eff["attention_decode_s"] if decode else eff["attention_prefill_s"]
    return eff["launch_s"] + eff["mem_latency_s"] + op


def _merge(cond: Any, a: AttnChoice, b: AttnChoice) -> AttnChoice:
    """Elementwise `a` where `cond` else `b` (numpy rows of the calibration mix both kernels)."""
    fields = ("ctas", "waves", "wave_eff", "t_compute", "t_dram", "t_l2", "time", "split", "t_overhead",
              "chain_latency")
    merged = {f: sm.where(cond, getattr(a, f), getattr(b, f)) for f in fields}
    return AttnChoice(a.name + "|" + b.name, ctas_per_sm=a.ctas_per_sm, **merged)


def _each(a: Attn, menu: FamilyMenu, hw: Hw, split: int | None = None) -> Iterator[AttnChoice]:
    """The candidates of `candidates`, priced one at a time (decode: only `split`'s when given)."""
    if a.decode:
        yield from _decode_each(a, menu, hw, split)
        return
    dk = sm.num(a.dk)
    for tile in menu.attention_tiles:
        c = prefill(a, tile, hw)
        if hasattr(dk, "shape"):
            yield _merge(dk > tile.max_head_dim, AttnChoice(c.name, c.ctas, c.ctas_per_sm, c.waves,
                                                            c.wave_eff, c.t_compute, c.t_dram, c.t_l2,
                                                            c.time * 0 + 1.0, t_overhead=c.t_overhead), c)
        elif not sm.numeric(dk) or dk <= tile.max_head_dim:
            yield c


def _decode_each(a: Attn, menu: FamilyMenu, hw: Hw, split: Any) -> Iterator[AttnChoice]:
    """Decode candidates: at each of the menu's splits the grouped MMA kernel where the group fits it,
    else the per-head one. With the framework's launch rule (menu.decode_launch) the grouped kernel
    runs at the library's split only, and gives way to the per-head kernel where the library does
    (decode_launch.py); `split` (repricing a choice) fixes the split. With free dims the library's
    choices are undecidable: both kernels are offered and the numeric copy's choice is repriced."""
    group = sm.num(a.heads / a.kv_heads)
    # NB: a free group size is priced with the MMA kernel
    fits: Any = True if sm.is_sym(group) else (group > 1) & (group <= menu.decode_max_group)
    rule, dims = menu.decode_launch, tuple(sm.num(d) for d in (a.batch, a.kv_heads, a.seq_kv))
    grouped_splits = menu.decode_splits if split is None else (split,)
    if rule is not None and split is None and all(sm.numeric(d) for d in dims):
        grouped_splits = (decode_launch.library_splits(rule, *dims, hw.sm_count, max(menu.decode_splits)),)
        fits = fits & decode_launch.runs_grouped(rule, *dims, hw.sm_count, a.kv_bytes)
    elif rule is not None and not isinstance(fits, np.ndarray) and fits:
        fits = None  # undecidable with free dims: both kernels offered
    if isinstance(fits, np.ndarray):  # rows of a table: per row the kernel the group (and rule) picks
        if rule is not None:  # one launch per kernel, each at the library's split
            yield _merge(fits, decode(a, menu, grouped_splits[0], hw, True),
                         decode(a, menu, _per_head_splits(a, menu, hw, split)[0], hw, False))
            return
        for s in menu.decode_splits:
            if split is None or s == split:
                yield _merge(fits, decode(a, menu, s, hw, True), decode(a, menu, s, hw, False))
        return
    splits = {True: grouped_splits, False: (), None: grouped_splits}[None if fits is None else bool(fits)]
    for s in splits:
        yield decode(a, menu, s, hw, grouped=True)
    if fits is None or not fits:
        for s in _per_head_splits(a, menu, hw, split):
            yield decode(a, menu, s, hw, grouped=False)


def candidates(a: Attn, menu: FamilyMenu, hw: Hw) -> list[AttnChoice]:
    """Every tile (prefill) or split and kernel (decode) priced for `a`."""
    out = list(_each(a, menu, hw))
    if a.decode:
        return out
    return out or [prefill(a, max(menu.attention_tiles, key=lambda t: t.max_head_dim), hw)]


def candidate(a: Attn, menu: FamilyMenu, hw: Hw, like: AttnChoice) -> AttnChoice:
    """The candidate of `candidates(a)` named like `like` (chosen on a numeric copy of `a`), pricing only
    it: with free dims every symbolic candidate costs sympy time, and only the chosen one is kept."""
    split = like.split if a.decode else None
    found = next((c for c in _each(a, menu, hw, split) if c.name == like.name), None)
    if found is not None:
        return found
    offered = candidates(a, menu, hw)
    # NB: a free group size is priced with the MMA kernel (_decode_each) while the numeric copy (every
    # free dim at one value: group 1) may pick the per-head one: then the offered kernel at its split
    found = next((c for c in offered if c.name == like.name), None)
    return found if found is not None else next((c for c in offered if c.split == like.split), offered[0])
