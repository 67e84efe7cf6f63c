"""A library's tile pick by shape: the tile a JIT-specialised GEMM library sets from M, N and the SM
count alone, before any timing (hwdesc/tiles/<family>.yaml `block_scaled.pick: waves`).

DeepGEMM's `get_best_gemm_config` (which TensorRT-LLM's sm90 fp8_block_scaling_gemm calls) runs

    swap      = M < swap_below_m            (A and B exchanged: the weights' N on the tile's M side)
    spanned   = N if swap else M            (the dim the tile's M covers; `other` the one its N covers)
    block_m   = the smallest tile M of the menu >= spanned, else the largest  (64 up to 64 rows, else 128)
    tiles     = batch * ceil(spanned / block_m) * ceil(other / block_n)
    waves     = ceil(tiles / slots)         (slots: one persistent CTA per SM)
    last      = tiles - (waves - 1) * slots (CTAs of the last wave, 1..slots)
    block_n   = argmin over the menu's N of (waves, -last, block_n)

so that only that one (tile, orientation) is the kernel that runs; the tile model then prices it. Every
step is integer arithmetic on numbers or numpy arrays of points (a mask per candidate); with free dims
the plan applies it on its numeric copy (estimator/pricing/plan.py `choose`).
NB: the library's pick ignores what the tile model would call faster (the promotion cost of a narrow
tile, the L2 traffic of re-read A panels): that is the point, it is what the library runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from estimator import symmath as sm
from estimator.pricing.menu import GemmTile

# lexicographic (waves, -last, block_n) as one number: last <= slots < 10**6, block_n < 10**3
_WAVE_WEIGHT = 1e9
_LAST_WEIGHT = 1e3


def covering_m(spanned: Any, tiles: tuple[GemmTile, ...]) -> Any:
    """The block M the library sets for a tile M spanning `spanned` elements: the smallest M of the menu
    at or above it, else the largest (a number, or an array for an array of points)."""
    ms = sorted({t.m for t in tiles})
    chosen = ms[-1]
    for m in reversed(ms[:-1]):
        chosen = sm.where(spanned <= m, m, chosen)
    return chosen


def _key(batch: Any, spanned: Any, other: Any, tile: GemmTile, slots: int) -> Any:
    tiles = batch * sm.ceil_div(spanned, tile.m) * sm.ceil_div(other, tile.n)
    waves = sm.ceil_div(tiles, slots)
    last = tiles - (waves - 1) * slots
    return waves * _WAVE_WEIGHT - last * _LAST_WEIGHT + tile.n


def picked(batch: Any, m: Any, n: Any, tiles: tuple[GemmTile, ...], sm_count: int,
           swap_below_m: int) -> dict[tuple[GemmTile, bool], Any]:
    """(tile, swap) -> whether the library runs it for this shape: a bool for numbers, a bool array for
    arrays of points (exactly one True per point). See the module docstring."""
    swap_at = (m < swap_below_m) if swap_below_m else (m < 0)
    keys = {}
    for tile in tiles:
        slots = sm_count // tile.sms * tile.max_ctas_per_sm
        for swap in (False, True):
            spanned, other = (n, m) if swap else (m, n)
            legal = (swap_at == swap) & (covering_m(spanned, tiles) == tile.m)
            keys[(tile, swap)] = sm.where(legal, _key(batch, spanned, other, tile, slots), np.inf)
    best = None
    for key in keys.values():
        best = key if best is None else sm.minimum(best, key)
    out = {}
    for choice, key in keys.items():
        won = key == best
        out[choice] = won if isinstance(won, np.ndarray) else bool(won)
    return out
