"""Reports of a Result: a terminal table, the JSON contract object, and the symbolic closed form."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any

import sympy

from estimator.estimate import PricedKernel, Result, group_totals
from estimator.ir import Expr
from estimator.pricing.price import unit_peak
from estimator.symmath import flat_symbolic, round_numbers, rounded
from estimator.textfit import fit_table, si, wide, width


def jsonable(expr: Expr) -> int | float | str:
    """A number once every symbol is bound; otherwise the sympy expression as a string."""
    e = sympy.sympify(expr)
    if e.is_number:
        return int(e) if e.is_Integer else float(e)
    # JSON carries the closed form with its numbers rounded, not re-simplified (symmath.round_numbers)
    return str(round_numbers(e, 6)) if e.has(sympy.Float) else str(e)


def show(expr: Expr, unit: str = "") -> str:
    """Human form: engineering units for seconds, compact floats, expressions rounded to 4 digits."""
    e = sympy.sympify(expr)
    if not e.is_number:
        return str(rounded(e, 4))
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


def _flat_report(fn):
    """Print a Result in its estimate's flat mode (symmath.py) when it has many unbound dims."""
    @functools.wraps(fn)
    def in_mode(result: Result, *args, **kwargs):
        with flat_symbolic(sum(v is None for v in result.dims.values())):
            return fn(result, *args, **kwargs)
    return in_mode


@_flat_report
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
                **_tile_json(p.kernel.tile),
                **_comm_json(tm),
            }
        kernels.append({"name": p.kernel.name, "nodes": [n.name for n in p.kernel.nodes],
                        "kind": p.kernel.kind, "op": p.kernel.op, **cache[sig]})
    return {
        "arch": result.hw.name,
        "precision": result.precision,
        "dims": result.dims,
        "pipeline": result.pipeline,
        "fusion": result.fusion,
        "total": {k: jsonable(v) for k, v in t.items()},
        "by_kind": _groups_json(result, "kind"),
        "by_limiter": _groups_json(result, "limiter"),
        "kernels": kernels,
        "uncosted": [{"node": u.node, "op": u.op, "reason": u.reason} for u in result.uncosted],
        "unknown_dims": result.graph.unknown_dims,
        "free_nodes": result.free_nodes,
    }


def _tile_json(plan) -> dict[str, Any]:
    """Per kernel: the tile plan's choice (null without --tiling or for non-GEMM kernels)."""
    if plan is None:
        return {"tile": None, "waves": None, "wave_eff": None, "tensor_util": None, "sass": None}
    return {"tile": plan.tile, "sass": getattr(plan, "sass", None),  # --kernel-sass: "file#kernel"
            "waves": None if plan.waves is None else jsonable(plan.waves),
            "wave_eff": None if plan.wave_eff is None else jsonable(plan.wave_eff),
            "tensor_util": None if plan.tensor_util is None else jsonable(plan.tensor_util)}


def _comm_json(tm) -> dict[str, Any]:
    """Collectives only: {"comm": {"op", "bytes", "group", "algorithm", "protocol"}}."""
    if tm.comm is None:
        return {}
    return {"comm": {k: jsonable(v) if k == "bytes" else v for k, v in tm.comm.items()}}


def _op_cell(p: PricedKernel) -> str:
    """The op; a collective adds its message size, group and algorithm ("AllReduce 128 KiB x8 oneshot")."""
    c = p.timing.comm
    if c is None:
        return p.kernel.op
    size = sympy.sympify(c["bytes"])
    text = str(size.evalf(4)) + " B"
    if size.is_number:
        v = float(size)
        text = next((f"{v / s:.4g} {u}" for s, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
                     if v >= s), f"{v:.0f} B")
    return f"{c['op']} {text} x{c['group']} {c['algorithm']}/{c['protocol']}"


def _tile_cells(plan) -> list[str]:
    """Ranked-table cells: the tile, and waves (last-wave fill) / estimated tensor-core utilization."""
    if plan is None or plan.tile is None:
        return ["-", "-"]
    waves = "-" if plan.waves is None else f"{_num(plan.waves):.0f} ({100 * _num(plan.wave_eff):.0f}%)"
    util = "" if plan.tensor_util is None else f" TC {100 * _num(plan.tensor_util):.0f}%"
    sass = getattr(plan, "sass", None)
    return [plan.tile + (f" [sass {sass}]" if sass else ""), waves + util]


def _groups_json(result: Result, key: str) -> dict[str, dict[str, Any]]:
    return {g: {k: jsonable(v) for k, v in vals.items()} for g, vals in group_totals(result, key).items()}


def _header(result: Result) -> list[str]:
    declared = {k: v for k, v in result.dims.items() if k in result.graph.dims or v is not None}
    dims = ", ".join(f"{k}={'?' if v is None else v}" for k, v in declared.items()) or "static"
    if len(declared) < len(result.dims):
        dims += f" (+{len(result.dims) - len(declared)} unnamed)"
    t = result.totals
    head = (f"{result.hw.display_name} ({result.hw.name}) | precision {result.precision} | dims {dims} | "
            f"fusion {result.fusion}")
    passes = f" ({result.pipeline or 'no passes'})"
    limit = width()
    return [
        head + (passes if limit is None or len(head + passes) <= limit or result.fusion == "custom" else ""),
        f"{len(result.kernels)} kernels, {result.free_nodes} free ops (views, shape arithmetic), "
        f"{len(result.uncosted)} uncosted",
        f"total estimate {_summary(t['estimate_s'], 's')}   bound {_summary(t['bound_s'], 's')}",
        f"model {_si(t['flops'], 'FLOP')}   DRAM {_si(t['dram_bytes'], 'B')}   "
        f"weights {_si(t['weight_bytes'], 'B')}",
        *_fp32_note(result),
    ]


def collectives_text(result: Result) -> list[str]:
    """Every collective kernel of `result` (tensor-parallel all-reduce, the lm_head's all-gather, the
    all-to-all of expert parallelism, attention DP's all-gather / reduce-scatter), one line per op,
    message and group, with its calls and time: the deployment's communication at a glance."""
    rows: dict[tuple, list] = {}
    for p in result.kernels:
        comm = getattr(p.timing, "comm", None)
        if p.kernel.kind != "communication" or not comm:
            continue
        key = (comm.get("op"), _num(comm.get("bytes")), comm.get("group"), comm.get("algorithm"))
        row = rows.setdefault(key, [0, 0.0])
        row[0] += 1
        row[1] += _num(p.timing.estimate_s) or 0.0
    if not rows:
        return ["collectives: none (one GPU)"]
    lines = ["collectives (op, message, GPUs, algorithm: calls, each, total):"]
    for (op, nbytes, group, algo), (calls, total) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        units = ((2**20, "MiB"), (2**10, "KiB"), (1, "B"))
        size = "?" if nbytes is None else next(f"{nbytes / f:.4g} {u}" for f, u in units
                                               if nbytes >= f or f == 1)
        lines.append(f"  {op:<14}{size:>10} x{group:<4}{str(algo or '-'):<18}{calls:>5} calls  "
                     f"{show(total / calls, 's'):>9} each  {show(total, 's'):>9}")
    return lines


def _fp32_note(result: Result) -> list[str]:
    """One line when an fp32 graph (its dtypes kept) is priced for a GPU with tensor cores."""
    if result.precision != "graph" or not result.hw.tensor_flops_per_s:
        return []
    tensors = result.graph.tensors.values()
    fp32 = any(t.is_weight and t.dtype == "fp32" and (t.rank or 0) >= 2 for t in tensors)
    if not fp32:
        return []
    return ["note: the graph is fp32 (its GEMMs priced on CUDA cores); serving engines (TensorRT-LLM, vLLM, "
            "SGLang) run LLMs in bf16 or lower: --precision bf16"]


SUMMARY_CHARS = 80  # a closed form longer than this is summarised in the table (--symbolic prints it)


def _si(expr: Expr, unit: str) -> str:
    """SI prefixes for a bound number (31.9 TFLOP); a closed form in the free dims as `show` prints it,
    summarised when long (`_summary`)."""
    e = sympy.sympify(expr)
    return si(float(e), unit) if e.is_number else f"{_summary(e)} {unit}"


def _summary(e: Expr, unit: str = "") -> str:
    """A closed form as `show` prints it; longer than SUMMARY_CHARS, its size and free dims instead (the
    full form is --symbolic's)."""
    text = show(e, unit)
    if len(text) <= SUMMARY_CHARS:
        return text
    dims = ", ".join(sorted(str(s) for s in sympy.sympify(e).free_symbols))
    return f"<closed form in {dims}, {len(text):,} characters: --symbolic prints it>"


def _table(rows: list[list[str]], align: str, clip: tuple[int, ...] = ()) -> list[str]:
    """Columns fitted to the terminal (estimator/textfit.py): `clip` columns clipped first."""
    return fit_table(rows, align, clip)


@_flat_report
def to_table(result: Result, top: int = 15) -> str:
    lines = _header(result)
    if result.symbolic:
        free = ", ".join(k for k, v in result.dims.items() if v is None)
        lines += ["", f"free dims: {free}; bind them with --dim NAME=VALUE for a ranked kernel table",
                  "", "by kind (estimate):"]
        for kind, vals in sorted(group_totals(result, "kind").items()):
            each = _summary(vals["estimate_s"], "s")
            lines.append(f"  {kind:<12} {int(vals['kernels']):>5} kernels  {each}")
    else:
        lines += _ranked(result, top)
    lines += _uncosted(result)
    priced = sorted({(p.kernel.name, p.kernel.tile.sass) for p in result.kernels
                     if getattr(p.kernel.tile, "sass", None)})
    if priced:
        lines += ["", "priced from SASS (--kernel-sass: MMA path and CTAs/SM of the compiled kernel):"]
        lines += [f"  {name} <- {sass}" for name, sass in priced]
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
             "limiter", "FLOP/B", "ridge", "tile", "waves (fill) util"]]
    for i, ps in enumerate(ranked[:top], 1):
        p = ps[0]
        w, tm = p.kernel.work, p.timing
        intensity = _num(w.total_flops) / _num(w.dram_bytes) if _num(w.dram_bytes) else float("inf")
        ridge = kernel_ridge(result, p)
        each = _num(tm.estimate_s)
        rows.append([str(i), _clip(p.kernel.name, 44), _op_cell(p), str(len(ps)), show(each, "s"),
                     show(each * len(ps), "s"), f"{100 * each * len(ps) / total:.1f}%", show(tm.bound_s, "s"),
                     tm.limiter, _intensity(intensity), "-" if ridge is None else f"{ridge:.0f}",
                     *_tile_cells(p.kernel.tile)])
    lines = ["", f"top {min(top, len(ranked))} of {len(ranked)} distinct kernels by total estimated time:"]
    # too wide for the terminal: names clipped, then the tile columns, bound, ridge and calls left out
    lines += fit_table(rows, "rllrrrrrlrrll", clip=(1, 2), drop=(12, 11, 7, 10, 3, 2, 9))
    for key in ("limiter", "kind"):
        lines += ["", f"by {key}:"]
        groups = sorted(group_totals(result, key).items(), key=lambda kv: -_num(kv[1]["estimate_s"]))
        rows = [[key, "kernels", "estimate", "share", "bound"]]
        for g, vals in groups:
            rows.append([g, str(int(vals["kernels"])), show(vals["estimate_s"], "s"),
                         f"{100 * _num(vals['estimate_s']) / total:.1f}%", show(vals["bound_s"], "s")])
        lines += _table(rows, "lrrrr")
    return lines


def _intensity(v: float) -> str:
    """FLOP per byte: 3 significant digits, whole numbers from 1,000 up (1,250, not 1.25e+03)."""
    return f"{v:,.0f}" if 1000 <= v < float("inf") else f"{v:.3g}"


def _clip(text: str, width: int) -> str:
    return text if wide() or len(text) <= width else "..." + text[-(width - 3):]


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
    """Closed forms of the totals in the free dims: polynomials for FLOPs and bytes, and for the times a
    polynomial plus one Max term per distinct kernel (times its multiplicity). Then, where Max decides:
    per distinct kernel the dim value where its compute term overtakes its memory term; with one free dim
    the totals as explicit pieces; and per free dim the leading term as that dim grows."""
    t = result.totals
    free = [k for k, v in result.dims.items() if v is None]
    lines = [f"# {result.hw.name}, precision {result.precision}, free dims: {', '.join(free) or '(none)'}",
             f"flops = {sympy.expand(t['flops'])}",
             f"dram_bytes = {sympy.expand(t['dram_bytes'])}",
             f"weight_bytes = {jsonable(t['weight_bytes'])}",
             f"bound_s = {_collect(t['bound_s'])}",
             f"estimate_s = {_collect(t['estimate_s'])}",
             f"kernels = {int(t['kernels'])}"]
    if free:
        lines += _where_max_decides(result, free)
        lines += _leading_terms(result, free)
    return "\n".join(lines)


def _collect(expr: Expr) -> str:
    """Terms without Max (kernels whose limiter never changes) folded into one polynomial first, then
    the Max terms, largest multiplicity first."""
    e = sympy.sympify(expr)
    if not isinstance(e, sympy.Add):
        return str(e.evalf(4))
    plain = [a for a in e.args if not a.has(sympy.Max)]
    maxes = sorted((a for a in e.args if a.has(sympy.Max)), key=lambda a: -abs(_num(a.as_coeff_Mul()[0])))
    parts = [str(sympy.expand(sympy.Add(*plain)).evalf(4))] if plain else []
    parts += [str(a.evalf(4)) for a in maxes]
    return " + ".join(parts)


def _primary_dim(free: list[str]) -> str:
    """The dim thresholds are solved for: the last one naming a sequence, else the last."""
    seqs = [d for d in free if "seq" in d]
    return (seqs or free)[-1]


def _fmt_x(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _where_max_decides(result: Result, free: list[str]) -> list[str]:
    from estimator.study.crossover import groups

    gl = groups(result)
    primary = _primary_dim(free)
    lines = []
    for x in [primary] + [d for d in free if d != primary]:
        lines += _along(gl, x, [d for d in free if d != x])
    if len(free) > 1:
        lines.append("(piecewise totals need one free dim: bind all but one with --dim, or use --sweep)")
    return lines


def _along(gl, x: str, others: list[str]) -> list[str]:
    """Limiter thresholds of every distinct kernel along x (the others symbolic, ordered at 1); with no
    other free dim, the totals as explicit pieces too."""
    from estimator.study.crossover import Piecewise, family_name

    note = f" (thresholds solved for {x}; terms ordered with {', '.join(others)} = 1)" if others else ""
    lines = ["", f"# where Max decides, along {x}{note}"]
    launch: list[float] = []
    for which in ("bound", "estimate"):
        pw = Piecewise(gl, x, {d: 1 for d in others}, which)
        rows: dict[tuple[str, ...], int] = {}  # identical kernels of different layers on one line
        at: dict[tuple[str, ...], float] = {}  # for the order: lowest threshold first
        for fam in pw.families:
            for v, before, after in pw.transitions(fam):
                if "compute" not in (before, after):  # launch <-> memory: summarised below
                    launch.append(v)
                    continue
                where = _fmt_x(v) if not others else _threshold(fam.group, which, x, before, after, v, others)
                key = (family_name(fam.group.name), fam.group.kind, before, after, where)
                rows[key] = rows.get(key, 0) + fam.group.count
                at[key] = v
        title = ("bound_s: compute (at peak) overtakes memory (at peak)" if which == "bound"
                 else "estimate_s: limiter changes into or out of compute")
        lines += [f"{title}:"] + ([f"  {n} x {name} [{kind}]: {before} below, {after} above {x} = {where}"
                                   for (name, kind, before, after, where), n in
                                   sorted(rows.items(), key=lambda kv: at[kv[0]])]
                                  or ["  none for dims >= 1"])
        if not others:
            lines += _pieces(pw, which, x)
    if launch:
        lines.append(f"estimate_s: {len(launch)} distinct kernel(s) change between launch floor and memory "
                     f"between {x} = {_fmt_x(min(launch))} and {_fmt_x(max(launch))}"
                     + (" (others at 1)" if others else ""))
    return lines


def _threshold(group, which: str, x: str, before: str, after: str, near: float, others: list[str]) -> str:
    """The threshold as an expression in the other free dims (numeric at 1 when sympy cannot solve)."""
    from estimator.ir import dim
    from estimator.study.crossover import max_args, real_symbol

    xr = real_symbol(x)
    t = group.timing
    terms = dict(t.terms) if which == "estimate" else {"compute": t.compute_s, "memory": t.memory_s}
    at = {xr: near, **{dim(o): 1 for o in others}}

    def top(label: str) -> Expr:
        args = max_args(sympy.sympify(terms[label]).xreplace({dim(x): xr}))
        return max(args, key=lambda a: _num(a.xreplace(at)))

    try:
        roots = sympy.solve(top(before) - top(after), xr)
    except (NotImplementedError, ValueError, TypeError, sympy.PolynomialError):
        roots = []
    ones = {dim(o): 1 for o in others}
    real = [r for r in roots if sympy.sympify(r.xreplace(ones)).is_real]
    if not real:
        return f"{_fmt_x(near)} (at {', '.join(others)} = 1)"
    best = min(real, key=lambda r: abs(float(r.xreplace(ones)) - near))
    return str(sympy.simplify(best).evalf(4))


def _pieces(pw, which: str, x: str, most: int = 10) -> list[str]:
    pieces = pw.pieces()
    name = f"{which}_s"
    rows = []
    for a, b, expr in pieces:
        span = f"{_fmt_x(a)} <= {x} < {_fmt_x(b)}" if b < pw.hi else f"{x} >= {_fmt_x(a)}"
        rows.append(f"  {span}: {name} = {expr.evalf(4)}")
    if len(rows) > most:
        rows = rows[:most // 2] + [f"  ... {len(rows) - most} more pieces ..."] + rows[-(most // 2):]
    return [f"{name} piecewise in {x} ({len(pieces)} piece(s)):"] + rows


def _leading_terms(result: Result, free: list[str]) -> list[str]:
    from estimator.study.crossover import leading_term

    lines = ["", "# leading terms as one free dim grows (the others fixed)"]
    for d in free:
        parts = []
        for key in ("bound_s", "estimate_s", "flops", "dram_bytes"):
            lead = leading_term(result.totals[key], d)
            if lead is None:
                parts.append(f"{key}: not a rational function of {d}")
                continue
            coeff, degree = lead
            power = d if degree == 1 else f"{d}**{degree}"
            parts.append(f"{key} ~ ({_coeff(coeff)})*{power}" if degree else f"{key} -> {_coeff(coeff)}")
        lines.append(f"{d}: " + "; ".join(parts))
    return lines


def _coeff(e: Expr) -> str:
    e = sympy.sympify(e)
    return f"{float(e):.4g}" if e.is_number else str(sympy.expand(e).evalf(4))
