"""How exact a closed form is: the free-dim totals against the tile model priced point by point.

A kernel whose dims are free keeps, in its formula, the tile the model chose as if every free dim were
SYMBOLIC_DIM_VALUE (estimator/pricing/plan.py); elsewhere a library runs another tile (or split, or the
decode kernel), so the formula is exact only on that tile's regime. This module evaluates, at the ends
of a range of the free dims (every combination of their low and high ends), each tile-planned kernel's
formula and its per-point price (estimator/pricing/points.py, what `--dim` and `--sweep` give) and
reports the kernels whose formula is off by more than EXACT_REL, with the relative error at each end,
and the total's. A sweep is always priced point by point; only the printed formulas approximate.

Default range: DEFAULT_RANGE for every free dim (a `--sweep` passes its own).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from estimator.estimate import Result

EXACT_REL = 1e-6
DEFAULT_RANGE = (64, 16384)
MAX_CORNER_DIMS = 6  # up to 2**6 = 64 corners; above, the corners with at most one dim off its end


def _corners(free: list[str], ranges: Mapping[str, tuple[int, int]]) -> list[tuple[int, ...]]:
    """Every combination of the free dims' low and high ends while there are at most MAX_CORNER_DIMS of
    them; above (a graph whose shape inference left many unknown dims, 2**n corners), the all-low and
    all-high corners and those with one dim at the other end: 2n + 2 points. NB: the error reported
    is then the largest over those points, not over every corner."""
    if len(free) <= MAX_CORNER_DIMS:
        return list(itertools.product(*[ranges[d] for d in free]))
    out = []
    for base, other in ((0, 1), (1, 0)):
        ends = [ranges[d][base] for d in free]
        out.append(tuple(ends))
        for i, d in enumerate(free):
            out.append(tuple(ranges[d][other] if j == i else e for j, e in enumerate(ends)))
    return out


@dataclass(frozen=True)
class Approximate:
    kernel: str
    tile: str | None  # the tile in the formula (chosen at SYMBOLIC_DIM_VALUE)
    count: int
    rel_error: list[tuple[dict[str, int], float]]  # (point, (formula - price) / price)


@dataclass(frozen=True)
class ClosedForm:
    ranges: dict[str, tuple[int, int]]
    kernels: list[Approximate]
    total_rel_error: list[tuple[dict[str, int], float]]

    @property
    def exact(self) -> bool:
        return not self.kernels

    def to_json(self) -> dict[str, Any]:
        def pts(errs):
            return [{"at": at, "rel_error": e} for at, e in errs]

        return {"exact": self.exact, "range": {k: list(v) for k, v in self.ranges.items()},
                "approximate": [{"kernel": a.kernel, "tile": a.tile, "count": a.count,
                                 "rel_error": pts(a.rel_error)} for a in self.kernels],
                "total_rel_error": pts(self.total_rel_error)}

    def lines(self) -> list[str]:
        rng = ", ".join(f"{k} in [{lo}, {hi}]" for k, (lo, hi) in self.ranges.items())
        if self.exact:
            return [f"# closed form exact (within {EXACT_REL:g}) against the tile model at the ends of {rng}"]
        out = [f"# closed form: piecewise in the tile choice; the formulas above keep one tile per kernel "
               f"and approximate {len(self.kernels)} kernel(s) ({rng}; --sweep prices every point exactly):"]
        for a in self.kernels:
            errs = ", ".join(f"{_at(at)}: {e:+.1%}" for at, e in a.rel_error)
            out.append(f"#   {a.kernel} (x{a.count}, tile {a.tile}): {errs}")
        out.append("#   total: " + ", ".join(f"{_at(at)}: {e:+.1%}" for at, e in self.total_rel_error))
        return out


def _at(point: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


def closed_form(result: Result, ranges: Mapping[str, tuple[int, int]] | None = None) -> ClosedForm | None:
    """The closed form's accuracy at the ends of `ranges` (default DEFAULT_RANGE per free dim), or None
    when no dim is free or the kernels carry no tile plans."""
    from estimator.study.sweep import Compiled

    free = [k for k, v in result.dims.items() if v is None]
    if not free or not result.tiling:
        return None
    ranges = {d: tuple(ranges[d]) if ranges and d in ranges else DEFAULT_RANGE for d in free}
    corners = _corners(free, ranges)
    values = {d: np.array([c[i] for c in corners], dtype=float) for i, d in enumerate(free)}
    compiled = Compiled(result)
    formula, priced = compiled.group_estimates(values)
    points = [dict(zip(free, (int(v) for v in c), strict=True)) for c in corners]
    approx = []
    for i, g in enumerate(compiled.groups):
        rel = (formula[i] - priced[i]) / np.where(priced[i] > 0, priced[i], 1.0)
        if np.max(np.abs(rel)) > EXACT_REL:
            tile = g.kernel.tile.tile if g.kernel is not None and g.kernel.tile is not None else None
            approx.append(Approximate(g.name, tile, g.count, list(zip(points, map(float, rel), strict=True))))
    counts = compiled.counts[:, None]
    tot_f, tot_p = (formula * counts).sum(axis=0), (priced * counts).sum(axis=0)
    total = list(zip(points, map(float, (tot_f - tot_p) / tot_p), strict=True))
    return ClosedForm(dict(ranges), approx, total)
