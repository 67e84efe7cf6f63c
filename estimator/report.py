"""Reports of a Result: a terminal table, the JSON contract object, and the symbolic closed form."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import sympy

from estimator.estimate import PricedKernel, Result, group_totals
from estimator.ir import Expr
from estimator.price import unit_peak


def jsonable(expr: Expr) -> int | float | str:
    """A number once every symbol is bound; otherwise the sympy expression as a string."""
    e = sympy.sympify(expr)
    if e.is_number:
        return int(e) if e.is_Integer else float(e)
    return str(e.evalf(6)) if e.has(sympy.Float) else str(e)


def show(expr: Expr, unit: str = "") -> str:
    """Human form: engineering units for seconds, compact floats, expressions rounded to 4 digits."""
    e = sympy.sympify(expr)
    if not e.is_number:
        return str(e.evalf(4))
    v = float(e)
    if unit == "s":
        for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
            if abs(v) >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v * 1e9:.3g} ns"
    if abs(v) >= 1e4:
        return f"{v:.3e}"
    return f"{v:.4g}"


def kernel_ridge(result: Result, p: PricedKernel) -> float | None:
    """FLOP/byte where the kernel's busiest unit and DRAM take equally long (its roofline ridge)."""
    if not p.kernel.work.flops:
        return None
    (unit, dtype), _ = max(p.kernel.work.flops.items(), key=lambda kv: _num(kv[1]))
    return unit_peak(result.hw, unit, dtype) / result.hw.dram_bytes_per_s


def _num(e: Expr) -> float:
    e = sympy.sympify(e)
    return float(e) if e.is_number else 0.0


def to_json(result: Result) -> dict[str, Any]:
    t = result.totals
    cache: dict[Hashable, dict[str, Any]] = {}
    kernels = []
    for p in result.kernels:
        sig = p.kernel.signature
        if sig not in cache:
            w, tm = p.kernel.work, p.timing
            cache[sig] = {
                "flops": jsonable(w.total_flops),
                "flops_by_unit": {f"{u}.{d}": jsonable(v) for (u, d), v in w.flops.items()},
                "dram_bytes": jsonable(w.dram_bytes),
                "bound_s": jsonable(tm.bound_s),
                "estimate_s": jsonable(tm.estimate_s),
                "limiter": tm.limiter,
            }
        kernels.append({"name": p.kernel.name, "nodes": [n.name for n in p.kernel.nodes],
                        "kind": p.kernel.kind, "op": p.kernel.op, **cache[sig]})
    return {
        "arch": result.hw.name,
        "precision": result.precision,
        "dims": result.dims,
        "pipeline": result.pipeline,
        "fusion": "none",
        "total": {k: jsonable(v) for k, v in t.items()},
        "by_kind": _groups_json(result, "kind"),
        "by_limiter": _groups_json(result, "limiter"),
        "kernels": kernels,
        "uncosted": [{"node": u.node, "op": u.op, "reason": u.reason} for u in result.uncosted],
        "unknown_dims": result.graph.unknown_dims,
        "free_nodes": result.free_nodes,
    }


def _groups_json(result: Result, key: str) -> dict[str, dict[str, Any]]:
    return {g: {k: jsonable(v) for k, v in vals.items()} for g, vals in group_totals(result, key).items()}


def _header(result: Result) -> list[str]:
    declared = {k: v for k, v in result.dims.items() if k in result.graph.dims or v is not None}
    dims = ", ".join(f"{k}={'?' if v is None else v}" for k, v in declared.items()) or "static"
    if len(declared) < len(result.dims):
        dims += f" (+{len(result.dims) - len(declared)} unnamed)"
    t = result.totals
    return [
        f"{result.hw.display_name} ({result.hw.name}) | precision {result.precision} | dims {dims} | "
        f"pipeline {result.pipeline or '(none)'}",
        f"{len(result.kernels)} kernels, {result.free_nodes} free ops (views, shape arithmetic), "
        f"{len(result.uncosted)} uncosted",
        f"total estimate {show(t['estimate_s'], 's')}   bound {show(t['bound_s'], 's')}",
        f"model FLOPs {show(t['flops'])}   DRAM bytes {show(t['dram_bytes'])}   "
        f"weight bytes {show(t['weight_bytes'])}",
    ]


def _table(rows: list[list[str]], align: str) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align, strict=True)]
        out.append("  ".join(cells).rstrip())
    return out


def to_table(result: Result, top: int = 15) -> str:
    lines = _header(result)
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        lines += ["", f"free dims: {free}; bind them with --dim NAME=VALUE for a ranked kernel table",
                  "", "by kind (estimate):"]
        for kind, vals in sorted(group_totals(result, "kind").items()):
            lines.append(f"  {kind:<12} {int(vals['kernels']):>5} kernels  {show(vals['estimate_s'], 's')}")
    else:
        lines += _ranked(result, top)
    lines += _uncosted(result)
    if result.graph.unknown_dims:
        unknown = result.graph.unknown_dims
        names = ", ".join(unknown[:8]) + (f" and {len(unknown) - 8} more" if len(unknown) > 8 else "")
        lines.append(f"note: shape inference left dims it could not name: {names}; "
                     f"bind them with --dim NAME=VALUE")
    return "\n".join(lines)


def _ranked(result: Result, top: int) -> list[str]:
    """The top kernels by total estimated time, identical kernels (same signature: the same op on the
    same shapes, as in every layer of a transformer) on one row with their count."""
    total = _num(result.totals["estimate_s"]) or 1.0
    groups: dict[Hashable, list[PricedKernel]] = {}
    for p in result.kernels:
        groups.setdefault(p.kernel.signature, []).append(p)
    ranked = sorted(groups.values(), key=lambda ps: -len(ps) * _num(ps[0].timing.estimate_s))
    rows = [["#", "kernel (first of its kind)", "op", "calls", "each", "total", "share", "bound each",
             "limiter", "FLOP/B", "ridge"]]
    for i, ps in enumerate(ranked[:top], 1):
        p = ps[0]
        w, tm = p.kernel.work, p.timing
        intensity = _num(w.total_flops) / _num(w.dram_bytes) if _num(w.dram_bytes) else float("inf")
        ridge = kernel_ridge(result, p)
        each = _num(tm.estimate_s)
        rows.append([str(i), _clip(p.kernel.name, 44), p.kernel.op, str(len(ps)), show(each, "s"),
                     show(each * len(ps), "s"), f"{100 * each * len(ps) / total:.1f}%", show(tm.bound_s, "s"),
                     tm.limiter, f"{intensity:.3g}", "-" if ridge is None else f"{ridge:.0f}"])
    lines = ["", f"top {min(top, len(ranked))} of {len(ranked)} distinct kernels by total estimated time:"]
    lines += _table(rows, "rllrrrrrlrr")
    for key in ("limiter", "kind"):
        lines += ["", f"by {key}:"]
        groups = sorted(group_totals(result, key).items(), key=lambda kv: -_num(kv[1]["estimate_s"]))
        rows = [[key, "kernels", "estimate", "share", "bound"]]
        for g, vals in groups:
            rows.append([g, str(int(vals["kernels"])), show(vals["estimate_s"], "s"),
                         f"{100 * _num(vals['estimate_s']) / total:.1f}%", show(vals["bound_s"], "s")])
        lines += _table(rows, "lrrrr")
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3):]


def _uncosted(result: Result) -> list[str]:
    if not result.uncosted:
        return []
    by_reason: dict[str, list[str]] = {}
    for u in result.uncosted:
        by_reason.setdefault(f"{u.op}: {u.reason}", []).append(u.node)
    lines = ["", f"uncosted ({len(result.uncosted)} nodes, not in the totals; --strict makes this an error):"]
    for reason, nodes in by_reason.items():
        more = f" (+{len(nodes) - 3} more)" if len(nodes) > 3 else ""
        lines.append(f"  {reason} [{', '.join(nodes[:3])}{more}]")
    return lines


def to_symbolic(result: Result) -> str:
    """Closed forms of the totals in the free dims: polynomials for FLOPs and bytes, sums of Max terms
    (one per distinct kernel, times its multiplicity) for the times."""
    t = result.totals
    free = ", ".join(k for k, v in result.dims.items() if v is None) or "(none)"
    lines = [f"# {result.hw.name}, precision {result.precision}, free dims: {free}",
             f"flops = {sympy.expand(t['flops'])}",
             f"dram_bytes = {sympy.expand(t['dram_bytes'])}",
             f"weight_bytes = {jsonable(t['weight_bytes'])}",
             f"bound_s = {_collect(t['bound_s'])}",
             f"estimate_s = {_collect(t['estimate_s'])}",
             f"kernels = {int(t['kernels'])}"]
    return "\n".join(lines)


def _collect(expr: Expr) -> str:
    e = sympy.sympify(expr)
    # Terms without Max (memory- or compute-only kernels) fold into one polynomial; keep Max terms apart.
    return str(e.evalf(4))
