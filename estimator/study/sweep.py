"""Scaling sweeps: evaluate one priced model over a grid of dim values, fast.

`estimate()` runs once per GPU with the swept dims left free (the other dims bound); every distinct
kernel's times are then `sympy.lambdify`-ed together into one numpy function, so a 10,000-point sweep is
a few array operations per distinct kernel, not 10,000 estimates. Per point: bound, estimate, FLOPs, DRAM
bytes, and the estimate split per limiter (each kernel counted under its limiter at that point), per
kernel kind and per scope (attention / MLP / other, as defined in `estimator.study.crossover`).

Sweep specs: `seq=128:32768:x2` (geometric: start, stop, factor > 1), `seq=128:4096:+128` (linear: step
> 0), `seq=512,2048,8192` (a list). Several specs make a grid.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from estimator.errors import UserError
from estimator.estimate import Result
from estimator.ir import dim
from estimator.pricing.points import plan_gemms, point_pricers
from estimator.pricing.units import dominant_index
from estimator.study.crossover import groups
from estimator.textfit import fit_table, wrap

MAX_POINTS = 1_000_000  # per GPU; beyond this the arrays (and any table of them) stop being useful


class SweepError(UserError):
    pass


@dataclass(frozen=True)
class Sweep:
    name: str
    values: tuple[int, ...]


def _int(text: str, what: str, spec: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise SweepError(f"--sweep {spec!r}: {what} {text.strip()!r} is not an integer") from None
    if value <= 0:
        raise SweepError(f"--sweep {spec!r}: {what} must be a positive integer, got {value}")
    return value


def parse_sweep(text: str) -> Sweep:
    """`NAME=START:STOP:xFACTOR`, `NAME=START:STOP:+STEP` or `NAME=V1,V2,...`."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    hint = "expected NAME=START:STOP:xFACTOR, NAME=START:STOP:+STEP or NAME=V1,V2,..."
    if not sep or not name or not spec.strip():
        raise SweepError(f"--sweep {text!r}: {hint}")
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            raise SweepError(f"--sweep {text!r}: {hint}")
        start, stop = _int(parts[0], "start", text), _int(parts[1], "stop", text)
        if stop < start:
            raise SweepError(f"--sweep {text!r}: stop {stop} is below start {start}")
        values = _range(text, start, stop, parts[2].strip())
    else:
        values = sorted({_int(v, "value", text) for v in spec.split(",")})
    if len(values) > MAX_POINTS:
        raise SweepError(f"--sweep {text!r}: {len(values):,} points; at most {MAX_POINTS:,}")
    return Sweep(name, tuple(values))


def _range(spec: str, start: int, stop: int, step: str) -> list[int]:
    if step[:1] in ("x", "*"):
        try:
            factor = float(step[1:])
        except ValueError:
            raise SweepError(f"--sweep {spec!r}: factor {step!r} is not a number (e.g. x2)") from None
        if not factor > 1 or not math.isfinite(factor):
            raise SweepError(f"--sweep {spec!r}: a geometric factor must be above 1, got {step}")
        count = int(math.floor(math.log(stop / start) / math.log(factor) + 1e-9)) + 1
        if count > MAX_POINTS:
            raise SweepError(f"--sweep {spec!r}: {count:,} points; at most {MAX_POINTS:,}")
        # Rounded to integers (dims are integers); x1.1 from 1 repeats small values, kept once.
        return sorted({round(start * factor**i) for i in range(count)})
    inc = _int(step[1:] if step.startswith("+") else step, "step", spec)
    if (stop - start) // inc + 1 > MAX_POINTS:
        raise SweepError(f"--sweep {spec!r}: {(stop - start) // inc + 1:,} points; at most {MAX_POINTS:,}")
    return list(range(start, stop + 1, inc))


def parse_sweeps(items: Sequence[str]) -> list[Sweep]:
    sweeps = [parse_sweep(item) for item in items]
    names = [s.name for s in sweeps]
    for n in set(names):
        if names.count(n) > 1:
            raise SweepError(f"--sweep {n}: swept twice; give one spec per dim")
    size = math.prod(len(s.values) for s in sweeps)
    if size > MAX_POINTS:
        raise SweepError(f"the sweep grid has {size:,} points; at most {MAX_POINTS:,}")
    return sweeps


def grid(sweeps: Sequence[Sweep]) -> dict[str, np.ndarray]:
    """Every combination, flattened; the first sweep varies fastest (it is the x axis of plots)."""
    if not sweeps:
        return {}
    mesh = np.meshgrid(*[np.array(s.values, dtype=float) for s in reversed(sweeps)], indexing="ij")
    return {s.name: m.ravel() for s, m in zip(reversed(sweeps), mesh, strict=True)}


@dataclass
class Points:
    """One GPU's sweep: arrays over the grid points."""

    arch: str
    precision: str
    dims: dict[str, np.ndarray]  # the swept dims
    fixed: dict[str, int]  # the bound dims
    estimate_s: np.ndarray
    bound_s: np.ndarray
    flops: np.ndarray
    dram_bytes: np.ndarray
    kernels: np.ndarray  # kernel launches (fewer where a dim of 1 turns ops into views)
    by_limiter: dict[str, np.ndarray]  # estimate seconds of the kernels with that limiter at that point
    by_kind: dict[str, np.ndarray]
    by_scope: dict[str, np.ndarray]
    _dominant: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.estimate_s)

    def dominant_limiter(self) -> np.ndarray:
        """Per point, the limiter holding the largest share of the estimate (computed once)."""
        if self._dominant is None:
            names = list(self.by_limiter)
            self._dominant = np.array(names)[np.argmax(np.stack([self.by_limiter[n] for n in names]), axis=0)]
        return self._dominant

    def point(self, i: int) -> dict[str, Any]:
        """One point as the estimate JSON object (without the per-kernel list)."""
        est = float(self.estimate_s[i])
        dims = {**self.fixed, **{k: int(v[i]) for k, v in self.dims.items()}}

        def shares(groups_: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
            return {g: {"estimate_s": float(v[i]), "share": float(v[i]) / est if est else 0.0}
                    for g, v in groups_.items()}

        return {"arch": self.arch, "precision": self.precision, "dims": dims,
                "total": {"bound_s": float(self.bound_s[i]), "estimate_s": est, "flops": float(self.flops[i]),
                          "dram_bytes": float(self.dram_bytes[i]), "kernels": int(self.kernels[i])},
                "limiter": str(self.dominant_limiter()[i]),
                "by_limiter": shares(self.by_limiter), "by_kind": shares(self.by_kind),
                "by_scope": shares(self.by_scope)}


    def patch(self, mask: np.ndarray, other: Points) -> None:
        """Overwrite the points selected by `mask` with `other` (which holds exactly those points)."""
        self._dominant = None
        for name in ("estimate_s", "bound_s", "flops", "dram_bytes", "kernels"):
            getattr(self, name)[mask] = getattr(other, name)
        for attr in ("by_limiter", "by_kind", "by_scope"):
            mine, theirs = getattr(self, attr), getattr(other, attr)
            for key in set(mine) | set(theirs):
                arr = mine.setdefault(key, np.zeros(len(self)))
                arr[mask] = theirs[key] if key in theirs else 0.0


# Per group, the lambdified expressions in this order (terms follow after the fixed ones).
_FIELDS = ("estimate_s", "bound_s", "flops", "dram_bytes")


class Compiled:
    """A Result's per-kernel times as one numpy function of its free dims."""

    def __init__(self, result: Result) -> None:
        self.result = result
        self.arch = result.hw.name
        self.free = tuple(k for k, v in result.dims.items() if v is None)
        self.fixed = {k: v for k, v in result.dims.items() if v is not None}
        self.groups = groups(result)
        self.limiters = tuple(dict.fromkeys(k for g in self.groups for k in g.timing.terms))
        # Tile-planned kernels are priced per point by the pricing core at arrays (estimator/pricing/
        # points.py): their symbolic formula holds the tile chosen at one size only.
        self._pricers = point_pricers(result, self.free, [g.kernel for g in self.groups])
        self.width = len(_FIELDS) + len(self.limiters)
        # The estimate and limiter terms of a kernel priced at the points are overwritten by that price
        # (_tile_points): their formulas are read (and, deferred, priced: estimator/pricing/deferred.py)
        # only where a point keeps them, `_late` (group, field) -> the expression's getter.
        self._late: dict[tuple[int, int], Callable[[], Any]] = {}
        exprs: list[Any] = []
        zero = sympy.Integer(0)
        for i, g in enumerate(self.groups):
            t = g.timing
            late = self._pricers[i] is not None and self._pricers[i].tiled
            if late:
                self._late[(i, 0)] = lambda t=t: t.estimate_s
            exprs += [zero if late else t.estimate_s, t.bound_s, g.flops, g.dram_bytes]
            for j, name in enumerate(self.limiters):
                if name not in t.terms:
                    exprs.append(zero)
                elif late:
                    self._late[(i, len(_FIELDS) + j)] = lambda t=t, name=name: t.terms[name]
                    exprs.append(zero)
                else:
                    exprs.append(t.terms[name])
        self._fn = sympy.lambdify([dim(n) for n in self.free], exprs, "numpy")
        self._late_fns: dict[tuple[int, int], Callable] = {}
        self.counts = np.array([g.count for g in self.groups], dtype=float)
        self._masks = {attr: self._group_masks(attr) for attr in ("kind", "scope")}

    def _group_masks(self, attr: str) -> dict[str, np.ndarray]:
        names = sorted({getattr(g, attr) for g in self.groups})
        return {n: np.array([getattr(g, attr) == n for g in self.groups]) for n in names}

    def _late_formula(self, m: np.ndarray, i: int, j: int, flat: list[np.ndarray], n: int) -> None:
        """m[i, j] from its formula (a `_late` entry: see __init__)."""
        fn = self._late_fns.get((i, j))
        if fn is None:
            fn = self._late_fns[(i, j)] = sympy.lambdify([dim(d) for d in self.free], self._late[(i, j)](),
                                                         "numpy")
        m[i, j] = fn(*flat)  # a scalar (a dim-free term) broadcasts

    def _point_plans(self, values: dict[str, np.ndarray], n: int) -> tuple[dict[int, Any], dict[int, Any]]:
        """({group: its Work at the points}, {group: its tile plan there}) for every tile-planned kernel
        (KernelPricer.tile_plan; no plan where the points' plan is the streaming one), the GEMMs planned
        together, one menu walk per group of alike ones (points.plan_gemms, as the serving steps do)."""
        works: dict[int, Any] = {}
        plans: dict[int, Any] = {}
        gemms: list[tuple[int, Any]] = []
        for i, pricer in enumerate(self._pricers):
            if pricer is None:
                continue
            works[i] = pricer.work(values, n)
            problem = pricer.gemm_problem(values, n) if pricer.tiled else None
            if problem is not None:
                gemms.append((i, problem))
            else:
                plans[i] = pricer.tile_plan(values, n, works[i])
        for (i, _), plan in zip(gemms, plan_gemms([(g, n) for _, g in gemms], self.result.hw), strict=True):
            if plan is None:  # no GEMM tile: the kernel's next plan
                plan = self._pricers[i].plan(values, n, works[i], gemm=False)
            plans[i] = None if plan.kind == "stream" else plan
        return works, plans

    def _tile_points(self, m: np.ndarray, values: dict[str, np.ndarray], n: int) -> None:
        """Overwrite, in m (groups x fields x points), the estimate of every tile-planned kernel by its
        per-point tile model price, and its limiter terms by the plan's parts (compute, memory, l2: the
        terms of its max; latency and launch: the costs added to it), which is how the plan names its
        limiter (estimator/pricing/plan.py `_plan`). Entries of the formulas left `_late` and not
        overwritten are then read from their formulas."""
        flat = [values[d] for d in self.free]
        if not self.result.tiling:
            for i, j in self._late:
                self._late_formula(m, i, j, flat, n)
            return
        at = {name: len(_FIELDS) + j for j, name in enumerate(self.limiters)}
        works, plans = self._point_plans(values, n)
        for i, pricer in enumerate(self._pricers):
            work, plan = works.get(i), plans.get(i)
            if plan is not None:  # the pricing core at the points (estimator/pricing/points.py)
                done = {0}
                m[i, 0] = pricer.price(values, n, plan, work).estimate_s
                for name, v in plan.parts.items():
                    if name in at:
                        m[i, at[name]] = v
                        done.add(at[name])
                for j in range(self.width):
                    if (i, j) in self._late and j not in done:
                        self._late_formula(m, i, j, flat, n)
                continue
            for j in range(self.width):
                if (i, j) in self._late:
                    self._late_formula(m, i, j, flat, n)
            if "launch" in at:  # a plan priced by its formula: its terms include the fixed part
                # NB: a stream plan has no per-CTA overhead, so this is its parts exactly; an attention
                # plan priced by formula (L2 residency) keeps its overhead in every term but launch
                for name in ("compute", "memory", "l2", "latency"):
                    if name in at:
                        m[i, at[name]] -= m[i, at["launch"]]

    def _formulas(self, values: Mapping[str, Any]) -> tuple[np.ndarray, list[np.ndarray], int]:
        """(groups x fields x points of the lambdified formulas, the flat dim arrays, points)."""
        missing = [n for n in self.free if n not in values]
        if missing:
            raise SweepError(f"no values for the free dim(s) {', '.join(missing)}")
        arrays = np.broadcast_arrays(*[np.asarray(values[n], dtype=float) for n in self.free])
        flat = [a.ravel() for a in arrays]
        n = flat[0].size if flat else 1
        raw = self._fn(*flat)
        m = np.empty((len(raw), n))
        for i, v in enumerate(raw):
            m[i] = v  # scalars (dim-free terms) broadcast
        return m.reshape(len(self.groups), self.width, n), flat, n

    def group_estimates(self, values: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Per group and point (one kernel, not times its count): the closed-form estimate and the
        estimate priced at the point (equal except where a tile choice changes)."""
        m, flat, n = self._formulas(values)
        for i, j in self._late:
            if j == 0:
                self._late_formula(m, i, 0, flat, n)
        formula = m[:, 0].copy()
        self._tile_points(m, dict(zip(self.free, flat, strict=True)), n)
        return formula, m[:, 0]

    def priced_matrix(self, values: Mapping[str, Any]) -> np.ndarray:
        """groups x (estimate, bound, flops, dram_bytes, limiter terms...) x points, one kernel each
        (not times its count), every tile-planned kernel priced at its points."""
        m, flat, n = self._formulas(values)
        self._tile_points(m, dict(zip(self.free, flat, strict=True)), n)
        return m

    def evaluate(self, values: Mapping[str, Any]) -> Points:
        """Every quantity at the points given per free dim (arrays broadcast together)."""
        m, flat, n = self._formulas(values)
        self._tile_points(m, dict(zip(self.free, flat, strict=True)), n)
        counts = self.counts[:, None]
        est = m[:, 0, :] * counts
        terms = m[:, len(_FIELDS):, :]
        lim = dominant_index(terms, axis=1)  # the limiter's rule (estimator/pricing/units.py)
        by_limiter = {name: np.where(lim == j, est, 0.0).sum(axis=0) for j, name in enumerate(self.limiters)}

        def by(attr: str) -> dict[str, np.ndarray]:
            return {g: est[mask].sum(axis=0) for g, mask in self._masks[attr].items()}

        def total(j: int) -> np.ndarray:
            return (m[:, j, :] * counts).sum(axis=0)

        dims = {k: v.round().astype(np.int64) for k, v in zip(self.free, flat, strict=True)}
        return Points(self.arch, self.result.precision, dims, dict(self.fixed), est.sum(axis=0), total(1),
                      total(2), total(3), np.full(n, len(self.result.kernels)), by_limiter, by("kind"),
                      by("scope"))


class Sweeper:
    """One GPU's sweep: the generic Compiled model, plus one specialised build per set of swept dims that
    some points set to 1. Binding a dim to 1 can change the graph itself (a transpose that moves a size-1
    axis becomes a view; canonicalization drops it), so there the generic expressions would over-count;
    those points are priced from a build with the dim bound, exactly as `--dim NAME=1` would."""

    def __init__(self, build: Callable[[Mapping[str, int]], Result]) -> None:
        self.build = build  # extra dims to bind -> Result
        self.compiled = Compiled(build({}))
        self.result = self.compiled.result
        self._special: dict[frozenset[str], Compiled] = {}

    def evaluate(self, values: Mapping[str, Any]) -> Points:
        pts = self.compiled.evaluate(values)
        free = self.compiled.free
        flat = dict(zip(free, (a.ravel() for a in np.broadcast_arrays(
            *[np.asarray(values[n], dtype=float) for n in free])), strict=True))
        code = np.zeros(len(pts), dtype=np.int64)  # bit j set: free dim j is 1 at that point
        for j, d in enumerate(free):
            code |= (flat[d] == 1).astype(np.int64) << j
        for c in np.unique(code[code > 0]):
            mask = code == c
            subset = frozenset(d for j, d in enumerate(free) if (int(c) >> j) & 1)
            if subset not in self._special:
                self._special[subset] = Compiled(self.build({d: 1 for d in subset}))
            sub = self._special[subset].evaluate({d: flat[d][mask] for d in free if d not in subset})
            pts.patch(mask, sub)
        return pts


# ---------------------------------------------------------------------------------------------------
# Outputs


def _seconds(v: float) -> str:
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v * 1e9:.3g} ns"


def _ordered(runs: Sequence[Points]) -> list[tuple[int, Points]]:
    """(point index, run) in table order: grid points in order, GPUs side by side."""
    return [(i, p) for i in range(len(runs[0])) for p in runs]


def _kind_columns(runs: Sequence[Points]) -> list[str]:
    totals: dict[str, float] = {}
    for p in runs:
        for k, v in p.by_kind.items():
            totals[k] = totals.get(k, 0.0) + float(v.sum())
    return sorted(totals, key=lambda k: -totals[k])


def format_table(runs: Sequence[Points], max_rows: int = 60) -> str:
    """Per point and GPU: dims, estimate, bound, the dominant limiter, shares per limiter, scope and kind."""
    first = runs[0]
    swept = list(first.dims)
    kinds = _kind_columns(runs)
    # a limiter no kernel has at any point gets no column (the CSV and JSON keep every one)
    limiters = [x for x in first.by_limiter if any(np.any(p.by_limiter.get(x, 0) > 0) for p in runs)]
    multi = len(runs) > 1
    head = (["arch"] * multi + swept + ["estimate", "bound", "limiter"] + [f"{x}%" for x in limiters]
            + ["attn%", "mlp%"] + [f"{k}%" for k in kinds] + (["speedup"] if multi else []))
    order = _ordered(runs)
    note = ""
    if len(order) > max_rows:
        per_arch = max(2, max_rows // len(runs))
        idx = np.unique(np.linspace(0, len(first) - 1, per_arch).round().astype(int))
        order = [(i, p) for i in idx for p in runs]
        note = (f"(showing {len(idx)} evenly spaced of {len(first):,} points per GPU; --csv FILE or --json "
                f"for all)")
    rows = [head]
    for i, p in order:
        est = float(p.estimate_s[i])

        def pct(v: np.ndarray, est=est, i=i) -> str:
            return f"{100 * float(v[i]) / est:.1f}" if est else "-"

        row = ([p.arch] * multi + [f"{int(p.dims[d][i]):,}" for d in swept]
               + [_seconds(est), _seconds(float(p.bound_s[i])), str(p.dominant_limiter()[i])]
               + [pct(p.by_limiter[x]) for x in limiters]
               + [pct(p.by_scope.get(scope, np.zeros(len(p)))) for scope in ("attention", "mlp")]
               + [pct(p.by_kind[k]) if k in p.by_kind else "-" for k in kinds])
        if multi:
            row.append(f"{float(first.estimate_s[i]) / est:.2f}x" if est else "-")
        rows.append(row)
    # the terminal's width (estimator/textfit.py): the last share columns go first, the speedup (the point
    # of comparing GPUs) stays
    n = len(head)
    drop = [*range(n - 2, 0, -1), n - 1] if multi else None
    lines = fit_table(rows, ("l" if multi else "") + "r" * (n - multi), drop=drop)
    fixed = ", ".join(f"{k}={v}" for k, v in first.fixed.items()) or "none"
    legend = [f"precision {first.precision}; fixed dims: {fixed}; shares are of the estimate "
              f"(limiter: of the kernels with that limiter at that point; attn/mlp: see "
              f"estimator.study.crossover)"]
    if multi:
        legend.append(f"speedup: estimate on {first.arch} / estimate on this GPU")
    legend = [part for line in legend for part in wrap(line)]
    return "\n".join(legend + lines + (wrap(note) if note else []))


def csv_rows(runs: Sequence[Points]) -> list[dict[str, Any]]:
    kinds = _kind_columns(runs)
    rows = []
    for i, p in _ordered(runs):
        est = float(p.estimate_s[i])
        row: dict[str, Any] = {"arch": p.arch, "precision": p.precision}
        row.update({k: v for k, v in p.fixed.items()})
        row.update({k: int(v[i]) for k, v in p.dims.items()})
        row.update({"estimate_s": est, "bound_s": float(p.bound_s[i]), "flops": float(p.flops[i]),
                    "dram_bytes": float(p.dram_bytes[i]), "limiter": str(p.dominant_limiter()[i])})
        for prefix, groups_ in (("limiter", p.by_limiter), ("scope", p.by_scope)):
            row.update({f"share_{prefix}_{g}": float(v[i]) / est if est else 0.0 for g, v in groups_.items()})
        row.update({f"share_kind_{k}": float(p.by_kind[k][i]) / est if est and k in p.by_kind else 0.0
                    for k in kinds})
        rows.append(row)
    return rows


def to_csv(runs: Sequence[Points]) -> str:
    rows = csv_rows(runs)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def to_json(runs: Sequence[Points], sweeps: Sequence[Sweep]) -> dict[str, Any]:
    return {"sweep": {s.name: list(s.values) for s in sweeps},
            "archs": [p.arch for p in runs],
            "points": [p.point(i) for i, p in _ordered(runs)]}
