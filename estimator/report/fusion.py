"""Reports about fusion: the strategy comparison table, --explain, and --print-after dumps."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterable

import sympy

from estimator.estimate import Result
from estimator.ir import Graph, is_fused
from estimator.report.table import show


def _num(expr) -> float | None:
    e = sympy.sympify(expr)
    return float(e) if e.is_number else None


def compare_table(results: dict[str, Result]) -> str:
    """kernels (launches), DRAM bytes, bound, estimate and speedup against `none` (or the first)."""
    base_name = "none" if "none" in results else next(iter(results))
    base = _num(results[base_name].totals["estimate_s"])
    first = next(iter(results.values()))
    dims = ", ".join(f"{k}={'?' if v is None else v}" for k, v in first.dims.items()) or "static"
    rows = [["strategy", "kernels", "DRAM bytes", "bound", "estimate", f"speedup vs {base_name}"]]
    for name, r in results.items():
        t = r.totals
        est = _num(t["estimate_s"])
        speedup = f"{base / est:.2f}x" if base is not None and est else "-"
        rows.append(
            [
                name,
                str(int(t["kernels"])),
                show(t["dram_bytes"]),
                show(t["bound_s"], "s"),
                show(t["estimate_s"], "s"),
                speedup,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{first.hw.display_name} ({first.hw.name}) | precision {first.precision} | dims {dims}"]
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def explain(result: Result, examples: int = 3) -> str:
    """Every refused fusion and near miss ("near miss: ..."), grouped by rule and reason, with a few
    example nodes; then the invented dims the frontend merged (dim_merges)."""
    return "\n".join([_refused(result, examples), *dim_merges(result, examples)])


def dim_merges(result: Result, examples: int = 3) -> list[str]:
    """The invented dims merged into each representative (frontends/unify_dims.py), a few names each,
    and the merges refused as conflicts."""
    into: dict[str, list[str]] = defaultdict(list)
    for name, rep in result.dim_merges.items():
        into[str(rep)].append(name)
    lines = [f"merged dims ({len(result.dim_merges)} invented dims the graph proves equal to another):"
             ] if into else []
    for rep, names in sorted(into.items(), key=lambda kv: -len(kv[1])):
        more = f" (+{len(names) - examples} more)" if len(names) > examples else ""
        lines.append(f"  {rep} <- {len(names)}: {', '.join(names[:examples])}{more}")
    if result.dim_conflicts:
        lines.append(f"dims not merged ({len(result.dim_conflicts)} conflicting equalities):")
        lines += [f"  {c}" for c in result.dim_conflicts[:examples]]
        if len(result.dim_conflicts) > examples:
            lines.append(f"  (+{len(result.dim_conflicts) - examples} more)")
    return ["", *lines] if lines else []


def _refused(result: Result, examples: int) -> str:
    if not result.refusals:
        return f"\nno fusion was refused and no near miss (fusion {result.fusion})"
    by_rule: dict[str, dict[str, list[tuple[str, ...]]]] = defaultdict(lambda: defaultdict(list))
    for r in result.refusals:
        by_rule[r.rule][r.reason].append(r.nodes)
    lines = ["", f"refused fusions ({len(result.refusals)}), by rule:"]
    for rule, reasons in by_rule.items():
        lines.append(f"  {rule}: {sum(len(v) for v in reasons.values())}")
        for reason, cases in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            shown = "; ".join(" + ".join(c) for c in cases[:examples])
            more = f" (+{len(cases) - examples} more)" if len(cases) > examples else ""
            lines.append(f"    {len(cases):>4} x {reason}: {shown}{more}")
    return "\n".join(lines)


def dump(graph: Graph) -> str:
    """One line per node in topological order; fused nodes list their members."""
    lines = []
    for node in graph.topo_nodes():
        outs = ", ".join(_typed(graph, t) for t in node.outputs if t)
        ins = ", ".join(t for t in node.inputs if t)
        head = f"{node.name}: {node.qualified_op}({ins}) -> {outs}"
        if is_fused(node):
            head += f"  [{node.attrs['kind']}: {' '.join(m.op_type for m in node.body)}]"
        lines.append(head)
    return "\n".join(lines)


def _typed(graph: Graph, tensor: str) -> str:
    t = graph.tensors.get(tensor)
    if t is None or t.shape is None:
        return tensor
    return f"{tensor}:{t.dtype}[{', '.join(str(d) for d in t.shape)}]"


def printer(passes: Iterable[str]) -> Callable | None:
    """An after-pass hook printing the graph (to stderr, so --json stays parseable) after the named
    passes ('all' for every pass)."""
    wanted = set(passes)
    if not wanted:
        return None

    def hook(name: str, result) -> None:
        if "all" in wanted or name in wanted:
            print(f"// ---- after {name} (modified={result.modified}) ----", file=sys.stderr)
            print(dump(result.graph), file=sys.stderr)

    return hook
