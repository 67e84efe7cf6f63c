"""The profile's terminal summary and its JSON object (the contract is in README.md, "Measured
profiles").

Kernels are grouped by normalised name; a group's fractions of peak are the time-weighted means of its
launches' fractions, and its bottleneck is the class holding most of its time (with the deciding
number of its longest launch of that class). With an estimate joined, the comparison is
validate_report's table and JSON, the same report as `--validate`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from estimator.profile.analysis import Analysis, Row
from estimator.profile.join import MATCH_THRESHOLD
from estimator.textfit import fit_table
from estimator.textfit import wrap as fit_lines  # prose lines at the terminal's width

NAME_WIDTH = 48  # the kernel column of the table; longer names wrap onto the next lines
FRACTIONS = ("tensor", "cuda", "sm", "dram", "l2", "l2_hit", "occupancy")


@dataclass
class Group:
    short: str
    kind: str
    rows: list[Row]

    @property
    def launches(self) -> int:
        return sum(r.kernel.instances for r in self.rows)

    @property
    def total_s(self) -> float:
        return sum(r.kernel.duration_s for r in self.rows)

    def fraction(self, key: str) -> float | None:
        have = [
            (getattr(r.achieved, key), r.kernel.duration_s)
            for r in self.rows
            if getattr(r.achieved, key) is not None
        ]
        weight = sum(w for _, w in have)
        if not have:
            return None
        return sum(v * w for v, w in have) / weight if weight > 0 else have[0][0]

    def bottleneck(self):
        time: dict[str, float] = defaultdict(float)
        for r in self.rows:
            time[r.bottleneck.kind] += r.kernel.duration_s
        kind = max(time, key=time.get)
        return max(
            (r for r in self.rows if r.bottleneck.kind == kind), key=lambda r: r.kernel.duration_s
        ).bottleneck


def groups(a: Analysis) -> list[Group]:
    by: dict[str, Group] = {}
    for r in a.rows:
        g = by.setdefault(r.kernel.short, Group(r.kernel.short, r.kernel.kind, []))
        g.rows.append(r)
    return sorted(by.values(), key=lambda g: (-g.total_s, g.short))


def bottlenecks(a: Analysis) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in a.rows:
        out[r.bottleneck.kind] += r.kernel.duration_s
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _timeline_json(a: Analysis) -> dict[str, Any] | None:
    t = a.timeline
    if t is None:
        return None
    return {
        "span_s": t.span_s,
        "busy_s": t.busy_s,
        "idle_s": t.idle_s,
        "idle_share": t.idle_s / t.span_s if t.span_s > 0 else 0.0,
        "launch_bound_gaps_s": t.launch_bound_gaps_s,
        "launch_overhead_share": t.launch_overhead_share,
        "launch_latency_min_s": t.launch_latency_min_s,
        "launch_latency_median_s": t.launch_latency_median_s,
        "comm_s": t.comm_s,
        "comm_overlap_s": t.comm_overlap_s,
        "comm_overlap_share": t.comm_overlap_share,
        "overall": a.idle_class() or "busy",
        "streams": [
            {
                "device": s.device,
                "stream": s.stream,
                "kernels": s.kernels,
                "busy_s": s.busy_s,
                "gaps_s": s.gaps_s,
                "gap_count": s.gap_count,
                "max_gap_s": s.max_gap_s,
                "median_gap_s": s.median_gap_s,
            }
            for s in t.streams
        ],
    }


def to_json(a: Analysis, top: int | None = None) -> dict[str, Any]:
    p, gs = a.profile, groups(a)
    measured = p.total_s
    total = measured or 1.0
    doc: dict[str, Any] = {
        "profile": {
            "path": p.path,
            "format": p.format,
            "records": len(p.kernels),
            "launches": sum(k.instances for k in p.kernels),
            "measured_s": measured,
            "runs": p.runs,
            "host": p.host,
            "warnings": p.warnings,
            "gpu": None
            if p.gpu is None
            else {
                "name": p.gpu.name,
                "compute_capability": p.gpu.compute_capability,
                "sm_count": p.gpu.sm_count,
                "dram_bytes_per_s": p.gpu.dram_bytes_per_s,
                "clock_hz": p.gpu.clock_hz,
                "l2_bytes": p.gpu.l2_bytes,
            },
        },
        "arch": a.hw.name if a.hw is not None else None,
        "arch_source": a.hw_note,
        "warnings": a.warnings,
        "by_kind": a.by_kind,
        "bottlenecks": bottlenecks(a),
        "timeline": _timeline_json(a),
        "kernels": [],
    }
    for g in gs[:top] if top else gs:
        b = g.bottleneck()
        first = max(g.rows, key=lambda r: r.kernel.duration_s)
        doc["kernels"].append(
            {
                "name": first.kernel.name,
                "short": g.short,
                "kind": g.kind,
                "launches": g.launches,
                "total_s": g.total_s,
                "share": g.total_s / total,
                **{k: g.fraction(k) for k in FRACTIONS},
                "sources": dict(first.achieved.sources),
                "bottleneck": {"kind": b.kind, "value": b.value, "why": b.why},
            }
        )
    if a.validation is not None:
        from estimator.report import validation as validate_report

        doc["join"] = {"strategy": a.joined.strategy, "iterations": a.joined.iterations,
                       "match": a.joined.match.to_json()}
        doc["estimate"] = validate_report.to_json(a.validation)
    return doc


def show(seconds: float | None, unit: str = "s") -> str:
    """Seconds in engineering units, 3 significant digits (as estimator.report.table.show prints them; that
    module pulls in sympy, which a profile without --model does not need)."""
    if seconds is None:
        return "-"
    for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {name}"
    return f"{seconds * 1e9:.3g} ns"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def wrap(text: str, width: int) -> list[str]:
    """A long kernel name as lines of at most `width`, broken after a `_`, `,`, `<` or space where one
    lies in the last third of the line. Never clipped: the tile shape, data types and layout sit in the
    middle of a library's kernel name (`sm80_xmma_gemm_f32f32_..._tilesize64x256x8_stage3_..._cublas`),
    so a cut there prints two different kernels alike."""
    lines = []
    while len(text) > width:
        cut = max(text.rfind(c, width * 2 // 3, width) for c in "_,< ")
        cut = cut + 1 if cut > 0 else width
        lines.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return [*lines, text]


def _table(rows: list[list[str]], align: str, drop: Sequence[int] | None = None) -> list[str]:
    """Columns fitted to the terminal (estimator/textfit.py; --wide keeps them all)."""
    return fit_table(rows, align, drop=drop)


def to_table(a: Analysis, top: int = 15) -> str:
    p = a.profile
    launches, measured = sum(k.instances for k in p.kernels), p.total_s
    lines = [
        *fit_lines(f"{p.path} ({p.format}): {launches} kernel launches, {show(measured, 's')} measured"
                   + (f" over {p.runs} runs" if p.runs > 1 else "")),
        f"GPU: {a.hw.display_name + ' (' + a.hw.name + '), ' if a.hw is not None else ''}{a.hw_note}",
    ]
    lines += [f"warning: {w}" for w in [*p.warnings, *a.warnings]]
    t = a.timeline
    if t is not None:
        lat = (
            f"launch latency min {show(t.launch_latency_min_s, 's')}, median "
            f"{show(t.launch_latency_median_s, 's')}; "
            if t.launch_latency_min_s is not None
            else ""
        )
        lines += [
            "",
            *fit_lines(f"timeline: span {show(t.span_s, 's')}, GPU busy {show(t.busy_s, 's')}, idle "
            f"{show(t.idle_s, 's')} ({_pct(t.idle_s / t.span_s if t.span_s else 0)}); {lat}"
            f"waiting for launches {_pct(t.launch_overhead_share)} of the span"
            + (
                f"; communication {show(t.comm_s, 's')}, {_pct(t.comm_overlap_share)} overlapped with compute"
                if t.comm_s
                else ""
            )),
        ]
        srows = [["device", "stream", "kernels", "busy", "gaps", "gap count", "median gap", "max gap"]]
        for s in t.streams[:top]:
            srows.append(
                [
                    str(s.device),
                    str(s.stream),
                    str(s.kernels),
                    show(s.busy_s, "s"),
                    show(s.gaps_s, "s"),
                    str(s.gap_count),
                    show(s.median_gap_s, "s"),
                    show(s.max_gap_s, "s"),
                ]
            )
        lines += _table(srows, "llrrrrrr")
    krows = [["kind", "launches", "time", "share"]]
    for kind, v in a.by_kind.items():
        krows.append([kind, str(int(v["kernels"])), show(v["total_s"], "s"), _pct(v["share"])])
    lines += ["", "by kind:", *_table(krows, "lrrr")]
    gs = groups(a)
    rows = [
        [
            "kernel",
            "kind",
            "launches",
            "time",
            "share",
            "tensor",
            "dram",
            "l2",
            "l2 hit",
            "occupancy",
            "bottleneck",
        ]
    ]
    for g in gs[:top]:
        b = g.bottleneck()
        first, *more = wrap(g.short, NAME_WIDTH)
        more = [m for line in more for m in wrap(line, NAME_WIDTH - 2)] if more else more
        rows.append(
            [
                first,
                g.kind,
                str(g.launches),
                show(g.total_s, "s"),
                _pct(g.total_s / (measured or 1.0)),
                *(_pct(g.fraction(k)) for k in ("tensor", "dram", "l2", "l2_hit", "occupancy")),
                f"{b.kind}: {b.why}",
            ]
        )
        rows += [["  " + line, *[""] * 10] for line in more]  # the rest of a long name, indented
    lines += [
        "",
        f"top {min(top, len(gs))} of {len(gs)} kernels by time (% of peak):",
        # narrower than the table: occupancy and the L2 columns give way before the bottleneck's words
        *_table(rows, "llrrrrrrrrl", drop=(9, 8, 7, 10, 6, 5, 4)),
    ]
    if a.validation is not None:
        from estimator.report import validation as validate_report

        m = a.joined.match
        lines += [
            "",
            f"join match score {m.score:.2f} (coverage {m.coverage:.2f} x order {m.order:.2f} x kinds "
            f"{m.kinds:.2f}; refused below {MATCH_THRESHOLD} without --force-join)",
            f"against the estimate (join by {a.joined.strategy}):",
            validate_report.to_table(a.validation, top),
        ]
    return "\n".join(lines)
