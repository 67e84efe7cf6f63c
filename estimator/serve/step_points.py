"""A serving step priced at arrays of points: every (batch, past_seq) a serving sweep asks of the decode
step, in one numpy pass, each point priced as `--dim batch=B --dim past_seq=P` prices it.

The orchestration of the pricing core (estimator/pricing/points.py) for the steps' graphs:
- the step's graphs (the folded 1- and 2-layer variants, estimator/serve/steps.py) are lowered once
  with the dims free by the same passes `estimate()` runs (estimate.lowered_graph); where some points
  set a dim to 1 a build with that dim bound prices them (binding a dim to 1 can change the graph: a
  transpose of a size-1 axis becomes a view), as study/sweep.Sweeper does;
- every distinct kernel (full signature, shared by the variants: it carries the sum of weight x count)
  is priced at the distinct values of the dims its shapes use (a GEMM of the decode step once per
  batch, not once per past length), by the pricing core at those arrays: its plan (a tile per point;
  the tiled GEMMs of every build planned together, one menu walk per group of alike ones:
  points.plan_gemms), then `price`; without tile pricing (--roofline, or a GPU without a tile model)
  `price` with no plan, as `estimate()` prices such kernels; collectives by `price` at each distinct
  message size.
NB: no L2 residency (serving never warms its inputs).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import sympy

from estimator.estimate import lowered_graph
from estimator.ir import Graph
from estimator.pricing.plan import tiling_supported
from estimator.pricing.points import KernelPricer, Lambdas, PointWork, plan_gemms
from estimator.pricing.price import price
from hwdesc import HardwareDescriptor


@dataclass
class _Unit:
    """One distinct kernel of a build: where it is, its weight in the step, the dims its shapes use."""

    key: Hashable  # the full signature (equal across graphs)
    graph: Graph
    kernel: Any
    weight: float
    dims: tuple[str, ...]
    pricer: KernelPricer
    context: bool


@dataclass
class _Build:
    """The step's kernels lowered with the dims of `free` free (the others bound to 1)."""

    free: tuple[str, ...]
    lam: Lambdas
    units: list[_Unit]
    kernels: float  # launches of the step: sum of weight x kernels over the variants


@dataclass
class _Gemm:
    """A tiled GEMM kernel at its distinct points, waiting to be planned with the others (plan_gemms)."""

    unit: _Unit
    problem: Any  # estimator.pricing.gemm.Gemm on arrays
    m: int
    mask: np.ndarray  # the evaluate() points of its build
    inverse: np.ndarray  # those points -> its distinct points
    at: dict[str, np.ndarray]  # its distinct points
    work: PointWork


def _add(out: tuple[np.ndarray, np.ndarray], u: _Unit, mask: np.ndarray, inverse: np.ndarray,
         est: np.ndarray) -> None:
    """Add the kernel's estimate (at its distinct points) x its weight to the totals at `mask`."""
    part = est[inverse] * u.weight
    out[0][mask] += part
    if u.context:
        out[1][mask] += part


def _symbols(obj: Any, out: set) -> set:
    """Names of the free symbols anywhere in a (nested tuple) kernel signature."""
    if isinstance(obj, sympy.Basic):
        out.update(s.name for s in obj.free_symbols)
    elif isinstance(obj, (tuple, list, frozenset)):
        for x in obj:
            _symbols(x, out)
    return out


class StepPoints:
    """One serving step's GPU time at arrays of its dims. `variants`: (graph already at the deployed
    precision, weight); `dims`: the dims the points give (the others must be bound or absent); `tiling`:
    kernels priced by the tile model where the GPU has one (else, and under --roofline, by `price`
    with no plan)."""

    def __init__(self, variants: Sequence[tuple[Graph, int]], hw: HardwareDescriptor, pipeline: str,
                 framework: str | None, dims: Sequence[str], context_kinds: Sequence[str] = (),
                 tiling: bool = True) -> None:
        self.variants, self.hw, self.pipeline, self.framework = list(variants), hw, pipeline, framework
        self.dims, self.context_kinds = tuple(dims), tuple(context_kinds)
        self.tiling = tiling and tiling_supported(hw)
        self._builds: dict[frozenset[str], _Build] = {}
        self._comm: dict[Hashable, float] = {}

    def _build(self, ones: frozenset[str]) -> _Build:
        hit = self._builds.get(ones)
        if hit is not None:
            return hit
        free = tuple(d for d in self.dims if d not in ones)
        lam = Lambdas(free)
        units: dict[Hashable, _Unit] = {}
        kernels = 0.0
        for graph, weight in self.variants:
            g, costs, lowered, _ = lowered_graph(graph, self.hw, None, dict.fromkeys(ones, 1), self.pipeline)
            kernels += weight * len(lowered.kernels)
            for k in lowered.kernels:
                key = costs.full_signature(k.signature)
                if key in units:
                    units[key].weight += weight
                    continue
                used = _symbols(key, set()) | _symbols(tuple(k.work.flops.values()), set())
                used |= _symbols((k.work.dram_bytes, k.work.comm.nbytes if k.work.comm else None), set())
                pricer = KernelPricer(g, k, self.hw, lam, self.tiling)
                units[key] = _Unit(key, g, k, float(weight), tuple(d for d in free if d in used), pricer,
                                   k.kind in self.context_kinds)
        self._builds[ones] = hit = _Build(free, lam, list(units.values()), kernels)
        return hit

    def evaluate(self, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(GPU time, its context-kind part, kernel launches) at the points (arrays of one length)."""
        flat = {d: np.asarray(values[d], dtype=float).ravel() for d in self.dims}
        n = len(next(iter(flat.values()))) if flat else 1
        out = (np.zeros(n), np.zeros(n))  # total, context
        kernels = np.zeros(n)
        code = np.zeros(n, dtype=np.int64)  # bit j set: dim j is 1 at that point
        for j, d in enumerate(self.dims):
            code |= (flat[d] == 1).astype(np.int64) << j
        gemms: list[_Gemm] = []  # every build's tiled GEMMs, priced together below
        for c in np.unique(code):
            mask = code == c
            ones = frozenset(d for j, d in enumerate(self.dims) if (int(c) >> j) & 1)
            build = self._build(ones)
            self._price_build(build, {d: flat[d][mask] for d in build.free}, mask, out, gemms)
            kernels[mask] = build.kernels
        plans = plan_gemms([(g.problem, g.m) for g in gemms], self.hw)
        for g, plan in zip(gemms, plans, strict=True):
            pricer = g.unit.pricer
            if plan is None:  # no GEMM tile: the kernel's next plan
                plan = pricer.plan(g.at, g.m, g.work, gemm=False)
            _add(out, g.unit, g.mask, g.inverse, pricer.price(g.at, g.m, plan, g.work).estimate_s)
        return out[0], out[1], kernels

    def _price_build(self, build: _Build, values: dict[str, np.ndarray], mask: np.ndarray,
                     out: tuple[np.ndarray, np.ndarray], gemms: list[_Gemm]) -> None:
        """Add each kernel's estimate at the points of `mask` to `out`, a tiled GEMM's to `gemms`."""
        n = int(mask.sum())
        distinct: dict[tuple[str, ...], tuple[dict, np.ndarray, int]] = {}
        for u in build.units:
            if u.dims not in distinct:  # the distinct value tuples of the dims this kernel uses
                if u.dims:
                    rows = np.stack([values[d] for d in u.dims], axis=1)
                    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
                else:
                    first, inverse = np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
                distinct[u.dims] = ({d: v[first] for d, v in values.items()}, inverse.ravel(), len(first))
            at, inverse, m = distinct[u.dims]
            comm = u.kernel.work.comm
            if comm is not None:
                sizes = build.lam.array(comm.nbytes, at, m)
                _add(out, u, mask, inverse, np.array([self._collective(u, b) for b in sizes]))
                continue
            work = u.pricer.work(at, m)
            if not self.tiling:
                _add(out, u, mask, inverse, u.pricer.price(at, m, None, work).estimate_s)
                continue
            problem = u.pricer.gemm_problem(at, m)
            if problem is not None:
                gemms.append(_Gemm(u, problem, m, mask, inverse, at, work))
                continue
            plan = u.pricer.plan(at, m, work)  # attention, or the streaming model
            _add(out, u, mask, inverse, u.pricer.price(at, m, plan, work).estimate_s)

    def _collective(self, u: _Unit, nbytes: float) -> float:
        key = (u.key, nbytes)
        hit = self._comm.get(key)
        if hit is None:
            size = sympy.Integer(int(nbytes)) if float(nbytes).is_integer() else sympy.Float(nbytes)
            work = replace(u.kernel.work, comm=replace(u.kernel.work.comm, nbytes=size))
            timing = price(work, self.hw, None, u.kernel.kind, u.kernel.op, self.framework, True)
            hit = self._comm[key] = float(timing.estimate_s)
        return hit
