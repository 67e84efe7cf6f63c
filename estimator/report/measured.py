"""A measured profile joined to an estimate (estimator/profile/analysis.py), as the recommenders and the
HTML report read it.

- `by_kernel(analysis, result)`: estimator kernel name -> {"measured_s", "counters", "limiter_counter",
  "bottleneck", "why"} for `Context.profile` (findings.py "profile"). measured_s is the kernel's time per
  model iteration: the sum over its graph nodes of the join's per-node times (the median per-run sum for
  a join by node name, the mean over the iterations walked for a join by order), as `--validate`'s
  report adds them. The counters are the achieved fractions of peak of the profile records joined 1:1 to
  that kernel (time-weighted over its records), in percent, named by the unit ("dram % of peak",
  "occupancy %"); `limiter_counter` is the one the profile's bottleneck rule decided on.
- `per_call(result, by_kernel)`: first kernel of each distinct kernel -> its mean measured seconds per
  call, for the roofline's hollow marks (figures.roofline(measured=...)).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from estimator.report.findings import distinct

UNITS = {"tensor": "tensor % of peak", "cuda": "cuda-core % of peak", "sm": "SM % of peak",
         "dram": "dram % of peak", "l2": "l2 % of peak", "l2_hit": "l2 hit rate %",
         "occupancy": "occupancy %"}


def _fractions(rows) -> dict[str, float]:
    out = {}
    for key, name in UNITS.items():
        have = [(getattr(r.achieved, key), r.kernel.duration_s) for r in rows
                if getattr(r.achieved, key) is not None]
        weight = sum(w for _, w in have)
        if have:
            out[name] = 100 * (sum(v * w for v, w in have) / weight if weight > 0 else have[0][0])
    return out


def _decider(bottleneck) -> str | None:
    """The counter name of the unit the bottleneck rule quoted ("dram at 23% of peak" -> dram)."""
    unit = bottleneck.why.split(" at ", 1)[0].removeprefix("busiest unit ").strip()
    return UNITS.get(unit)


def by_kernel(analysis, result) -> dict[str, dict[str, Any]]:
    joined = analysis.joined
    if joined is None:
        return {}
    node_s = {t.name: t.seconds for t in joined.times if t.name not in joined.unjoined_names}
    rows = defaultdict(list)
    for r in analysis.rows:
        if r.estimate_kernel is not None:
            rows[r.estimate_kernel].append(r)
    out = {}
    for i, p in enumerate(result.kernels):
        times = [node_s[n.name] for n in p.kernel.nodes if n.name in node_s]
        if not times:
            continue
        mine = rows.get(i, [])
        longest = max(mine, key=lambda r: r.kernel.duration_s) if mine else None
        entry = {"measured_s": sum(times), "counters": _fractions(mine), "limiter_counter": None,
                 "bottleneck": None, "why": None}
        if longest is not None:
            b = longest.bottleneck
            decided = _decider(b)
            entry.update(bottleneck=b.kind, why=b.why,
                         limiter_counter=decided if decided in entry["counters"] else None)
        out[p.kernel.name] = entry
    return out


def per_call(result, measured: dict[str, dict[str, Any]]) -> dict[str, float]:
    out = {}
    for ps in distinct(result):
        times = [measured[p.kernel.name]["measured_s"] for p in ps if p.kernel.name in measured]
        if times:
            out[ps[0].kernel.name] = sum(times) / len(times)
    return out


def write_html(path: str, ctx, title: str, recs, threshold: float, found, measured) -> None:
    """The report page of a joined profile: the estimate's sections with the measured marks on the
    roofline and the measured findings as its recommendations."""
    from estimator.errors import UserError
    from estimator.report import html
    from passes import STRATEGIES

    fusion = {name: (ctx.base if name == ctx.base.fusion else ctx.rerun(pipeline=p))
              for name, p in STRATEGIES.items()}
    page = html.render(ctx.base, title, recs, threshold, fusion, None, None, per_call(ctx.base, measured),
                       found)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise UserError(f"--report {path}: {exc.strerror or exc}") from None
