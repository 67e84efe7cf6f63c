"""`estimate validate ... --markdown`: the accuracy tables as Markdown, so that docs are generated from
the commands (docs/validation.md), never typed by hand."""

from __future__ import annotations

from collections.abc import Sequence


def pct(x: float, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal: 0.0512 -> "5.1%" (signed: "+5.1%")."""
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table: the first column left-aligned, the others (figures) right."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
