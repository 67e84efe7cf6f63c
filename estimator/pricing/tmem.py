"""Tensor memory (TMEM, sm_100 / sm_103): where tcgen05 MMAs keep their fp32 accumulators, and the
budget that bounds a GEMM tile and its co-resident CTAs.

Counting rule (hwdesc/tiles/blackwell.yaml `tmem`): TMEM is `lanes` x `columns` 32-bit cells per SM
(128 x 512). An accumulator tile's rows sit on lanes and its N columns on columns, so an fp32
accumulator of a tile_m x tile_n tile takes tile_n columns on tile_m / sms lanes of each SM (a 2-CTA
tile of M = 256 puts 128 rows on each SM of the pair). Columns are allocated per CTA over all lanes
(`tcgen05.alloc`: a power of two, at least `min_alloc_columns`), so an M = 64 tile still holds its N
columns. A persistent kernel keeps `accumulator_buffers` (2) accumulators so that the epilogue of one
tile drains while the MMA fills the next: 2N columns; where 2N do not fit it runs single-buffered (N).
A tile whose rows exceed the lanes or whose single accumulator exceeds the columns is not offered.

    columns_per_cta = pow2ceil(max(min_alloc_columns, buffers * tile_n))
    ctas_per_sm    <= columns // columns_per_cta

NB: block-scale factors of NVFP4 / MX MMAs also live in TMEM (a few columns per stage); not counted.
"""

from __future__ import annotations

from estimator.pricing.menu import GemmTile, Tmem


def _pow2ceil(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def fits(tile: GemmTile, tmem: Tmem) -> bool:
    """The tile's accumulator fits one SM's TMEM at all (rows on lanes, one buffer of N columns)."""
    return tile.m // tile.sms <= tmem.lanes and tile.n <= tmem.columns


def buffers(tile: GemmTile, tmem: Tmem) -> int:
    """Accumulator buffers one CTA keeps: `accumulator_buffers` where they fit, else 1 (0: no fit)."""
    if not fits(tile, tmem):
        return 0
    want = tmem.accumulator_buffers
    return want if want * tile.n <= tmem.columns else 1


def columns_per_cta(tile: GemmTile, tmem: Tmem) -> int:
    """TMEM columns one CTA allocates (0 when the tile does not fit)."""
    b = buffers(tile, tmem)
    if b == 0:
        return 0
    return _pow2ceil(max(tmem.min_alloc_columns, b * tile.n))


def ctas_per_sm(tile: GemmTile, tmem: Tmem) -> int:
    """CTAs of this tile TMEM lets co-reside on one SM (0: the tile is not offered)."""
    cols = columns_per_cta(tile, tmem)
    return tmem.columns // cols if cols else 0
