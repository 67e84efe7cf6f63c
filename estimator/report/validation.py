"""Reports of a Validation: measured vs bound vs estimate, in total and per kernel (table and JSON).

efficiency = bound / measured (1.0 would be the speed of light); error = (estimate - measured) / measured.
A kernel (or the total) measured below its bound is a model error: the bound is supposed to be a floor.
The total compares the fastest run with the bound; a kernel its profiled median, with the profiler's
1 us resolution as tolerance.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from estimator.report.table import show
from estimator.report.table import to_json as estimate_json
from estimator.truth import free_views
from estimator.truth.validate import PROFILER_RESOLUTION_S, Match, Validation

TOTAL_COLUMNS = ("measured_s", "measured_min_s", "bound_s", "estimate_s")


def match_bound(v: Validation, m: Match) -> float:
    return sum(float(v.result.kernels[k].timing.bound_s) for k in m.kernels)


def match_estimate(v: Validation, m: Match) -> float:
    return sum(float(v.result.kernels[k].timing.estimate_s) for k in m.kernels)


def below_bound(v: Validation, m: Match) -> bool:
    return m.measured_s + PROFILER_RESOLUTION_S < match_bound(v, m)


def model_errors(v: Validation) -> list[Match]:
    return [m for m in v.matches if below_bound(v, m)]


def _label(v: Validation, m: Match) -> str:
    names = [v.result.kernels[k].kernel.name for k in m.kernels]
    return names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} fused)"


def _op(v: Validation, m: Match) -> str:
    return "+".join(sorted({v.result.kernels[k].kernel.op for k in m.kernels}))


def by_op(v: Validation) -> dict[str, dict[str, float]]:
    """Measured, bound and estimate summed per op type of the joined kernels."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for m in v.matches:
        row = rows[_op(v, m)]
        row["kernels"] += len(m.kernels)
        row["measured_s"] += m.measured_s
        row["bound_s"] += match_bound(v, m)
        row["estimate_s"] += match_estimate(v, m)
    return {op: dict(r) for op, r in sorted(rows.items(), key=lambda kv: -kv[1]["measured_s"])}


def totals(v: Validation) -> dict[str, float]:
    bound, est = float(v.result.totals["bound_s"]), float(v.result.totals["estimate_s"])
    return {"measured_s": v.measured_s, "measured_min_s": v.measured_min_s, "bound_s": bound,
            "estimate_s": est, "efficiency": bound / v.measured_s,
            "estimate_error": (est - v.measured_s) / v.measured_s}


def to_json(v: Validation, top_unjoined: int = 20) -> dict[str, Any]:
    doc = estimate_json(v.result)
    t = totals(v)
    doc["total"].update(measured_s=t["measured_s"], measured_min_s=t["measured_min_s"],
                        efficiency=t["efficiency"], estimate_error=t["estimate_error"],
                        below_bound=v.measured_min_s < t["bound_s"], unjoined_s=v.unjoined_s)
    for m in v.matches:
        if len(m.kernels) == 1:
            k = doc["kernels"][m.kernels[0]]
            k["measured_s"] = m.measured_s
            k["efficiency"] = k["bound_s"] / m.measured_s if m.measured_s > 0 else None
            k["below_bound"] = below_bound(v, m)
    unjoined = sorted(v.unjoined, key=lambda n: -n.seconds)

    def names(m: Match) -> list[str]:
        return [doc["kernels"][k]["name"] for k in m.kernels]

    doc["validation"] = {
        "ep": v.ep,
        "opt_level": v.level,
        "runs": len(v.wall_s),
        "wall_s": v.wall_s,
        "profile_runs": v.profile_runs,
        "profiled_s": v.profiled_s,
        "joined_s": v.joined_s,
        "joined_share": v.joined_share,
        "unjoined_s": v.unjoined_s,
        "outside_nodes_s": v.measured_s - v.profiled_s,
        "profiler_overhead_s": v.profiler_overhead_s,
        "executed_nodes": len(v.profile),
        "unjoined_nodes": [{"node": n.name, "op": n.op, "measured_s": n.seconds}
                           for n in unjoined[:top_unjoined]],
        "unjoined_count": len(v.unjoined),
        "free_view_s": v.free_view_s,  # views and shape arithmetic, priced as free (truth/free_views.py)
        "free_view_count": len(v.free_views),
        "free_view_by_op": free_views.by_op(v.free_views),
        "fused_groups": [{"kernels": names(m), "nodes": list(m.nodes), "measured_s": m.measured_s,
                          "bound_s": match_bound(v, m), "estimate_s": match_estimate(v, m)}
                         for m in v.matches if len(m.kernels) > 1],
        "model_errors": [{"kernels": names(m), "measured_s": m.measured_s, "bound_s": match_bound(v, m)}
                         for m in model_errors(v)],
        "by_op": by_op(v),
        "notes": v.notes,
        "warnings": v.warnings,
    }
    if v.source:  # a profile read from a file (estimator/profile/)
        doc["validation"]["source"] = v.source
    return doc


def _table(rows: list[list[str]], align: str) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    cells = [(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align, strict=True))
             for r in rows]
    return ["  ".join(r).rstrip() for r in cells]


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}%"


def to_table(v: Validation, top: int = 15) -> str:
    r, t = v.result, totals(v)
    dims = ", ".join(f"{k}={val}" for k, val in r.dims.items()) or "static"
    how = (f"measured in {v.source}, {len(v.wall_s)} run(s)" if v.source else
           f"validated with onnxruntime --ep {v.ep} (optimization {v.level}), {len(v.wall_s)} timed runs, "
           f"{v.profile_runs} profiled")
    lines = [
        f"{r.hw.display_name} ({r.hw.name}) | dims {dims} | {how}",
        *(f"warning: {w}" for w in v.warnings),
        "",
        *_table([["", "measured (median)", "measured (min)", "bound", "estimate"],
                 ["total", *(show(t[k], "s") for k in TOTAL_COLUMNS)]], "lrrrr"),
        f"efficiency (bound / measured) {100 * t['efficiency']:.0f}%   "
        f"estimate error (estimate - measured) / measured {_pct(t['estimate_error'])}",
        f"join: {len(v.profile) - len(v.unjoined) - len(v.free_views)} of {len(v.profile)} executed nodes "
        f"joined to kernels, {100 * v.joined_share:.1f}% of profiled node time; free views "
        f"{len(v.free_views)} nodes {show(v.free_view_s, 's')}; unjoined {len(v.unjoined)} nodes "
        f"{show(v.unjoined_s, 's')}; "
        f"outside the nodes (executor, session.run) {_outside(t['measured_s'] - v.profiled_s)}; "
        f"profiler overhead subtracted {show(v.profiler_overhead_s, 's')} per node",
    ]
    if v.measured_min_s < t["bound_s"]:
        lines.append("MODEL ERROR: the fastest run beat the total bound")
    errors = model_errors(v)
    lines.append(f"model errors: {len(errors)} kernel(s) measured below their bound"
                 + (" (flagged ! below)" if errors else ""))
    lines += v.notes
    rows = [["op", "kernels", "measured", "bound", "estimate", "efficiency", "error"]]
    for op, row in list(by_op(v).items())[:top]:
        rows.append([op, str(int(row["kernels"])), show(row["measured_s"], "s"), show(row["bound_s"], "s"),
                     show(row["estimate_s"], "s"), _eff(row["bound_s"], row["measured_s"]),
                     _err(row["estimate_s"], row["measured_s"])])
    lines += ["", "by op (joined kernels):", *_table(rows, "lrrrrrr")]
    ranked = sorted(v.matches, key=lambda m: (not below_bound(v, m), -m.measured_s))[:top]
    rows = [["", "kernel", "op", "measured", "bound", "estimate", "efficiency", "error"]]
    for m in ranked:
        bound, est = match_bound(v, m), match_estimate(v, m)
        rows.append(["!" if below_bound(v, m) else "", _clip(_label(v, m), 48), _op(v, m),
                     show(m.measured_s, "s"), show(bound, "s"), show(est, "s"), _eff(bound, m.measured_s),
                     _err(est, m.measured_s)])
    title = f"top {len(ranked)} of {len(v.matches)} kernels (model errors first, then by measured time):"
    lines += ["", title, *_table(rows, "llllrrrr")]
    return "\n".join(lines)


def _outside(seconds: float) -> str:
    # Negative when the profiled runs (profiler on, other runs) were slower than the timed ones.
    return show(seconds, "s") if seconds >= 0 else "n/a (the profiled runs were slower)"


def _eff(bound: float, measured: float) -> str:
    return f"{100 * bound / measured:.0f}%" if measured > 0 else "-"


def _err(estimate: float, measured: float) -> str:
    return _pct((estimate - measured) / measured) if measured > 0 else "-"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3):]
