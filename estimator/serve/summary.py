"""Text output of the serving mode: the serving summary, the memory breakdown, a sweep table with its
Pareto front, and the Pareto plot."""

from __future__ import annotations

from collections.abc import Sequence

from estimator.serve.memory import Memory
from estimator.serve.serving import ServeResult

GB = 1e9
DEFINITIONS = (
    "TTFT = arrival -> first token; TPOT = (E2E - TTFT) / (osl - 1); E2E = arrival -> last "
    "token; admitted = requests in flight at once (the rest queue)"
)


SCHEDULER_TEXT = {"inflight": "in-flight batching, prefills mixed into the decode steps",
                  "prefill_first": "prefill-first waves", "static": "static batches"}


def _scheduler(r: ServeResult) -> str:
    from estimator.serve.frameworks import frameworks

    fw = frameworks().get(r.framework)
    name = fw.display_name.split(" (")[0] if fw is not None else r.framework
    return f"  scheduler: {SCHEDULER_TEXT.get(r.scheduler, r.scheduler)} ({name})"


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 10 else f"{s:.2f} s"


TERM_LABELS = {"kv_queue_s": "queue for a KV slot", "budget_queue_s": "queue for the token budget",
               "join_s": "wait to join a step", "slot_queue_s": "queue for the prefill slot",
               "host_queue_s": "queue at the front end", "prefill_s": "prefill",
               "dispatch_s": "prefill dispatch", "burst_s": "benchmark start (burst)"}


def fit_text(r: ServeResult) -> str:
    """The line of a deployment that does not fit: why, and the smallest that does (where known)."""
    mem = r.memory
    line = (f"does not fit: {mem.non_kv_bytes / GB:.1f} GB per GPU before any KV cache "
            f"({mem.weights_bytes / GB:.1f} GB of weights) on {mem.device_bytes / GB:.1f} GB; "
            f"{'; '.join(n.removeprefix('does not fit: ') for n in r.notes)}")  # one prefix, not two
    fit = r.smallest_fit
    if fit is not None:
        line += "; smallest fit: " + (" ".join(f"--{k} {v}" for k, v in fit.items()) if fit
                                      else "none up to the NVLink domain")
    return line


def memory_text(mem: Memory, isl: int, osl: int, batch: int | None, context: int) -> str:
    rows = [
        ("weights", mem.weights_bytes),
        ("activations", mem.activations_bytes),
        ("comm buffers", mem.comm_buffers_bytes),
        ("framework reserve", mem.reserve_bytes),
        ("KV cache", max(mem.kv_budget_bytes, 0.0)),
    ]
    lines = [f"memory per GPU (of {mem.device_bytes / GB:.1f} GB the runtime reports):"]
    for name, value in rows:
        extra = (
            f"  (peak at {mem.activations_peak_kernel})"
            if name == "activations" and mem.activations_peak_kernel
            else ""
        )
        lines.append(f"  {name:<18}{value / GB:>9.2f} GB{extra}")
    fits = mem.fits(isl, osl)
    lines.append(
        f"  KV per token {mem.kv_bytes_per_token / 1024:.1f} KiB; capacity {mem.kv_capacity_tokens:,} "
        f"tokens ({mem.kv_policy}, blocks of {mem.tokens_per_block})"
    )
    lines.append(
        f"  fits: {'yes' if fits else 'NO'}; sequences of {isl}+{osl} tokens: "
        f"{mem.max_concurrency(isl, osl) if fits else 0}"
    )
    lines.append(f"  largest batch at context {context}: {mem.largest_batch(context)}")
    if batch:
        lines.append(f"  longest context at batch {batch}: {mem.longest_context(batch):,} tokens")
    return "\n".join(lines)


def serve_text(r: ServeResult, title: str) -> str:
    w = r.workload
    if not r.fits:
        return f"{title}\n  {fit_text(r)}"
    lines = [
        title,
        f"workload: isl {w.isl}, osl {w.osl}, concurrency {w.concurrency} ({w.batching} batching); "
        f"admitted {r.admitted}",
        _scheduler(r),
        f"  TTFT            {_ms(r.ttft_s):>12}" + (f"  (queueing {_ms(r.queue_s)})" if r.queue_s else ""),
        *(f"    {TERM_LABELS[k]:<28}{_ms(v):>12}" for k, v in r.ttft_terms.items() if v),
        f"  TPOT            {_ms(r.tpot_s):>12}",
        f"  E2E             {_ms(r.e2e_s):>12}",
        f"  tokens/s        {r.tokens_per_s:>12,.0f}   per GPU {r.tokens_per_s_per_gpu:,.0f}   "
        f"per user {r.tokens_per_s_per_user:,.1f}",
        f"  KV capacity     {r.kv_capacity_tokens:>12,} tokens; headroom {r.kv_headroom_tokens:,} tokens",
    ]
    for name, step in (("decode step", r.decode), ("prefill step", r.prefill)):
        if step is not None:
            s = step.first()
            mode = f"CUDA graph at batch {s.batch}" if s.graphed else f"eager, batch {s.batch}"
            lines.append(
                f"  {name:<15} {_ms(s.step_s):>12} = GPU {_ms(s.gpu_s)} + launch {_ms(s.launch_s)} "
                f"+ scheduler {_ms(s.sched_s)}  ({mode}, {s.kernels} kernels)"
            )
    lines.extend(f"  note: {n}" for n in r.notes)
    lines.append(f"  ({DEFINITIONS})")
    return "\n".join(lines)


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which (tokens/s/GPU, tokens/s/user) points no other point beats on both axes."""
    return [not any(o[0] >= p[0] and o[1] >= p[1] and o != p for o in points) for p in points]


def sweep_text(rows: Sequence[tuple[int, ServeResult]]) -> str:
    pts = [(r.tokens_per_s_per_gpu, r.tokens_per_s_per_user or 0.0) for _, r in rows]
    front = pareto(pts)
    out = [
        f"{'tp':>3} {'conc':>5} {'admitted':>8} {'TTFT':>10} {'TPOT':>10} {'tok/s/GPU':>10} "
        f"{'tok/s/user':>10}  pareto"
    ]
    for (tp, r), best in zip(rows, front, strict=True):
        if not r.fits:
            out.append(f"{tp:>3} {r.workload.concurrency:>5}  {fit_text(r)}")
            continue
        out.append(
            f"{tp:>3} {r.workload.concurrency:>5} {r.admitted:>8} {_ms(r.ttft_s):>10} {_ms(r.tpot_s):>10} "
            f"{r.tokens_per_s_per_gpu:>10,.0f} {r.tokens_per_s_per_user:>10,.1f}  {'*' if best else ''}"
        )
    out.append(f"(* = on the Pareto front of tokens/s/GPU against tokens/s/user; {DEFINITIONS})")
    return "\n".join(out)


def plot_pareto(rows: Sequence[tuple[int, ServeResult]], path: str, title: str) -> None:
    pareto_figure(rows, title).savefig(path, bbox_inches="tight")


def pareto_figure(rows: Sequence[tuple[int, ServeResult]], title: str):
    """The Pareto plot as a matplotlib Figure (the HTML report inlines it as SVG)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for tp in sorted({tp for tp, _ in rows}):
        pts = sorted(
            (r.tokens_per_s_per_user, r.tokens_per_s_per_gpu, r.workload.concurrency)
            for t, r in rows
            if t == tp and r.fits
        )
        if pts:
            (line,) = ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"tp {tp}", gid=f"tp:{tp}"
            )
            for x, y, c in pts:
                ax.annotate(str(c), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ok = [(r.tokens_per_s_per_user, r.tokens_per_s_per_gpu) for _, r in rows if r.fits]
    front = sorted(p for p, best in zip(ok, pareto([(b, a) for a, b in ok]), strict=True) if best)
    if front:
        ax.plot([p[0] for p in front], [p[1] for p in front], "k--", lw=1, label="Pareto front", gid="pareto")
    ax.set_xlabel("tokens/s per user (1 / TPOT)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig
