"""Text for a terminal: tables fitted to its width, and numbers with SI prefixes.

The width is the terminal's (shutil.get_terminal_size: the COLUMNS variable first, then the terminal
stdout is); output into a pipe or a file has no width to fit and keeps every column whole, as does
`--wide` (the command line runs the mode inside `fitted(None)`). A table wider than the width first
clips its text columns (kernel names: the head goes, the informative tail stays) down to CLIP_MIN
characters, then leaves out its last columns, and says so in a line under it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import shutil
import textwrap
from collections.abc import Iterator, Sequence

CLIP_MIN = 24  # characters a clipped text column keeps at least (the tail of a kernel name)
_WIDTH: contextvars.ContextVar[int | None | str] = contextvars.ContextVar("width", default="terminal")


def terminal_width() -> int | None:
    """Columns of the terminal (COLUMNS first); None when stdout is no terminal and COLUMNS is unset."""
    cols = shutil.get_terminal_size(fallback=(0, 0)).columns
    return cols if cols > 0 else None


def width() -> int | None:
    """The width tables fit now: `fitted`'s, else the terminal's."""
    w = _WIDTH.get()
    return terminal_width() if w == "terminal" else w


def wide() -> bool:
    """--wide: every column whole, names unclipped."""
    return _WIDTH.get() is None


@contextlib.contextmanager
def fitted(columns: int | None) -> Iterator[None]:
    """Fit tables to `columns` (None: never clip, --wide) inside the block."""
    token = _WIDTH.set(columns)
    try:
        yield
    finally:
        _WIDTH.reset(token)


def clip_left(text: str, size: int) -> str:
    """`text` in at most `size` characters, its head replaced by '...' (names end in what tells them
    apart: a layer's op, a tile, a dtype)."""
    return text if len(text) <= size else "..." + text[-(size - 3):]


def fit_table(rows: Sequence[Sequence[str]], align: str, clip: Sequence[int] = (),
              drop: Sequence[int] | None = None, columns: int | None | str = "now") -> list[str]:
    """Lines of `rows` (the first the header) in columns two spaces apart, `align` 'l'/'r' per column;
    wider than `columns` (default: `width()`), the `clip` columns are clipped (clip_left; the header
    row keeps its words), then columns left out in the order `drop` gives (default: the last first),
    with a note line naming them."""
    limit = width() if columns == "now" else columns
    rows = [list(r) for r in rows]
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    kept = list(range(n))

    def total() -> int:
        return sum(widths[i] for i in kept) + 2 * (len(kept) - 1)

    full = {c: ([r[c] for r in rows], widths[c]) for c in clip}  # the clipped columns' whole text
    if limit is not None and total() > limit:
        for c in clip:
            over = total() - limit
            if over > 0 and widths[c] > CLIP_MIN:
                widths[c] = max(CLIP_MIN, widths[c] - over)
                for r in rows[1:]:
                    r[c] = clip_left(r[c], widths[c])
                head = rows[0][c]
                rows[0][c] = head if len(head) <= widths[c] else head.split()[0][:widths[c]]
        order = list(drop) if drop is not None else list(range(n - 1, 0, -1))
        for c in order:
            if total() <= limit or len(kept) == 1:
                break
            kept.remove(c)
        for c in clip:  # what dropping a column freed goes back to the clipped names
            spare = limit - total()
            texts, whole = full[c]
            if c in kept and spare > 0 and widths[c] < whole:
                widths[c] = min(whole, widths[c] + spare)
                for r, text in zip(rows[1:], texts[1:], strict=True):
                    r[c] = clip_left(text, widths[c])
                rows[0][c] = texts[0] if len(texts[0]) <= widths[c] else texts[0].split()[0][:widths[c]]
    out = []
    for r in rows:
        cells = [r[i].ljust(widths[i]) if align[i] == "l" else r[i].rjust(widths[i]) for i in kept]
        out.append("  ".join(cells).rstrip())
    if len(kept) < n:
        left = ", ".join(rows[0][i] for i in range(n) if i not in kept)
        out += wrap(f"(--wide for {n - len(kept)} more column(s): {left})", limit)
    return out


def wrap(text: str, columns: int | None | str = "now") -> list[str]:
    """`text` in lines of at most `columns` (default: `width()`; None: one line)."""
    limit = width() if columns == "now" else columns
    if limit is None or len(text) <= limit:
        return [text]
    return textwrap.wrap(text, limit, break_on_hyphens=False) or [text]


SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str) -> str:
    """`value` with an SI prefix and 3 significant digits: 3.186e13 FLOP -> '31.9 TFLOP'."""
    if not math.isfinite(value):
        return f"{value} {unit}"
    for scale, prefix in SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
