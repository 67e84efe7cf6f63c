"""Serving recommenders (`--serve ... --recommend`): what-ifs re-served through the same serving code.

Each reads `ctx.serve` (estimator.serve.whatif.Serving; without --serve they return nothing) and states
the metric its gain is in (Recommendation.metric); gain = base value - what-if value, exactly, and
gain_pct = 100 x gain / base value:

- cuda-graphs: a step the framework runs eagerly (a decode batch beyond its largest captured CUDA graph;
  prefill, eager by default) priced captured instead, through estimator/serve/launch.py's terms:
      eager:    step = max(gpu, kernels x eager_launch_s_per_kernel) + step_overhead_s
      captured: step = gpu(padded batch) + graph_launch_s + step_overhead_s
  The workload is served again under the framework with that capture; metric TPOT (decode) or TTFT
  (prefill).
- serve-throughput: another (TP, concurrency) point whose TPOT is at most the base's (the TPOT target)
  with more tokens/s per GPU; metric GPU-seconds per output token, 1 / (tokens/s/GPU).
- serve-latency: another (TP, concurrency) point with at least the base's tokens/s per GPU (the same
  throughput) and a lower TPOT; metric TPOT.
Candidates: TP in TP_CHOICES within the NVLink domain, concurrency in the powers of two up to 4x the
base's (and the base's own), each point the serving model at that deployment. Only the best point of
each TP is kept as a what-if; only the best of all is shown.
"""

from __future__ import annotations

from estimator.report.recommendation import Context, Recommendation, recommender

TP_CHOICES = (1, 2, 4, 8)
MAX_CONCURRENCY = 1024
REL = 1e-9  # a what-if must beat the base by more than float rounding (equal points are not a gain)


def _rec(action: str, flags, base: float, new: float, reason: str, evidence, metric: str) -> Recommendation:
    gain = base - new
    return Recommendation(action, tuple(flags), new, gain, 100 * gain / base if base else 0.0, reason,
                          evidence, "model", metric=metric)


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def _step_evidence(step, fw) -> dict:
    return {"gpu_s": step.gpu_s, "launch_s": step.launch_s, "sched_s": step.sched_s, "step_s": step.step_s,
            "batch": step.batch, "kernels": step.kernels, "graphed": step.graphed,
            "eager_launch_s_per_kernel": float(fw.eager_launch_s_per_kernel),
            "graph_launch_s": float(fw.graph_launch_s)}


@recommender("cuda-graphs")
def cuda_graphs(ctx: Context) -> list[Recommendation]:
    from estimator.serve.whatif import capturing, prefill_captured

    sv = ctx.serve
    if sv is None or not sv.result.fits:
        return []
    r, fw, out = sv.result, sv.framework, []
    if r.decode is not None and not r.decode.graphed:
        alt = sv.with_framework(capturing(fw, r.admitted))
        reason = (f"decode at batch {r.admitted} runs eagerly ({fw.display_name} captures up to batch "
                  f"{fw.cuda_graph_max_batch}): step {_ms(r.decode.step_s)} = GPU {_ms(r.decode.gpu_s)} + "
                  f"launch {_ms(r.decode.launch_s)} ({r.decode.kernels} kernels x "
                  f"{float(fw.eager_launch_s_per_kernel) * 1e6:g} us, what the GPU does not hide) + "
                  f"scheduler; captured {_ms(alt.decode.step_s)}; TPOT {_ms(r.tpot_s)} -> {_ms(alt.tpot_s)}")
        out.append(_rec(f"capture decode batch {r.admitted} in a CUDA graph (raise the CUDA-graph max batch "
                        f"from {fw.cuda_graph_max_batch} to {max(fw.cuda_graph_max_batch, r.admitted)})", (),
                        r.tpot_s, alt.tpot_s, reason,
                        {**_step_evidence(r.decode, fw), "graphed_step_s": alt.decode.step_s}, "tpot_s"))
    if r.prefill is not None and not r.prefill.graphed:
        alt = sv.with_framework(prefill_captured(fw))
        reason = (f"prefill runs eagerly: step {_ms(r.prefill.step_s)} = GPU {_ms(r.prefill.gpu_s)} + launch "
                  f"{_ms(r.prefill.launch_s)} ({r.prefill.kernels} kernels) + scheduler; captured "
                  f"{_ms(alt.prefill.step_s)}; TTFT {_ms(r.ttft_s)} -> {_ms(alt.ttft_s)}")
        out.append(_rec("capture the prefill step in a CUDA graph", (), r.ttft_s, alt.ttft_s, reason,
                        {**_step_evidence(r.prefill, fw), "graphed_step_s": alt.prefill.step_s}, "ttft_s"))
    return out


def _candidates(sv) -> list[tuple[int, int]]:
    domain = getattr(getattr(sv.opts.hw, "interconnect", None), "nvlink_domain_gpus", None) or 8
    c0 = sv.work.concurrency
    cs = sorted({c0, *(2 ** k for k in range(11) if 2 ** k <= min(4 * c0, MAX_CONCURRENCY))})
    return [(tp, c) for tp in TP_CHOICES if tp <= domain for c in cs if (tp, c) != (sv.tp, c0)]


def _flags(sv, tp: int, c: int) -> tuple[str, ...]:
    w = sv.work
    return ("--tp", str(tp), "--serve", f"isl={w.isl},osl={w.osl},concurrency={c}")


def _points(sv):
    candidates = _candidates(sv)
    sv.prefetch(candidates)
    for tp, c in candidates:
        alt = sv.at(tp, c)
        if alt is not None and alt.fits:
            yield tp, c, alt


def _evidence(r) -> dict:
    return {"tp": r.gpus, "concurrency": r.workload.concurrency, "admitted": r.admitted, "tpot_s": r.tpot_s,
            "ttft_s": r.ttft_s, "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu}


def _best_per_tp(points, key) -> list:
    best: dict[int, tuple] = {}
    for tp, c, alt in points:
        if tp not in best or key(alt) < key(best[tp][2]):
            best[tp] = (tp, c, alt)
    return list(best.values())


@recommender("serve-throughput", best_only=True)
def more_throughput(ctx: Context) -> list[Recommendation]:
    sv = ctx.serve
    if sv is None or not sv.result.fits:
        return []
    r = sv.result
    ok = [(tp, c, a) for tp, c, a in _points(sv)
          if a.tpot_s <= r.tpot_s and a.tokens_per_s_per_gpu > r.tokens_per_s_per_gpu * (1 + REL)]
    out = []
    for tp, c, a in _best_per_tp(ok, lambda a: -a.tokens_per_s_per_gpu):
        reason = (f"tp {tp} at concurrency {c}: {a.tokens_per_s_per_gpu:,.0f} tokens/s/GPU instead of "
                  f"{r.tokens_per_s_per_gpu:,.0f} at TPOT {_ms(a.tpot_s)} (target: the base's "
                  f"{_ms(r.tpot_s)}); "
                  f"TTFT {_ms(a.ttft_s)} vs {_ms(r.ttft_s)}, admitted {a.admitted} vs {r.admitted}")
        out.append(_rec(f"serve on tp {tp} at concurrency {c}: more tokens/s per GPU at the same TPOT",
                        _flags(sv, tp, c), 1 / r.tokens_per_s_per_gpu, 1 / a.tokens_per_s_per_gpu, reason,
                        {"base": _evidence(r), "whatif": _evidence(a)}, "s_per_token_per_gpu"))
    return out


@recommender("serve-latency", best_only=True)
def lower_tpot(ctx: Context) -> list[Recommendation]:
    sv = ctx.serve
    if sv is None or not sv.result.fits:
        return []
    r = sv.result
    ok = [(tp, c, a) for tp, c, a in _points(sv)
          if a.tokens_per_s_per_gpu >= r.tokens_per_s_per_gpu * (1 - REL) and a.tpot_s < r.tpot_s * (1 - REL)]
    out = []
    for tp, c, a in _best_per_tp(ok, lambda a: a.tpot_s):
        reason = (f"tp {tp} at concurrency {c}: TPOT {_ms(a.tpot_s)} instead of {_ms(r.tpot_s)} at "
                  f"{a.tokens_per_s_per_gpu:,.0f} tokens/s/GPU (>= the base's "
                  f"{r.tokens_per_s_per_gpu:,.0f}); "
                  f"TTFT {_ms(a.ttft_s)} vs {_ms(r.ttft_s)}")
        out.append(_rec(f"serve on tp {tp} at concurrency {c}: lower TPOT at the same tokens/s per GPU",
                        _flags(sv, tp, c), r.tpot_s, a.tpot_s, reason,
                        {"base": _evidence(r), "whatif": _evidence(a)}, "tpot_s"))
    return out
