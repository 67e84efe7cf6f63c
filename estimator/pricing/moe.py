"""A MoE layer's experts on one GPU of a moe_tp x moe_ep group, as TensorRT-LLM's fused MoE runs them:
routing (top-k), a grouped GEMM over the ACTIVE local experts (fc1: gate and up, SwiGLU fused into its
epilogue), and the second grouped GEMM (fc2), with the token permute / unpermute around them.

Active experts. `tokens * topk` assignments land on `experts` experts; the GPU holds experts / ep of them,
each with inter / tp of its intermediate width. A grouped GEMM reads the weights of an expert only when at
least one token routes there, so at decode (few assignments) the layer reads far fewer bytes than all its
experts:
- uniform (random) routing: E[distinct experts hit] = E * (1 - (1 - 1/E)^(tokens * topk)) (each
  assignment an independent uniform draw; NB: a token's own top-k are distinct, which this ignores)
- balanced (the benchmark's `balanced`: token i's j-th expert is (i + j * ceil(E / topk)) mod E, a
  stride): min(E, tokens * topk) distinct experts, each with the same load
- power_law_<alpha> (aiconfigurator's collector): per-expert loads drawn from a power law on [1, 0.8 *
  tokens] (on [0.01, 2] when tokens * topk <= E) with exponent alpha, scaled to tokens * topk and
  rounded, the hottest expert swapped onto the measured rank (rank 0). Priced with the law's expected
  order statistics: expert i of E (hottest first) gets the quantile at (i + 0.5) / E of the law.
The rank's time is its own experts' (the measured GPU, rank 0): with ep > 1 its share of the loads.

Per active expert with n tokens, its GEMMs pad the token rows to the grouped GEMM's tile M (`tile_m`):
    flops   = 2 * (gated ? 3 : 2) * hidden * inter_l * ceil(n / tile_m) * tile_m
    weights = (gated ? 3 : 2) * hidden * inter_l * weight bytes (+ block scales)
    estimate = moe_fixed_s + max(flops / (peak * moe_tensor), (weights + activations) / (BW * moe_dram))
               + (1 - moe_overlap) * min(...)
`moe_fixed_s`: the layer's kernels' launches and dependent phases (routing, permute, two GEMMs,
finalize); `moe_expert_s` per LOCAL expert, active or not (the fused MoE's per-expert bookkeeping: expert
offsets, each expert's problem in the grouped GEMM's scheduler, its scales): the H100 table's 1-token
rows at hidden 7168 take 46, 54, 73, 115 us for 32, 64, 128, 256 local experts with the same weight
bytes. A grouped GEMM streams its weights with ceil(rows / 128) x ceil(N / 128) CTAs; fewer CTAs than
SMs / moe_cta_stream reach that share of the DRAM bandwidth (one CTA streams its weight tile at up to
moe_cta_stream x its 1 / SMs share: an SM's own load path is wider than its share of DRAM's). Constants fitted per family (hwdesc/families/*.yaml, efficiency.moe_*).
"""

from __future__ import annotations

import numpy as np

MOE_KEYS = ("moe_fixed_s", "moe_tensor", "moe_dram", "moe_overlap", "moe_expert_s", "moe_cta_stream")
TILE_M = 128
TILE_N = 128
# weight bytes per element and the MMA dtype per table dtype (moe_dtype): 4-bit weights carry one
# scale byte per 32 (mx) or 16 (nv) elements
DTYPES = {"bfloat16": (2.0, "bf16"), "fp8": (1.0, "fp8"), "fp8_block": (1.0 + 4 / 128 / 128, "fp8"),
          "w4a16_mxfp4": (0.5 + 1 / 32, "bf16"), "w4a8_mxfp4_mxfp8": (0.5 + 1 / 32, "fp8"),
          "nvfp4": (0.5 + 1 / 16, "fp4")}


def active_uniform(assignments, experts):
    """Expected distinct experts hit by `assignments` independent uniform draws over `experts`."""
    e = np.asarray(experts, dtype=float)
    return e * (1 - (1 - 1 / e) ** np.asarray(assignments, dtype=float))


def active_balanced(assignments, experts):
    return np.minimum(np.asarray(experts, dtype=float), np.asarray(assignments, dtype=float))


def power_law_loads(tokens: int, topk: int, experts: int, alpha: float) -> np.ndarray:
    """The expected per-expert loads (hottest first) of aiconfigurator's power-law routing."""
    a = tokens * topk
    lo, hi = (1.0, 0.8 * tokens) if a > experts else (0.01, 2.0)
    hi = max(hi, lo * (1 + 1e-9))
    u = 1 - (np.arange(experts) + 0.5) / experts  # the hottest expert at the top quantile
    x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
    return np.round(x / x.sum() * a)


def rank_loads(tokens: int, topk: int, experts: int, ep: int, distribution: str) -> np.ndarray:
    """Token counts of the measured rank's experts (rank 0 of ep), each active expert one entry."""
    local = max(experts // ep, 1)
    a = tokens * topk
    if distribution.startswith("power_law"):
        loads = power_law_loads(tokens, topk, experts, float(distribution.rsplit("_", 1)[1]))
        # rank 0 holds the hottest expert and, NB, an evenly strided share of the rest
        mine = np.concatenate([loads[:1], loads[1:][::ep][: local - 1]])
        return mine[mine > 0]
    if distribution == "balanced":
        active = min(experts, a)
        per = a / active
        mine = int(round(active / ep)) if active < experts else local
        return np.full(max(mine, 1), per)
    active = float(active_uniform(a, experts)) / ep
    return np.full(max(int(round(active)), 1), a / ep / max(active, 1e-9))


def layer_work(tokens: int, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int,
               dtype: str, distribution: str, gated: bool, sm_count: int) -> dict:
    """The measured GPU's layer: exact and tile-padded FLOPs, the two grouped GEMMs' weight bytes and CTA
    fill, the activations' bytes, the MMA dtype, the active and the local experts."""
    wbytes, mma = DTYPES[dtype]
    inter_l = inter / tp
    mats = 3 if gated else 2
    loads = rank_loads(tokens, topk, experts, ep, distribution)
    row_tiles = np.ceil(loads / TILE_M)
    n1 = (mats - 1) * inter_l  # fc1: gate and up (gated) or up alone, N side; K = hidden
    ctas1 = row_tiles.sum() * np.ceil(n1 / TILE_N)
    ctas2 = row_tiles.sum() * np.ceil(hidden / TILE_N)  # fc2: N = hidden, K = inter_l
    act = loads.sum() * (hidden * 2 * 2 + inter_l * mats * 2) + tokens * hidden * 2 * 2
    return {"flops_exact": float(2 * mats * hidden * inter_l * loads.sum()),
            "flops": float(2 * mats * hidden * inter_l * row_tiles.sum() * TILE_M),
            "w1": float(len(loads) * n1 * hidden * wbytes), "w2": float(len(loads) * hidden * inter_l * wbytes),
            "ctas1": float(max(ctas1, 1) / sm_count), "ctas2": float(max(ctas2, 1) / sm_count),
            "act": float(act), "mma": mma, "active": len(loads), "local": max(experts // ep, 1)}


def layer_time(w: dict, peak, dram_bytes_per_s: float, eff: dict):
    """(bound_s, estimate_s) of the layer (module docstring); elementwise over arrays of rows (`w` a
    layer_work record, or one of arrays)."""
    nbytes = w["w1"] + w["w2"] + w["act"]
    bound = np.maximum(w["flops_exact"] / peak, nbytes / dram_bytes_per_s)
    tc = w["flops"] / (peak * eff["moe_tensor"])
    bw = dram_bytes_per_s * eff["moe_dram"]
    k = eff["moe_cta_stream"]  # one CTA streams at up to k x its 1 / SMs share of the DRAM bandwidth
    tm = (w["w1"] / (bw * np.minimum(1.0, k * w["ctas1"])) + w["w2"] / (bw * np.minimum(1.0, k * w["ctas2"]))
          + w["act"] / bw)
    est = (eff["moe_fixed_s"] + eff["moe_expert_s"] * w["local"] + np.maximum(tc, tm)
           + (1 - eff["moe_overlap"]) * np.minimum(tc, tm))
    return bound, est
