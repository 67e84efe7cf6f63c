"""Fit the collective model's constants on a GPU's tables and print the fit; `--write` puts them into
the --arch GPU's family file `collectives` (hwdesc/families/hopper.yaml from the H100 tables,
blackwell.yaml from the B200 tables; a family without a fit of its own inherits or carries Hopper's) and,
from a table holding every framework's rows (H100's), the framework overheads into
estimator/pricing/custom_allreduce.yaml.

    estimate calibrate --comm [--data ../shared/calibration/h100_sxm] [--arch h100-sxm] [--write]
                              [--keep-nccl] [--comm-split]
    estimate calibrate --comm --arch b200 --data ../shared/calibration/b200_sxm --comm-split --write

`--comm-split`: fit on every other message size of each curve (fit_mask), print the residuals of the
fitted rows and of the disjoint rest (the check). The constants are mechanisms, not rows: per op and
protocol a latency floor (alpha_s, the launch and first step), a per-ring-step latency (step_s, times
the steps of the op at the GPU count) and a bus efficiency at 2, 4 and 8 GPUs (a fraction of the
descriptor's own NVLink bandwidth); the NVLS line; the per-peer LL threshold of the p2p kernels; the
custom kernels' lines. So they carry to every SKU of the family through its descriptor (GB200, B300
from B200: link bandwidth, NVLink domain, SHARP).

Tables (serving.md section 0): nccl.csv.gz (nccl-tests, no CUDA graph: 4 ops x {half, int8} x {2, 4, 8}
GPUs x 21 sizes; `message_elements` is the total buffer) and custom_allreduce.csv.gz (bf16 custom
all-reduce of TensorRT-LLM, vLLM and SGLang, graph and eager, 2/4/8 GPUs, 23 sizes).

The model is estimator/pricing/collectives.py's; here it is evaluated on numpy arrays (`nccl_times`,
`custom_times`), and `estimate validate comm` checks the written constants through the estimator
itself. Stages, each a Nelder-Mead search (estimator/calibration/search.py) in log space for times and
efficiencies, minimizing the sum over group sizes of the median plus the 90th percentile of
|est - meas| / meas:
  1. per NCCL op: per protocol (LL, LL128, Simple) alpha_s, step_s and the bus efficiency at 2, 4 and 8
     GPUs; for all-reduce also the NVLS line (alpha_s, efficiency; fp16 at 8 GPUs, NVLS's min_gpus);
     then seeded restarts around the best point (the min over lines has local optima). All-to-all is
     NCCL's p2p kernel (collectives._p2p): the LL line (one efficiency, a peer's stream), the simple and
     simple_wide lines, and the per-peer LL threshold, the candidate of P2P_LL_CANDIDATES that fits best;
  2. custom all-reduce: one-shot, two-shot (efficiency at 2/4/8 GPUs) and multimem kernels (alpha_s,
     step_s, efficiency), each framework's graph_overhead_s and eager host times (by group size, and
     for the routes after the first), with each framework's choice (custom_allreduce.yaml routes, the
     GPU family's where the framework has its own: TensorRT-LLM on Blackwell) and the stage-1 NCCL
     lines where a framework falls back to NCCL. A table with some frameworks only (B200's: TensorRT-LLM
     under CUDA graphs) fits the kernels those frameworks run, the overheads kept (fit_kernels_only).
The estimator never reads these tables.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import hwdesc
from estimator.calibration import comm_constants
from estimator.calibration.descriptors import ROOT
from estimator.calibration.search import nelder_mead
from estimator.calibration.tables import check_data, read_csv
from estimator.errors import UserError
from estimator.pricing import collectives
from hwdesc.interconnect import EFFICIENCY_GROUPS, PROTOCOLS

OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
       "alltoall": "all_to_all"}
ELEMENT_BYTES = {"half": 2, "int8": 1, "bfloat16": 2}
SOURCES = {"TRTLLM": ("trtllm", True), "vLLM_custom_graph": ("vllm", True),
           "vLLM_custom_eager": ("vllm", False),
           "SGLang_CustomAllReduce_graph": ("sglang", True),
           "SGLang_CustomAllReduce_eager": ("sglang", False)}
# Start: serving.md section 3's three-line fits, as (alpha_s, step_s, efficiency at 2/4/8)
START = {"ll": (4e-6, 0.5e-6, 0.05), "ll128": (6e-6, 0.5e-6, 0.45), "simple": (25e-6, 1e-6, 0.7)}
P2P_LL_CANDIDATES = (16384, 32768, 65536)  # NCCL_P2P_LL_THRESHOLD (16 KiB) x 1, 2, 4 channels per peer


COLUMN_ALIASES = {"message_size": "message_elements", "allreduce_dtype": "dtype"}  # b200_sxm's custom table


def read(path: Path) -> dict[str, np.ndarray]:
    """A collective table's rows as arrays, plus n (GPUs), bytes, t (seconds) and dtype_name. The B200
    custom all-reduce table names two columns as its source does (message_size, allreduce_dtype): read
    as the H100 table's message_elements and dtype."""
    rows = read_csv(path, "num_gpus", "latency_ms")
    rows = [{COLUMN_ALIASES.get(k, k): v for k, v in r.items()} for r in rows]
    missing = [c for c in ("message_elements",) if c not in rows[0]]
    if missing or not ({"nccl_dtype", "dtype"} & set(rows[0])):
        raise UserError(f"{path}: no column {', '.join(missing) or 'nccl_dtype or dtype'}")
    out = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    out["n"] = out["num_gpus"].astype(int)
    dtype = out["nccl_dtype"] if "nccl_dtype" in out else out["dtype"]
    unknown = sorted(set(dtype) - set(ELEMENT_BYTES))
    if unknown:
        raise UserError(f"{path}: unknown dtype {unknown[0]!r} (known: {', '.join(ELEMENT_BYTES)})")
    out["bytes"] = out["message_elements"].astype(float) * np.array([ELEMENT_BYTES[d] for d in dtype])
    out["t"] = out["latency_ms"].astype(float) * 1e-3
    out["dtype_name"] = dtype
    return out


def error(est: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(est / meas - 1)


def score(est, meas, groups) -> float:
    """Sum over group sizes of median + p90 of the relative error, plus the worst group's p90 (so that
    no group is traded away for the others)."""
    total, worst = 0.0, 0.0
    for n in np.unique(groups):
        e = error(est[groups == n], meas[groups == n])
        p90 = float(np.percentile(e, 90))
        total, worst = total + float(np.median(e)) + p90, max(worst, p90)
    return total + worst


# ---- NCCL ---------------------------------------------------------------------------------------

def nccl_line(line: dict, op: str, n: np.ndarray, nbytes: np.ndarray, link: float) -> np.ndarray:
    """t = alpha + steps * step + F * bytes / (eta(n) * link), as collectives._nccl."""
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    eta = np.select([n >= 8, n >= 4], [line["bus_efficiency"][2], line["bus_efficiency"][1]],
                    line["bus_efficiency"][0])
    return line["alpha_s"] + steps * line["step_s"] + factor * nbytes / (eta * link)


def p2p_times(consts: dict, n, nbytes, link: float) -> np.ndarray:
    """All-to-all as collectives._p2p: LL (one stream per peer, every peer at once) where a peer's bytes
    nbytes / n are at most p2p_ll_max_bytes_per_peer, else the fastest simple line."""
    lines, per_peer = consts["nccl"]["all_to_all"], nbytes / n
    simple = np.min([nccl_line(line, "all_to_all", n, nbytes, link)
                     for p, line in lines.items() if p != "ll"], axis=0)
    ll = lines["ll"]
    eta = ll["bus_efficiency"][0] if isinstance(ll["bus_efficiency"], list) else ll["bus_efficiency"]
    low = ll["alpha_s"] + (n - 1) * ll["step_s"] + per_peer / (eta * link)
    return np.where(per_peer <= consts["p2p_ll_max_bytes_per_peer"], low, simple)


def nccl_times(consts: dict, op: str, n, nbytes, nvls_ok, link: float) -> np.ndarray:
    if op == "all_to_all" and consts.get("p2p_ll_max_bytes_per_peer") is not None:
        return p2p_times(consts, n, nbytes, link)
    times = [nccl_line(line, op, n, nbytes, link) for line in consts["nccl"][op].values()]
    best = np.min(times, axis=0)
    if op == "all_reduce":
        nv = consts["nvls"]
        rate = np.full(len(nbytes), nv["bus_efficiency"] * link)
        if nv.get("chunk_s") is not None:  # collectives.nvls_rate's chunk limit
            ops = nv["channels"] * np.asarray(n)
            chunk = np.array([collectives.nvls_chunk_bytes(float(b), int(o))
                              for b, o in zip(nbytes, ops, strict=True)])
            rate = np.minimum(rate, ops * chunk / nv["chunk_s"])
        t = nv["alpha_s"] + nbytes / rate
        best = np.where(nvls_ok & (n >= nv["min_gpus"]), np.minimum(best, t), best)
    return best


def _unpack_nccl(x: np.ndarray, op: str, nvls_channels: int | None = None) -> dict:
    protos, i = {}, 0
    for p in PROTOCOLS:
        protos[p] = {"alpha_s": float(np.exp(x[i])), "step_s": float(np.exp(x[i + 1])),
                     "bus_efficiency": [float(np.exp(v)) for v in x[i + 2:i + 5]]}
        i += 5
    out = {"nccl": {op: protos}}
    out["nvls"] = ({"alpha_s": float(np.exp(x[i])), "bus_efficiency": float(np.exp(x[i + 1])), "min_gpus": 8}
                   if op == "all_reduce" else None)
    if out["nvls"] is not None and nvls_channels is not None:
        out["nvls"].update(channels=nvls_channels, chunk_s=float(np.exp(x[i + 2])))
    return out


def _unpack_p2p(x: np.ndarray, ll_max: float) -> dict:
    e = np.exp(x)
    lines = {"ll": {"alpha_s": float(e[0]), "step_s": float(e[1]), "bus_efficiency": [float(e[2])]}}
    for i, p in ((3, "simple"), (8, "simple_wide")):
        lines[p] = {"alpha_s": float(e[i]), "step_s": float(e[i + 1]),
                    "bus_efficiency": [float(v) for v in e[i + 2:i + 5]]}
    return {"nccl": {"all_to_all": lines}, "p2p_ll_max_bytes_per_peer": ll_max}


def _search(f, x0: np.ndarray, restarts: int, seed: int) -> tuple[float, np.ndarray]:
    """Nelder-Mead from x0 at shrinking steps, then seeded restarts around the best point (the min over
    lines has local optima)."""
    x = np.array(x0)
    for step in (0.5, 0.2, 0.1, 0.05):
        x, v = nelder_mead(f, x, step=step, iters=3000)
    best, rng = (v, x), np.random.default_rng(seed)
    for _ in range(restarts):
        x = best[1] + rng.normal(0, 0.3, len(best[1]))
        for step in (0.3, 0.1, 0.03):
            x, v = nelder_mead(f, x, step=step, iters=3000)
        if v < best[0]:
            best = (v, x)
    return best


def fit_p2p(n, b, t, link: float, restarts: int, seed: int) -> dict:
    """All-to-all: the LL line (one efficiency: a peer's stream), two simple lines, and the per-peer LL
    threshold among NCCL's candidates (NCCL_P2P_LL_THRESHOLD 16 KiB times 1, 2 or 4 channels per peer)."""
    x0 = np.log([5e-6, 0.3e-6, 0.013, 12e-6, 0.1e-6, 0.5, 0.5, 0.6, 20e-6, 0.5e-6, 0.6, 0.65, 0.7])
    fits = []
    for ll_max in P2P_LL_CANDIDATES:
        def f(x, ll_max=ll_max):
            return score(p2p_times(_unpack_p2p(x, ll_max), n, b, link), t, n)
        v, x = _search(f, x0, restarts, seed)
        fits.append((v, ll_max, x))
    v, ll_max, x = min(fits, key=lambda fit: fit[0])
    return _unpack_p2p(x, ll_max)


def fit_nccl(rows: dict, link: float, restarts: int = 6, seed: int = 1,
             nvls_channels: int | None = None) -> dict:
    """`nvls_channels` (the descriptor's nvls.channels): also fit the NVLS chunk time (nvls.chunk_s)."""
    consts = {"nccl": {}, "nvls": None}
    for raw, op in OPS.items():
        sel = rows["op_name"] == raw
        if op == "all_to_all":
            p2p = fit_p2p(rows["n"][sel], rows["bytes"][sel], rows["t"][sel], link, restarts, seed)
            consts["nccl"][op] = p2p["nccl"][op]
            consts["p2p_ll_max_bytes_per_peer"] = p2p["p2p_ll_max_bytes_per_peer"]
            continue
        n, b, t = rows["n"][sel], rows["bytes"][sel], rows["t"][sel]
        nvls_ok = rows["dtype_name"][sel] == "half"
        x0 = []
        for p in PROTOCOLS:
            a, s, e = START[p]
            x0 += [np.log(a), np.log(s)] + [np.log(e)] * len(EFFICIENCY_GROUPS)
        if op == "all_reduce":
            x0 += ([np.log(50e-6), np.log(0.5), np.log(20e-6)] if nvls_channels  # a binding chunk limit
                   else [np.log(50e-6), np.log(0.6)])

        def f(x, op=op, n=n, b=b, t=t, nvls_ok=nvls_ok):
            c = _unpack_nccl(x, op, nvls_channels)
            return score(nccl_times(c, op, n, b, nvls_ok, link), t, n)

        _, x = _search(f, x0, restarts, seed)
        c = _unpack_nccl(x, op, nvls_channels)
        consts["nccl"][op] = c["nccl"][op]
        if c["nvls"] is not None:
            consts["nvls"] = c["nvls"]
    return consts


# ---- custom all-reduce ------------------------------------------------------------------------------

def custom_times(consts: dict, fws: dict, fw_name: str, graphed: bool, n, nbytes, hw, link) -> np.ndarray:
    """A framework's all-reduce time, as collectives._framework chooses it (routes in order)."""
    fw = fws[fw_name]
    copy = 2 * nbytes / (hw.dram_bytes_per_s * hw.efficiency["dram"])
    nccl = nccl_times(consts, "all_reduce", n, nbytes, np.ones(len(n), bool), link)
    if not graphed:
        host = np.array([fw.host_s(g) for g in [int(v) for v in n]])
        nccl = np.maximum(host, nccl + copy)
    chosen = nccl
    groups = [int(g) for g in n]
    host = np.array([fw.host_s(g) for g in groups])
    for route in reversed(fw.routes_for(hw.family)):
        limit = np.array([route.max_bytes.get(g, -1.0) for g in groups])
        times = {}
        for name in route.kernels:
            line = consts["custom"][name]
            traffic = {"oneshot": n - 1, "twoshot": 2 * (n - 1) / n}.get(name, np.ones(len(n)))
            eta = line["bus_efficiency"]
            eta = np.array([eta[2] if g >= 8 else eta[1] if g >= 4 else eta[0] for g in groups]) \
                if isinstance(eta, list) else eta
            times[name] = (line["alpha_s"] + (n - 1) * line["step_s"] + fw.graph_overhead_s
                           + traffic * nbytes / (eta * link))
        if route.oneshot_max_bytes and {"oneshot", "twoshot"} <= set(times):
            thr = np.array([np.inf if route.oneshot_max_bytes.get(g, np.nan) is None
                            else route.oneshot_max_bytes.get(g, np.nan) for g in groups])
            best = np.min(list(times.values()), axis=0)
            option = np.where(np.isnan(thr), best, np.where(nbytes < thr, times["oneshot"], times["twoshot"]))
        else:
            option = np.min(list(times.values()), axis=0)
        if not graphed:
            option = np.maximum(route.eager_host_s or host, option + copy)
        if fw.versus_nccl == "min":
            option = np.minimum(option, nccl)
        chosen = np.where(nbytes <= limit, option, chosen)
    return chosen


def _with_overheads(fws: dict, over: dict) -> dict:
    """Frameworks with fitted figures: graph_overhead_s, eager_host_s (by group size) and
    `route_eager_host_s` (the eager host time of the routes after the first: vLLM's symmetric memory)."""
    from dataclasses import replace
    out = {}
    for name, fw in fws.items():
        figures = dict(over.get(name, {}))
        route_host = figures.pop("route_eager_host_s", None)
        routes = fw.routes
        if route_host is not None:
            routes = (routes[0], *(replace(r, eager_host_s=route_host) for r in routes[1:]))
        out[name] = replace(fw, routes=routes, **figures)
    return out


def _parts(rows: dict) -> list[tuple[str, str, bool, np.ndarray]]:
    """(source, framework, graphed, row mask) for each framework source present in the table."""
    unknown = sorted(set(rows["kernel_source"]) - set(SOURCES))
    if unknown:
        raise UserError(f"custom_allreduce.csv.gz: unknown kernel_source {unknown[0]!r} "
                        f"(known: {', '.join(SOURCES)})")
    return [(src, *SOURCES[src], rows["kernel_source"] == src) for src in SOURCES
            if (rows["kernel_source"] == src).any()]


def fit_custom(rows: dict, nccl: dict, hw, link: float) -> tuple[dict, dict]:
    """The custom kernels and the frameworks' overheads, on a table holding every framework's rows
    (H100's: graph and eager). A table with some frameworks only (B200's: TensorRT-LLM under CUDA graphs)
    fits the kernels alone (fit_kernels_only): the frameworks' overheads are the frameworks', not the
    GPU's, and stay as custom_allreduce.yaml has them."""
    parts = _parts(rows)
    if {src for src, *_ in parts} != set(SOURCES):
        return fit_kernels_only(rows, nccl, hw, link, parts), {}
    fws = collectives.frameworks()

    def unpack(x):
        e = np.exp(x)
        custom = {"oneshot": {"alpha_s": e[0], "step_s": e[1], "bus_efficiency": e[2]},
                  "twoshot": {"alpha_s": e[3], "step_s": e[4], "bus_efficiency": list(e[5:8])},
                  "multimem": {"alpha_s": e[8], "step_s": e[9], "bus_efficiency": e[10]}}
        def by_group(v):
            return dict(zip((2, 4, 8), v, strict=True))

        over = {"vllm": {"graph_overhead_s": e[11], "eager_host_s": by_group(e[13:16]),
                         "route_eager_host_s": e[16]},
                "sglang": {"graph_overhead_s": e[12], "eager_host_s": by_group(e[17:20]),
                           "route_eager_host_s": e[21]},
                "trtllm": {"graph_overhead_s": e[20]}}
        return {**nccl, "custom": custom}, over

    def f(x):
        consts, over = unpack(x)
        f_fws = _with_overheads(fws, over)
        scores = []
        for _, name, graphed, sel in parts:
            est = custom_times(consts, f_fws, name, graphed, rows["n"][sel], rows["bytes"][sel], hw, link)
            scores.append(score(est, rows["t"][sel], rows["n"][sel]))
        return sum(scores) + max(scores)

    x = np.log([2.4e-6, 0.1e-6, 0.66, 4.4e-6, 0.43e-6, 0.47, 0.63, 0.62, 6.3e-6, 0.23e-6, 0.46, 1.6e-6,
                0.05e-6,
                21e-6, 23.5e-6, 23.5e-6, 42.8e-6, 31e-6, 31e-6, 31e-6, 0.2e-6, 37e-6])
    for step in (0.5, 0.2, 0.1, 0.05):
        x, _ = nelder_mead(f, x, step=step, iters=4000)
    return unpack(x)


def current_custom(hw) -> dict:
    """The descriptor's custom kernel lines as this tool's nested dict."""
    out = {}
    for name, x in hw.interconnect.collectives.custom.items():
        eff = list(x.bus_efficiency) if len(x.bus_efficiency) > 1 else x.bus_efficiency[0]
        out[name] = {"alpha_s": x.alpha_s, "step_s": x.step_s, "bus_efficiency": eff}
    return out


def fit_kernels_only(rows: dict, nccl: dict, hw, link: float, parts: list) -> dict:
    """The custom kernels that the present frameworks' routes on this GPU's family take (alpha_s, step_s
    and the bus efficiency; two-shot's at 2, 4 and 8 GPUs), from the descriptor's values; the other
    kernels stay as the descriptor has them."""
    fws = collectives.frameworks()
    used = sorted({k for _, name, _, _ in parts for r in fws[name].routes_for(hw.family) for k in r.kernels})
    start = current_custom(hw)
    layout = [(k, 3 if k == "twoshot" else 1) for k in used]

    def unpack(x):
        e, custom, i = np.exp(x), {k: dict(v) for k, v in start.items()}, 0
        for k, effs in layout:
            custom[k] = {"alpha_s": float(e[i]), "step_s": float(e[i + 1]),
                         "bus_efficiency": [float(v) for v in e[i + 2:i + 2 + effs]] if effs > 1
                         else float(e[i + 2])}
            i += 2 + effs
        return {**nccl, "custom": custom}

    def f(x):
        consts = unpack(x)
        scores = []
        for _, name, graphed, sel in parts:
            est = custom_times(consts, fws, name, graphed, rows["n"][sel], rows["bytes"][sel], hw, link)
            scores.append(score(est, rows["t"][sel], rows["n"][sel]))
        return sum(scores) + max(scores)

    x0 = []
    for k, effs in layout:
        line = start[k]
        eff = line["bus_efficiency"]
        eff = (eff if isinstance(eff, list) else [eff] * 3)[:effs] if effs > 1 else (
            eff if not isinstance(eff, list) else eff[-1])
        x0 += [np.log(line["alpha_s"]), np.log(max(line["step_s"], 1e-9))] + list(np.log(np.atleast_1d(eff)))
    _, x = _search(f, np.array(x0), restarts=4, seed=1)
    return unpack(x)


def descriptor_constants(hw) -> dict:
    """The descriptor's NCCL and NVLS constants as this tool's nested dict."""
    c = hw.interconnect.collectives

    def line(x):
        return {"alpha_s": x.alpha_s, "step_s": x.step_s, "bus_efficiency": list(x.bus_efficiency)}

    nvls = {**line(c.nvls), "bus_efficiency": c.nvls.bus_efficiency[0], "min_gpus": c.nvls_min_gpus}
    if c.nvls_chunk_s is not None:
        nvls.update(channels=c.nvls_channels, chunk_s=c.nvls_chunk_s)
    return {"nccl": {op: {p: line(x) for p, x in protos.items()} for op, protos in c.nccl.items()},
            "nvls": nvls, "p2p_ll_max_bytes_per_peer": c.p2p_ll_max_bytes_per_peer}


# ---- report and write -------------------------------------------------------------------------------

def rounded(obj):
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v) for v in obj]
    if isinstance(obj, float):
        return float(f"{obj:.3g}")
    return obj


def _yaml_value(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v:.3g}" for k, v in value.items()) + "}"
    return f"{value:.3g}"


def write_frameworks(over: dict, path: Path = collectives.FRAMEWORKS_FILE) -> None:
    """Set the fitted graph_overhead_s / eager_host_s values in custom_allreduce.yaml; a framework's
    `route_eager_host_s` goes to every route after its first."""
    text = path.read_text()
    blocks = re.split(r"(?m)^(?=\w[\w-]*:\n)", text)
    out = []
    for block in blocks:
        name = block.split(":", 1)[0]
        for key, value in over.get(name, {}).items():
            indent, entry = ("      ", "eager_host_s") if key == "route_eager_host_s" else ("  ", key)
            pattern = rf"(?m)^({indent}{entry}:\n{indent}  value: )[^\n]*\n{indent}  source: [^\n]*"
            repl = r"\g<1>" + _yaml_value(value) + "\n" + indent + '  source: "estimate calibrate --comm"'
            block, count = re.subn(pattern, repl, block)
            if not count:
                raise UserError(f"{path}: no {name}.{key} entry to write")
        out.append(block)
    path.write_text("".join(out))
    collectives.frameworks.cache_clear()


def report(rows, est, keys) -> list[str]:
    lines = []
    for key in sorted(set(zip(*[rows[k] for k in keys], strict=True))):
        sel = np.ones(len(est), bool)
        for k, v in zip(keys, key, strict=True):
            sel &= rows[k] == v
        e = error(est[sel], rows["t"][sel])
        label = " ".join(str(v) for v in key)
        lines.append(f"  {label:<40} n={sel.sum():>3}  median {100 * np.median(e):5.1f}%  "
                     f"p90 {100 * np.percentile(e, 90):5.1f}%  max {100 * e.max():5.1f}%")
    return lines


@dataclass(frozen=True)
class CommFit:
    """What `estimate calibrate --comm` was asked (the command line, read once). `split`: fit on every
    other message size of each (op or source, GPU count, dtype) curve (fit_mask), check on the other
    rows, reported apart; else fit on every row."""

    data: Path
    arch: str = "h100-sxm"
    write: bool = False
    restarts: int = 6
    keep_nccl: bool = False
    split: bool = False


def fit_mask(rows: dict, split: bool) -> np.ndarray:
    """The rows fitted on: every row, or (`split`) every other message size of each curve (op or
    kernel source, GPU count, dtype; by size), the second dtype of an op starting one size later, so
    that each byte size of an op's half and int8 curves (the same byte sizes) is fitted once and checked
    once; the disjoint rest is the check."""
    n = len(rows["t"])
    if not split:
        return np.ones(n, bool)
    label = rows["op_name"] if "kernel_source" not in rows else rows["kernel_source"]
    keep = np.zeros(n, bool)
    for lab in np.unique(label):
        for j, dtype in enumerate(sorted(set(rows["dtype_name"][label == lab]))):
            for g in np.unique(rows["n"]):
                idx = np.nonzero((label == lab) & (rows["dtype_name"] == dtype) & (rows["n"] == g))[0]
                idx = idx[np.argsort(rows["bytes"][idx], kind="stable")]
                keep[idx[j % 2::2]] = True
    return keep


def _subset(rows: dict, mask: np.ndarray) -> dict:
    return {k: v[mask] for k, v in rows.items()}


def _residuals(title: str, rows: dict, est: np.ndarray, keys: tuple, fit: np.ndarray) -> list[str]:
    lines = [f"\n# {title} residuals |est - meas| / meas, fitted rows ({int(fit.sum())})"]
    lines += report(_subset(rows, fit), est[fit], keys)
    if not fit.all():
        lines.append(f"# {title}, the check: the other {int((~fit).sum())} rows")
        lines += report(_subset(rows, ~fit), est[~fit], keys)
    return lines


def run(args: CommFit) -> int:
    check_data(args.data, "nccl.csv.gz", "custom_allreduce.csv.gz")
    hw = hwdesc.load(args.arch)
    link = hw.interconnect.nvlink_bytes_per_s_per_direction
    nccl_rows = read(args.data / "nccl.csv.gz")
    custom_rows = read(args.data / "custom_allreduce.csv.gz")
    nccl_fit = fit_mask(nccl_rows, args.split)
    custom_fit = fit_mask(custom_rows, args.split)
    nccl = (descriptor_constants(hw) if args.keep_nccl
            else rounded(fit_nccl(_subset(nccl_rows, nccl_fit), link, args.restarts,
                                  nvls_channels=hw.interconnect.collectives.nvls_channels)))
    custom, over = fit_custom(_subset(custom_rows, custom_fit), nccl, hw, link)
    consts, over = rounded(custom), rounded(over)
    print(f"# collective constants fitted on {args.data} ({hw.name}, family {hw.family}, "
          f"link {link:.3g} B/s per direction)")
    for op, protos in consts["nccl"].items():
        for p, line in protos.items():
            print(f"nccl {op} {p}: {line}")
    print(f"p2p_ll_max_bytes_per_peer: {consts.get('p2p_ll_max_bytes_per_peer')}\nnvls: {consts['nvls']}\n"
          f"custom: {consts['custom']}\nframeworks: {over or 'kept (not fitted here)'}")
    est = np.zeros(len(nccl_rows["t"]))
    for raw, op in OPS.items():
        sel = nccl_rows["op_name"] == raw
        est[sel] = nccl_times(consts, op, nccl_rows["n"][sel], nccl_rows["bytes"][sel],
                              nccl_rows["dtype_name"][sel] == "half", link)
    print("\n".join(_residuals("nccl.csv.gz", nccl_rows, est, ("op_name", "n"), nccl_fit)))
    fws = _with_overheads(collectives.frameworks(), over)
    est = np.zeros(len(custom_rows["t"]))
    for _, name, graphed, sel in _parts(custom_rows):
        est[sel] = custom_times(consts, fws, name, graphed, custom_rows["n"][sel], custom_rows["bytes"][sel],
                                hw, link)
    print("\n".join(_residuals("custom_allreduce.csv.gz", custom_rows, est, ("kernel_source", "n"),
                               custom_fit)))
    if args.write:
        data = os.path.relpath(Path(args.data).resolve(), ROOT)
        if not data.startswith(".."):
            data = str(args.data)
        extra = (f" --arch {args.arch}" if args.arch != "h100-sxm" else "") + (
            " --comm-split" if args.split else "")
        fws = collectives.frameworks()
        used = {k for _, name, _, _ in _parts(custom_rows) for r in fws[name].routes_for(hw.family)
                for k in r.kernels}
        kept = () if over else tuple(k for k in consts["custom"] if k not in used)
        print("wrote " + ", ".join(comm_constants.write(
            consts, hwdesc.bundled_dir(), fitted_on=f"{data}/nccl.csv.gz, custom_allreduce.csv.gz",
            command=f"estimate calibrate --comm{extra} --data {data} --write", family=hw.family, kept=kept)))
        if over:
            write_frameworks(over)
            print(f"wrote {collectives.FRAMEWORKS_FILE.name}")
    return 0
