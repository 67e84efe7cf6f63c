"""TPOT of Qwen3-32B, Qwen3-235B-A22B and gpt-oss-120b against measured H100 serving (issue 13).

Source: e2e_serving.csv.gz of the --data folder (../shared/calibration/h100_sxm; aiconfigurator's
silicon_sample: TensorRT-LLM, vLLM and SGLang at a fixed client concurrency). Until the serving issue's
`--serve` lands, a TPOT is priced as ONE decode step at batch B = concurrency against a cache of past =
isl + osl / 2 tokens, on one GPU's shard of the model, plus (`--steady`, the default) the prefills
in-flight batching mixes into every step in steady state: B / osl requests finish per step, so as many
arrive, each prefilling isl tokens (the measured TPOT at isl 2048, B 128 falls from 184 to 63 ms as osl
goes 128 -> 512: 0.5 x a ~160 ms prefill, as this predicts).
The KV cache is appended in place (the decode graph's Concat of past and new K/V, HF's semantics, is not
charged: engines write the new row into a paged cache).
Where the framework mixes a prefill into a decode step (in-flight batching: TensorRT-LLM, vLLM's chunked
prefill; not SGLang, whose default runs prefill batches on their own, enable_mixed_chunk False), that
step's decoding requests ride in the prefill's GEMMs: the weights are read once, and the mixed step's
non-attention kernels are the prefill's at isl + B tokens; each prefill adds that, plus its attention,
less the decode step's non-attention kernels (serve/serving.py's mixed step, T_mix = T_pre + the decode
attention, with the B decode rows in the GEMMs too). Before, each prefill was charged whole on top of a
full decode step, reading every weight twice (Qwen3-235B TP4/EP4 at isl 128, B 64: +89%).
Each row is priced on one GPU of its deployment through the same passes as `estimate --tp N
--expert-parallel M`: the experts sharded by expert parallelism EP (models.decoder_config.shard_experts:
E / EP experts, k / EP routes, the dispatch and combine AllToAll around the grouped GEMMs), then
passes/shard_tp.py at TP (heads, dense MLP, vocabulary; the experts width-sharded by MoE-TP = TP / EP,
which the rows' moe_tp_size equals) with its AllReduce / AllGather kernels, all priced by the collective
model in the row's framework (trtllm, vllm, sglang: its custom all-reduce; decode CUDA-graphed, prefill
eager). Each table also gives the error without the communication kernels (the figures before they
were priced).
SGLang's scheduler runs prefill first and never mixes (estimator/serve/frameworks.yaml `scheduler`):
a closed loop of equal requests then runs in lock-step waves (all B prefilled in chunks of
chunked_prefill_size tokens with the decodes stalled, then all decode together and finish on the same
step), and a request's TPOT carries only the wave's prefill chunks after its own first token (wave_tpot_s
on estimator/serve/waves.py, the model `--serve --framework sglang` runs; `--no-waves`: the in-flight
model). The
measured SGLang TTFTs are 2-7x vLLM's at the same TP / isl / osl / concurrency (the wave's prefill) and
its TPOTs 0.55-0.89x (osl 128, B 128 the lowest), as this predicts.
- precision: the row's (fp8 -> fp8; empty -> bf16); a per-tensor fp8 checkpoint (gemm_quant_mode fp8:
  Qwen3-32B's TensorRT-LLM and vLLM fp8 rows, gpt-oss's TensorRT-LLM rows) as the engine runs it
  (estimator/w8a8.py, `--precision fp8-w8a8`: fp8 linears with their activation quantization kernels, bf16
  activations and all-reduces, the lm_head and routers in bf16; the KV cache in fp8 for TensorRT-LLM, bf16
  for vLLM; `--no-w8a8`: every tensor fp8, the figures before). gpt-oss ships its experts in MXFP4 (the
  bundled config's MoeSpec.weight_format); H100 has no fp4 tensor cores, so vLLM runs them through a W4A16
  grouped GEMM: rows whose MoE is not fp8-quantized (vLLM's, labelled fp4 / nvfp4) are priced with bf16
  activations and the experts as stored (4.25 bits a weight, dequantized in the mainloop); block-scaled
  rows (fp8_block: Qwen3-235B's TensorRT-LLM rows) with everything in fp8.
NB: no scheduler or sampling time, and disaggregated rows are left out. Targets: Qwen3-32B median
|error| <= 12%, the MoE models <= 20%.

    estimate validate moe-serving --data ../shared/calibration/h100_sxm [--models qwen3-32b,...]
        [--frameworks trtllm,...] [--tp 1,2] [--verbose] [--no-steady] [--no-mixed] [--no-waves] [--no-w8a8]
        [--markdown]
A missed target prints MISSED (the exit code stays 0: 1 is the CLI's internal error).
"""

from __future__ import annotations

import csv
import gzip
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from estimator.calibration.markdown import pct, table
from estimator.calibration.tables import check_data
from estimator.errors import UserError

MODELS = {"qwen3-32b": "Qwen/Qwen3-32B", "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B-FP8",
          "gpt-oss-120b": "openai/gpt-oss-120b"}
TARGETS = {"qwen3-32b": 0.12, "qwen3-235b-a22b": 0.20, "gpt-oss-120b": 0.20}


def _int(row: dict, key: str, default: int = 1) -> int:
    """A parallel size; empty or 0 (the CSV writes both for "not used") is `default`."""
    return int(row[key]) if row.get(key) and int(row[key]) > 0 else default


def precision_of(row: dict, cfg, w8a8: bool = True) -> tuple[str, str]:
    """(--precision, the experts' stored format, "" for none) of a row (see the module doc); "w8a8" for
    a per-tensor fp8 checkpoint (gemm_quant_mode fp8) unless `w8a8` is False (--no-w8a8)."""
    stored = cfg.moe.weight_format if cfg.moe is not None else ""
    if stored and not row.get("moe_quant_mode", "").startswith("fp8"):
        return "bf16", stored  # weight-only experts (W4A16), bf16 activations
    if row.get("gemm_quant_mode") == "fp8" and w8a8:
        return "w8a8", ""  # per-tensor fp8 linears, bf16 activations (estimator/w8a8.py)
    return ("fp8" if row["precision"] in ("fp8", "fp4") else "bf16"), ""


# The KV cache of a per-tensor fp8 deployment: TensorRT-LLM takes the checkpoint's kv_cache_quant_algo
# (FP8 in ModelOpt's fp8 recipe); vLLM's kv_cache_dtype default "auto" is the model dtype (bf16).
W8A8_KV = {"trtllm": "fp8e4m3", "vllm": None, "sglang": None}


def deployed(graph, precision: str, backend: str):
    """(graph, --precision) of a row: "w8a8" re-types `graph` as estimator/w8a8.py (fp8 weights and GEMM
    inputs with their quantization kernels, bf16 elsewhere) and leaves --precision unset."""
    if precision != "w8a8":
        return graph, precision
    from estimator.precision import DEPLOYED
    from estimator.w8a8 import w8a8

    return w8a8(graph, *DEPLOYED["fp8-w8a8"], kv_dtype=W8A8_KV[backend]), None


def with_expert_format(cfg, stored: str):
    """`cfg` with its experts stored as `stored` ("" the float dtype --precision sets)."""
    from dataclasses import replace

    if cfg.moe is None or cfg.moe.weight_format == stored:
        return cfg
    return replace(cfg, moe=replace(cfg.moe, weight_format=stored))


def sharded_graphs(cfg, tp: int, ep: int):
    """(decode, prefill) graphs of one GPU under TP and EP, through the passes `estimate` uses."""
    from dataclasses import replace

    from estimator.frontends.hf_config import build_graph
    from models.decoder_config import shard_experts
    from passes.shard_tp import shard_tp

    if ep > 1:  # one GPU's expert share, as `estimate --expert-parallel` (estimator/cli/hf.py) takes it
        cfg = replace(cfg, moe=shard_experts(cfg.moe, ep))
    return tuple(shard_tp(build_graph(cfg, decode=decode), tp).graph for decode in (True, False))


def _kernel_sum(result, keep):
    """sum of the kept kernels' estimate_s as a function of the one free dim."""
    import sympy

    from estimator.ir import dim

    total = sympy.Add(*(p.timing.estimate_s for p in result.kernels if keep(result.graph, p.kernel)))
    free = sorted(total.free_symbols, key=str)
    if not free:
        return lambda _x, v=float(total): v
    return sympy.lambdify([dim(free[0].name)], total, "numpy")


# Frameworks whose default scheduler runs a prefill inside a decode step (module doc).
MIXED_BATCHING = {"trtllm": "TensorRT-LLM in-flight batching: context and generation requests in one step",
                  "vllm": "vLLM V1: chunked prefill on by default, prefill chunks batched with decodes"}


def _both(result):
    """(with, without the communication kernels): each a function of the one free dim."""
    return (_kernel_sum(result, lambda g, k: True),
            _kernel_sum(result, lambda g, k: k.kind != "communication"))


def _shared(result):
    """(with, without comm) of the kernels a mixed step shares with its prefill: all but attention."""
    return (_kernel_sum(result, lambda g, k: k.kind != "attention"),
            _kernel_sum(result, lambda g, k: k.kind not in ("attention", "communication")))


def _decode_step(graph, hw, precision: str, batches: set[int], framework: str) -> dict:
    """batch -> ((with comm, without), (shared with comm, without)) functions past_seq -> seconds of one
    decode step and of its non-attention kernels (tiles chosen at the bound batch; CUDA-graphed
    collectives)."""
    from estimator.estimate import estimate
    from passes import pipeline_for

    steps = {}
    for b in sorted(batches):
        result = estimate(graph, hw, precision=precision, dims={"batch": b},
                          pipeline=pipeline_for("tensorrt"), framework=framework)
        steps[b] = (_both(result), _shared(result))
    return steps


def tpot_s(step, prefill, batch: int, isl: float, osl: float, mixed: bool, i: int = 0) -> float:
    """One row's TPOT: the decode step at past isl + osl/2, plus batch / osl prefills per step, each
    what it adds to its step: where `mixed`, the non-attention kernels at isl + batch tokens (the
    decoding rows ride in the prefill's GEMMs) plus the prefill's attention, less the decode step's
    non-attention kernels; else the whole prefill (see the module doc). `i` 0 with the communication
    kernels, 1 without."""
    (whole, shared), past = step, isl + osl / 2
    t = whole[i](past)
    if prefill is not None:
        (pre, pre_shared) = prefill
        extra = pre[i](isl)
        if mixed:
            extra += pre_shared[i](isl + batch) - pre_shared[i](isl) - shared[i](past)
        t += batch / osl * max(0.0, extra)
    return float(t)


def wave_tpot_s(step, prefill, batch: int, isl: float, osl: float, chunk: int, i: int = 0) -> float:
    """One row's TPOT under a prefill-first scheduler (frameworks.yaml `scheduler`), on the serving mode's
    wave model (estimator/serve/waves.py): the batch requests of a wave are prefilled in
    S = ceil(batch x isl / chunk) steps of `chunk` prompt tokens (the framework's max_num_tokens, SGLang's
    chunked_prefill_size) with every decode stalled, then decode together for osl - 1 steps, each the
    decode step at past isl + osl/2: TPOT = T_dec + mean prefill after the request's first token / (osl - 1).
    The wave's prefill W = the non-attention kernels at each chunk's tokens + batch x one prompt's
    attention. NB: the time is spread over the chunks in proportion to their tokens.
    The in-flight model (tpot_s: batch / osl prefills on every step) charges (about) twice as much."""
    from estimator.serve.waves import chunk_tokens, last_chunks, wave

    (whole, _shared), past = step, isl + osl / 2
    (pre, pre_shared) = prefill
    chunks = chunk_tokens(batch, int(isl), chunk)
    attention = max(0.0, pre[i](isl) - pre_shared[i](isl))
    work = sum(pre_shared[i](n) for n in chunks) + batch * attention
    chunk_s = [work * n / (batch * isl) for n in chunks]
    decode_s = float(whole[i](past)) * (osl - 1)
    return wave(chunk_s, last_chunks(batch, int(isl), chunk), decode_s, int(osl)).tpot_s


def _prefill(graph, hw, precision: str, framework: str):
    """((with comm, without), (shared with comm, without)) functions seq -> seconds of one request's
    prefill of seq tokens and of its non-attention kernels (batch 1, eager collectives)."""
    from estimator.estimate import estimate
    from passes import pipeline_for

    result = estimate(graph, hw, precision=precision, dims={"batch": 1}, pipeline=pipeline_for("tensorrt"),
                      framework=framework, comm_graphed=False)
    return _both(result), _shared(result)


def rows_of(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [r for r in csv.DictReader(f) if r["mode"] == "agg" and r["silicon_tpot_ms"]]


@dataclass(frozen=True)
class MoeServingCheck:
    """What `estimate validate moe-serving` was asked (the command line, read once)."""

    data: Path
    models: tuple[str, ...] = tuple(MODELS)
    frameworks: tuple[str, ...] = ("trtllm", "vllm", "sglang")
    tp: tuple[str, ...] = ()
    verbose: bool = False
    steady: bool = True
    mixed: bool = True
    waves: bool = True
    w8a8: bool = True
    markdown: bool = False


def markdown(name: str, errors_by_key: dict) -> str:
    """A model's TPOT accuracy per deployment as a Markdown table: median and p90 of |error|, the signed
    median (+ = over-predicted) and the median |error| without the communication kernels."""
    import numpy as np

    def cells(err, bare):
        return (len(err), pct(float(np.median(np.abs(err)))), pct(float(np.percentile(np.abs(err), 90))),
                pct(float(np.median(err)), True), pct(float(np.median(np.abs(bare)))))

    rows = [(f"{backend} tp {tp} ep {ep} moe-tp {moe_tp} {precision}", *cells(err, bare))
            for (tp, ep, moe_tp, precision, backend), (err, bare) in errors_by_key.items()]
    every = [np.concatenate([e[i] for e in errors_by_key.values()]) for i in (0, 1)]
    rows.append(("all", *cells(*every)))
    return f"**{name}** (target: median |error| <= {TARGETS[name]:.0%})\n\n" + table(
        ("deployment", "rows", "TPOT median", "TPOT p90", "TPOT signed", "median without comm"), rows)


def run(args: MoeServingCheck) -> int:
    import hwdesc

    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        raise UserError(f"--models: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    check_data(args.data, "e2e_serving.csv.gz")
    hw = hwdesc.load("h100-sxm")
    rows = rows_of(args.data / "e2e_serving.csv.gz")
    for name in args.models:
        errors_by_key = model_errors(name, rows, hw, args)
        if not errors_by_key:
            print(f"\n{name}: no rows")
        elif args.markdown:
            print("\n" + markdown(name, errors_by_key))
        else:
            print(text(name, errors_by_key))
    return 0


def model_errors(name: str, rows: list[dict], hw, args: MoeServingCheck) -> dict:
    """(tp, ep, moe_tp, precision, backend) -> (relative TPOT errors, the same without the communication
    kernels) of the model's rows, each group priced once."""
    import numpy as np

    from estimator.serve.frameworks import framework
    from models.named_configs import NAMED

    mine = [r for r in rows if r["model_path"] == MODELS[name]
            and r["backend"] in args.frameworks
            and (not args.tp or r["tp_size"] in args.tp)]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in mine:
        precision, stored = precision_of(r, NAMED[name], args.w8a8)
        tp, ep = _int(r, "tp_size"), _int(r, "moe_ep_size")
        if NAMED[name].moe is None:
            ep = 1
        key = (tp, ep, _int(r, "moe_tp_size", tp // ep), precision, stored, r["backend"])
        groups[key].append(r)
    errors_by_key = {}
    for (tp, ep, moe_tp, precision, stored, backend), grp in sorted(groups.items()):
        if NAMED[name].moe is not None and moe_tp * ep != tp:
            print(f"  skipped {len(grp)} rows: tp {tp} != moe_tp {moe_tp} x ep {ep}", file=sys.stderr)
            continue
        decode, prefill_graph = sharded_graphs(with_expert_format(NAMED[name], stored), tp, ep)
        batches = {int(r["batch_size"]) for r in grp}
        decode, prec = deployed(decode, precision, backend)
        step = _decode_step(decode, hw, prec, batches, backend)
        prefill_graph, prec = deployed(prefill_graph, precision, backend)
        prefill = _prefill(prefill_graph, hw, prec, backend) if args.steady else None
        meas = np.array([float(r["silicon_tpot_ms"]) for r in grp])
        errs = []
        mixed = backend in MIXED_BATCHING and args.mixed
        waves = framework(backend).scheduler == "prefill_first" and prefill is not None and args.waves
        chunk = int(framework(backend).max_num_tokens)
        for i in (0, 1):  # 0: with the communication kernels, 1: without (the figures before)
            est = np.array([wave_tpot_s(step[int(r["batch_size"])], prefill, int(r["batch_size"]),
                                        float(r["isl"]), float(r["osl"]), chunk, i) if waves else
                            tpot_s(step[int(r["batch_size"])], prefill, int(r["batch_size"]),
                                   float(r["isl"]), float(r["osl"]), mixed, i)
                            for r in grp]) * 1e3
            errs.append((est - meas) / meas)
            if args.verbose and i == 0:
                for r, e, m in zip(grp, est, meas, strict=True):
                    print(f"    {backend} tp {tp} {precision} isl {r['isl']} osl {r['osl']} "
                          f"batch {r['batch_size']}: measured {m:.2f} ms, estimate {e:.2f} ms "
                          f"({(e - m) / m:+.1%})")
        errors_by_key[(tp, ep, moe_tp, precision + (f"/{stored}" if stored else ""), backend)] = errs
    return errors_by_key


def text(name: str, errors_by_key: dict) -> str:
    """The plain-text table of a model's errors (median signed and |error|, with and without comm)."""
    import numpy as np

    all_err = np.concatenate([e[0] for e in errors_by_key.values()])
    no_comm = np.concatenate([e[1] for e in errors_by_key.values()])
    med = float(statistics.median(np.abs(all_err)))
    ok = med <= TARGETS[name]
    lines = [f"\n{name}: {len(all_err)} rows, median |error| {med:.1%} (target {TARGETS[name]:.0%}) "
             f"{'ok' if ok else 'MISSED'}; without the communication kernels "
             f"{float(statistics.median(np.abs(no_comm))):.1%}",
             f"  {'framework':>9} {'tp':>3} {'ep':>3} {'moe_tp':>6} {'prec':>10} {'rows':>5} "
             f"{'median err':>11} {'median |err|':>13} {'no-comm err':>12} {'no-comm |err|':>14}"]
    for (tp, ep, moe_tp, precision, backend), (err, bare) in errors_by_key.items():
        lines.append(f"  {backend:>9} {tp:>3} {ep:>3} {moe_tp:>6} {precision:>10} {len(err):>5} "
                     f"{float(np.median(err)):>11.1%} {float(np.median(np.abs(err))):>13.1%} "
                     f"{float(np.median(bare)):>12.1%} {float(np.median(np.abs(bare))):>14.1%}")
    return "\n".join(lines)
