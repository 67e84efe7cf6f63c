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
history is the keys attended to (past + the new token). The rule's constants are the library's, in the
family's tile menu (`attention.decode_launch`). NB: the per-head kernel's own split (its multi-block
mode fills the SMs) stays the cheapest of the menu's splits; the rule's split is capped by the largest
of them (a larger one would also need more of the library's reserved workspace).

Works on numbers and on numpy arrays (the calibration prices every row of a table at once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from estimator.tiling.menu import DecodeLaunch


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
