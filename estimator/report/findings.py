"""Kernel-level recommenders, read off the tile plans and the other fusion strategies' kernels.

- tile-quantization: a GEMM whose last wave leaves the machine idle (wave efficiency < WAVE_EFF_MIN) or
  whose edge tiles are mostly padding (useful share of the tiles' M x N < PAD_EFF_MIN; N = 129 on a
  32-wide tile pays for 160 columns). The what-if re-estimates that GEMM alone, through estimate(), at
  its own shape and at M or N rounded to a multiple of the tile (and of 64 / 128), down (drop the odd rows
  or columns, e.g. fold them into another GEMM) and up (pad); the tile model itself already picks
  split-K. gain = calls x (time at its shape - time at the better shape), both single-GEMM estimates.
  NB: a GEMM fused with an epilogue is re-estimated without the epilogue, at both shapes alike.
- fusion-kernels: memory- or launch-bound kernels that another strategy's rule merges into one kernel
  (the bytes it keeps on chip, the launches it saves). gain = the base kernels' estimates - the fused
  kernel's estimate, both from full estimate() runs, summed over every occurrence.
- split-kv: a decode attention kernel at small batch fills the GPU only because the tile model chose a
  split-KV (flash-decoding) configuration. The what-if prices the same kernel through the same tiling
  and pricing code estimate() runs (plan_kernel + price), its menu restricted to no split; the gain is
  what the split saves over a runtime without it (the estimate assumes the split: keep it), so the
  recommendation's estimate_s is the base total. NB: estimate() has no option to forbid a split.
- profile: with a joined measured profile (estimate profile FILE --model M --recommend), kernels measured
  far above their estimate (gain = measured - estimate) or far from their peak (no unit busy; gain =
  measured - bound), with the counter that shows why; metric: measured seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

import sympy

from estimator.estimate import PricedKernel, Result, estimate
from estimator.ir import Graph, Node, Tensor
from estimator.report.recommendation import (
    Context,
    Recommendation,
    fmt_bytes,
    from_gain,
    recommender,
    seconds,
)

WAVE_EFF_MIN = 0.75  # NB: below this the last wave idles a quarter of the machine or more
PAD_EFF_MIN = 0.9  # NB: below this a tenth of the tiles' MMA work is padding
ROUNDINGS = (64, 128)
MEASURED_OVER_ESTIMATE = 1.5  # a measured kernel this much slower than its estimate is worth a look


def distinct(result: Result) -> list[list[PricedKernel]]:
    """Kernels grouped by signature (identical layers on one entry), in first-occurrence order."""
    groups: dict[Hashable, list[PricedKernel]] = {}
    for p in result.kernels:
        groups.setdefault(p.kernel.signature, []).append(p)
    return list(groups.values())


def _num(x) -> float | None:
    e = sympy.sympify(x)
    return float(e) if e.is_number else None


# ---- wave quantization ----------------------------------------------------------------------------

def gemm_graph(spec, m: int, n: int) -> Graph:
    """One MatMul C[batch, m, n] = A[batch, m, k] . B[(batch,) k, n] with the spec's dtypes: the
    what-if graph of a reshaped GEMM."""
    batch, k = int(spec.batch), int(spec.k)
    b_shape = (k, n) if spec.b.rank == 2 else (batch, k, n)
    tensors = {"a": Tensor("a", tuple(map(sympy.Integer, (batch, m, k))), spec.a.dtype),
               "b": Tensor("b", tuple(map(sympy.Integer, b_shape)), spec.b.dtype, is_weight=spec.b.is_weight,
                           is_const=spec.b.is_weight),
               "c": Tensor("c", tuple(map(sympy.Integer, (batch, m, n))), spec.c.dtype)}
    node = Node("gemm", "MatMul", inputs=("a", "b"), outputs=("c",))
    inputs = ("a",) if spec.b.is_weight else ("a", "b")
    return Graph("gemm-whatif", [node], tensors, inputs, ("c",), opsets={"": 18})


def tile_extent(tile: str | None) -> tuple[int, int] | None:
    """(rows along M, columns along N) of a plan's tile name "RxCxK[ swapAB][ splitKS]"."""
    try:
        rows, cols, _ = (int(x) for x in (tile or "").split()[0].split("x"))
    except (ValueError, IndexError):
        return None
    return rows, cols


def pad_efficiency(m: int, n: int, rows: int, cols: int) -> float:
    """Useful share of the tiles' output: m n / (ceil(m / rows) rows x ceil(n / cols) cols)."""
    return m * n / (-(-m // rows) * rows * (-(-n // cols) * cols))


def _shapes(m: int, n: int, rows: int, cols: int) -> list[tuple[str, int, int]]:
    out = []
    for name, v, q0 in (("N", n, cols), ("M", m, rows)):
        for q in dict.fromkeys((q0, *ROUNDINGS)):
            if v % q == 0:
                continue
            for new in (v // q * q, -(-v // q) * q):
                if new > 0:
                    out.append((f"{name} {v} -> {new} (a multiple of {q})",
                                new if name == "M" else m, new if name == "N" else n))
    return list(dict.fromkeys(out))


@recommender("tile-quantization")
def tile_quantization(ctx: Context) -> list[Recommendation]:
    from estimator.pricing.problem import gemm_of_kernel

    out = []
    for ps in distinct(ctx.base):
        p = ps[0]
        plan = p.kernel.tile
        extent = tile_extent(plan.tile) if plan is not None and plan.kind == "gemm" else None
        spec = gemm_of_kernel(ctx.base.graph, p.kernel) if extent is not None else None
        dims = [_num(x) for x in (spec.batch, spec.m, spec.n, spec.k)] if spec is not None else [None]
        if None in dims or _num(plan.wave_eff) is None:
            continue
        m, n = int(dims[1]), int(dims[2])
        pad = pad_efficiency(m, n, *extent)
        if _num(plan.wave_eff) >= WAVE_EFF_MIN and pad >= PAD_EFF_MIN:
            continue

        def time_of(m_: int, n_: int, spec=spec) -> float:
            r = estimate(gemm_graph(spec, m_, n_), ctx.hw, pipeline="canonicalize", roofline=not ctx.tiling)
            return seconds(r.totals["estimate_s"])

        t0 = time_of(m, n)
        best = max(((t0 - time_of(m2, n2), label, m2, n2) for label, m2, n2 in _shapes(m, n, *extent)),
                   key=lambda c: c[0], default=None)
        if best is None or best[0] <= 0:
            continue
        saved, label, m2, n2 = best
        gain = len(ps) * saved
        reason = (f"{plan.tile} tiles: {_num(plan.ctas):.0f} CTAs in {_num(plan.waves):.0f} wave(s) on "
                  f"{ctx.hw.sm_count} SMs, wave efficiency {100 * _num(plan.wave_eff):.0f}%, useful share of "
                  f"the tiles {100 * pad:.0f}%; the GEMM alone "
                  f"takes {_fmt(t0)} at M={m}, N={n} and {_fmt(t0 - saved)} at M={m2}, N={n2} "
                  f"({len(ps)} call{'s' if len(ps) > 1 else ''})")
        out.append(from_gain(ctx, gain, ctx.total_s - gain, f"reshape {p.kernel.name}: {label}", (),
                             reason, {"kernel": p.kernel.name, "tile": plan.tile, "ctas": _num(plan.ctas),
                                      "waves": _num(plan.waves), "wave_eff": _num(plan.wave_eff),
                                      "pad_eff": pad,
                                      "m": m, "n": n, "k": int(dims[3]), "calls": len(ps)}))
    return out


def _fmt(v: float) -> str:
    from estimator.report.table import show

    return show(v, "s")


# ---- split-KV decode attention ------------------------------------------------------------------

@recommender("split-kv")
def split_kv(ctx: Context) -> list[Recommendation]:
    from dataclasses import replace

    from estimator.pricing.menu import menu_for
    from estimator.pricing.plan import hw_params, plan_kernel
    from estimator.pricing.price import price
    from estimator.pricing.residency import Residency

    menu = menu_for(ctx.hw.family)
    if menu is None:
        return []
    one = replace(menu, decode_splits=(1,))
    out = []
    for ps in distinct(ctx.base):
        p = ps[0]
        plan = p.kernel.tile
        if plan is None or plan.kind != "attention" or "splitKV" not in (plan.tile or ""):
            continue
        alone = plan_kernel(ctx.base.graph, p.kernel, ctx.hw, hw_params(ctx.hw), one, Residency({}, {}))
        t_split, t_one = _est(p), seconds(price(p.kernel.work, ctx.hw, alone).estimate_s)
        gain = len(ps) * (t_one - t_split)
        reason = (f"{plan.tile}: {_num(plan.ctas):.0f} CTAs on {ctx.hw.sm_count} SMs; without split-KV "
                  f"{_num(alone.ctas):.0f} CTAs ({100 * _num(alone.wave_eff):.0f}% of one wave) and "
                  f"{_fmt(t_one)} instead of {_fmt(t_split)} per call ({len(ps)} call"
                  f"{'s' if len(ps) > 1 else ''}); the estimate assumes the split")
        out.append(from_gain(ctx, gain, ctx.total_s, f"keep a split-KV (flash-decoding) kernel for "
                             f"{p.kernel.name}", (), reason,
                             {"tile": plan.tile, "ctas": _num(plan.ctas),
                              "ctas_without_split": _num(alone.ctas),
                              "wave_eff_without_split": _num(alone.wave_eff), "calls": len(ps)}))
    return out


# ---- kernels another strategy fuses ---------------------------------------------------------------

def _est(p: PricedKernel) -> float:
    return seconds(p.timing.estimate_s)


def _fused_groups(base: Result, alt: Result) -> dict[tuple, list]:
    """pattern (fused op, base ops) -> [occurrences, saved_s, bytes removed, base limiters, max base
    kernel time] for every alt kernel that wholly contains two or more base kernels, at least one of
    them memory- or launch-bound."""
    where = {n.name: i for i, p in enumerate(base.kernels) for n in p.kernel.nodes}
    groups: dict[tuple, list] = {}
    for q in alt.kernels:
        names = {n.name for n in q.kernel.nodes}
        idx = {where[n] for n in names if n in where}  # members free in the base (views) launch nothing
        if len(idx) < 2:
            continue
        covered = [base.kernels[i] for i in sorted(idx)]
        if any(not {n.name for n in p.kernel.nodes} <= names for p in covered):
            continue
        limiters = {p.timing.limiter for p in covered}
        if not limiters & {"memory", "l2", "launch"}:  # traffic or launches a fusion removes
            continue
        saved = sum(_est(p) for p in covered) - _est(q)
        removed = sum(seconds(p.kernel.work.dram_bytes) for p in covered) - seconds(q.kernel.work.dram_bytes)
        key = (q.kernel.op, tuple(p.kernel.op for p in covered))
        g = groups.setdefault(key, [0, 0.0, 0.0, set(), 0.0])
        g[0] += 1
        g[1] += saved
        g[2] += removed
        g[3] |= limiters
        g[4] = max(g[4], *(_est(p) for p in covered))
    return groups


@recommender("fusion-kernels")
def fusable_kernels(ctx: Context) -> list[Recommendation]:
    from passes import STRATEGIES, Pipeline

    best: dict[tuple, tuple[str, list]] = {}
    here = Pipeline.parse(ctx.pipeline)
    for name, pipeline in STRATEGIES.items():
        if Pipeline.parse(pipeline) == here:
            continue
        for key, g in _fused_groups(ctx.base, ctx.rerun(pipeline=pipeline)).items():
            if key not in best or g[1] > best[key][1][1]:
                best[key] = (name, g)
    out = []
    for (fused_op, ops), (strategy, (count, saved, removed, limiters, longest)) in best.items():
        chain = " + ".join(ops)
        if limiters == {"launch"}:
            why = (f"a chain of {len(ops)} launch-bound kernels (each <= {_fmt(longest)}) becomes one launch")
            trigger = "launch"
        else:
            why = f"memory-bound kernels; fusing keeps {fmt_bytes(removed)} of DRAM traffic on chip"
            trigger = "memory"
        reason = f"{why}; {count} occurrence(s), rule(s) {fused_op} of --fusion {strategy}"
        out.append(from_gain(ctx, saved, ctx.total_s - saved, f"fuse {chain} into one kernel",
                             ("--fusion", strategy), reason,
                             {"limiters": sorted(limiters), "trigger": trigger, "occurrences": count,
                              "dram_bytes_removed": removed, "longest_kernel_s": longest}))
    return out


# ---- measured profile (issue 14) ------------------------------------------------------------------

@recommender("profile")
def measured_outliers(ctx: Context) -> list[Recommendation]:
    """ctx.profile: kernel name -> {"measured_s": float, "counters": {name: value}, and optionally
    "limiter_counter", "bottleneck", "why"} (estimator/report/measured.py builds it from a joined
    profile). A kernel is listed when it is far from its estimate (measured > MEASURED_OVER_ESTIMATE x
    the estimate; gain = measured - estimate) or, else, far from its peak (the profile's bottleneck rule
    found no unit busy: class "latency"; gain = measured - bound, the most tuning could recover). The
    counter reported is `limiter_counter`, else the largest. Metric: measured seconds; gain_pct is of the
    measured time of every joined kernel."""
    if not ctx.profile:
        return []
    per: dict[Hashable, list] = defaultdict(list)
    for ps in distinct(ctx.base):
        for p in ps:
            m = ctx.profile.get(p.kernel.name)
            if m and m.get("measured_s") is not None:
                per[p.kernel.signature].append((p, float(m["measured_s"]), m))
    measured_total = sum(r[1] for rows in per.values() for r in rows)
    out = []
    for rows in per.values():
        p, first = rows[0][0], rows[0][2]
        est, bound, n = _est(p), seconds(p.timing.bound_s), len(rows)
        measured = sum(r[1] for r in rows)
        far_est = measured > MEASURED_OVER_ESTIMATE * est * n
        far_peak = not far_est and first.get("bottleneck") == "latency" and measured > bound * n
        if not (far_est or far_peak):
            continue
        counters = first.get("counters") or {}
        counter = first.get("limiter_counter") or (max(counters, key=lambda c: counters[c]) if counters
                                                    else None)
        gain = measured - (est if far_est else bound) * n
        why = f"; {first['why']}" if first.get("why") else ""
        reason = (f"measured {_fmt(measured / n)} per call vs estimate {_fmt(est)} and bound {_fmt(bound)}"
                  + (f"; {counter} = {counters.get(counter):.4g}" if counter else "") + why
                  + ("" if far_est else "; near its estimate but no unit is busy: the gain is against the "
                     "bound (speed of light)"))
        what = (f"{measured / (est * n):.1f}x its estimate" if far_est
                else f"{measured / (bound * n):.1f}x its bound, no unit busy")
        out.append(Recommendation(
            f"tune {p.kernel.name} (measured {what})", (), measured_total - gain, gain,
            100 * gain / measured_total if measured_total else 0.0, reason,
            {"measured_s": measured, "estimate_s": est * n, "bound_s": bound * n, "calls": n,
             "counter": counter, "counter_value": counters.get(counter) if counter else None,
             "bottleneck": first.get("bottleneck"), "trigger": "estimate" if far_est else "peak"},
            "kernel", metric="measured_s"))
    return out
