"""The cold start of a closed-loop benchmark: the first round's prompts arrive all at once.

A benchmark client at concurrency C (genai-perf / aiperf `--concurrency C --request-count R x C`,
vLLM's benchmark_serving `--max-concurrency C --num-prompts R x C`) starts its C clients together on
an idle server, and reports the mean TTFT over all R x C requests. The first round is a burst: the C
prompts queue for the prefill steps, k_b whole prompts a step (the budget-limited k_max of
estimator/serve/serving.py, every prompt is already waiting) over n_c chunk steps each, so prompt group
i (i = 0 .. g - 1, g = ceil(W / k_b)) has its first token after (i + 1) n_c burst steps. A burst step is
a prefill step T_pre(k_b) plus the decoding of the groups already prefilled riding along (in-flight
batching): step j carries b_j = min(floor(j / n_c) k_b, W - k_b) decoders, priced as
ride(b_j) = ride(W - k) x b_j / (W - k) (the decode attention is linear in the batch). The mean over
the W burst requests of their TTFT is TTFT_1; rounds 2 .. R run in the steady state (TTFT_ss), so the
reported mean is

    TTFT = TTFT_ss + (TTFT_1 - TTFT_ss) / R        (E2E shifts by the same amount, TPOT does not).

Worked: W = 4, k_b = 1, n_c = 1, T_pre = 10 ms, ride(W - 1 = 3) = 3 ms: steps cost 10, 11, 12, 13 ms
(0, 1, 2, 3 decoders riding), the groups finish at 10, 21, 33, 46 ms, TTFT_1 = 27.5 ms.
NB: the burst's decoders are priced at the steady-state context (isl + osl / 2); requests beyond the
KV capacity (C > W) and the static batching model (which is a burst every round) are left out; the
measured phase is taken to start on an idle server (a warm-up that drained before it).
"""

from __future__ import annotations

import numpy as np


def burst_ttft_s(w: int, k_b: int, n_c: int, pre_step_s: float, ride_s: float, ride_batch: int) -> float:
    """TTFT_1: the mean time to first token of `w` requests arriving together at an idle server that
    prefills `k_b` whole prompts a step over `n_c` chunk steps (each `pre_step_s`), the prefilled
    requests' decoding riding in every step (`ride_s` at a batch of `ride_batch` decoders, scaled
    linearly)."""
    if w < 1:
        return 0.0
    k_b = max(1, min(int(k_b), w))
    groups = -(-w // k_b)
    steps = np.arange(groups * n_c)
    decoders = np.minimum((steps // n_c) * k_b, max(w - k_b, 0))
    per_decoder = ride_s / ride_batch if ride_batch > 0 else 0.0
    ends = np.cumsum(pre_step_s + decoders * per_decoder)[n_c - 1::n_c]  # group i's first token
    sizes = np.full(groups, k_b)
    sizes[-1] = w - k_b * (groups - 1)
    return float((ends * sizes).sum() / w)


def benchmark_mean(steady_s: float, first_round_s: float, rounds: int | None) -> float:
    """The mean over `rounds` rounds of a figure that is `first_round_s` in the first round and
    `steady_s` in the others (`rounds` None: the steady state alone)."""
    if not rounds:
        return steady_s
    return steady_s + (first_round_s - steady_s) / int(rounds)
