"""Fit the tile model's efficiency constants on measured H100 kernels and print the fit and its error.

    estimate calibrate [--data ../shared/calibration/h100_sxm] [--arch h100-sxm] [--sample 6000] [--write]
    estimate calibrate --comm [--write] [--keep-nccl]   (the collective constants: fit_comm.py)

Tables (see the data's README): bf16 GEMMs, context (prefill) attention and generation (decode) attention
measured on an H100 SXM. Each row becomes the graph estimator/calibration/kernel_graphs.py builds for it,
priced at once over every row by estimator/calibration/tables.py's `Template` (the estimator's own tile
model on numpy arrays). Inputs are warm (--warm-inputs): the benchmarks rotate weights, not activations.

Two stages, each a Nelder-Mead search (log space for times, logit space for fractions) minimizing the
sum over tables of the median plus the 90th percentile of |est - meas| / meas (the two figures the
validation reports), on a seeded sample of rows per table:
  1. GEMM table: tensor, dram, l2, l2_resident, launch_s, mem_latency_s, split_k_s;
  2. all three tables, the other GEMM constants fixed: softmax_overlap, attention_cta_s, attention_step_s,
     attention_prefill_s, attention_decode_s, and l2 again (shared by every kernel, and barely
     constrained by GEMMs alone).
`--attention` runs stage 2 alone on the two attention tables, without `l2` (every GEMM constant as the
descriptor has it), and `--write` then writes only the attention constants.
`--decode` fits only the constants no prefill kernel reads (DECODE_KEYS: the decode op's and CTA's
fixed costs, the bf16 kernel's row cost, the split-KV combine) on the generation table, every other
constant as the descriptor has it, so the context table's figures stay exactly as they are; `--write`
then writes only those.
`--gemm-keys K1,K2` runs stage 1 on the named GEMM constants only (e.g. the output path,
`epilogue_store,dram_store`), every other constant as the descriptor has it and the attention tables
untouched.
`--fp8` fits two more constants, `tensor_fp8` (the tensor-core fraction of fp8 GEMMs, which reach a
smaller share of their doubled peak than bf16 ones) and `block_scale` (the CUDA-core fraction of a
block-scaled GEMM's per-block promotion), on a seeded sample of the fp8 GEMM rows (per-tensor and 1x128
block-scaled, activation quantization included), with every other constant as the descriptor has it:
a Nelder-Mead search (logit space) of the sum over the two kinds of median + p90, each row priced by the
estimator as `estimate validate kernels` prices it (`--fp8-sample` rows; row by row, so a few hundred);
`--write` puts them into the fitted GPU's family file (the other families keep fp8 values of their own
or leave the block-scaled kernel's constants out: Hopper's fp8 wgmma pipeline and CUDA-core promotion
are its own, hwdesc/families/*.yaml `inherits`). `--fp8-keys K1,K2` names the constants fitted (default
tensor_fp8,block_scale; times in log space): besides those two, the library-picked block-scaled kernel's
`block_scale_oob_s` (a k-step's cost per padded row of its partial M tile, per CTA on it),
`block_scale_straddle_s` (a k-step's extra for a tile straddling two weight-scale blocks) and
`block_scale_store` (the DRAM share its C stores reach), estimator/pricing/gemm.py, and the 1 x 128
quantization kernel's `block_quant_round_s` (a round of its grid-stride loop, estimator/pricing/quant.py).
When every key named is a block_ one, only fp8_block rows are sampled. The NVFP4 kernel's keys
(FP4_KEYS: `tensor_fp4`, the tensor-core fraction of block-scaled fp4 GEMMs; `block_scale_step_s`, the
k-step floor, and `block_scale_fill_s`, the fixed cost, of sm_100's block-scaled kernel) are fitted apart,
on the nvfp4 rows (the fp4 quantize kernel and the GEMM) priced at once (tables.nvfp4_table), `--sample`
of them. `min_kernel_s` (with --fp8: the floor of a streaming kernel launched through a framework,
estimator/pricing/plan.py stream_time, which the per-tensor fp8 path's four small kernels show) may be
fitted beside tensor_fp8 on a family whose GEMMs' fixed cost is below it. Every fit also prints its
residuals on the rows its search did not see (the seeded sample's complement): the held-out check.
The constants are printed rounded to 3 significant digits and the residuals are computed with those
rounded values on every row. `--write` puts exactly those values, with the tables they were fitted on
and the command line, into the `efficiency` block of the `--arch` GPU's family file,
hwdesc/families/<family>.yaml (descriptors.write_descriptors): every SKU of the family reads them, and so
does each family inheriting them (today Blackwell, sm_120 and Ampere take the H100 fit through their own
peaks; no per-GPU fitting). The estimator never reads these tables.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

import hwdesc
from estimator.calibration.descriptors import tables_of, write_descriptors
from estimator.calibration.search import nelder_mead, rounded, sample
from estimator.calibration.tables import Table, attention_table, check_data, gemm_table, nvfp4_table
from estimator.errors import UserError
from estimator.pricing.menu import menu_for

GEMM_KEYS = ("tensor", "dram", "l2", "l2_resident", "launch_s", "mem_latency_s", "split_k_s",
             "epilogue_store", "dram_store")
ATTENTION_KEYS = ("softmax_overlap", "attention_cta_s", "attention_step_s", "attention_prefill_s",
                  "attention_decode_s", "attention_decode_cta_s", "attention_l2", "attention_split_s",
                  "attention_decode_row_s", "attention_split_each_s", "attention_dequant_ops",
                  "attention_dram")
# read by decode kernels only (estimator/pricing/attention.py decode, combine_s)
DECODE_KEYS = ("attention_decode_s", "attention_decode_cta_s", "attention_split_s", "attention_decode_row_s",
               "attention_split_each_s", "attention_dequant_ops")
FRACTIONS = ("tensor", "dram", "l2", "l2_resident", "softmax_overlap", "attention_l2", "epilogue_store",
             "dram_store", "tensor_fp4", "attention_dram")
START = {"tensor": 0.8, "dram": 0.85, "l2": 0.8, "l2_resident": 0.75, "launch_s": 2e-6,
         "mem_latency_s": 1e-6, "split_k_s": 2e-6, "epilogue_store": 0.7, "dram_store": 0.7,
         "softmax_overlap": 0.3, "attention_cta_s": 4e-6,
         "attention_step_s": 1e-7, "attention_prefill_s": 5e-6, "attention_decode_s": 2e-6,
         "attention_decode_cta_s": 4e-6, "attention_l2": 0.5, "attention_split_s": 4e-6,
         "attention_decode_row_s": 5e-10, "attention_split_each_s": 1e-7,
         "attention_dequant_ops": 4.0, "tensor_fp4": 0.5, "block_scale_step_s": 2e-7,
         "block_scale_fill_s": 1e-6}


# ---- fitting --------------------------------------------------------------------------------------

def with_constants(hw, consts: dict):
    eff = dict(hw.efficiency)
    eff.update(consts)
    return replace(hw, efficiency=MappingProxyType(eff))


def loss(tables: list[tuple[Table, np.ndarray]], hw, menu) -> float:
    total = 0.0
    for table, idx in tables:
        est = table.times(hw, menu, idx)[idx]
        err = np.abs(est / table.rows["t"][idx] - 1)
        total += float(np.median(err) + np.percentile(err, 90))
    return total


def fit(keys: tuple[str, ...], tables, hw, menu, consts: dict) -> dict:
    """Search in log space (times) and logit space (fractions, kept inside (0, 1) without a flat clamp)."""
    def unpack(x):
        out = dict(consts)
        for key, v in zip(keys, x, strict=True):
            out[key] = float(1 / (1 + np.exp(-v))) if key in FRACTIONS else float(np.exp(v))
        return out

    def pack(key: str) -> float:
        v = consts[key]
        if key in FRACTIONS:
            v = min(max(v, 1e-3), 0.995)
            return float(np.log(v / (1 - v)))
        return float(np.log(v))

    x = np.array([pack(k) for k in keys])
    for step in (0.3, 0.1):  # a restart from the best point with a smaller simplex
        x, _ = nelder_mead(lambda x: loss(tables, with_constants(hw, unpack(x)), menu), x, step=step)
    return unpack(x)


def residuals(table: Table, hw, menu, only=None, what: str = "rows") -> list[str]:
    """The residuals per regime over every row, or over the rows of the mask `only` (the held-out check:
    the rows the search did not see), named `what`."""
    est = table.times(hw, menu)
    err = est / table.rows["t"] - 1
    keep = np.ones(len(err), bool) if only is None else only
    lines = [f"{table.name}: {int(keep.sum())} {what}"]
    for label, mask in [*table.regimes, ("all", np.ones(len(err), bool))]:
        mask = mask & keep
        if not mask.any():  # a regime without rows (a small table)
            continue
        e = np.abs(err[mask])
        lines.append(f"  {label:<16} n={mask.sum():>6}  median |err| {100 * np.median(e):5.1f}%  "
                     f"p90 {100 * np.percentile(e, 90):5.1f}%  "
                     f"median signed {100 * np.median(err[mask]):+5.1f}%")
    return lines


FP8_KEYS = ("tensor_fp8", "block_scale", "block_scale_oob_s", "block_scale_straddle_s", "block_scale_store",
            "block_quant_round_s", "tensor_fp4", "block_scale_step_s", "block_scale_fill_s",
            "min_kernel_s")
# the NVFP4 GEMM's constants (sm_100): fitted on the nvfp4 rows alone
FP4_KEYS = ("tensor_fp4", "block_scale_step_s", "block_scale_fill_s")
FP8_START = {"tensor_fp8": 0.6, "block_scale": 0.3, "block_scale_oob_s": 3e-11,
             "block_scale_straddle_s": 5e-8, "block_scale_store": 0.5, "block_quant_round_s": 1e-6,
             "tensor_fp4": 0.5, "block_scale_step_s": 2e-7, "block_scale_fill_s": 1e-6,
             "min_kernel_s": 2.5e-6}


def fp8_table(keys: tuple[str, ...]) -> str:
    """The GEMM rows that constrain `keys`: nvfp4 for the NVFP4 kernel's, fp8_block for the block-scaled
    fp8 kernel's alone, else every fp8 row (validate_kernels.GEMM_TABLES)."""
    if all(k in FP4_KEYS for k in keys):
        return "nvfp4"
    if all(k.startswith("block_") and k not in FP4_KEYS for k in keys):
        return "fp8_block"
    return "fp8"


def fit_fp8(data: Path, hw, n: int, seed: int, keys: tuple[str, ...] = FP8_KEYS[:2]) -> dict:
    """The fp8 constants `keys` by Nelder-Mead (logit space for fractions, log space for times) on `n`
    fp8 GEMM rows, both kinds (see the module docstring), every other constant as the descriptor has
    it."""
    from estimator.calibration import validate_kernels as vk

    unknown = [k for k in keys if k not in FP8_KEYS]
    if unknown:
        raise UserError(f"--fp8-keys: not fp8 constants: {', '.join(unknown)} "
                        f"(choose from {', '.join(FP8_KEYS)})")
    if any(k in FP4_KEYS for k in keys) and not all(k in FP4_KEYS for k in keys):
        raise UserError(f"--fp8-keys: the NVFP4 constants ({', '.join(FP4_KEYS)}) are fitted apart from "
                        "the fp8 ones")

    which = fp8_table(keys)
    rows = vk.rows_of(data, which)
    if not len(rows["t"]):
        raise UserError(f"--data {data}: no {which} rows in gemm.csv.gz")
    idx = np.nonzero(sample(len(rows["t"]), n, seed))[0]
    models = [vk.model_of(which, {k: v[i] for k, v in rows.items()}) for i in idx]
    meas = rows["t"][idx]
    block = rows["dtype"][idx] == "fp8_block"

    def unpack(x: np.ndarray) -> dict:
        return {k: float(np.exp(v) if k.endswith("_s") else 1 / (1 + np.exp(-v)))
                for k, v in zip(keys, x, strict=True)}

    def f(x: np.ndarray) -> float:
        h = with_constants(hw, unpack(x))
        est = np.array([vk.price(m, h, rt, warm)[1] for m, rt, warm in models])
        err = np.abs(est / meas - 1)
        # the two kinds are reported (and judged) apart: the sum of each one's median and p90
        return float(sum(np.median(err[k]) + np.percentile(err[k], 90) for k in (block, ~block) if k.any()))

    start = {k: hw.efficiency.get(k, FP8_START[k]) for k in keys}
    clipped = {k: min(max(start[k], 0.05), 0.95) for k in keys}
    x = np.array([np.log(start[k]) if k.endswith("_s") else np.log(clipped[k] / (1 - clipped[k]))
                  for k in keys])
    for step in (0.3, 0.1):
        x, _ = nelder_mead(f, x, step=step, iters=30, tol=1e-3)
    return rounded(unpack(x))


def fit_gemm_only(keys: tuple[str, ...], gemm: Table, hw, menu, args) -> int:
    """Stage 1 on the named keys only (`--gemm-keys`), every other constant as the descriptor has it."""
    unknown = [k for k in keys if k not in GEMM_KEYS]
    if unknown:
        raise UserError(f"--gemm-keys: not GEMM constants: {', '.join(unknown)} "
                        f"(choose from {', '.join(GEMM_KEYS)})")
    consts = {k: hw.efficiency.get(k, START[k]) for k in keys}
    if not args.no_fit:
        consts = rounded(fit(keys, [(gemm, sample(len(gemm.rows["t"]), args.sample, args.seed))], hw, menu,
                             consts))
    print(f"# GEMM constants fitted on {args.data} ({hw.name}, {hw.family})")
    for key in keys:
        print(f"{key}: {consts[key]:.3g}")
    print("\n".join(residuals(gemm, with_constants(hw, consts), menu)))
    if args.write:
        print("wrote " + ", ".join(write_descriptors(
            consts, family=hw.family, fitted_on=tables_of(args.data, "gemm.csv.gz", rows="bf16 GEMM rows"))))
    return 0


def fit_fp4(args) -> int:
    """The NVFP4 kernel's constants (`--fp8 --fp8-keys tensor_fp4,block_scale_step_s,block_scale_fill_s`)
    on the nvfp4 GEMM rows, priced at once over the rows as the kernel stages are (tables.nvfp4_table:
    the fp4 quantize kernel and the block-scaled GEMM; a Nelder-Mead search as `fit`'s) on `--sample`
    rows; the held-out check on the others."""
    check_data(args.data, "gemm.csv.gz")
    hw = hwdesc.load(args.arch)
    menu = menu_for(hw.family)
    table = nvfp4_table(args.data)
    if not len(table.rows["t"]):
        raise UserError(f"--data {args.data}: no nvfp4 rows in gemm.csv.gz")
    keys = args.fp8_keys
    consts = {k: hw.efficiency.get(k, START[k]) for k in keys}
    seen = sample(len(table.rows["t"]), args.sample, args.seed)
    if not args.no_fit:
        consts = rounded(fit(keys, [(table, seen)], hw, menu, consts))
    print(f"# NVFP4 constants fitted on {args.data} ({hw.name}, {hw.family})")
    for key in keys:
        print(f"{key}: {consts[key]:.3g}")
    fitted = with_constants(hw, consts)
    print("\n".join(residuals(table, fitted, menu)))
    print("\n".join(residuals(table, fitted, menu, ~seen, "rows held out")))
    if args.write:
        print("wrote " + ", ".join(write_descriptors(
            consts, family=hw.family, fitted_on=tables_of(args.data, "gemm.csv.gz", rows="nvfp4 GEMM rows"))))
    return 0


@dataclass(frozen=True)
class KernelFit:
    """What `estimate calibrate` was asked (the command line, read once): `which` is "all" (both stages),
    "attention", "decode", "gemm-keys" (with `gemm_keys`) or "fp8" (with `fp8_keys`, `fp8_sample`)."""

    data: Path
    arch: str = "h100-sxm"
    which: str = "all"
    sample: int = 6000
    seed: int = 0
    write: bool = False
    no_fit: bool = False
    gemm_keys: tuple[str, ...] = ()
    fp8_keys: tuple[str, ...] = FP8_KEYS[:2]
    fp8_sample: int = 200


def run(args: KernelFit) -> int:
    """Fit (or with no_fit, only score) the constants `args.which` names, print them and the residuals;
    with `write`, put them into the fitted GPU's family file."""
    if args.which == "fp8" and args.fp8_keys and all(k in FP4_KEYS for k in args.fp8_keys):
        return fit_fp4(args)
    if args.which == "fp8":
        check_data(args.data, "gemm.csv.gz")
        hw = hwdesc.load(args.arch)
        consts = fit_fp8(args.data, hw, args.fp8_sample, args.seed, args.fp8_keys)
        print("  ".join(f"{k}: {v:.3g}" for k, v in consts.items())
              + f"  (fitted on {args.fp8_sample} fp8 GEMM rows of {args.data})")
        if args.write:  # fp8 MMA pipelines differ by family: the fit goes to the fitted family only
            rows = f"{fp8_table(tuple(consts))} GEMM rows"
            print("wrote " + ", ".join(write_descriptors(
                consts, family=hw.family, fitted_on=tables_of(args.data, "gemm.csv.gz", rows=rows))))
        return 0

    tables = ("gemm.csv.gz",) if args.which == "gemm-keys" else \
        ("gemm.csv.gz", "context_attention.csv.gz", "generation_attention.csv.gz")
    check_data(args.data, *tables)
    hw = hwdesc.load(args.arch)
    menu = menu_for(hw.family)
    gemm = gemm_table(args.data)
    if args.which == "gemm-keys":
        return fit_gemm_only(args.gemm_keys, gemm, hw, menu, args)
    ctx = attention_table(args.data, "context")
    gen = attention_table(args.data, "generation")
    # a key the descriptor lacks starts from START, but attention_dram from `dram` (its meaning when absent)
    start = {**START, "attention_dram": hw.efficiency["dram"]}
    consts = {k: hw.efficiency.get(k, start[k]) for k in (*GEMM_KEYS, *ATTENTION_KEYS)}
    if args.which == "decode" and not args.no_fit:  # every constant a prefill kernel reads stays as it is
        consts = rounded(fit(DECODE_KEYS, [(gen, sample(len(gen.rows["t"]), args.sample, args.seed))], hw,
                             menu, consts))
    elif args.which == "attention" and not args.no_fit:  # the GEMM constants (and l2) stay as they are
        tables = [(t, sample(len(t.rows["t"]), args.sample, args.seed)) for t in (ctx, gen)]
        consts = rounded(fit(ATTENTION_KEYS, tables, hw, menu, consts))
    elif not args.no_fit:
        gemm_rows = sample(len(gemm.rows["t"]), args.sample, args.seed)
        consts = fit(GEMM_KEYS, [(gemm, gemm_rows)], hw, menu, consts)
        consts = rounded(consts)
        # stage 2: the attention constants, and `l2` again, now against every table (the L2 efficiency
        # is shared by every kernel; GEMMs alone barely constrain it)
        every = [(gemm, gemm_rows)] + [(t, sample(len(t.rows["t"]), args.sample, args.seed))
                                       for t in (ctx, gen)]
        consts = fit((*ATTENTION_KEYS, "l2"), every, with_constants(hw, consts), menu, consts)
        consts = rounded(consts)
    fitted = with_constants(hw, consts)
    what = "in the descriptor (--no-fit)" if args.no_fit else f"fitted on {args.data}"
    print(f"# efficiency constants {what} ({hw.name}, {hw.family})")
    for key in (*GEMM_KEYS, *ATTENTION_KEYS):
        if not args.no_fit or key in hw.efficiency:  # --no-fit: the descriptor's own constants
            print(f"{key}: {consts[key]:.3g}")
    print("\n# residuals |estimate - measured| / measured, every row, warm inputs")
    for table in (gemm, ctx, gen):
        print("\n".join(residuals(table, fitted, menu)))
    if not args.no_fit:  # the check on the rows the search did not see (its seeded samples' complement)
        print(f"\n# held out: the same residuals on the rows outside the search's samples (--sample "
              f"{args.sample}, --seed {args.seed})")
        searched = {"decode": (gen,), "attention": (ctx, gen)}.get(args.which, (gemm, ctx, gen))
        for table in searched:
            seen = sample(len(table.rows["t"]), args.sample, args.seed)
            print("\n".join(residuals(table, fitted, menu, ~seen, "rows held out")))
    if args.write:
        written = {k: consts[k] for k in DECODE_KEYS} if args.which == "decode" else \
            {k: consts[k] for k in ATTENTION_KEYS} if args.which == "attention" else consts
        names = ("generation_attention.csv.gz",) if args.which == "decode" else \
            ("context_attention.csv.gz", "generation_attention.csv.gz") if args.which == "attention" else \
            ("gemm.csv.gz", "context_attention.csv.gz", "generation_attention.csv.gz")
        print("wrote " + ", ".join(write_descriptors(written, family=hw.family,
                                                     fitted_on=tables_of(args.data, *names))))
    return 0
