"""Validate the estimator on measured kernel tables: bound violations and estimate error per regime.

    estimate validate kernels --data ../shared/calibration/h100_sxm [--arch h100-sxm] [--warm-inputs]
                              [--tables gemm,fp8,fp8_block,context,generation,mla_context,mla_generation,
                                        mla_bmm,moe,nccl,allreduce]
                              [--sample N] [--json OUT] [--markdown]

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
L2 (estimator/calibration/tables.py). `--sample N` prices a seeded sample of N rows per table (the full
tables take ~15 minutes on one core).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

import hwdesc
from estimator.calibration import kernel_graphs, mla_graphs, validate_comm
from estimator.calibration.markdown import pct, table
from estimator.calibration.tables import check_data, read_table, select
from estimator.errors import UserError
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.pricing import mla, moe
from passes import DEFAULT_STRATEGY, pipeline_for

# the GEMM tables are views of gemm.csv.gz by dtype: fp8 holds both fp8 kinds, fp8_block the block-scaled
# rows alone
GEMM_TABLES = {"gemm": lambda d: d == "bfloat16", "fp8": lambda d: d != "bfloat16",
               "fp8_block": lambda d: d == "fp8_block"}
# TensorRT-LLM's MLA op tables (mla_graphs.py) and the MoE layer table (validate_moe.py)
MLA_TABLES = {"mla_context": "mla_context.csv.gz", "mla_generation": "mla_generation.csv.gz",
              "mla_bmm": "mla_bmm.csv.gz"}
NOISE = 0.03  # a violation within 3% of the bound is measurement noise (clock boost, timer resolution)


def fp8_gemm(m: int, n: int, k: int, block: int) -> tuple:
    """The activation's quantization as the frameworks run it, then MatMul with an fp8 weight.
    Per-tensor (block 0): the scale is the activation's amax / 448 (one amax kernel reading x once more,
    written as a ReduceMax: the |x| is inside that kernel), then QuantizeLinear. 1 x `block` scales:
    one fused kernel computes each block's amax and quantizes (QuantizeLinear with block_size; its
    scales are an output-sized input)."""
    info = helper.make_tensor_value_info
    x, y = info("x", TensorProto.BFLOAT16, [m, k]), info("y", TensorProto.BFLOAT16, [m, n])
    inits = [kernel_graphs._external("w", [k, n], TensorProto.FLOAT8E4M3FN)]
    attrs = {"axis": 1, "block_size": block} if block else {}
    nodes = []
    if block:
        inits.append(kernel_graphs._external("x_scale", [m, k // block], TensorProto.FLOAT))
    else:
        inits.append(helper.make_tensor("fp8_max", TensorProto.BFLOAT16, [], [448.0]))
        nodes += [helper.make_node("ReduceMax", ["x"], ["amax"], name="amax", keepdims=0),
                  helper.make_node("Div", ["amax", "fp8_max"], ["x_scale_bf16"], name="scale"),
                  helper.make_node("Cast", ["x_scale_bf16"], ["x_scale"], name="scale_cast",
                                   to=TensorProto.FLOAT)]
    nodes += [helper.make_node("QuantizeLinear", ["x", "x_scale"], ["xq"], name="quantize", **attrs),
              helper.make_node("MatMul", ["xq", "w"], ["y"], name="gemm")]
    model = kernel_graphs._model(nodes, [x], [y], inits)
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
        return model, ({"xq": "fp8e4m3"} if block else {}), ("x",)
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
    if table in ("gemm", "fp8_block"):
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


def moe_price(row: dict, hw) -> tuple[float, float]:
    """A MoE layer row (moe.csv.gz) priced by estimator/pricing/moe.py with the descriptor's constants."""
    if not all(k in hw.efficiency for k in moe.MOE_KEYS):
        raise UserError(f"--tables moe: {hw.name} has no MoE constants ({', '.join(moe.MOE_KEYS)})")
    w = moe.layer_work(int(row["num_tokens"]), int(row["hidden_size"]), int(row["inter_size"]),
                       int(row["topk"]),
                       int(row["num_experts"]), int(row["moe_tp_size"]), int(row["moe_ep_size"]),
                       str(row["moe_dtype"]), str(row["distribution"]),
                       row["kernel_source"] != "moe_torch_flow_nongated", hw.sm_count,
                       row["kernel_source"] == "moe_torch_flow_min_latency")
    peak = hw.tensor_flops_per_s.get(w["mma"], hw.tensor_flops_per_s["bf16"])
    bound, est = moe.layer_time(w, peak, hw.sm_count, hw.dram_bytes_per_s, dict(hw.efficiency))
    return float(bound), float(est)


def run_table(table: str, data: Path, hw, warm: bool, sample: int, seed: int) -> dict:
    comm = table in validate_comm.TABLES  # collectives: validate_comm.py
    rows = validate_comm.rows_of(data, table) if comm else rows_of(data, table)
    n = len(rows["t"])
    idx = np.arange(n)
    if sample and sample < n:
        idx = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    rows = {k: v[idx] for k, v in rows.items()}
    bound, est = np.zeros(len(idx)), np.zeros(len(idx))
    start = time.time()
    cache: dict[tuple, tuple[float, float]] = {}  # one estimate per distinct shape and dtypes
    for j in range(len(idx)):
        row = {k: v[j] for k, v in rows.items()}
        if comm:
            key = validate_comm.key_of(table, row)
        else:
            key = tuple(v for k, v in sorted(row.items()) if k != "t")
        if key in cache:
            pass
        elif comm:
            cache[key] = validate_comm.price(table, row, hw)
        elif table == "moe":
            cache[key] = moe_price(row, hw)
        else:
            model, retype, warm_names = model_of(table, row, mla.quantizes_query(hw.family),
                                                 mla.bmm_fp8_kind(hw.family))
            # the absorbed BMMs' activation is the previous op's output, resident in L2 when it fits (the
            # MLA tables' collector rotates weights only): warm whatever --warm-inputs says
            cache[key] = price(model, hw, retype, warm_names if warm or table == "mla_bmm" else False)
        bound[j], est[j] = cache[key]
    meas = rows["t"]
    out = {"table": table, "sampled": bool(sample and sample < n), "rows_in_table": n,
           "seconds": round(time.time() - start, 1), "all": summarize(meas, bound, est), "regimes": {}}
    for label, mask in (validate_comm.regimes if comm else regimes)(table, rows):
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


ALL_TABLES = (*GEMM_TABLES, "context", "generation", *MLA_TABLES, "moe", *validate_comm.TABLES)
TABLE_FILES = {**dict.fromkeys(GEMM_TABLES, "gemm.csv.gz"), "context": "context_attention.csv.gz",
               "generation": "generation_attention.csv.gz", **MLA_TABLES, "moe": "moe.csv.gz",
               **validate_comm.TABLES}


@dataclass(frozen=True)
class KernelCheck:
    """What `estimate validate kernels` (or `comm`) was asked (the command line, read once)."""

    data: Path
    tables: tuple[str, ...]
    arch: str = "h100-sxm"
    warm_inputs: bool = False
    sample: int = 0
    seed: int = 0
    json: Path | None = None
    markdown: bool = False


def run(args: KernelCheck) -> int:
    unknown = [t for t in args.tables if t not in ALL_TABLES]
    if unknown:
        raise UserError(f"--tables: unknown table(s) {', '.join(unknown)}; known: {', '.join(ALL_TABLES)}")
    check_data(args.data, *dict.fromkeys(TABLE_FILES[t] for t in args.tables))
    if args.sample < 0:
        raise UserError(f"--sample {args.sample}: must be >= 0")
    hw = hwdesc.load(args.arch)
    results = []
    for name in args.tables:
        result = run_table(name, args.data, hw, args.warm_inputs, args.sample, args.seed)
        results.append(result)
        print(markdown(result) + "\n" if args.markdown else "\n".join(show(result)), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"arch": hw.name, "warm_inputs": args.warm_inputs, "tables": results},
                                        indent=1))
    return 0
