"""Fit the tile model's efficiency constants on measured H100 kernels and print the fit and its error.

    python tools/calibrate.py [--data ../shared/calibration/h100_sxm] [--arch h100-sxm] [--sample 6000]
                              [--write]
    python tools/calibrate.py --comm [--write] [--keep-nccl]   (the collective constants:
                                                                tools/calibrate_comm.py)

Tables (see the data's README): bf16 GEMMs, context (prefill) attention and generation (decode) attention
measured on an H100 SXM. Each row becomes the graph tools/kernel_graphs.py builds for it; the graph of a
table is imported once with symbolic dims, lowered by the estimator, and its kernels' Work, tile problems
and tensor sizes are turned into numpy functions of the dims, so that the estimator's own tile model
(estimator/pricing: plan.gemm_plan, plan.attention_plan, plan.stream_time, residency.stack_hits) prices
every row at once, each row's tile chosen by the tiling step's own rule. Inputs are warm (--warm-inputs): the
benchmarks rotate weights, not activations.

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
estimator as tools/validate_kernels.py prices it (`--fp8-sample` rows; row by row, so a few hundred);
`--write` puts them into the descriptors of the fitted GPU's family only (Hopper's fp8 wgmma pipeline
and CUDA-core promotion are its own). `--fp8-keys K1,K2` names the constants fitted (default
tensor_fp8,block_scale; times in log space): besides those two, the library-picked block-scaled kernel's
`block_scale_oob_s` (a k-step's cost per padded row of its partial M tile, per CTA on it),
`block_scale_straddle_s` (a k-step's extra for a tile straddling two weight-scale blocks) and
`block_scale_store` (the DRAM share its C stores reach), estimator/pricing/gemm.py, and the 1 x 128
quantization kernel's `block_quant_round_s` (a round of its grid-stride loop, estimator/pricing/quant.py).
When every key named is a block_ one, only fp8_block rows are sampled.
The constants are printed rounded to 3 significant digits and the residuals are computed with those
rounded values on every row. `--write` puts exactly those values into the `efficiency` block of every
bundled GPU descriptor (the H100 fit carries over to other GPUs through their own peaks; no per-GPU
fitting). The estimator never reads these tables.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
import sympy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import kernel_graphs  # noqa: E402

import hwdesc  # noqa: E402
from estimator.frontends.onnx_import import import_model  # noqa: E402
from estimator.ir import dim  # noqa: E402
from estimator.kernel import CostCache, lower  # noqa: E402
from estimator.pricing import plan as tplan  # noqa: E402
from estimator.pricing.menu import menu_for  # noqa: E402
from estimator.pricing.points import NO_RESIDENCY  # noqa: E402
from estimator.pricing.problem import GemmSpec, attention_of_kernel, gemm_of_kernel  # noqa: E402
from estimator.pricing.residency import boundary, resident_bytes, stack_hits  # noqa: E402
from passes import DEFAULT_STRATEGY, Pipeline, pipeline_for  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "calibration" / "h100_sxm"
GEMM_KEYS = ("tensor", "dram", "l2", "l2_resident", "launch_s", "mem_latency_s", "split_k_s",
             "epilogue_store", "dram_store")
ATTENTION_KEYS = ("softmax_overlap", "attention_cta_s", "attention_step_s", "attention_prefill_s",
                  "attention_decode_s", "attention_decode_cta_s", "attention_l2", "attention_split_s",
                  "attention_decode_row_s", "attention_split_each_s", "attention_dequant_ops")
# read by decode kernels only (estimator/pricing/attention.py decode, combine_s)
DECODE_KEYS = ("attention_decode_s", "attention_decode_cta_s", "attention_split_s", "attention_decode_row_s",
               "attention_split_each_s", "attention_dequant_ops")
FRACTIONS = ("tensor", "dram", "l2", "l2_resident", "softmax_overlap", "attention_l2", "epilogue_store",
             "dram_store")
START = {"tensor": 0.8, "dram": 0.85, "l2": 0.8, "l2_resident": 0.75, "launch_s": 2e-6,
         "mem_latency_s": 1e-6, "split_k_s": 2e-6, "epilogue_store": 0.7, "dram_store": 0.7,
         "softmax_overlap": 0.3, "attention_cta_s": 4e-6,
         "attention_step_s": 1e-7, "attention_prefill_s": 5e-6, "attention_decode_s": 2e-6,
         "attention_decode_cta_s": 4e-6, "attention_l2": 0.5, "attention_split_s": 4e-6,
         "attention_decode_row_s": 5e-10, "attention_split_each_s": 1e-7,
         "attention_dequant_ops": 4.0}


# ---- tables ---------------------------------------------------------------------------------------

def read_table(path: Path) -> dict[str, np.ndarray]:
    with gzip.open(path, "rt") as f:
        rows = list(csv.DictReader(f))
    cols = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        try:
            cols[key] = np.array([float(v) for v in values])
        except ValueError:
            cols[key] = np.array(values)
    cols["t"] = cols.pop("latency_ms") * 1e-3
    return cols


def select(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in cols.items()}


# ---- a table's graph as numpy functions -------------------------------------------------------------

@dataclass
class KernelFns:
    reads: list[str]
    writes: list[str]
    flops: dict  # (unit, dtype) -> fn(dims)
    dram: object  # fn(dims)
    kind: str  # "gemm", "attention", "stream"
    spec: object = None  # GemmSpec / Core template, fields as fns
    unit: tuple = ()
    q_bytes: float = 0.0
    kv_bytes: float = 0.0


def _fn(expr, symbols):
    f = sympy.lambdify(symbols, sympy.sympify(expr), "numpy")
    return lambda values: np.broadcast_to(np.asarray(f(*values), dtype=float), values[0].shape)


class Template:
    """A table's graph, imported once with symbolic dims and lowered as the CLI would."""

    def __init__(self, model, dim_names: tuple[str, ...], fp8: tuple[str, ...] = ()):
        graph = import_model(model)
        graph = kernel_graphs.retype(graph, fp8)
        graph = Pipeline.parse(pipeline_for(DEFAULT_STRATEGY)).run(graph)
        self.graph = graph
        self.symbols = [dim(n) for n in dim_names]
        kernels = lower(graph, CostCache(graph)).kernels
        self.sizes = {}
        self.kernels = []
        for k in kernels:
            reads, writes = boundary(graph, k)
            for t in (*reads, *writes):
                if t not in self.sizes and graph.tensors[t].shape is not None:
                    self.sizes[t] = _fn(graph.tensors[t].nbytes, self.symbols)
            fns = KernelFns(reads, writes, {u: _fn(v, self.symbols) for u, v in k.work.flops.items()},
                            _fn(k.work.dram_bytes, self.symbols), "stream")
            spec = gemm_of_kernel(graph, k)
            found = attention_of_kernel(graph, k) if spec is None else None
            if spec is not None:
                fns.kind, fns.unit = "gemm", tplan._mma_unit(k.work)
                fns.spec = (spec, {f: _fn(getattr(spec, f), self.symbols) for f in ("batch", "m", "n", "k")})
            elif found is not None:
                core, fns.q_bytes, fns.kv_bytes = found
                fns.kind, fns.unit = "attention", tplan._mma_unit(k.work)
                fields = ("batch", "heads", "seq_q", "seq_new", "past", "dk", "dv")
                fns.spec = (core, {f: _fn(getattr(core, f), self.symbols) for f in fields},
                            _fn(core.kv_heads if core.kv_heads is not None else core.heads, self.symbols))
            self.kernels.append(fns)
        self.warm = [t for t in graph.inputs if not graph.tensors[t].is_weight]

    def times(self, values: list[np.ndarray], hw, menu, weights_cold: tuple[str, ...] = ()) -> np.ndarray:
        """Estimated time of every row (sum over the graph's kernels), as the estimator computes it."""
        sizes = {t: f(values) for t, f in self.sizes.items()}
        accesses = [(k.reads, k.writes) for k in self.kernels]
        warm = [t for t in self.warm if t not in weights_cold]
        hits = stack_hits(accesses, sizes, hw.l2_bytes * hw.efficiency["l2_resident"], warm)
        hwp = tplan.hw_params(hw)
        total = np.zeros(values[0].shape)
        for k, hit in zip(self.kernels, hits, strict=True):
            resident = resident_bytes(hit, sizes) + np.zeros(values[0].shape)
            dram = k.dram(values)
            if k.kind == "gemm":
                spec, f = k.spec
                arr = GemmSpec(spec.node, *(f[x](values) for x in ("batch", "m", "n", "k")), spec.a, spec.b,
                               spec.c)
                a_l2 = hit.get(spec.a.name, False) + np.zeros(values[0].shape, bool)
                b_l2 = hit.get(spec.b.name, False) + np.zeros(values[0].shape, bool)
                g = tplan.gemm_problem(arr, k.unit, dram, resident, a_l2, b_l2, hw, menu)
                plan = tplan.gemm_plan(g, k.unit, None, hw, hwp, menu, NO_RESIDENCY)
            elif k.kind == "attention":
                core, f, kvh = k.spec
                arr = replace(core, **{x: fn(values) for x, fn in f.items()}, kv_heads=kvh(values))
                a = tplan.attention_problem(arr, k.q_bytes, k.kv_bytes, k.unit, dram, resident, hw)
                plan = tplan.attention_plan(a, k.unit, None, hw, hwp, menu, NO_RESIDENCY)
            else:
                flops = {u: fn(values) for u, fn in k.flops.items()}
                total = total + tplan.stream_time(flops, dram, resident, hw)[3]
                continue
            total = total + plan.estimate_s  # the tile each row's own argmin picks (symmath.argmin)
        return total


# ---- the three tables -----------------------------------------------------------------------------

@dataclass
class Table:
    name: str
    rows: dict
    parts: list  # (row mask, Template, dim value arrays)
    regimes: list  # (label, mask)
    cold: tuple[str, ...] = ()

    def times(self, hw, menu, idx=None) -> np.ndarray:
        n = len(self.rows["t"])
        out = np.zeros(n)
        for mask, template, values in self.parts:
            sel = mask if idx is None else mask & idx
            if sel.any():
                out[sel] = template.times([v[sel] for v in values], hw, menu, self.cold)
        return out


def gemm_table(data: Path, dtype: str = "bfloat16") -> Table:
    rows = read_table(data / "gemm.csv.gz")
    rows = select(rows, rows["dtype"] == dtype)
    t = Template(kernel_graphs.gemm("m", "n", "k", weight_initializer=False), ("m", "n", "k"))
    m = rows["m"]
    regimes = [("m <= 64", m <= 64), ("64 < m <= 1024", (m > 64) & (m <= 1024)), ("m > 1024", m > 1024)]
    return Table(f"gemm {dtype}", rows, [(np.ones(len(m), bool), t, [rows["m"], rows["n"], rows["k"]])],
                 regimes, cold=("w",))


def attention_table(data: Path, which: str) -> Table:
    rows = read_table(data / f"{which}_attention.csv.gz")
    parts = []
    for adt in np.unique(rows["attn_dtype"]):
        for kvdt in np.unique(rows["kv_cache_dtype"]):
            mask = (rows["attn_dtype"] == adt) & (rows["kv_cache_dtype"] == kvdt)
            if not mask.any():
                continue
            fp8 = kernel_graphs.fp8_tensors(which, str(adt), str(kvdt))
            if which == "context":
                model = kernel_graphs.context_attention("b", "s", "h", "kv", "d")
                values = [rows["batch_size"], rows["isl"], rows["num_heads"], rows["num_key_value_heads"],
                          rows["head_dim"]]
                names = ("b", "s", "h", "kv", "d")
            else:
                model = kernel_graphs.generation_attention("b", "step", "h", "kv", "d")
                values = [rows["batch_size"], rows["step"], rows["num_heads"], rows["num_key_value_heads"],
                          rows["head_dim"]]
                names = ("b", "step", "h", "kv", "d")
            parts.append((mask, Template(model, names, fp8), values))
    if which == "context":
        s = rows["isl"]
        regimes = [("isl <= 1024", s <= 1024), ("isl > 1024", s > 1024)]
    else:
        s = rows["step"]
        regimes = [("step < 1024", s < 1024), ("step >= 1024", s >= 1024)]
    # The benchmark's KV cache is not kept warm in L2 (rows of 40-80 MB of cache run at ~1.5 TB/s, below
    # DRAM speed): only the new activations are warm.
    return Table(f"{which} attention", rows, parts, regimes, cold=("past_key", "past_value"))


# ---- fitting --------------------------------------------------------------------------------------

def nelder_mead(f, x0: np.ndarray, step: float = 0.2, iters: int = 400, tol: float = 1e-6):
    """Minimize f from x0 (a small, dependency-free Nelder-Mead)."""
    pts = [np.array(x0, float)] + [np.array(x0, float) + step * np.eye(len(x0))[i] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = int(np.argmin(vals))
    return pts[i], vals[i]


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


def rounded(consts: dict) -> dict:
    return {k: float(f"{v:.3g}") for k, v in consts.items()}


def sample(n: int, size: int, seed: int) -> np.ndarray:
    idx = np.zeros(n, bool)
    idx[np.random.default_rng(seed).choice(n, min(size, n), replace=False)] = True
    return idx


def residuals(table: Table, hw, menu) -> list[str]:
    est = table.times(hw, menu)
    err = est / table.rows["t"] - 1
    lines = [f"{table.name}: {len(err)} rows"]
    for label, mask in [*table.regimes, ("all", np.ones(len(err), bool))]:
        e = np.abs(err[mask])
        lines.append(f"  {label:<16} n={mask.sum():>6}  median |err| {100 * np.median(e):5.1f}%  "
                     f"p90 {100 * np.percentile(e, 90):5.1f}%  "
                     f"median signed {100 * np.median(err[mask]):+5.1f}%")
    return lines


# ---- writing the descriptors ----------------------------------------------------------------------

SOURCE = "tools/calibrate.py, fitted on the H100 SXM tables; the same on every GPU"


def source_line(family: str | None) -> str:
    """The `source:` of a written constant: where it was fitted and where it is carried."""
    if family is None:
        return SOURCE
    return SOURCE.replace("every GPU", f"every {family} GPU (written to that family only)")


def write_descriptors(consts: dict, directory: Path | None = None, family: str | None = None) -> list[str]:
    """Set `efficiency.<key>` to {value, source} in every GPU descriptor of `directory` (default: the
    bundled ones), or only in those of `family`; the whole entry is replaced: value, source, confidence
    and note lines."""
    done = []
    for path in sorted((directory or hwdesc.bundled_dir()).glob("*.yaml")):
        text = path.read_text()
        if "\nefficiency:\n" not in text:
            continue
        if family is not None and not re.search(rf"(?m)^family: {re.escape(family)}\s*$", text):
            continue
        head, _, block = text.partition("\nefficiency:\n")
        for key, value in consts.items():
            entry = f"  {key}:\n    value: {value:.3g}\n    source: \"{source_line(family)}\"\n"
            found = re.search(rf"(?m)^  {key}:\n(?:    .*\n|      .*\n)*", block)
            if found:
                block = block[:found.start()] + entry + block[found.end():]
            else:
                block = block.rstrip("\n") + "\n" + entry
        path.write_text(head + "\nefficiency:\n" + block)
        done.append(path.name)
    return done


FP8_KEYS = ("tensor_fp8", "block_scale", "block_scale_oob_s", "block_scale_straddle_s", "block_scale_store",
            "block_quant_round_s")
FP8_START = {"tensor_fp8": 0.6, "block_scale": 0.3, "block_scale_oob_s": 3e-11,
             "block_scale_straddle_s": 5e-8, "block_scale_store": 0.5, "block_quant_round_s": 1e-6}


def fit_fp8(data: Path, hw, n: int, seed: int, keys: tuple[str, ...] = FP8_KEYS[:2]) -> dict:
    """The fp8 constants `keys` by Nelder-Mead (logit space for fractions, log space for times) on `n`
    fp8 GEMM rows, both kinds (see the module docstring), every other constant as the descriptor has
    it."""
    import validate_kernels as vk

    unknown = [k for k in keys if k not in FP8_KEYS]
    if unknown:
        raise SystemExit(f"error: --fp8-keys: not fp8 constants: {', '.join(unknown)} "
                         f"(choose from {', '.join(FP8_KEYS)})")

    rows = vk.rows_of(data, "fp8")
    if all(k.startswith("block_") for k in keys):  # constants of the block-scaled rows alone
        rows = select(rows, rows["dtype"] == "fp8_block")
    idx = np.nonzero(sample(len(rows["t"]), n, seed))[0]
    models = [vk.model_of("fp8", {k: v[i] for k, v in rows.items()}) for i in idx]
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
        raise SystemExit(f"error: --gemm-keys: not GEMM constants: {', '.join(unknown)} "
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
        print("wrote " + ", ".join(write_descriptors(consts)))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--comm" in argv:  # the collective constants: tools/calibrate_comm.py (its own options follow)
        import calibrate_comm

        return calibrate_comm.main([a for a in argv if a != "--comm"])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--arch", default="h100-sxm")
    ap.add_argument("--sample", type=int, default=6000, help="rows per table used by the search")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", action="store_true", help="write the fitted constants into hwdesc/*.yaml")
    ap.add_argument("--no-fit", action="store_true", help="only print the residuals of the current YAML")
    ap.add_argument("--fp8", action="store_true",
                    help="fit only tensor_fp8 and block_scale on the fp8 GEMM rows")
    ap.add_argument("--fp8-sample", type=int, default=200)
    ap.add_argument("--fp8-keys", default="tensor_fp8,block_scale",
                    help=f"comma list, with --fp8: the constants fitted (from {', '.join(FP8_KEYS)})")
    ap.add_argument("--attention", action="store_true",
                    help="fit only the attention constants (stage 2 without l2), the rest as the YAML has it")
    ap.add_argument("--decode", action="store_true",
                    help="fit only the decode-only attention constants on the generation table")
    ap.add_argument("--gemm-keys", help="comma list: fit only these GEMM constants, on the GEMM table "
                    "alone (stage 1; the attention constants and tables untouched)")
    args = ap.parse_args(argv)
    if args.fp8:
        hw = hwdesc.load(args.arch)
        consts = fit_fp8(args.data, hw, args.fp8_sample, args.seed, tuple(args.fp8_keys.split(",")))
        print("  ".join(f"{k}: {v:.3g}" for k, v in consts.items())
              + f"  (fitted on {args.fp8_sample} fp8 GEMM rows of {args.data})")
        if args.write:  # fp8 MMA pipelines differ by family: the fit goes to the fitted family only
            print("wrote " + ", ".join(write_descriptors(consts, family=hw.family)))
        return 0

    hw = hwdesc.load(args.arch)
    menu = menu_for(hw.family)
    gemm = gemm_table(args.data)
    if args.gemm_keys:
        return fit_gemm_only(tuple(args.gemm_keys.split(",")), gemm, hw, menu, args)
    ctx = attention_table(args.data, "context")
    gen = attention_table(args.data, "generation")
    consts = {k: hw.efficiency.get(k, START[k]) for k in (*GEMM_KEYS, *ATTENTION_KEYS)}
    if args.decode and not args.no_fit:  # every constant a prefill kernel reads stays as it is
        consts = rounded(fit(DECODE_KEYS, [(gen, sample(len(gen.rows["t"]), args.sample, args.seed))], hw,
                             menu, consts))
    elif args.attention and not args.no_fit:  # the GEMM constants (and l2) stay as the descriptor has them
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
        print(f"{key}: {consts[key]:.3g}")
    print("\n# residuals |estimate - measured| / measured, every row, warm inputs")
    for table in (gemm, ctx, gen):
        print("\n".join(residuals(table, fitted, menu)))
    if args.write:
        written = {k: consts[k] for k in DECODE_KEYS} if args.decode else \
            {k: consts[k] for k in ATTENTION_KEYS} if args.attention else consts
        print("wrote " + ", ".join(write_descriptors(written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
