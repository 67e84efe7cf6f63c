"""Lock-step waves: a closed loop of equal requests under a prefill-first scheduler (SGLang).

SGLang's scheduler runs a prefill batch whenever one can be formed and decodes only when none can
(Scheduler.get_next_batch_to_run: "Run prefill first if possible"; enable_mixed_chunk False by default),
so prefill and decode never share a step. B equal requests then move in waves: all B arrive together
(the previous wave's all finished on the same step), their B x isl prompt tokens are prefilled in
S = ceil(B x isl / chunk) steps of `chunk` tokens (chunked_prefill_size, the framework's
max_num_tokens; the last step takes the rest) with every decode stalled, then the B decode together
for osl - 1 steps and finish on the same step.
  chunk c (1-based) holds n_c = min(chunk, B x isl - (c - 1) x chunk) tokens and lasts T_c;
  prompt r (0-based) ends in chunk e_r = ceil((r + 1) x isl / chunk): its first token comes at
    F_r = T_1 + ... + T_{e_r}, and the chunks after it, P - F_r (P = the wave's whole prefill), stall
    its decoding;
  TTFT = mean over r of F_r;   E2E = P + D, D = the osl - 1 decode steps of the B (summed exactly);
  TPOT = (E2E - TTFT) / (osl - 1) = D / (osl - 1) + mean(P - F_r) / (osl - 1);
  the wave lasts P + D: tokens/s = B x osl / (P + D).
The chunk prices are the caller's (serve(): a share of the priced prefill step, estimator/serve/serving.py;
estimator/calibration/validate_moe_serving.py: its kernel sums): one wave model for both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import accumulate

from estimator.serve.frameworks import Framework
from estimator.serve.launch import StepCost, prefill_step


@dataclass(frozen=True)
class Wave:
    ttft_s: float  # mean over the B requests of the time to the end of their last prefill chunk
    tpot_s: float
    e2e_s: float
    duration_s: float  # the wave's prefill + decode: one cycle of every client
    tokens_per_s: float
    stall_s: float  # mean over the B requests of the prefill chunks after their first token
    chunks: int  # the wave's prefill steps


def chunk_tokens(batch: int, isl: int, chunk: int) -> list[int]:
    """The prompt tokens of each prefill step of a wave of `batch` prompts of `isl` tokens."""
    total = batch * isl
    return [min(chunk, total - start) for start in range(0, total, chunk)]


def last_chunks(batch: int, isl: int, chunk: int) -> list[int]:
    """The chunk (1-based) in which each prompt's last token is prefilled: its first output token."""
    return [math.ceil((r + 1) * isl / chunk) for r in range(batch)]


def wave(chunk_s: list[float], ends: list[int], decode_s: float, osl: int) -> Wave:
    """The wave's metrics from its prefill steps' times `chunk_s`, each request's last chunk `ends`
    (last_chunks) and the sum `decode_s` of its osl - 1 decode steps (see the module doc)."""
    batch = len(ends)
    done = list(accumulate(chunk_s, initial=0.0))  # done[e]: the prefill time to the end of chunk e
    prefill = done[-1]
    ttft = sum(done[e] for e in ends) / batch
    stall = prefill - ttft  # = mean over r of (P - F_r)
    duration = prefill + decode_s
    return Wave(ttft, (decode_s + stall) / (osl - 1), duration, duration, batch * osl / duration, stall,
                len(chunk_s))


def priced_wave(steps, fw: Framework, batch: int, isl: int, decode_s: float,
                osl: int) -> tuple[StepCost, Wave]:
    """(the wave's first prefill step, the Wave) of `batch` requests on `steps` under framework `fw`:
    each chunk of n tokens is the share n / (batch x isl) of the prefill step of the batch prompts
    (E_pre(batch, isl), estimator/serve/launch.py `prefill_step`: eager, with its launch and scheduler
    terms); `decode_s` the sum of the osl - 1 decode steps at batch.
    NB: a chunk's time is proportional to its tokens, so the weights the prefill step reads once are
    spread over the chunks rather than read by each (SGLang's chunks of 8192 tokens are compute-bound)."""
    chunks = chunk_tokens(batch, isl, int(fw.max_num_tokens))
    costs = {n: prefill_step(steps, fw, batch, isl, batch * isl / n) for n in set(chunks)}
    chunk_s = [float(costs[n].step_s) for n in chunks]
    return costs[chunks[0]], wave(chunk_s, last_chunks(batch, isl, int(fw.max_num_tokens)), decode_s, osl)
