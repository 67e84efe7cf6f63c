"""The report's serving summary: the `--serve` result (estimator.serve.whatif.Serving) as the flat mapping
(quantity -> shown value) that html.serve_section lays out, in the order a reader asks: the workload,
latency (TTFT, TPOT, E2E), throughput (total, per GPU, per user), admission and KV cache, then memory per
GPU. The figures are ServeResult's and Memory's own (estimator/serve/serving.py, memory.py); nothing is
recomputed here."""

from __future__ import annotations

from typing import Any

from estimator.serve.summary import DEFINITIONS

GB = 1e9


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def summary(sv) -> dict[str, Any]:
    r, mem, w = sv.result, sv.result.memory, sv.work
    out: dict[str, Any] = {
        "deployment": f"{sv.model} on {sv.tp} x {sv.opts.hw.name} (tp {sv.tp}), {sv.framework.display_name}",
        "workload": f"isl {w.isl}, osl {w.osl}, concurrency {w.concurrency} ({w.batching} batching)",
        "fits": "yes" if r.fits else "no",
    }
    if r.fits:
        out.update({
            "TTFT": _ms(r.ttft_s) + (f" (queueing {_ms(r.queue_s)})" if r.queue_s else ""),
            "TPOT": _ms(r.tpot_s),
            "E2E": _ms(r.e2e_s),
            "tokens/s": f"{r.tokens_per_s:,.0f}",
            "tokens/s per GPU": f"{r.tokens_per_s_per_gpu:,.0f}",
            "tokens/s per user": f"{r.tokens_per_s_per_user:,.1f}",
            "admitted concurrency": str(r.admitted),
        })
    out["KV capacity"] = f"{r.kv_capacity_tokens:,} tokens" + (
        f" (headroom {r.kv_headroom_tokens:,})" if r.fits else "")
    for name, step in (("decode step", r.decode), ("prefill step", r.prefill)):
        if step is not None:
            mode = f"CUDA graph at batch {step.batch}" if step.graphed else f"eager, batch {step.batch}"
            out[name] = (f"{_ms(step.step_s)} = GPU {_ms(step.gpu_s)} + launch {_ms(step.launch_s)} + "
                         f"scheduler {_ms(step.sched_s)} ({mode}, {step.kernels} kernels)")
    for name, value in (("weights", mem.weights_bytes), ("activations", mem.activations_bytes),
                        ("comm buffers", mem.comm_buffers_bytes), ("framework reserve", mem.reserve_bytes),
                        ("KV cache", max(mem.kv_budget_bytes, 0.0))):
        out[f"memory per GPU: {name}"] = f"{value / GB:.2f} GB"
    out["memory per GPU: device"] = f"{mem.device_bytes / GB:.2f} GB"
    for i, note in enumerate(r.notes, 1):
        out[f"note {i}"] = note
    out["definitions"] = DEFINITIONS
    return out
