"""Figures of one estimate, shared by the HTML report (inline SVG) and `--roofline-plot FILE` (PNG/SVG/PDF,
written like the sweep's `--plot`).

- roofline: the GPU's roofs at the kernels' precisions (peak FLOP/s of each execution unit the kernels
  use, and DRAM bandwidth x arithmetic intensity), with every distinct kernel (one signature: the same
  op on the same shapes, as in every layer) placed at x = FLOPs / DRAM bytes and y = FLOPs / estimate_s
  (filled, coloured by limiter) and, when a measured profile is joined, y = FLOPs / measured_s (hollow).
  Kernels with no FLOPs (pure data movement: copies, gathers, transposes) have no place on those log
  axes: a narrow panel at the left shows them by the DRAM bandwidth they reach (bytes / estimate_s)
  under the DRAM roof. Each mark is its own artist with gid `kernel-<i>` / `measured-<i>`, i the index of
  the distinct kernel (see `distinct_kernels`), so every distinct kernel has exactly one mark.
- breakdown: the estimate's shares by kernel kind and by limiter, as two stacked horizontal bars.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Mapping

import matplotlib
import numpy as np
import sympy
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from estimator.estimate import PricedKernel, Result, group_totals
from estimator.report.findings import distinct

LIMITER_COLORS = {"compute": "#1f77b4", "memory": "#d62728", "l2": "#ff7f0e", "latency": "#8c564b",
                  "launch": "#7f7f7f", "communication": "#9467bd"}
# The breakdown's kind bar draws from colours no limiter uses (matplotlib's tab10 less LIMITER_COLORS, then
# tab20's light twins), so a kind never reads as a limiter; a limiter without its own colour takes one of
# tab20b's dark shades, used by neither.
KIND_COLORS = ("#2ca02c", "#e377c2", "#bcbd22", "#17becf", "#ffbb78", "#98df8a", "#c49c94", "#f7b6d2",
               "#dbdb8d", "#9edae5", "#aec7e8", "#c5b0d5")
OTHER_LIMITER_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")


def _n(x) -> float:
    e = sympy.sympify(x)
    return float(e) if e.is_number else float("nan")


def distinct_kernels(result: Result) -> list[list[PricedKernel]]:
    return distinct(result)


def placed(result: Result) -> list[tuple[int, PricedKernel, int, float, float]]:
    """(index, first kernel, calls, intensity FLOP/B, estimated FLOP/s) of every placeable distinct kernel."""
    out = []
    for i, ps in enumerate(distinct_kernels(result)):
        p = ps[0]
        w = p.kernel.work
        flops, dram, est = _n(w.total_flops), _n(w.dram_bytes), _n(p.timing.estimate_s)
        if flops > 0 and dram > 0 and est > 0:
            out.append((i, p, len(ps), flops / dram, flops / est))
    return out


def movers(result: Result) -> list[tuple[int, PricedKernel, int, float]]:
    """(index, first kernel, calls, DRAM bytes/s reached) of every distinct kernel without FLOPs."""
    out = []
    for i, ps in enumerate(distinct_kernels(result)):
        p = ps[0]
        dram, est = _n(p.kernel.work.dram_bytes), _n(p.timing.estimate_s)
        if not _n(p.kernel.work.total_flops) > 0 and dram > 0 and est > 0:
            out.append((i, p, len(ps), dram / est))
    return out


def _movement_panel(ax, result: Result, moving, total: float, measured) -> None:
    bw = result.hw.dram_bytes_per_s
    ax.axhline(bw, color="0.25", lw=1.4, gid="roof-dram")
    ax.annotate(f"DRAM {bw / 1e12:.3g} TB/s", (0, bw), xytext=(0, 3), textcoords="offset points", ha="center",
                va="bottom", fontsize=7, color="0.25")
    for j, (i, p, calls, y) in enumerate(moving):
        x = (j % 5) - 2  # a little spread, so identical figures stay visible
        share = calls * _n(p.timing.estimate_s) / total
        color = LIMITER_COLORS.get(p.timing.limiter.split("|")[0], "#2ca02c")
        ax.plot([x], [y], "s", ms=4 + 14 * np.sqrt(share), color=color, alpha=0.8, mec="black", mew=0.5,
                gid=f"kernel-{i}")
        t = (measured or {}).get(p.kernel.name)
        if t:
            ax.plot([x], [_n(p.kernel.work.dram_bytes) / t], "s", ms=6, mfc="none", mec=color, mew=1.5,
                    gid=f"measured-{i}")
    ax.set_yscale("log")
    ax.set_xlim(-4, 4)
    ax.set_xticks([])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: _per_s(v) + "B/s"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_title("no FLOPs\n(DRAM B/s)", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)


def _per_s(v: float, _pos=None) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if v >= scale:
            return f"{v / scale:g} {prefix}"
    return f"{v:g}"


def _roofs(result: Result) -> dict[str, float]:
    """label -> peak FLOP/s of each (unit, dtype) the kernels run their FLOPs on."""
    from estimator.pricing.price import unit_peak

    seen: dict[str, float] = {}
    for p in result.kernels:
        for (unit, dtype), f in p.kernel.work.flops.items():
            if _n(f) > 0:
                try:
                    seen.setdefault(f"{unit} {dtype}", unit_peak(result.hw, unit, dtype))
                except ValueError:
                    continue
    return seen


def _new_figure(size: tuple[float, float]) -> Figure:
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def roofline(result: Result, measured: Mapping[str, float] | None = None) -> Figure:
    """The roofline chart; `measured`: kernel name -> measured seconds per call (a joined profile)."""
    fig = _new_figure((8.0, 4.6))
    marks, moving = placed(result), movers(result)
    total = _n(result.totals["estimate_s"]) or 1.0
    if moving:
        grid_spec = fig.add_gridspec(1, 2, width_ratios=[1, 7])
        _movement_panel(fig.add_subplot(grid_spec[0]), result, moving, total, measured)
        ax = fig.add_subplot(grid_spec[1])
    else:
        ax = fig.add_subplot()
    bw = result.hw.dram_bytes_per_s
    roofs = _roofs(result)
    xs = [m[3] for m in marks] or [1.0]
    lo = min(min(xs), min((p / bw for p in roofs.values()), default=1.0)) / 4
    hi = max(max(xs), max((p / bw for p in roofs.values()), default=1.0)) * 4
    grid = np.geomspace(lo, hi, 200)
    styles = ("-", "--", ":", "-.")
    for j, (label, peak) in enumerate(sorted(roofs.items(), key=lambda kv: -kv[1])):
        ax.plot(grid, np.minimum(peak, grid * bw), styles[j % len(styles)], color="0.25", lw=1.4,
                gid=f"roof-{label.replace(' ', '-')}")
        ax.annotate(f"{label}: {peak / 1e12:.4g} TFLOP/s", (hi, peak), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=8, color="0.25")
    ax.annotate(f"DRAM {bw / 1e12:.3g} TB/s", (lo * 1.5, lo * 1.5 * bw), xytext=(2, 6),
                textcoords="offset points", fontsize=8, color="0.25", rotation=25)
    for i, p, calls, x, y in marks:
        share = calls * _n(p.timing.estimate_s) / total
        color = LIMITER_COLORS.get(p.timing.limiter.split("|")[0], "#2ca02c")
        ax.plot([x], [y], "o", ms=4 + 14 * np.sqrt(share), color=color, alpha=0.8, mec="black", mew=0.5,
                gid=f"kernel-{i}")
        t = (measured or {}).get(p.kernel.name)
        if t:
            ax.plot([x], [_n(p.kernel.work.total_flops) / t], "o", ms=6, mfc="none", mec=color, mew=1.5,
                    gid=f"measured-{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    # plain tick labels: the default 10^n labels go through mathtext, the slowest part of the figure
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(_per_s))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("throughput (FLOP/s, estimated)")
    note = f" + {len(moving)} without FLOPs (left)" if moving else ""
    ax.set_title(f"{result.hw.display_name}, precision {result.precision}: {len(marks)} distinct kernels"
                 f"{note}\n(marker size: share of the estimate)", fontsize=9)
    handles = [matplotlib.lines.Line2D([], [], ls="", marker="o", color=c, label=lim)
               for lim, c in LIMITER_COLORS.items()
               if any(p.timing.limiter.startswith(lim) for _, p, *_ in [*marks, *moving])]
    if measured:
        handles.append(matplotlib.lines.Line2D([], [], ls="", marker="o", mfc="none", color="0.3",
                                               label="measured"))
    ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def breakdown(result: Result) -> Figure:
    """Two stacked bars: the estimate's share per kernel kind and per limiter."""
    fig = _new_figure((8.0, 2.6))
    ax = fig.add_subplot()
    total = _n(result.totals["estimate_s"]) or 1.0
    for row, key in enumerate(("kind", "limiter")):
        groups = sorted(group_totals(result, key).items(), key=lambda kv: -_n(kv[1]["estimate_s"]))
        left, others = 0.0, 0
        for j, (name, vals) in enumerate(groups):
            share = 100 * _n(vals["estimate_s"]) / total
            if key == "kind":
                color = KIND_COLORS[j % len(KIND_COLORS)]
            elif name in LIMITER_COLORS:
                color = LIMITER_COLORS[name]
            else:
                color, others = OTHER_LIMITER_COLORS[others % len(OTHER_LIMITER_COLORS)], others + 1
            ax.barh(row, share, left=left, color=color, edgecolor="white",
                    gid=f"breakdown-{key}-{name}", label=f"{name} {share:.1f}%" if share < 6 else None)
            if share >= 6:
                ax.text(left + share / 2, row, f"{name}\n{share:.0f}%", ha="center", va="center", fontsize=7,
                        color="white")
            left += share
    ax.set_yticks([0, 1], ["by kind", "by limiter"])
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("share of the total estimate (%)")
    if ax.get_legend_handles_labels()[0]:  # the segments too narrow for a label inside
        fig.legend(loc="outside lower center", ncol=5, fontsize=7, frameon=False)
    return fig


_SVG_COUNT = itertools.count(1)
# matplotlib's own structural ids: figure_1, axes_1, line2d_3...
_AUTO_ID = re.compile(r'\bid="([A-Za-z][A-Za-z0-9.]*(?:_\d+)+)"')


def to_svg(fig: Figure) -> str:
    """The figure as an inline <svg> element: text kept as text (no glyph definitions), no XML prolog.
    Several of them share one page, so matplotlib's structural ids (figure_1, axes_1...) get a prefix
    unique to this SVG and its referenced definitions (clip paths, markers) a per-SVG hash salt."""
    n = next(_SVG_COUNT)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"svg{n}"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return _AUTO_ID.sub(lambda m: f'id="svg{n}-{m.group(1)}"', text[text.index("<svg"):])
