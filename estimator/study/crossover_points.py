"""Crossovers on the tile model itself: where, along one free dim, the per-point price (the one `--dim`
and `--sweep` give, estimator/pricing/points.py) changes regime.

The symbolic solver of estimator/study/crossover.py reads each kernel's formula, which keeps the tile
chosen at one size (SYMBOLIC_DIM_VALUE); with tile plans that formula is not the price away from that
size, so crossovers are found on the priced points instead: the dim is sampled on a geometric grid of
integers from LO_INT to HI_INT (SAMPLES points), every sign change of a quantity between neighbours is
narrowed by bisection on integers (all intervals at once, one array evaluation per round) to the last
integer before the change a and the first after it a + 1, reported as value a + 1/2 (so that
`from_int` = a + 1 as for the symbolic solver). Quantities: attention - MLP time, attention core - MLP,
compute-limited - memory-limited time (whole model), and each distinct kernel's limiter.
NB: two changes between neighbouring samples (sample spacing ~1% of the dim) show as none or one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from estimator.pricing.units import dominant_index
from estimator.study.crossover import Crossover
from estimator.study.sweep import _FIELDS, Compiled

LO_INT, HI_INT = 2, 2**31 - 1  # a dim of 1 is a build of its own (Sweeper); int32 dims
SAMPLES = 2000


def _quantities(c: Compiled, m: np.ndarray) -> dict[tuple, np.ndarray]:
    """Per point: whole-model differences (sign matters) and each group's limiter index."""
    est = m[:, 0, :] * c.counts[:, None]
    terms = m[:, len(_FIELDS):, :]
    lim = dominant_index(terms, axis=1)  # the limiter's rule, as Compiled.evaluate (pricing/units.py)
    scope = np.array([g.scope for g in c.groups])
    core = np.array([g.core for g in c.groups])
    names = list(c.limiters)

    def by(mask) -> np.ndarray:
        return est[mask].sum(axis=0)

    out = {("attention_vs_mlp", "attention", "mlp"): by(scope == "attention") - by(scope == "mlp"),
           ("attention_core_vs_mlp", "attention core", "mlp"): by(core) - by(scope == "mlp")}
    if "compute" in names and "memory" in names:
        compute = np.where(lim == names.index("compute"), est, 0).sum(axis=0)
        memory = np.where(lim == names.index("memory"), est, 0).sum(axis=0)
        out[("compute_vs_memory", "compute", "memory")] = compute - memory
    for i in range(len(c.groups)):
        out[("limiter", i)] = lim[i].astype(float)
    return out


def point_crossovers(compiled: Compiled, name: str, fixed: Mapping[str, int]) -> list[Crossover]:
    """Every crossover along `name` (the other free dims at `fixed`) on the priced points."""
    def at(xs: np.ndarray) -> dict[tuple, np.ndarray]:
        values = {d: (xs if d == name else np.full(len(xs), float(fixed[d]))) for d in compiled.free}
        return _quantities(compiled, compiled.priced_matrix(values))

    xs = np.unique(np.geomspace(LO_INT, HI_INT, SAMPLES).round())
    q = at(xs)
    found: list[tuple[tuple, float, float]] = []  # (key, a, b): state changes between integers a < b
    for key, v in q.items():
        change = (np.sign(v[:-1]) != np.sign(v[1:])) if key[0] != "limiter" else (v[:-1] != v[1:])
        found += [(key, xs[i], xs[i + 1]) for i in np.nonzero(change)[0]]
    lo = np.array([a for _, a, _ in found])
    hi = np.array([b for _, _, b in found])
    while len(found) and np.any(hi - lo > 1):
        mid = np.floor((lo + hi) / 2)
        qm = at(mid)
        ql = at(lo)
        for j, (key, _, _) in enumerate(found):
            same = (np.sign(qm[key][j]) == np.sign(ql[key][j])) if key[0] != "limiter" \
                else qm[key][j] == ql[key][j]
            if hi[j] - lo[j] > 1:
                lo[j], hi[j] = (mid[j], hi[j]) if same else (lo[j], mid[j])
    return [_crossover(compiled, name, fixed, key, a, b, at) for (key, _, _), a, b in
            zip(found, lo, hi, strict=True)]


def _crossover(c: Compiled, name: str, fixed, key: tuple, a: float, b: float, at) -> Crossover:
    ends = at(np.array([a, b]))
    check = {"x_below": float(a), "x_above": float(b)}
    if key[0] == "limiter":
        g = c.groups[key[1]]
        before, after = (c.limiters[int(v)] for v in ends[key])
        return Crossover(c.arch, name, float(a) + 0.5, dict(fixed), "limiter", g.name, before, after, g.count,
                         g.kind, None, check)
    what, first, second = key
    below, above = (float(v) for v in ends[key])
    after, before = (first, second) if above > 0 else (second, first)
    sign = 1.0 if above > 0 else -1.0
    check.update({"diff_below": sign * below, "diff_above": sign * above})
    return Crossover(c.arch, name, float(a) + 0.5, dict(fixed), what, "model", before, after, check=check)
