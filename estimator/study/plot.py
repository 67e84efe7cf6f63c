"""Plots of a sweep: latency against the swept dim on log-log axes, one colour per GPU (and per value of
any other swept dim), estimate solid and bound dashed, each line labelled at its right end. A ring marks
where the dominant limiter (the limiter holding the largest share of the estimate) changes, found by
bisection between sweep points. `stack="kind"|"limiter"` adds one panel per GPU with the estimate's
shares stacked (percent, linear axis), which log axes would distort.

Each line carries a gid ("estimate:LABEL", "bound:LABEL", "limiter-change:LABEL") so tests can read the
data back from the Figure.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogFormatter, NullFormatter

from estimator.errors import UserError
from estimator.study.sweep import Compiled, Points

FORMATS = (".png", ".svg", ".pdf")
DIM_UNITS = {"batch": "sequences", "seq": "tokens", "past_seq": "tokens in the KV cache"}


class PlotError(UserError):
    pass


def time_unit(seconds: np.ndarray) -> tuple[str, float]:
    """(unit name, factor) for the middle of the range on a log axis (its geometric mean)."""
    positive = np.asarray(seconds, dtype=float)
    positive = positive[positive > 0]
    mid = float(np.sqrt(positive.min() * positive.max())) if positive.size else 1.0
    for name, factor in (("s", 1.0), ("ms", 1e3), ("us", 1e6)):
        if mid >= 1 / factor:
            return name, factor
    return "ns", 1e9


def dim_label(name: str) -> str:
    unit = DIM_UNITS.get(name) or ("tokens" if "seq" in name else "")
    return f"{name} ({unit})" if unit else name


def _count(v: float, _pos: object = None) -> str:
    if v >= 1e6 and v % 1e6 == 0:
        return f"{v / 1e6:g}M"
    if v >= 1e3 and v % 1e3 == 0:
        return f"{v / 1e3:g}k"
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _lines(runs: Sequence[tuple[Compiled, Points]], x: str):
    """(label, compiled, fixed values of the other swept dims, sorted indices) per line."""
    out = []
    for compiled, pts in runs:
        others = [d for d in pts.dims if d != x]
        combos = sorted({tuple(int(pts.dims[d][i]) for d in others) for i in range(len(pts))})
        for combo in combos:
            mask = np.ones(len(pts), dtype=bool)
            for d, v in zip(others, combo, strict=True):
                mask &= pts.dims[d] == v
            idx = np.nonzero(mask)[0]
            idx = idx[np.argsort(pts.dims[x][idx])]
            extra = ", ".join(f"{d}={v}" for d, v in zip(others, combo, strict=True))
            label = pts.arch + (f" ({extra})" if extra else "")
            out.append((label, compiled, pts, dict(zip(others, combo, strict=True)), idx))
    return out


# Integer points per interval and round of limiter_changes' search: each round prices every open
# interval's points in one call, so an interval of n integers takes ~log(n) / log(SEARCH_POINTS) rounds.
SEARCH_POINTS = 32


def limiter_changes(compiled: Compiled, pts: Points, x: str, others: dict[str, int], idx: np.ndarray
                    ) -> list[tuple[float, float, str, str]]:
    """(x, estimate there, limiter before, limiter after) where the dominant limiter changes between two
    consecutive sweep points: the first integer x after the earlier point where it differs from the
    earlier point's (dims are counts, as in estimator/study/crossover_points.py). Every open interval is
    narrowed at once: each round prices SEARCH_POINTS integers of each in one Compiled.evaluate."""
    dom = pts.dominant_limiter()[idx]
    xs = pts.dims[x][idx].astype(np.int64)
    # (last x known to have the earlier limiter, first x known to differ, the earlier limiter)
    open_ = [[int(xs[i]), int(xs[i + 1]), dom[i]] for i in np.nonzero(dom[:-1] != dom[1:])[0]]
    if not open_:
        return []
    while True:
        wide = [iv for iv in open_ if iv[1] - iv[0] > 1]
        if not wide:
            break
        probes = [np.unique(np.geomspace(a + 1, b - 1, min(SEARCH_POINTS, b - a - 1)).round()
                            .astype(np.int64)) for a, b, _ in wide]
        at = compiled.evaluate({x: np.concatenate(probes).astype(float), **others}).dominant_limiter()
        start = 0
        for iv, probe in zip(wide, probes, strict=True):
            got = at[start:start + probe.size]
            start += probe.size
            differs = np.nonzero(got != iv[2])[0]
            if differs.size:
                k = int(differs[0])
                iv[1] = int(probe[k])
                if k:
                    iv[0] = int(probe[k - 1])
            else:
                iv[0] = int(probe[-1])
    ends = compiled.evaluate({x: np.array([b for _, b, _ in open_], dtype=float), **others})
    after = ends.dominant_limiter()
    return [(float(b), float(ends.estimate_s[k]), str(before), str(after[k]))
            for k, (_, b, before) in enumerate(open_)]


def make_figure(runs: Sequence[tuple[Compiled, Points]], x: str, stack: str | None = None,
                title: str = "") -> Figure:
    lines = _lines(runs, x)
    unit, factor = time_unit(np.concatenate([p.estimate_s for _, p in runs] + [p.bound_s for _, p in runs]))
    panels = len(runs) if stack else 0
    # A bare Figure on the Agg canvas: no pyplot state, no display needed.
    fig = Figure(figsize=(10, 6 + 2.4 * panels), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1 + panels, 1, height_ratios=[2.6] + [1] * panels)
    ax = fig.add_subplot(grid[0])
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    ends: list[tuple[str, float, float, str]] = []
    any_change = False
    for (label, compiled, pts, others, idx), color in zip(lines, itertools.cycle(colors)):
        xs = pts.dims[x][idx]
        est = pts.estimate_s[idx] * factor
        ax.plot(xs, est, "-", color=color, lw=2, marker="o", ms=3, gid=f"estimate:{label}")
        ax.plot(xs, pts.bound_s[idx] * factor, "--", color=color, lw=1.3, gid=f"bound:{label}")
        ends.append((label, float(xs[-1]), float(est[-1]), color))
        handles.append(Line2D([], [], color=color, lw=2, label=label))
        changes = limiter_changes(compiled, pts, x, others, idx)
        if changes:
            any_change = True
            cx = [c[0] for c in changes]
            ax.plot(cx, [c[1] * factor for c in changes], "o", ms=9, mfc="white", mec=color, mew=2,
                    gid=f"limiter-change:{label}", zorder=5)
            for cxv, cy, before, after in changes:
                ax.annotate(f"{before}\u2192{after}\n{x}={_count(round(cxv))}", (cxv, cy * factor),
                            xytext=(-8, 10), textcoords="offset points", ha="right", fontsize=8, color=color)
    _axes(ax, runs[0][1], x, unit)
    _end_labels(ax, ends)
    handles += [Line2D([], [], color="0.3", lw=2, label="estimate"),
                Line2D([], [], color="0.3", lw=1.3, ls="--", label="bound (speed of light)")]
    if any_change:
        handles.append(Line2D([], [], color="0.3", ls="", marker="o", ms=8, mfc="white", mew=2,
                              label="dominant limiter changes"))
    ax.legend(handles=handles, loc="upper left", fontsize=9, frameon=False)
    ax.set_title(title, fontsize=11)
    for k, (_, pts) in enumerate(runs if stack else []):
        _stack_panel(fig.add_subplot(grid[1 + k], sharex=ax), pts, x, stack, lines)
    return fig


def _axes(ax, pts: Points, x: str, unit: str) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    values = np.unique(pts.dims[x])
    if len(values) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(values))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_count))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    # Under a decade of range matplotlib labels some minor ticks, in 2x10^0 form by default: plain here.
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    ax.set_xlabel(dim_label(x))
    ax.set_ylabel(f"latency per forward pass ({unit})")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    ax.margins(x=0.12)


def _end_labels(ax, ends: list[tuple[str, float, float, str]], gap_pt: float = 11.0) -> None:
    """Each line's name at its right end, nudged apart vertically so close lines stay readable."""
    ax.autoscale_view()
    to_pt = 72.0 / ax.figure.dpi
    placed = sorted(((ax.transData.transform((x, y))[1] * to_pt, label, x, y, color)
                     for label, x, y, color in ends), key=lambda t: t[0])
    last = -np.inf
    for y_pt, label, x, y, color in placed:
        target = max(y_pt, last + gap_pt)
        last = target
        ax.annotate(label, (x, y), xytext=(6, target - y_pt), textcoords="offset points", color=color,
                    va="center", fontsize=9, fontweight="bold")


def _stack_panel(ax, pts: Points, x: str, stack: str, lines) -> None:
    data = pts.by_kind if stack == "kind" else pts.by_limiter
    first = next(line for line in lines if line[2] is pts)
    label, _, _, _, idx = first
    xs = pts.dims[x][idx]
    est = np.where(pts.estimate_s[idx] > 0, pts.estimate_s[idx], 1.0)
    names = sorted(data, key=lambda g: -float(data[g][idx].sum()))
    shares = [100 * data[g][idx] / est for g in names]
    ax.stackplot(xs, shares, labels=names, alpha=0.85, gid=f"stack:{label}")
    ax.set_ylim(0, 100)  # x: shared with the latency plot (log scale, ticks and format)
    ax.set_ylabel(f"share of estimate (%)\nby {stack}")
    ax.set_xlabel(dim_label(x))
    ax.set_title(label, fontsize=9, loc="left")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    ax.grid(True, alpha=0.3)


def check_path(path: str) -> None:
    if Path(path).suffix.lower() not in FORMATS:
        raise PlotError(f"--plot {path}: use a file name ending in {', '.join(FORMATS)}")


def save(fig: Figure, path: str) -> None:
    check_path(path)
    try:
        fig.savefig(path, dpi=130)
    except OSError as exc:
        raise PlotError(f"--plot {path}: {exc.strerror or exc}") from None
