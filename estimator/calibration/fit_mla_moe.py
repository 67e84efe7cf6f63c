"""Fit the MLA and MoE kernels' constants (estimator/pricing/mla.py, moe.py) on a seeded half of a measured
table and check them on the disjoint other half.

    estimate calibrate --mla-moe mla_generation|moe|mla_bmm --data ../shared/calibration/h100_sxm
                       --arch h100-sxm [--seed 0]

The rows are priced by the pricing functions themselves, on numpy arrays of the table's columns (the
same code `estimate` runs for a model's MLA / MoE kernels); the constants are a grid search minimizing
median + p90 of |estimate - measured| / measured on the fit half. Prints the constants with the check
half's figures; they are written to hwdesc/families/<family>.yaml by hand with this command as `command:`.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np

import hwdesc
from estimator.calibration.tables import read_table
from estimator.pricing import mla, moe

GRIDS = {
    "mla_generation": {
        "mla_decode_s": [2e-6, 4e-6, 6e-6, 8e-6, 10e-6],
        "mla_overlap": [0.5, 0.7, 0.85, 1.0],
        "mla_tensor": [0.6, 0.7, 0.8, 0.9],
        "mla_dram": [0.7, 0.75, 0.8, 0.85, 0.9, 0.95],
        "mla_decode_row_s": [1e-12, 3e-10, 1e-9, 2e-9],
        "mla_decode_seq_s": [1e-12, 2e-8, 4e-8],
    },
    "moe": {
        "moe_fixed_s": [5e-6, 10e-6, 20e-6],
        "moe_gemm_s": [2e-6, 5e-6, 10e-6],
        "moe_tensor": [0.35, 0.45, 0.6, 0.75],
        "moe_dram": [0.7, 0.85, 0.95],
        "moe_overlap": [1.0],
        "moe_expert_s": [1e-12, 5e-8, 1e-7, 2e-7],
        "moe_cta_stream": [8.0],
        "moe_rows": [0.15, 0.2, 0.3, 0.4],
    },
    "mla_bmm": {  # the bf16 (cuBLAS) constants; the block-scaled fp8 (DeepGEMM) ones in BMM_FP8
        "mla_bmm_s": [1e-12, 0.5e-6, 1e-6, 1.5e-6, 2e-6, 2.5e-6, 3e-6],
        "mla_bmm_wave_s": [0.2e-6, 0.4e-6, 0.6e-6, 0.8e-6, 1.0e-6, 1.2e-6, 1.5e-6, 2e-6],
        "mla_bmm_dram": [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95],
    },
}
BMM_FP8 = {
    "mla_bmm_fp8_s": [1e-12, 0.5e-6, 1e-6, 1.5e-6, 2e-6, 3e-6, 4e-6],
    "mla_bmm_fp8_wave_s": [1e-12, 0.2e-6, 0.4e-6, 0.6e-6, 0.8e-6, 1.2e-6],
    "mla_bmm_fp8_dram": [0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7],
}
# `--refine`: the per-dtype and min-latency constants (and the MMA / DRAM fractions they scale), the
# descriptor's other constants held (a coordinate step after the full grid above)
REFINE = {
    "moe": {
        "moe_tensor": [0.5, 0.6, 0.75, 0.85],
        "moe_dram": [0.6, 0.7, 0.85],
        "moe_block_tensor": [0.3, 0.35, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0],
        "moe_block_dram": [0.5, 0.75, 0.9, 1.0],
        "moe_fused_s": [8e-6, 12e-6, 16e-6, 20e-6, 25e-6],
    },
}
MOE_SAMPLE = 6000  # rows of the MoE table priced (of 126K / 218K), seeded


def moe_rows(rows: dict, seed: int, sm_count: int, family: str | None = None) -> dict:
    """A seeded sample of the MoE table with each row's layer Work (moe.layer_work), computed once."""
    n = len(rows["t"])
    idx = np.sort(np.random.default_rng(seed).choice(n, min(MOE_SAMPLE, n), replace=False))
    rows = {k: v[idx] for k, v in rows.items()}
    work = [moe.layer_work(int(rows["num_tokens"][j]), int(rows["hidden_size"][j]),
                           int(rows["inter_size"][j]), int(rows["topk"][j]), int(rows["num_experts"][j]),
                           int(rows["moe_tp_size"][j]), int(rows["moe_ep_size"][j]),
                           str(rows["moe_dtype"][j]), str(rows["distribution"][j]),
                           rows["kernel_source"][j] != "moe_torch_flow_nongated", sm_count,
                           rows["kernel_source"][j] == "moe_torch_flow_min_latency", family)
            for j in range(len(idx))]
    for key in work[0]:
        rows[key] = np.array([w[key] for w in work])
    return rows


def moe_layer(rows: dict, hw, eff: dict) -> np.ndarray:
    peak = np.array([hw.tensor_flops_per_s.get(m, hw.tensor_flops_per_s["bf16"]) for m in rows["mma"]])
    return moe.layer_time(rows, peak, hw.sm_count, hw.dram_bytes_per_s, eff)[1]


def mla_generation(rows: dict, hw, eff: dict) -> np.ndarray:
    """Each row's MLA decode estimate (mla.decode_time, as plan.attention_plan calls it)."""
    k = mla.decode_kernel(hw.family, {**eff, **dict.fromkeys(mla.MLA_KEYS, 0.0)})
    b, h, s = rows["batch_size"], rows["num_heads"], rows["step"] + 1
    kvb = np.where(rows["kv_cache_dtype"] == "fp8", 1.0, 2.0)
    dram = b * s * 576 * kvb + b * h * (576 + 512) * 2  # the latent cache, Q in and O out (bf16)
    peaks = {d: hw.tensor_flops_per_s[d] for d in ("bf16", "fp8")}
    out = np.zeros(len(b))
    # the graph's other kernel: the in-place append of the new latent row (a tiny stream kernel)
    append = eff["launch_s"] + eff["mem_latency_s"]
    for width in (1.0, 2.0):  # the MMA dtype is per cache dtype
        m = kvb == width
        q = 1.0 if width == 1.0 and mla.quantizes_query(hw.family) else 2.0
        out[m] = append + mla.decode_time(b[m], h[m], s[m], 576, 512, q, width, dram[m], hw.sm_count,
                                          hw.dram_bytes_per_s,
                                 peaks, eff, k).time
    return out


def mla_bmm_rows(rows: dict, hw) -> dict:
    """Each row's graph (validate_kernels.mla_bmm) lowered and planned once with the descriptor's
    constants: its BMM kernel's DRAM bytes beyond the L2-resident reads, MMA peak and whether it is the
    block-scaled one, and the time of its other kernels (the fp8 rows' quantize), which the BMM constants
    do not move."""
    from estimator.calibration import kernel_graphs, validate_kernels
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from passes import DEFAULT_STRATEGY, pipeline_for

    n = len(rows["t"])
    cols = {c: np.zeros(n) for c in ("dram", "peak", "block", "other")}
    for j in range(n):
        row = {key: v[j] for key, v in rows.items()}
        model, retype, warm = validate_kernels.model_of("mla_bmm", row, False, mla.bmm_fp8_kind(hw.family))
        graph = import_model(model)
        for dtype in set(retype.values()):
            graph = kernel_graphs.retype(graph, tuple(t for t, d in retype.items() if d == dtype), dtype)
        r = estimate(graph, hw, pipeline=pipeline_for(DEFAULT_STRATEGY), warm_inputs=warm)
        for pk in r.kernels:
            if pk.kernel.op == "MatMul":
                unit = max(pk.kernel.work.flops, key=lambda u: float(pk.kernel.work.flops[u]))
                cols["dram"][j] = float(pk.kernel.work.dram_bytes) - float(pk.kernel.tile.resident_bytes)
                cols["peak"][j] = hw.tensor_flops_per_s["fp8" if unit[1].startswith("fp8") else "bf16"]
                cols["block"][j] = float(unit[1].startswith("fp8"))
            else:
                cols["other"][j] += float(pk.timing.estimate_s)
    return {**rows, **cols}


def mla_bmm(rows: dict, hw, eff: dict) -> np.ndarray:
    """Each row's estimate: its other kernels + mla.bmm_time (as plan._mla_bmm_plan calls it)."""
    out = rows["other"].copy()
    pre = rows["op_name"] == "mla_gen_pre"
    n, kdim = np.where(pre, 512, 128), np.where(pre, 128, 512)
    for block in (False, True):
        m = rows["block"] == float(block)
        k = mla.bmm_kernel(hw.family, block, {**dict.fromkeys(mla.BMM_KEYS[block], 0.0), **eff})
        if not m.any() or k is None:
            continue
        for width in np.unique(n[m]):  # one N per call: DeepGEMM's block_n pick loops over it
            w = m & (n == width)
            out[w] += mla.bmm_time(rows["num_heads"][w], rows["num_tokens"][w], int(width), kdim[w],
                                   rows["peak"][w], rows["dram"][w], hw.sm_count, hw.dram_bytes_per_s, eff,
                                   k, block).time
    return out


PRICE = {"mla_generation": mla_generation, "moe": moe_layer, "mla_bmm": mla_bmm}


def score(err: np.ndarray) -> float:
    return float(np.median(err) + np.percentile(err, 90))


def _grid_fit(rows: dict, half: np.ndarray, grid: dict, table: str, hw, base: dict | None = None) -> tuple:
    """(score, constants, per-row error) of the grid point best on the `half` rows."""
    best = None
    for values in itertools.product(*grid.values()):
        eff = {**(base or dict(hw.efficiency)), **dict(zip(grid, values, strict=True))}
        err = np.abs(PRICE[table](rows, hw, eff) - rows["t"]) / rows["t"]
        s = score(err[half])
        if best is None or s < best[0]:
            best = (s, eff, err)
    return best


def fit(table: str, data: Path, arch: str, seed: int = 0, refine: bool = False) -> tuple[dict, dict]:
    hw = hwdesc.load(arch)
    rows = read_table(data / f"{table}.csv.gz")
    if table == "moe":
        rows = moe_rows(rows, seed, hw.sm_count, hw.family)
    if table == "mla_bmm":
        rows = mla_bmm_rows(rows, hw)
    half = np.random.default_rng(seed).random(len(rows["t"])) < 0.5
    grid = (REFINE if refine else GRIDS)[table]
    if table == "mla_bmm" and mla.bmm_kernel(hw.family, True, dict.fromkeys(mla.BMM_KEYS[True])):
        # the block-scaled rows' constants, fitted on those rows alone (the bf16 ones move only the others)
        block = rows["block"] == 1.0
        fp8 = _grid_fit({k: v[block] for k, v in rows.items()}, half[block], BMM_FP8, table, hw)
        hw_eff = {**dict(hw.efficiency), **fp8[1]}
        rows = {k: v[~block] for k, v in rows.items()}
        bf16 = _grid_fit(rows, half[~block], grid, table, hw, hw_eff)
        err = np.concatenate([fp8[2], bf16[2]])
        half = np.concatenate([half[block], half[~block]])
        check = err[~half]
        return ({**{k: fp8[1][k] for k in BMM_FP8}, **{k: bf16[1][k] for k in grid}},
                {"fit_rows": int(half.sum()), "check_rows": int((~half).sum()),
                 "check_median": float(np.median(check)), "check_p90": float(np.percentile(check, 90)),
                 "check_median_fp8": float(np.median(fp8[2][~half[:len(fp8[2])]])),
                 "check_median_bf16": float(np.median(bf16[2][~half[len(fp8[2]):]]))})
    _, eff, err = _grid_fit(rows, half, grid, table, hw)
    check = err[~half]
    return ({k: eff[k] for k in grid},
            {"fit_rows": int(half.sum()), "check_rows": int((~half).sum()),
             "check_median": float(np.median(check)),
             "check_p90": float(np.percentile(check, 90))})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m estimator.calibration.fit_mla_moe")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--arch", default="h100-sxm")
    p.add_argument("--table", choices=sorted(GRIDS), required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--refine", action="store_true", help="fit only the REFINE grid, the rest held")
    args = p.parse_args(argv)
    if args.refine and args.table not in REFINE:
        p.error(f"--refine: no refine grid for {args.table}")
    constants, check = fit(args.table, args.data, args.arch, args.seed, args.refine)
    for k, v in constants.items():
        print(f"{k}: {v:.3g}")
    print(", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in check.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
