"""Validate the estimator on measured kernel tables: bound violations and estimate error per regime.

    estimate validate kernels --data ../shared/calibration/h100_sxm [--arch h100-sxm] [--warm-inputs]
                              [--tables gemm,fp8,fp8_block,nvfp4,context,generation,mla_context,
                                        mla_generation,mla_bmm,moe,nccl,allreduce,...]
                              [--sample N] [--json OUT] [--markdown]

Without --tables, every table of the registry (TABLES, `register`) whose file the folder holds.

Every row becomes the ONNX graph estimator/calibration/kernel_graphs.py builds for it (a MatMul
y = x . W^T with W an
initializer; RoPE + opset-23 Attention for context attention; Attention over a KV cache for generation),
and runs through `estimator.estimate.estimate` as the CLI would (default fusion strategy, tiling on), in
one process. The bound and the estimate of a row are the sums over its graph's kernels.

Reported, per table and regime (GEMM: m <= 64, 64 < m <= 1024, m > 1024; attention: short and long
sequences): bound violations (measured below the bound: the model is wrong there), and
|estimate - measured| / measured as median and 90th percentile. fp8 GEMM rows (per-tensor `fp8` and
1x128 block-scaled `fp8_block`) time the activation's quantization too (a QuantizeLinear kernel is in
their graph) and are reported on their own; table `fp8_block` is the block-scaled rows alone (a sample
of N of them, by GEMM regime). `nccl` and `allreduce` are the collective tables
(nccl.csv.gz, custom_allreduce.csv.gz; validate_comm.py, `estimate validate comm`), per op or framework
and GPU count.

`--warm-inputs`: activations start resident in L2 when they fit, as in the benchmarks (which rotate
weights, not activations). The KV cache of generation rows is never warm: those tables do not keep it in
L2 (estimator/calibration/tables.py). `--sample N` prices a seeded sample of N rows per table.

Speed: without --warm-inputs a kernel table's graph is estimated once with its dims free, and every row
is priced at once at its dims as `--sweep` prices points (estimator/study/sweep.py: the pricing core on
arrays, each row's own tile, estimator/pricing/points.py), the same numbers as estimate() row by row
(tests/test_validate_tables.py; the block-scaled fp8 rows to 1e-4: their scales are a graph input
there); mla_context and mla_generation too. The MoE table's rows are each distinct row's layer Work
once and moe.layer_time on arrays of them. With --warm-inputs (L2 residency is not modelled at points),
for the absorbed BMMs (mla_bmm: their activation is always L2-warm) and for the collectives each
distinct row is estimated alone.

A table is one `TableSpec` in TABLES: its file, its rows, its regimes and how its rows are priced
(`swept` variants of a symbolic graph, or `row_by_row`); `register` adds one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import hwdesc
from estimator import jsonout
from estimator.calibration import kernel_graphs, mla_graphs, validate_comm
from estimator.calibration.markdown import pct, table
from estimator.calibration.tables import check_data, read_table, select
from estimator.errors import UserError
from estimator.estimate import estimate, lowered_graph
from estimator.frontends.onnx_import import import_model
from estimator.pricing import mla, moe
from estimator.study.sweep import Compiled
from passes import DEFAULT_STRATEGY, pipeline_for

# the GEMM tables are views of gemm.csv.gz by dtype: fp8 holds both fp8 kinds, fp8_block the block-scaled
# rows alone
GEMM_TABLES = {"gemm": lambda d: d == "bfloat16", "fp8": lambda d: (d == "fp8") | (d == "fp8_block"),
               "fp8_block": lambda d: d == "fp8_block", "nvfp4": lambda d: d == "nvfp4"}
# TensorRT-LLM's MLA op tables (mla_graphs.py) and the MoE layer table (pricing/moe.py)
MLA_TABLES = {"mla_context": "mla_context.csv.gz", "mla_generation": "mla_generation.csv.gz",
              "mla_bmm": "mla_bmm.csv.gz"}
NOISE = 0.03  # a violation within 3% of the bound is measurement noise (clock boost, timer resolution)


def fp8_gemm(m, n, k, block: int) -> tuple:
    """The activation's quantization as the frameworks run it, then MatMul with an fp8 weight.
    Per-tensor (block 0): the scale is the activation's amax / 448 (one amax kernel reading x once more,
    written as a ReduceMax: the |x| is inside that kernel), then QuantizeLinear. 1 x `block` scales:
    one fused kernel computes each block's amax and quantizes (QuantizeLinear with block_size; its
    scales are an output-sized input). Dims given as names (str) make a symbolic template: the weight
    and the block scales are then graph inputs (read once, as kernel_graphs.gemm's)."""
    info = helper.make_tensor_value_info
    x, y = info("x", TensorProto.BFLOAT16, [m, k]), info("y", TensorProto.BFLOAT16, [m, n])
    symbolic = isinstance(k, str)
    inputs, inits = [x], []
    if symbolic:
        inputs.append(info("w", TensorProto.FLOAT8E4M3FN, [k, n]))
    else:
        inits.append(kernel_graphs._external("w", [k, n], TensorProto.FLOAT8E4M3FN))
    attrs = {"axis": 1, "block_size": block} if block else {}
    nodes = []
    if block and symbolic:
        inputs.append(info("x_scale", TensorProto.FLOAT, [m, f"{k}/{block}"]))
    elif block:
        inits.append(kernel_graphs._external("x_scale", [m, k // block], TensorProto.FLOAT))
    else:
        inits.append(helper.make_tensor("fp8_max", TensorProto.BFLOAT16, [], [448.0]))
        nodes += [helper.make_node("ReduceMax", ["x"], ["amax"], name="amax", keepdims=0),
                  helper.make_node("Div", ["amax", "fp8_max"], ["x_scale_bf16"], name="scale"),
                  helper.make_node("Cast", ["x_scale_bf16"], ["x_scale"], name="scale_cast",
                                   to=TensorProto.FLOAT)]
    nodes += [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize", **attrs),
              helper.make_node("MatMul", ["xq", "w"], ["y"], name="gemm")]
    model = kernel_graphs._model(nodes, inputs, [y], inits)
    return model, {"xq": "fp8e4m3", "y": "bf16"}


def price(model, hw, retype: dict, warm) -> tuple[float, float]:
    graph = import_model(model)
    for dtype in set(retype.values()):
        graph = kernel_graphs.retype(graph, tuple(n for n, d in retype.items() if d == dtype), dtype)
    r = estimate(graph, hw, pipeline=pipeline_for(DEFAULT_STRATEGY), warm_inputs=warm)
    return float(r.totals["bound_s"]), float(r.totals["estimate_s"])


def rows_of(data: Path, table: str) -> dict:
    if table in GEMM_TABLES:
        rows = read_table(data / "gemm.csv.gz")
        return select(rows, GEMM_TABLES[table](rows["dtype"]))
    if table in MLA_TABLES:
        return read_table(data / MLA_TABLES[table])
    if table == "moe":
        return read_table(data / "moe.csv.gz")
    return read_table(data / f"{table}_attention.csv.gz")


def model_of(table: str, row: dict, quantize_query: bool = False, bmm_fp8: str = "block_scaled") -> tuple:
    """(model, {tensor: dtype to re-type to}, names of the warm inputs or True)."""
    i = {k: int(v) for k, v in row.items() if isinstance(v, (float, np.floating)) and k != "t"}
    if table == "gemm":
        return kernel_graphs.gemm(i["m"], i["n"], i["k"]), {}, True
    if table in ("fp8", "fp8_block"):
        block = 128 if row["dtype"] == "fp8_block" else 0
        model, retype = fp8_gemm(i["m"], i["n"], i["k"], block)
        return model, retype, True
    if table == "nvfp4":
        model, retype = kernel_graphs.nvfp4_gemm(i["m"], i["n"], i["k"])
        return model, retype, True
    if table in MLA_TABLES:
        return mla_model_of(table, row, i, quantize_query, bmm_fp8)
    names = kernel_graphs.fp8_tensors(table, str(row["attn_dtype"]), str(row["kv_cache_dtype"]))
    retype = dict.fromkeys(names, "fp8e4m3")
    if table == "context":
        model = kernel_graphs.context_attention(i["batch_size"], i["isl"], i["num_heads"],
                                                i["num_key_value_heads"], i["head_dim"])
        return model, retype, True
    model = kernel_graphs.generation_attention(i["batch_size"], i["step"], i["num_heads"],
                                               i["num_key_value_heads"], i["head_dim"])
    return model, retype, ("q", "k", "v")  # the KV cache is not warm in these benchmarks


def mla_model_of(table: str, row: dict, i: dict, quantize_query: bool = False,
                 bmm_fp8: str = "block_scaled") -> tuple:
    """An MLA table's row (mla_graphs.py): an fp8 cache re-types the cache (generation: the latent, and
    the query where the family's kernel quantizes it, `quantize_query`: pricing/mla.py; context: Q, K,
    V and the cache: the FP8 FMHA); an fp8 BMM has
    fp8 activations (its weight is fp8 in the graph)."""
    if table == "mla_bmm":
        block = row["bmm_dtype"] == "fp8" and bmm_fp8 == "block_scaled"
        model = mla_graphs.mla_bmm(str(row["op_name"]), i["num_tokens"], i["num_heads"], block)
        return model, ({"xq": "fp8e4m3", "y": "bf16"} if block else {}), ("x",)
    fp8 = row["kv_cache_dtype"] == "fp8"
    if table == "mla_context":
        model = mla_graphs.mla_context(i["batch_size"], i["isl"], i["num_heads"], fp8)
        return model, (dict.fromkeys(("qq", "kq", "vq", "cache"), "fp8e4m3") if fp8 else {}), True
    model = mla_graphs.mla_generation(i["batch_size"], i["step"], i["num_heads"])
    names = ("past", "new", "latent", "kt", "values") + (("q",) if quantize_query else ())
    return model, (dict.fromkeys(names, "fp8e4m3") if fp8 else {}), ("q",)


def regimes(table: str, rows: dict) -> list[tuple[str, np.ndarray]]:
    if table == "moe":
        t = rows["num_tokens"]
        dists = [(str(d), rows["distribution"] == d) for d in np.unique(rows["distribution"])]
        return [*dists, ("tokens <= 128", t <= 128), ("tokens > 128", t > 128)]
    if table in MLA_TABLES:
        if table == "mla_bmm":
            return [(f"{o} {d}", (rows["op_name"] == o) & (rows["bmm_dtype"] == d))
                    for o in np.unique(rows["op_name"]) for d in np.unique(rows["bmm_dtype"])]
        heads = rows["num_heads"]
        kv = [(f"kv {d}", rows["kv_cache_dtype"] == d) for d in np.unique(rows["kv_cache_dtype"])]
        return [*kv, ("heads < 64", heads < 64), ("heads >= 64", heads >= 64)]
    if table in ("gemm", "fp8_block", "nvfp4"):
        m = rows["m"]
        return [("m <= 64", m <= 64), ("64 < m <= 1024", (m > 64) & (m <= 1024)), ("m > 1024", m > 1024)]
    if table == "fp8":
        return [(f"{d}", rows["dtype"] == d) for d in np.unique(rows["dtype"])]
    if table == "context":
        return [("isl <= 1024", rows["isl"] <= 1024), ("isl > 1024", rows["isl"] > 1024)]
    return [("step < 1024", rows["step"] < 1024), ("step >= 1024", rows["step"] >= 1024)]


def summarize(meas: np.ndarray, bound: np.ndarray, est: np.ndarray) -> dict:
    err = np.abs(est - meas) / meas
    ratio = meas / bound
    return {"rows": int(len(meas)), "median_err": float(np.median(err)),
            "p90_err": float(np.percentile(err, 90)),
            "median_signed": float(np.median((est - meas) / meas)),
            "violations": int(np.sum(ratio < 1)), "violations_beyond_noise": int(np.sum(ratio < 1 - NOISE)),
            "worst_measured_over_bound": float(ratio.min())}


def moe_rows_price(rows: dict, hw, warm: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every MoE row at once: each distinct row's layer Work (moe.layer_work) once, then moe.layer_time
    on the arrays of them (elementwise: each row's numbers as that row alone would get them)."""
    if not all(k in hw.efficiency for k in moe.MOE_KEYS):
        raise UserError(f"--tables moe: {hw.name} has no MoE constants ({', '.join(moe.MOE_KEYS)})")
    n = len(rows["t"])
    index, works, where = {}, [], np.zeros(n, dtype=np.int64)
    for j in range(n):
        row = {k: v[j] for k, v in rows.items()}
        key = _kernel_key(row)
        if key not in index:
            index[key] = len(works)
            works.append(moe.layer_work(int(row["num_tokens"]), int(row["hidden_size"]),
                                        int(row["inter_size"]), int(row["topk"]), int(row["num_experts"]),
                                        int(row["moe_tp_size"]), int(row["moe_ep_size"]),
                                        str(row["moe_dtype"]), str(row["distribution"]),
                                        row["kernel_source"] != "moe_torch_flow_nongated", hw.sm_count,
                                        row["kernel_source"] == "moe_torch_flow_min_latency", hw.family))
        where[j] = index[key]
    w = {k: np.array([x[k] for x in works]) for k in works[0]}
    peak = np.array([hw.tensor_flops_per_s.get(m, hw.tensor_flops_per_s["bf16"]) for m in w["mma"]])
    bound, est = moe.layer_time(w, peak, hw.sm_count, hw.dram_bytes_per_s, dict(hw.efficiency))
    return (np.broadcast_to(np.asarray(bound, dtype=float), (len(works),))[where],
            np.broadcast_to(np.asarray(est, dtype=float), (len(works),))[where])


def _mla_row(table: str, row: dict, hw, warm: bool) -> tuple[float, float]:
    model, retype, warm_names = model_of(table, row, mla.quantizes_query(hw.family),
                                         mla.bmm_fp8_kind(hw.family))
    # the absorbed BMMs' activation is the previous op's output, resident in L2 when it fits (the MLA
    # tables' collector rotates weights only): warm whatever --warm-inputs says
    return price(model, hw, retype, warm_names if warm or table == "mla_bmm" else False)


# ---- the table registry -------------------------------------------------------------------------------

PriceRows = Callable[[dict, Any, bool], tuple[np.ndarray, np.ndarray]]  # (rows, hw, warm) -> bound, estimate


@dataclass(frozen=True)
class TableSpec:
    """One measured table: `file` in the folder, `rows(data)` its rows as arrays (`t`: seconds),
    `regimes(rows)` the (label, mask) it is reported by, `price_rows(rows, hw, warm)` the bound and the
    estimate of every row (`swept` or `row_by_row` below)."""

    name: str
    file: str
    rows: Callable[[Path], dict]
    regimes: Callable[[dict], list[tuple[str, np.ndarray]]]
    price_rows: PriceRows


TABLES: dict[str, TableSpec] = {}


def register(spec: TableSpec) -> TableSpec:
    """Add a table to `estimate validate kernels` (its name is what --tables selects)."""
    TABLES[spec.name] = spec
    return spec


def row_by_row(key: Callable[[dict], tuple], price_one: Callable[[dict, Any, bool], tuple[float, float]]
               ) -> PriceRows:
    """Each distinct row (by `key`) estimated alone: `price_one(row, hw, warm)` -> (bound_s, estimate_s)."""
    def price_rows(rows: dict, hw, warm: bool) -> tuple[np.ndarray, np.ndarray]:
        n = len(rows["t"])
        bound, est = np.zeros(n), np.zeros(n)
        cache: dict[tuple, tuple[float, float]] = {}  # one estimate per distinct shape and dtypes
        for j in range(n):
            row = {k: v[j] for k, v in rows.items()}
            key_ = key(row)
            if key_ not in cache:
                cache[key_] = price_one(row, hw, warm)
            bound[j], est[j] = cache[key_]
        return bound, est
    return price_rows


# A swept table's variants: (row mask, symbolic model, {tensor: dtype to re-type to}, {dim: values}).
Variants = Callable[[dict], Iterator[tuple[np.ndarray, Any, dict, dict[str, np.ndarray]]]]


def swept(variants: Variants, fallback: PriceRows, same_kernels: bool = True) -> PriceRows:
    """Every row priced at once: each variant's symbolic graph estimated once (dims free, the default
    pipeline, the tile model), then evaluated at the rows' dims as the sweep evaluates points
    (estimator/study/sweep.py Compiled: each row its own tile through the pricing core at arrays).
    Rows where some dims are 1 take a build with those dims bound, as `--sweep` does (Sweeper), unless
    binding them leaves the lowered kernels as they are (the same ops, in the same order: then the
    generic formulas hold there, and the costly build is skipped; `_same_kernels`). `fallback` (row by
    row) with warm inputs: residency is not modelled at points. `same_kernels=False`: every such set of
    dims bound to 1 takes its build (the MLA tables: a decode's one sequence or one head prices apart from
    the generic formulas though its kernels' ops stay the same)."""
    def price_rows(rows: dict, hw, warm: bool) -> tuple[np.ndarray, np.ndarray]:
        if warm:
            return fallback(rows, hw, warm)
        n = len(rows["t"])
        bound, est = np.zeros(n), np.zeros(n)
        for mask, model, retype, dims in variants(rows):
            if mask.any():
                graph = import_model(model)
                for dtype in set(retype.values()):
                    names = tuple(t for t, d in retype.items() if d == dtype)
                    graph = kernel_graphs.retype(graph, names, dtype)
                bound[mask], est[mask] = _points(graph, hw, {d: v[mask] for d, v in dims.items()},
                                                 same_kernels)
        return bound, est
    return price_rows


def _points(graph, hw, values: dict[str, np.ndarray],
            same_kernels: bool = True) -> tuple[np.ndarray, np.ndarray]:
    pipeline = pipeline_for(DEFAULT_STRATEGY)

    def build(extra: dict) -> Any:
        return estimate(graph, hw, pipeline=pipeline, dims=extra, warm_inputs=False)

    compiled = Compiled(build({}))
    points = compiled.evaluate(values)
    free = compiled.free
    code = np.zeros(len(points), dtype=np.int64)  # bit j set: free dim j is 1 at that row
    for j, d in enumerate(free):
        code |= (values[d] == 1).astype(np.int64) << j
    generic = None
    for c in np.unique(code[code > 0]):
        ones = {d: 1 for j, d in enumerate(free) if (int(c) >> j) & 1}
        generic = _kernel_ops(graph, hw, {}) if generic is None and same_kernels else generic
        if same_kernels and _kernel_ops(graph, hw, ones) == generic:
            continue
        mask = code == c
        sub = Compiled(build(ones)).evaluate({d: v[mask] for d, v in values.items() if d not in ones})
        points.patch(mask, sub)
    return points.bound_s, points.estimate_s


def _kernel_ops(graph, hw, dims: dict) -> tuple:
    """The lowered kernels' (kind, op, node count), `dims` bound: what binding a dim to 1 may change (a
    view instead of a copy, a dropped op), before any price."""
    kernels = lowered_graph(graph, hw, None, dims, pipeline_for(DEFAULT_STRATEGY))[2].kernels
    return tuple((k.kind, k.op, len(k.nodes)) for k in kernels)


def _one_kernel_row(table: str) -> Callable[[dict, Any, bool], tuple[float, float]]:
    def price_one(row: dict, hw, warm: bool) -> tuple[float, float]:
        model, retype, warm_names = model_of(table, row)
        return price(model, hw, retype, warm_names if warm else False)
    return price_one


def _kernel_key(row: dict) -> tuple:
    return tuple(v for k, v in sorted(row.items()) if k != "t")


def _gemm_variants(table: str) -> Variants:
    def variants(rows: dict):
        dims = {"m": rows["m"], "n": rows["n"], "k": rows["k"]}
        if table == "gemm":
            model = kernel_graphs.gemm("m", "n", "k", weight_initializer=False)
            yield np.ones(len(rows["t"]), bool), model, {}, dims
            return
        for dtype in np.unique(rows["dtype"]):
            if dtype == "nvfp4":  # the fp4 quantize kernel and the block-scaled fp4 GEMM (kernel_graphs.py)
                model, retype = kernel_graphs.nvfp4_gemm("m", "n", "k", weight_initializer=False)
            else:
                model, retype = fp8_gemm("m", "n", "k", 128 if dtype == "fp8_block" else 0)
            yield rows["dtype"] == dtype, model, retype, dims
    return variants


def _attention_variants(table: str) -> Variants:
    """One variant per (attn_dtype, kv_cache_dtype), and for context per head_dim too: a prefill head size
    picks the kernel's tiles, and one no tile takes is priced another way (a bound head size keeps each
    row's); decode takes its kernel per row at any head size. Batch, length and head counts are the
    swept dims."""
    def variants(rows: dict):
        context = table == "context"
        names = ("b", "s" if context else "step", "h", "kv") + (() if context else ("d",))
        values = [rows["batch_size"], rows["isl" if context else "step"], rows["num_heads"],
                  rows["num_key_value_heads"]] + ([] if context else [rows["head_dim"]])
        build = kernel_graphs.context_attention if context else kernel_graphs.generation_attention
        for adt in np.unique(rows["attn_dtype"]):
            for kvdt in np.unique(rows["kv_cache_dtype"]):
                retype = dict.fromkeys(kernel_graphs.fp8_tensors(table, str(adt), str(kvdt)), "fp8e4m3")
                mask = (rows["attn_dtype"] == adt) & (rows["kv_cache_dtype"] == kvdt)
                for d in np.unique(rows["head_dim"]) if context else ("d",):
                    sub = mask & (rows["head_dim"] == d) if context else mask
                    yield sub, build(*names[:4], int(d) if context else d), retype, dict(zip(names, values,
                                                                                           strict=True))
    return variants


for _name in GEMM_TABLES:
    register(TableSpec(_name, "gemm.csv.gz", lambda d, t=_name: rows_of(d, t),
                       lambda r, t=_name: regimes(t, r),
                       swept(_gemm_variants(_name), row_by_row(_kernel_key, _one_kernel_row(_name)))))
for _name in ("context", "generation"):
    register(TableSpec(_name, f"{_name}_attention.csv.gz", lambda d, t=_name: rows_of(d, t),
                       lambda r, t=_name: regimes(t, r),
                       swept(_attention_variants(_name), row_by_row(_kernel_key, _one_kernel_row(_name)))))
for _name, _file in validate_comm.TABLES.items():  # collectives: validate_comm.py
    register(TableSpec(_name, _file, lambda d, t=_name: validate_comm.rows_of(d, t),
                       lambda r, t=_name: validate_comm.regimes(t, r),
                       row_by_row(lambda row, t=_name: validate_comm.key_of(t, row),
                                  lambda row, hw, warm, t=_name: validate_comm.price(t, row, hw))))

def _mla_variants(table: str, hw) -> Variants:
    """MLA context and generation: one variant per kv_cache_dtype (its fp8 tensors as mla_model_of
    re-types them, the family's query quantization included), batch, length and heads swept."""
    def variants(rows: dict):
        length = "isl" if table == "mla_context" else "step"
        dims = {"b": rows["batch_size"], "s": rows[length], "h": rows["num_heads"]}
        for kvdt in np.unique(rows["kv_cache_dtype"]):
            row = {"kv_cache_dtype": kvdt, "batch_size": 1.0, length: 1.0, "num_heads": 1.0}
            _, retype, _ = mla_model_of(table, row, {"batch_size": 1, length: 1, "num_heads": 1},
                                        mla.quantizes_query(hw.family))
            fp8 = kvdt == "fp8"
            model = (mla_graphs.mla_context("b", "s", "h", fp8) if table == "mla_context"
                     else mla_graphs.mla_generation("b", "s", "h"))
            yield rows["kv_cache_dtype"] == kvdt, model, retype, dims
    return variants


def _mla_swept(table: str) -> PriceRows:
    """Every row at once (`swept`); row by row with --warm-inputs."""
    fallback = row_by_row(_kernel_key, lambda row, hw, warm: _mla_row(table, row, hw, warm))

    def price_rows(rows: dict, hw, warm: bool) -> tuple[np.ndarray, np.ndarray]:
        return swept(_mla_variants(table, hw), fallback, same_kernels=False)(rows, hw, warm)
    return price_rows


for _name, _file in MLA_TABLES.items():  # MLA ops (mla_graphs.py)
    # the absorbed BMMs each row alone: their activation is L2-resident (_mla_row), which the points do
    # not model
    price_rows = (row_by_row(_kernel_key, lambda row, hw, warm, t=_name: _mla_row(t, row, hw, warm))
                  if _name == "mla_bmm" else _mla_swept(_name))
    register(TableSpec(_name, _file, lambda d, t=_name: rows_of(d, t), lambda r, t=_name: regimes(t, r),
                       price_rows))
register(TableSpec("moe", "moe.csv.gz", lambda d: rows_of(d, "moe"), lambda r: regimes("moe", r),
                   moe_rows_price))


def run_table(table: str, data: Path, hw, warm: bool, sample: int, seed: int) -> dict | None:
    """One table's accuracy (None where the folder's file holds no row of it)."""
    spec = TABLES[table]
    rows = spec.rows(data)
    n = len(rows["t"])
    if not n:
        return None
    idx = np.arange(n)
    if sample and sample < n:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    rows = {k: v[idx] for k, v in rows.items()}
    start = time.time()
    bound, est = spec.price_rows(rows, hw, warm)
    meas = rows["t"]
    out = {"table": table, "sampled": bool(sample and sample < n), "rows_in_table": n,
           "seconds": round(time.time() - start, 1), "all": summarize(meas, bound, est), "regimes": {}}
    for label, mask in spec.regimes(rows):
        if mask.any():
            out["regimes"][label] = summarize(meas[mask], bound[mask], est[mask])
    return out


def show(result: dict) -> list[str]:
    head = (f"{result['table']}: {result['all']['rows']} rows"
            + (f" (seeded sample of {result['rows_in_table']})" if result["sampled"] else "")
            + f", {result['seconds']} s")
    lines = [head, f"  {'regime':<16} {'rows':>6} {'median':>7} {'p90':>7} {'signed':>7} "
                   f"{'viol.':>6} {'>3%':>5} {'worst meas/bound':>17}"]
    for label, s in [*result["regimes"].items(), ("all", result["all"])]:
        lines.append(f"  {label:<16} {s['rows']:>6} {100 * s['median_err']:>6.1f}% "
                     f"{100 * s['p90_err']:>6.1f}% {100 * s['median_signed']:>+6.1f}% {s['violations']:>6} "
                     f"{s['violations_beyond_noise']:>5} {s['worst_measured_over_bound']:>17.3f}")
    return lines


def markdown(result: dict) -> str:
    """One table's accuracy as a Markdown table (no wall time: the figures alone, for docs). Errors are
    |estimate - measured| / measured (median, 90th percentile) and the signed median (+ = over-predicted)."""
    head = (f"**{result['table']}**: {result['all']['rows']} rows"
            + (f" (seeded sample of {result['rows_in_table']})" if result["sampled"] else ""))
    rows = [(label, s["rows"], pct(s["median_err"]), pct(s["p90_err"]), pct(s["median_signed"], True),
             s["violations"], s["violations_beyond_noise"], f"{s['worst_measured_over_bound']:.3f}")
            for label, s in [*result["regimes"].items(), ("all", result["all"])]]
    return head + "\n\n" + table(("regime", "rows", "median error", "p90 error", "median signed",
                                    "below bound", "below by > 3%", "worst measured / bound"), rows)


@dataclass(frozen=True)
class KernelCheck:
    """What `estimate validate kernels` (or `comm`) was asked (the command line, read once). `tables`
    empty: every registered table whose file is in `data`."""

    data: Path
    tables: tuple[str, ...]
    arch: str = "h100-sxm"
    warm_inputs: bool = False
    sample: int = 0
    seed: int = 0
    json: Path | None = None
    markdown: bool = False


def run(args: KernelCheck) -> int:
    unknown = [t for t in args.tables if t not in TABLES]
    if unknown:
        raise UserError(f"--tables: unknown table(s) {', '.join(unknown)}; known: {', '.join(TABLES)}")
    if args.sample < 0:
        raise UserError(f"--sample {args.sample}: must be >= 0")
    tables = args.tables
    if not tables:
        check_data(args.data)
        tables = tuple(t for t, spec in TABLES.items() if (args.data / spec.file).is_file())
        if not tables:
            files = ", ".join(dict.fromkeys(s.file for s in TABLES.values()))
            raise UserError(f"--data {args.data}: no table of {files}")
    check_data(args.data, *dict.fromkeys(TABLES[t].file for t in tables))
    hw = hwdesc.load(args.arch)
    results = []
    for name in tables:
        result = run_table(name, args.data, hw, args.warm_inputs, args.sample, args.seed)
        if result is None:
            print(f"{name}: no rows in {TABLES[name].file}" + ("\n" if args.markdown else ""), flush=True)
            continue
        results.append(result)
        print(markdown(result) + "\n" if args.markdown else "\n".join(show(result)), flush=True)
    if args.json:
        doc = {"arch": hw.name, "warm_inputs": args.warm_inputs, "tables": results}
        args.json.write_text(jsonout.dumps(doc, indent=1))
    return 0
