"""A MoE layer's experts on one GPU of a moe_tp x moe_ep group, as TensorRT-LLM's fused MoE runs them:
routing (top-k), a grouped GEMM over the ACTIVE local experts (fc1: gate and up, SwiGLU fused into its
epilogue), and the second grouped GEMM (fc2), with the token permute / unpermute around them.

Active experts. `tokens * topk` assignments land on `experts` experts; the GPU holds experts / ep of them,
each with inter / tp of its intermediate width. A grouped GEMM reads the weights of an expert only when at
least one token routes there, so at decode (few assignments) the layer reads far fewer bytes than all its
experts:
- uniform (random) routing: E[distinct experts hit] = E * (1 - (1 - topk/E)^tokens) (each token's top-k
  a uniform draw of distinct experts; estimator/cost/moe.py expected_active_experts)
- balanced (the benchmark's `balanced`: token i's j-th expert is (i + j * ceil(E / topk)) mod E, a
  stride): min(E, tokens * topk) distinct experts, each with the same load
- power_law_<alpha> (aiconfigurator's collector): per-expert loads drawn i.i.d. from a power law on [1,
  0.8 * tokens] (on [0.01, 2] when tokens * topk <= E) with exponent alpha, scaled to tokens * topk and
  rounded, the EP group with the largest load swapped onto the measured rank (rank 0). Priced with the
  mean over POWER_LAW_DRAWS seeded draws of that generator (power_law_loads).
The rank's time is its own experts' (the measured GPU, rank 0): with ep > 1 its share of the loads.

Per active expert with n tokens, its GEMMs pad the token rows to the grouped GEMM's tile M (`tile_m`):
    flops   = 2 * (gated ? 3 : 2) * hidden * inter_l * ceil(n / tile_m) * tile_m
    weights = (gated ? 3 : 2) * hidden * inter_l * weight bytes (+ block scales)
    estimate = moe_fixed_s + max(flops / (peak * moe_tensor), (weights + activations) / (BW * moe_dram))
               + (1 - moe_overlap) * min(...)
The permute (a gather of each assignment's token row) and the finalize (the weighted scatter-reduce of
the expert outputs) are kernels of their own before and after the GEMMs, at `moe_rows` of the DRAM
bandwidth (row-granular gathers; the H100 table's 16K-token rows keep ~2-5 ms at hidden 4096, top-8,
whatever moe_tp: a cost per assignment that TP does not split):  + rows_bytes / (BW * moe_rows); the
layer's input and output rows (every token, whichever rank holds its experts) stream at moe_dram.
`moe_fixed_s`: the layer's kernels' launches and dependent phases (routing, permute, two GEMMs,
finalize); `moe_expert_s` per LOCAL expert, active or not (the fused MoE's per-expert bookkeeping: expert
offsets, each expert's problem in the grouped GEMM's scheduler, its scales): the H100 table's 1-token
rows at hidden 7168 take 46, 54, 73, 115 us for 32, 64, 128, 256 local experts with the same weight
bytes. A grouped GEMM streams its weights with ceil(rows / 128) x ceil(N / 128) CTAs; fewer CTAs than
SMs / moe_cta_stream reach that share of the DRAM bandwidth (one CTA streams its weight tile at up to
moe_cta_stream x its 1 / SMs share: an SM's own load path is wider than its share of DRAM's).
Constants fitted per family (hwdesc/families/*.yaml, efficiency.moe_*).
"""

from __future__ import annotations

import functools

import numpy as np
import sympy

from estimator import symmath as sm
from estimator.pricing import mla

MOE_KEYS = ("moe_fixed_s", "moe_gemm_s", "moe_tensor", "moe_dram", "moe_overlap", "moe_expert_s",
            "moe_cta_stream", "moe_rows")
TILE_M = 128
TILE_N = 128
# M tiles of a weight-only (W4A16: stored MXFP4 / int4 weights, bf16 activations) grouped GEMM, as vLLM's
# fused_marlin_moe picks one per call: the smallest of these with rows per expert / tile < 0.9, else the
# last (vllm/model_executor/layers/fused_moe/fused_marlin_moe.py "M block size selection logic"; vLLM runs
# gpt-oss's MXFP4 experts on Hopper through this W4A16 Marlin path)
WEIGHT_ONLY_TILES_M = (8, 16, 32, 48, 64)
WEIGHT_ONLY_FILL = 0.9
POWER_LAW_DRAWS = 8  # seeded draws of the benchmark's power-law generator averaged per row
# the min-latency rows' router: the collector builds TensorRT-LLM's DeepseekV3Gate (n_group 8,
# topk_group 4) for every min-latency case, whatever the model
GATE_GROUPS = 8
GATE_TOPK_GROUPS = 4
# weight bytes per element and the MMA dtype per table dtype (moe_dtype): 4-bit weights carry one
# scale byte per 32 (mx) or 16 (nv) elements
DTYPES = {"bfloat16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp8_block": (1.0 + 4 / 128 / 128, "fp8"),
          "w4a16_mxfp4": (0.5 + 1 / 32, "bf16"), "w4a8_mxfp4_mxfp8": (0.5 + 1 / 32, "fp8"),
          "nvfp4": (0.5 + 1 / 16, "fp4")}


def active_uniform(tokens, topk, experts):
    """Expected distinct experts hit when each of `tokens` tokens picks `topk` distinct experts of
    `experts` uniformly: E * (1 - (1 - k/E)^T), as estimator/cost/moe.py expected_active_experts."""
    e = np.asarray(experts, dtype=float)
    return e * (1 - (1 - np.asarray(topk, dtype=float) / e) ** np.asarray(tokens, dtype=float))


def active_balanced(assignments, experts):
    return np.minimum(np.asarray(experts, dtype=float), np.asarray(assignments, dtype=float))


@functools.lru_cache(maxsize=16384)  # the B200 table holds ~8.5K argument sets
def power_law_counts(tokens: int, topk: int, experts: int, alpha: float, ep: int = 1,
                     draws: int = POWER_LAW_DRAWS) -> tuple[np.ndarray, ...]:
    """Per-expert token counts of `draws` seeded draws of aiconfigurator's power-law generator: counts
    drawn i.i.d. from the power law on [1, 0.8 * tokens] (on [0.01, 2] when tokens * topk <= E), scaled
    to tokens * topk and rounded, the rounding's remainder added to the largest counts first (taken from
    the smallest), and the EP group with the largest sum swapped onto rank 0 (the measured one).
    Seeded, so computed once per argument set (the MoE table's rows repeat them across layer sizes and
    dtypes); the arrays are read-only."""
    rng = np.random.default_rng(0)
    a = tokens * topk
    lo, hi = (1.0, 0.8 * tokens) if a > experts else (0.01, 2.0)
    hi = max(hi, lo * (1 + 1e-9))
    # every draw at once: [draws, experts] uniforms are the successive draws' own (one stream)
    u = rng.random((draws, experts))
    x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
    n = np.round(x / x.sum(axis=1, keepdims=True) * a)
    delta = (a - n.sum(axis=1)).astype(int)[:, None]
    order = np.argsort(-n, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(experts)[None, :], axis=1)
    # delta > 0: one each to the largest first, cycling (rank < delta mod E gets one more)
    up = np.where(delta > 0, delta // experts + (rank < delta % experts), 0)
    # delta < 0: one each from the smallest positive first, cycling over the L positive counts (the first
    # L of the descending order): reversed position L - 1 - rank
    live = n > 0
    pos = np.maximum(live.sum(axis=1, keepdims=True), 1)
    take = -np.minimum(delta, 0)
    down = np.where(live & (delta < 0), take // pos + ((pos - 1 - rank) < take % pos), 0)
    n = n + up - down
    if experts % ep == 0 and ep > 1:
        groups = n.reshape(draws, ep, -1)
        heavy = np.argmax(groups.sum(axis=2), axis=1)
        perm = np.tile(np.arange(ep), (draws, 1))
        perm[:, 0] = heavy
        perm[np.arange(draws), heavy] = 0
        n = groups[np.arange(draws)[:, None], perm].reshape(draws, -1)
    n.setflags(write=False)
    return tuple(n)


def power_law_loads(tokens: int, topk: int, experts: int, alpha: float, ep: int = 1,
                    draws: int = POWER_LAW_DRAWS) -> list[np.ndarray]:
    """The measured rank's expert loads (rank 0's E / ep counts) of each power_law_counts draw."""
    local = experts // ep if experts % ep == 0 else experts
    return [n[:local] for n in power_law_counts(tokens, topk, experts, alpha, ep, draws)]


def collector_choices(tokens: int, topk: int, experts: int, ep: int, distribution: str) -> list[np.ndarray]:
    """The collector's [tokens, topk] expert choices per draw: `balanced` strides token i's j-th pick by
    ceil(E / topk) ((i + j * stride) mod E; (i * stride / tokens + j * stride) mod E when tokens <
    stride); power-law lays each draw's experts, heaviest first, over the [topk, tokens] slots, so an
    expert with more than `tokens` assignments repeats inside a token's row."""
    if distribution.startswith("power_law"):
        alpha = float(distribution.rsplit("_", 1)[1])
        out = []
        for n in power_law_counts(tokens, topk, experts, alpha, ep):
            order = np.argsort(-n, kind="stable")
            slots = np.repeat(order, n[order].astype(int))
            out.append(slots.reshape(topk, tokens).T)
        return out
    stride = -(-experts // topk)
    i = np.arange(tokens)[:, None]
    j = np.arange(topk)[None, :]
    first = i if tokens >= stride else (i * stride / tokens).astype(int)
    return [((first + j * stride) % experts).astype(int)]


def group_limited_gate(choices: np.ndarray, experts: int, topk: int, groups: int = GATE_GROUPS,
                       topk_groups: int = GATE_TOPK_GROUPS) -> np.ndarray:
    """Per-expert token counts after TensorRT-LLM's DeepSeek-V3 gate (sigmoid scores, `groups` expert
    groups ranked by the sum of their top-2 scores, top `topk_groups` groups kept, top-k experts inside
    them) re-routes the collector's logits (softmax of each token's one-hot choice counts, so a score
    orders as the count). Ties go to the lower index (group, then expert). NB: a token whose choices
    span more than `topk_groups` groups keeps those in the first groups and fills its top-k with the
    lowest-indexed experts of the kept groups, so those few experts collect most tokens."""
    # tokens with the same choices route the same: gate each distinct row once, weighted by its tokens
    # (distinct rows by a lexicographic sort of the columns: np.unique(axis=0)'s, without its slow
    # structured-dtype sort)
    ordered = choices[np.lexsort(choices.T[::-1])]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    choices = ordered[first]
    weight = np.diff(np.append(np.flatnonzero(first), len(ordered)))
    t = choices.shape[0]
    counts = np.zeros((t, experts))
    np.add.at(counts, (np.repeat(np.arange(t), choices.shape[1]), choices.reshape(-1)), 1)
    g = groups if experts % groups == 0 else 1
    per = counts.reshape(t, g, -1)
    top2 = -np.sort(-per, axis=2)[:, :, :2].sum(axis=2)
    # rank groups by (score desc, index asc): a stable sort of the negated scores
    kept = np.argsort(-top2, axis=1, kind="stable")[:, :min(topk_groups, g)]
    mask = np.zeros((t, g), dtype=bool)
    np.put_along_axis(mask, kept, True, axis=1)
    score = np.where(np.repeat(mask, experts // g, axis=1), counts, -1.0)
    picked = np.argsort(-score, axis=1, kind="stable")[:, :topk]
    return np.bincount(picked.reshape(-1), weights=np.repeat(weight, picked.shape[1]),
                       minlength=experts).astype(float)


@functools.lru_cache(maxsize=4096)
def gated_loads(tokens: int, topk: int, experts: int, ep: int, distribution: str) -> list[np.ndarray]:
    """Rank 0's per-expert loads when the min-latency kernel's DeepSeek-V3 gate routes the collector's
    logits (group_limited_gate on collector_choices), one array per draw, idle experts dropped."""
    local = experts // ep if experts % ep == 0 else experts
    out = []
    for ch in collector_choices(tokens, topk, experts, ep, distribution):
        n = group_limited_gate(ch, experts, topk)[:local]
        out.append(n[n > 0] if (n > 0).any() else np.ones(1))
    return out


def rank_loads(tokens: int, topk: int, experts: int, ep: int, distribution: str,
               gate: bool = False) -> np.ndarray | list[np.ndarray]:
    """Token counts of the measured rank's experts (rank 0 of ep), each active expert one entry; `gate`:
    the min-latency rows' DeepSeek-V3 gate re-routes the collector's logits (gated_loads)."""
    local = max(experts // ep, 1)
    a = tokens * topk
    if gate:
        return gated_loads(tokens, topk, experts, ep, distribution)
    if distribution.startswith("power_law"):  # NB: the draws' mean load profile (layer_work averages)
        draws = power_law_loads(tokens, topk, experts, float(distribution.rsplit("_", 1)[1]), ep)
        return [d[d > 0] for d in draws]
    if distribution == "balanced":
        active = min(experts, a)
        per = a / active
        mine = int(round(active / ep)) if active < experts else local
        return np.full(max(mine, 1), per)
    active = float(active_uniform(tokens, topk, experts)) / ep
    return np.full(max(int(round(active)), 1), a / ep / max(active, 1e-9))


def weight_only_tile_m(rows_per_expert):
    """The M tile of a weight-only grouped GEMM (WEIGHT_ONLY_TILES_M) for `rows_per_expert` routed rows
    per local expert (tokens x top_k / experts): a number, an array of points or a sympy expression."""
    tiles = WEIGHT_ONLY_TILES_M
    if sm.is_sym(rows_per_expert):
        return sympy.Piecewise(*[(t, rows_per_expert < WEIGHT_ONLY_FILL * t) for t in tiles[:-1]],
                               (tiles[-1], True))
    x = np.asarray(rows_per_expert, dtype=float)
    out = np.select([x < WEIGHT_ONLY_FILL * t for t in tiles[:-1]], tiles[:-1], tiles[-1]).astype(float)
    return out if out.ndim else float(out)


def grouped_gemm(row_tiles, active, local, n, k, wbytes, peak, sm_count: int, dram_bytes_per_s: float,
                 eff: dict, out_bytes=0.0, in_bytes=0.0, tile_m=TILE_M):
    """(compute_s, memory_s, fixed_s, estimate_s) of one grouped GEMM over the active experts:
    `row_tiles` M tiles of `tile_m` rows in all (128; a weight-only GEMM's: weight_only_tile_m), `active`
    experts of `local`, each [n, k] with `wbytes` per weight element; `in_bytes` / `out_bytes` its
    activations. Over any number type (estimator/symmath.py)."""
    flops = 2 * row_tiles * tile_m * n * k
    weights = active * n * k * wbytes
    ctas = row_tiles * sm.ceil_div(n, TILE_N)
    fill = sm.minimum(1.0, eff["moe_cta_stream"] * sm.maximum(ctas, 1) / sm_count)
    bw = dram_bytes_per_s * eff["moe_dram"]
    compute = flops / (peak * eff["moe_tensor"])
    memory = weights / (bw * fill) + (in_bytes + out_bytes) / bw
    fixed = eff["moe_gemm_s"] + eff["moe_expert_s"] * local
    est = fixed + sm.maximum(compute, memory) + (1 - eff["moe_overlap"]) * sm.minimum(compute, memory)
    return compute, memory, fixed, est


@functools.lru_cache(maxsize=16)
def block_scaled(family: str | None) -> frozenset:
    """The MoE dtypes whose grouped GEMM the family's engine runs with a block-scaled mainloop
    (estimator/pricing/mla_moe.yaml `moe_block_scaled`): they reach moe_block_tensor of the MMA rate and
    moe_block_dram of the weight stream's."""
    return frozenset((mla.kernels_file().get("moe_block_scaled") or {}).get(family) or ())


@functools.lru_cache(maxsize=16384)
def _load_stats(tokens: int, topk: int, experts: int, ep: int, distribution: str,
                gate: bool) -> tuple[float, float, float]:
    """The draws' mean (tile rows, active experts, assignments) of the measured rank (rank_loads); once
    per argument set (the MoE table repeats them across layer sizes and dtypes)."""
    draws = rank_loads(tokens, topk, experts, ep, distribution, gate=gate)
    draws = draws if isinstance(draws, list) else [draws]
    return (float(np.mean([np.ceil(d / TILE_M).sum() for d in draws])),
            float(np.mean([len(d) for d in draws])), float(np.mean([d.sum() for d in draws])))


def layer_work(tokens: int, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int,
               dtype: str, distribution: str, gated: bool, sm_count: int,
               fused_permute: bool = False, family: str | None = None) -> dict:
    """`fused_permute`: the GEMMs gather and scatter the token rows themselves (TensorRT-LLM's
    min-latency MoE), so the rows move at the GEMMs' rate, not as a permute and a finalize of their own.
    The measured GPU's layer: its active experts' tile rows, the two grouped GEMMs' shapes, the token
    rows moved by the permute and finalize, the MMA dtype, the active and the local experts; `block`:
    the family's engine runs this dtype's grouped GEMM with a block-scaled mainloop (block_scaled)."""
    wbytes, mma = DTYPES[dtype]
    inter_l = inter / tp
    mats = 3 if gated else 2
    row_tiles, active, assignments = _load_stats(tokens, topk, experts, ep, distribution, fused_permute)
    # the bound's rank: at least its mean share of the assignments (the measured rank holds the heaviest
    # group), in as few experts as one (a skewed draw may pile them up): a floor any draw stays above
    # NB: the min-latency kernel's rows read fewer experts than a balanced routing hits (B200 table: 32
    # tokens x top-8 of 256 in 0.40 ms, below the 0.71 ms of all 256 nvfp4 experts): its routing is not
    # the collector's balanced one, so its bound takes the same floor
    skewed = distribution.startswith("power_law") or fused_permute
    floor_a = min(assignments, tokens * topk / ep) if skewed else None
    return {"row_tiles": row_tiles, "assignments": assignments,
            "bound_assignments": assignments if floor_a is None else floor_a,
            "bound_active": active if floor_a is None else float(min(active, 1)),
            "n1": (mats - 1) * inter_l, "k1": hidden, "n2": hidden, "k2": inter_l, "wbytes": wbytes,
            "mats": mats, "hidden": hidden, "inter_l": inter_l, "tokens": tokens,
            # permute gathers each assignment's token row, finalize scatter-reduces its output (bf16)
            "rows": assignments * hidden * 2 * 2,
            "io": float(tokens * hidden * 2 * 2),  # the layer's input read and output written (bf16)
            "mma": mma, "active": active, "local": max(experts // ep, 1), "fused": float(fused_permute),
            "block": float(dtype in block_scaled(family))}


def layer_time(w: dict, peak, sm_count: int, dram_bytes_per_s: float, eff: dict):
    """(bound_s, estimate_s) of the layer (module docstring): routing, permute and finalize, then fc1
    (SwiGLU in its epilogue) and fc2, each a grouped GEMM; elementwise over arrays of rows."""
    a = w["assignments"]
    fc1_out = a * w["inter_l"] * 2  # after SwiGLU (or the activation): inter_l wide, bf16
    block, fused = np.asarray(w["block"]) > 0, np.asarray(w["fused"]) > 0
    # the min-latency (trtllm-gen) chain: routing builds the active experts' tile list, so its GEMMs
    # have no per-local-expert scan; its fixed cost is moe_fused_s for the whole chain
    eff = {**eff,
           "moe_tensor": eff["moe_tensor"] * np.where(block, eff.get("moe_block_tensor", 1.0), 1.0),
           "moe_dram": eff["moe_dram"] * np.where(block, eff.get("moe_block_dram", 1.0), 1.0),
           "moe_gemm_s": np.where(fused, 0.0, eff["moe_gemm_s"]),
           "moe_expert_s": np.where(fused, 0.0, eff["moe_expert_s"]),
           "moe_fixed_s": np.where(fused, eff.get("moe_fused_s", eff["moe_fixed_s"] + 2 * eff["moe_gemm_s"]),
                                   eff["moe_fixed_s"])}
    g1 = grouped_gemm(w["row_tiles"], w["active"], w["local"], w["n1"], w["k1"], w["wbytes"], peak, sm_count,
                      dram_bytes_per_s, eff, out_bytes=fc1_out)
    g2 = grouped_gemm(w["row_tiles"], w["active"], w["local"], w["n2"], w["k2"], w["wbytes"], peak, sm_count,
                      dram_bytes_per_s, eff, in_bytes=fc1_out)
    # the bound: the fewest FLOPs and bytes the rank's routing allows (layer_work bound_*)
    ab = w["bound_assignments"]
    flops_exact = 2 * ab * (w["n1"] * w["k1"] + w["n2"] * w["k2"])
    nbytes = (w["bound_active"] * (w["n1"] * w["k1"] + w["n2"] * w["k2"]) * w["wbytes"]
              + (2 * w["inter_l"] * 2 + w["hidden"] * 2 * 2) * ab + w["io"])
    bound = np.maximum(flops_exact / peak, nbytes / dram_bytes_per_s)
    rows_rate = np.where(w["fused"] > 0, eff["moe_dram"], eff["moe_rows"])
    routing = (eff["moe_fixed_s"] + w["rows"] / (dram_bytes_per_s * rows_rate)
               + w["io"] / (dram_bytes_per_s * eff["moe_dram"]))
    return bound, routing + g1[3] + g2[3]
