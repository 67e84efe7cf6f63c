"""The measured kernel tables of a calibration folder, and a table's graph as numpy functions of its dims.

A folder (e.g. ../shared/calibration/h100_sxm beside a checkout; its README describes the tables) holds
gzipped CSVs: gemm.csv.gz (bf16 and fp8 GEMMs), context_attention.csv.gz and generation_attention.csv.gz
(prefill and decode attention), nccl.csv.gz and custom_allreduce.csv.gz (collectives) and
e2e_serving.csv.gz (end-to-end TTFT / TPOT of deployments). The estimator never reads them: only
`estimate calibrate` (which fits the descriptors' constants on them) and `estimate validate` do.

Each row of a kernel table becomes the graph estimator/calibration/kernel_graphs.py builds for it; the
graph of a table is imported once with symbolic dims, lowered by the estimator, and its kernels' Work, tile
problems and tensor sizes are turned into numpy functions of the dims (`Template`), so that the estimator's
own tile model (estimator/pricing: plan.gemm_plan, plan.attention_plan, plan.stream_time,
residency.stack_hits) prices every row at once, each row's tile chosen by the tiling step's own rule.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import sympy

from estimator.calibration import kernel_graphs
from estimator.errors import UserError
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.kernel import CostCache, lower
from estimator.pricing import plan as tplan
from estimator.pricing.points import NO_RESIDENCY
from estimator.pricing.problem import GemmSpec, attention_of_kernel, gemm_of_kernel
from estimator.pricing.residency import boundary, resident_bytes, stack_hits
from passes import DEFAULT_STRATEGY, Pipeline, pipeline_for

# Where a checkout keeps the H100 tables: ../shared/calibration/h100_sxm beside the repository (the
# `--data` default of `estimate calibrate`; an installed package has none there and asks for --data).
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "calibration" / "h100_sxm"


def check_data(data: Path, *files: str) -> None:
    """A UserError (one `error:` line, exit 2) unless the folder `data` holds every one of `files`."""
    if not data.is_dir():
        raise UserError(f"--data {data}: no such folder")
    missing = [f for f in files if not (data / f).is_file()]
    if missing:
        raise UserError(f"--data {data}: no {', '.join(missing)} there")


# ---- tables ---------------------------------------------------------------------------------------

def read_csv(path: Path, *columns: str) -> list[dict[str, str]]:
    """The rows of a gzipped CSV; a UserError (exit 2) when it is not one, has no rows or lacks one of
    `columns`."""
    try:
        with gzip.open(path, "rt") as f:
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{path}: not a gzipped CSV ({exc})") from None
    if not rows:
        raise UserError(f"{path}: no rows")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise UserError(f"{path}: no column {', '.join(missing)}")
    return rows


def read_table(path: Path) -> dict[str, np.ndarray]:
    rows = read_csv(path, "latency_ms")
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

    def __init__(self, model, dim_names: tuple[str, ...], fp8: tuple[str, ...] = (),
                 dtypes: dict[str, str] | None = None):
        graph = import_model(model)
        graph = kernel_graphs.retype(graph, fp8)
        for dtype in sorted(set((dtypes or {}).values())):  # tensors re-typed to other dtypes (NVFP4)
            graph = kernel_graphs.retype(graph, tuple(n for n, d in dtypes.items() if d == dtype), dtype)
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
                total = total + tplan.stream_time(flops, dram, resident, hw)[4]
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


def nvfp4_table(data: Path) -> Table:
    """The nvfp4 rows of gemm.csv.gz (the fp4 quantize kernel, then the block-scaled fp4 GEMM:
    kernel_graphs.nvfp4_gemm), by m as the bf16 table."""
    rows = read_table(data / "gemm.csv.gz")
    rows = select(rows, rows["dtype"] == "nvfp4")
    model, dtypes = kernel_graphs.nvfp4_gemm("m", "n", "k", weight_initializer=False)
    t = Template(model, ("m", "n", "k"), dtypes=dtypes)
    m = rows["m"]
    regimes = [("m <= 64", m <= 64), ("64 < m <= 1024", (m > 64) & (m <= 1024)), ("m > 1024", m > 1024)]
    return Table("gemm nvfp4", rows, [(np.ones(len(m), bool), t, [rows["m"], rows["n"], rows["k"]])],
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


