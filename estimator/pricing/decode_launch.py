"""How a framework launches its decode attention: which kernel it runs and over how many KV splits.

TensorRT-LLM (the H100 tables' framework) decides both on the host, from the batch, the KV heads and the
history length, not by timing the candidates:

  splits   = history // min_tokens_per_split                      (at least 1)
  splits   = min(splits, round(sqrt(split_sqrt_factor * splits)))  (a long history is split less than
                                                                    in proportion: the combine grows)
  waves    = batch * kv_heads * splits / SMs
  splits   = floor(splits / (waves / target_waves)) when waves > target_waves   (at least 1)

and it runs its grouped MMA kernel (XQA) only when that fills the machine well enough,

  batch * kv_heads * max(1, history // min_tokens_per_split) * min_blocks_factor >= SMs,

falling back to the per-head masked-MHA kernel (one CTA per query head) otherwise, for the caches in
`fallback_kv_bytes` (on Hopper a 16-bit cache; the fp8 cache's sm90 kernel is always taken). The
history is the keys attended to (past + the new token). The per-head kernel's block size and its own
split (multi-block mode) follow the library's rule too (per_head_launch). The rule's constants are the
library's, in the family's tile menu (`attention.decode_launch`). NB: the rule's split is capped by the
menu's largest (a larger one would also need more of the library's reserved workspace).

Works on numbers and on numpy arrays (the calibration prices every row of a table at once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from estimator.pricing.menu import DecodeLaunch


def _floor_div(x: Any, d: int) -> Any:
    return np.floor_divide(np.asarray(x, dtype=float), d)


def library_splits(rule: DecodeLaunch, batch: Any, kv_heads: Any, history: Any, sms: int,
                   cap: int) -> Any:
    """The KV splits of the grouped kernel (module doc), at most `cap`."""
    splits = np.maximum(_floor_div(history, rule.min_tokens_per_split), 1)
    splits = np.minimum(splits, np.round(np.sqrt(rule.split_sqrt_factor * splits)))
    waves = np.asarray(batch, dtype=float) * kv_heads * splits / sms
    over = waves / rule.target_waves
    splits = np.where(over > 1, np.floor(splits / np.maximum(over, 1)), splits)
    splits = np.minimum(np.maximum(splits, 1), cap).astype(int)
    return splits if splits.ndim else int(splits)


def runs_grouped(rule: DecodeLaunch, batch: Any, kv_heads: Any, history: Any, sms: int,
                 kv_bytes: float) -> Any:
    """Whether the library runs its grouped kernel rather than the per-head one (module doc)."""
    if int(round(kv_bytes)) not in rule.fallback_kv_bytes:
        return True
    blocks = np.asarray(batch, dtype=float) * kv_heads * np.maximum(
        _floor_div(history, rule.min_tokens_per_split), 1)
    full = blocks * rule.min_blocks_factor >= sms
    return full if full.ndim else bool(full)


# The per-head kernel's threads: 16-byte loads of the 16-bit compute type per K/V row slice, and its
# smallest block (TensorRT-LLM's masked-MHA: THDS_PER_BLOCK 256, a K/V loop unrolled 8 deep).
LOAD_BYTES = 16
COMPUTE_BYTES = 2
BASE_THREADS = 256
UNROLL = 8


def per_head_launch(batch: Any, heads: Any, history: Any, head_dim: Any, sms: int, ctas_per_sm: int,
                    cap: int) -> tuple[Any, Any]:
    """(co-resident CTAs per SM, KV splits) of the per-head (masked-MHA) kernel as TensorRT-LLM launches
    it: grid (heads, batch, splits). `ctas_per_sm` 256-thread CTAs fill an SM (registers); a grid of
    fewer than ctas_per_sm x SMs CTAs gets larger blocks instead,

      factor  = min(ceil(SMs * ctas_per_sm / (batch * heads)), ctas_per_sm)
      threads = 256 x factor, rounded down to 256, 512 or 1024    (1024 at most)
      cpsm    = ctas_per_sm * 256 / threads                       (the same threads per SM)

    and multi-block mode splits the history to fill one wave of those blocks, at least one unrolled
    loop of keys per split:

      splits  = clamp(ceil(SMs * cpsm / (batch * heads)), 1, min(ceil(history / keys_per_loop), cap))
      keys_per_loop = threads / (head_dim_pow2 * 2 bytes / 16 bytes) * 8

    NB: `cap` stands for the library's reserved partials (max_seq_len_tile)."""
    bh = np.asarray(batch, dtype=float) * heads
    factor = np.minimum(np.ceil(sms * ctas_per_sm / bh), ctas_per_sm)
    units = np.where(factor >= 4, 4, np.where(factor >= 2, 2, 1))  # blocks of 256, 512 or 1024 threads
    cpsm = np.maximum(ctas_per_sm // units, 1)
    dh = 2 ** np.ceil(np.log2(np.asarray(head_dim, dtype=float)))
    keys_per_loop = BASE_THREADS * units / (dh * COMPUTE_BYTES / LOAD_BYTES) * UNROLL
    most = np.minimum(np.ceil(np.asarray(history, dtype=float) / keys_per_loop), cap)
    splits = np.maximum(np.minimum(np.ceil(sms * cpsm / bh), most), 1).astype(int)
    cpsm = cpsm.astype(int)
    return (cpsm, splits) if splits.ndim else (int(cpsm), int(splits))
