"""`--report FILE.html`: one self-contained page of an estimate (no network access when opened).

Sections: with --serve first the served figures (TTFT, TPOT, tokens/s, memory per GPU: cards, then
the rest of estimator/report/serving.py's flat mapping), since they are what a serving report is read
for; then the summary (bound, estimate, limiter mix, model FLOPs / DRAM bytes / weights; under --serve
titled as the step whose kernels follow), recommendations (one row per action, one quantity per column,
evidence formatted), the roofline and the time breakdown (inline SVG from estimator/report/figures.py),
the sortable kernel table with tile plans (one row per kernel, as many as the JSON's "kernels";
collapsed in a <details> past LONG_TABLE rows), the fusion comparison and the sweep plot (with --sweep).
Styles and the small script (column sorting, tooltips on the roofline marks) are inline; there is no
link, font, image or script fetched from anywhere. `@media print` drops the interactive parts.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

import sympy

from estimator.estimate import Result, group_totals
from estimator.report import figures
from estimator.report.recommendation import distinct_actions
from estimator.report.table import jsonable, show

CSS = """
:root { --fg:#1b1f24; --muted:#5b6470; --line:#d8dde3; --bg:#fff; --accent:#0b5cad; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 1.2rem 1.5rem 3rem; max-width: 1280px; }
h1 { font-size: 1.45rem; margin: 0 0 .2rem; } h2 { font-size: 1.15rem; margin: 2rem 0 .6rem;
     border-bottom: 1px solid var(--line); padding-bottom: .2rem; }
.sub { color: var(--muted); margin: 0 0 1rem; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .6rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .7rem; }
.card b { display: block; font-size: 1.2rem; } .card span { color: var(--muted); font-size: .8rem; }
figure { margin: 0; } figure svg { width: 100%; max-width: 54rem; height: auto; display: block; }
figcaption { color: var(--muted); font-size: .85rem; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { padding: .25rem .45rem; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; position: sticky; top: 0; background: #f4f6f8; }
table.sortable th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.sortable th[aria-sort="descending"]::after { content: " \\25BC"; }
.scroll { max-height: 70vh; overflow: auto; border: 1px solid var(--line); }
.name { max-width: 28rem; overflow-wrap: anywhere; }
code { font-size: 12px; background: #f4f6f8; padding: 0 .2rem; border-radius: 3px; }
#tip { position: fixed; pointer-events: none; background: #1b1f24; color: #fff; font-size: 12px;
       padding: .35rem .5rem; border-radius: 4px; display: none; max-width: 26rem; z-index: 10; }
.note { color: var(--muted); font-size: .85rem; }
details > summary { cursor: pointer; color: var(--accent); margin: .3rem 0; }
.cards.served .card b { font-size: 1.35rem; } .card span + span { display: block; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; } #tip { display: none !important; }
  .scroll { max-height: none; overflow: visible; border: 0; }
  table.sortable th { position: static; } h2 { break-after: avoid; } figure, .cards { break-inside: avoid; }
}
"""

# Sorting: a click on a header orders the rows by that column (numbers by data-v, text otherwise).
# Tooltips: every roofline mark (<g id="kernel-N">) shows its kernel's row from the embedded JSON.
JS = """
(function () {
  window.addEventListener('beforeprint', function () {
    document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  });
  function key(td) { var v = td.getAttribute('data-v'); return v === null ? td.textContent : parseFloat(v); }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var asc = th.getAttribute('aria-sort') !== 'ascending';
        table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          var c = (typeof x === 'number' && typeof y === 'number') ? x - y
                                                                   : String(x).localeCompare(String(y));
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  var data = JSON.parse(document.getElementById('kernel-data').textContent);
  var tip = document.getElementById('tip');
  document.querySelectorAll('svg g[id^="kernel-"], svg g[id^="measured-"]').forEach(function (g) {
    var d = data[g.id.split('-')[1]];
    if (!d) { return; }
    g.addEventListener('mousemove', function (e) {
      tip.textContent = d.name + ' | ' + d.op + ' | ' + d.limiter + ' | ' + d.calls + ' call(s) x ' + d.each +
        ' | ' + d.intensity + ' FLOP/B' + (d.tile ? ' | tile ' + d.tile : '');
      tip.style.display = 'block';
      tip.style.left = (e.clientX + 12) + 'px';
      tip.style.top = (e.clientY + 12) + 'px';
    });
    g.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  });
})();
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x) -> float | None:
    e = sympy.sympify(x)
    return float(e) if e.is_number else None


def _cell(value: Any, text: str | None = None, numeric: bool = True) -> str:
    if not numeric:
        return f"<td>{_e(value if text is None else text)}</td>"
    v = _num(value) if value is not None else None
    shown = text if text is not None else ("-" if v is None else show(v))
    attr = "" if v is None else f' data-v="{v!r}"'
    return f'<td class="n"{attr}>{_e(shown)}</td>'


def _table(headers: Sequence[tuple[str, bool]], rows: Sequence[str], cls: str = "sortable",
           tid: str = "") -> str:
    head = "".join(f'<th class="n">{_e(h)}</th>' if num else f"<th>{_e(h)}</th>" for h, num in headers)
    ident = f' id="{tid}"' if tid else ""
    return f'<table class="{cls}"{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _si(x, unit: str) -> str:
    v = _num(x) or 0.0
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


LONG_TABLE = 50  # a table of more rows is collapsed (<details>): the page stays readable from the top


def _collapsible(rows: int, what: str, body: str) -> str:
    if rows <= LONG_TABLE:
        return body
    return f"<details><summary>show all {rows} {_e(what)}</summary>{body}</details>"


def summary(result: Result, heading: str = "Summary") -> str:
    t = result.totals
    total = _num(t["estimate_s"]) or 1.0
    mix = sorted(group_totals(result, "limiter").items(), key=lambda kv: -(_num(kv[1]["estimate_s"]) or 0))
    cards = [("estimate", show(t["estimate_s"], "s")), ("bound (speed of light)", show(t["bound_s"], "s")),
             ("kernels", str(int(t["kernels"]))), ("model FLOPs", _si(t["flops"], "FLOP")),
             ("DRAM traffic", _si(t["dram_bytes"], "B")), ("weights", _si(t["weight_bytes"], "B"))]
    cards += [(f"{name}-limited", f"{100 * (_num(v['estimate_s']) or 0) / total:.1f}%") for name, v in mix]
    body = "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in cards)
    extra = (f'<p class="note">{len(result.uncosted)} uncosted op(s), not in the totals: '
             f'{_e(", ".join(sorted({u.op for u in result.uncosted})))}</p>' if result.uncosted else "")
    return f'<section id="summary"><h2>{_e(heading)}</h2><div class="cards">{body}</div>{extra}</section>'


# What a recommendation's gain is measured in (Recommendation.metric): every one is in seconds, but a
# decode step, a TPOT and GPU-seconds per token are different quantities, so the table names it per row.
METRICS = {"estimate_s": "model estimate", "tpot_s": "TPOT", "ttft_s": "TTFT",
           "s_per_token_per_gpu": "GPU-s per token", "measured_s": "measured time"}


def _value(key: str, v: Any) -> str:
    """One evidence value in its unit: seconds (`*_s`) and bytes (`*bytes*`) with SI prefixes, rates
    (`*_per_s`) too, other floats to 4 significant digits, a mapping as `key value, ...`."""
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {_value(k, x)}" for k, x in v.items())
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if key.endswith("_per_s"):
        return _si(v, "B/s" if "bytes" in key else ("FLOP/s" if "flops" in key else "/s"))
    if key.endswith("_s"):
        return show(v, "s")
    if "bytes" in key:
        return _si(v, "B")
    return f"{v:,}" if isinstance(v, int) else f"{v:.4g}"


def _evidence(ev: Mapping[str, Any]) -> str:
    return "; ".join(f"{k}: {_value(k, v)}" for k, v in ev.items())


def recommendations_section(recs: Sequence, total_s: float, threshold: float, also: Sequence = ()) -> str:
    rows = []
    for i, (r, same) in enumerate(distinct_actions(recs), 1):
        more = "".join(f"; also {METRICS.get(o.metric, o.metric)} -{show(o.gain_s, 's')} ({o.gain_pct:.1f}%)"
                       for o in same)
        rows.append(f"<tr>{_cell(i)}<td>{_e(r.action)}</td><td>{_e(METRICS.get(r.metric, r.metric))}</td>"
                    f"{_cell(r.gain_s, show(r.gain_s, 's'))}{_cell(r.gain_pct, f'{r.gain_pct:.1f}%')}"
                    f"{_cell(r.estimate_s, show(r.estimate_s, 's'))}"
                    f"<td><code>{_e(' '.join(r.flags) or '-')}</code></td><td>{_e(r.reason + more)}</td>"
                    f"<td>{_e(_evidence(r.evidence))}</td></tr>")
    note = (f'<p class="note">Every row is a what-if the estimator priced again: the saving in the quantity '
            f"of its row (the model estimate is {show(total_s, 's')}), in seconds and as a share of that "
            f"quantity, and the what-if's value of it. Shown when the gain is at least "
            f"{100 * threshold:g}%.</p>")
    table = _table([("#", True), ("action", False), ("quantity", False), ("saves", True), ("saves %", True),
                    ("what-if value", True), ("flags", False), ("reason", False), ("evidence", False)], rows,
                   tid="recommendations") \
        if rows else '<p>No what-if saves at least the threshold.</p>'
    rest = ", ".join(f"{r.action} ({-r.gain_pct:+.1f}%)" for r in also)
    tail = (f'<p class="note">Also estimated, not shown (time change): {_e(rest)}</p>' if rest
            else "")
    return f'<section id="recs"><h2>Recommendations</h2>{note}{table}{tail}</section>'


def kernel_rows(result: Result) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """One <tr> per kernel (data-group = its distinct-kernel index, as the roofline's marks), and the
    tooltip data per distinct kernel."""
    groups = figures.distinct_kernels(result)
    index = {ps[0].kernel.signature: i for i, ps in enumerate(groups)}
    cache: dict[Any, str] = {}
    tips: dict[str, dict[str, Any]] = {}
    rows = []
    for n, p in enumerate(result.kernels):
        sig = p.kernel.signature
        if sig not in cache:
            w, tm, plan = p.kernel.work, p.timing, p.kernel.tile
            flops, dram = _num(w.total_flops), _num(w.dram_bytes)
            ai = flops / dram if flops is not None and dram else None
            tile = [None, None, None, None] if plan is None else [plan.tile, plan.waves, plan.wave_eff,
                                                                   plan.tensor_util]
            eff = _num(tile[2]) if tile[2] is not None else None
            util = _num(tile[3]) if tile[3] is not None else None
            cache[sig] = (f"<td>{_e(p.kernel.op)}</td><td>{_e(p.kernel.kind)}</td><td>{_e(tm.limiter)}</td>"
                          f"{_cell(tm.estimate_s, show(tm.estimate_s, 's'))}"
                          f"{_cell(tm.bound_s, show(tm.bound_s, 's'))}"
                          f"{_cell(flops)}{_cell(dram)}{_cell(ai, '-' if ai is None else f'{ai:.3g}')}"
                          f"<td>{_e(tile[0] or '-')}</td>{_cell(tile[1])}"
                          f"{_cell(eff, '-' if eff is None else f'{100 * eff:.0f}%')}"
                          f"{_cell(util, '-' if util is None else f'{100 * util:.0f}%')}")
            i = index[sig]
            tips[str(i)] = {"name": p.kernel.name, "op": p.kernel.op, "limiter": tm.limiter,
                            "calls": len(groups[i]), "each": show(tm.estimate_s, "s"), "tile": tile[0],
                            "intensity": "-" if ai is None else f"{ai:.3g}"}
        rows.append(f'<tr data-group="{index[sig]}">{_cell(n + 1)}<td class="name">{_e(p.kernel.name)}</td>'
                    f"{cache[sig]}</tr>")
    return rows, tips


KERNEL_HEADERS = [("#", True), ("kernel", False), ("op", False), ("kind", False), ("limiter", False),
                  ("estimate", True), ("bound", True), ("FLOPs", True), ("DRAM bytes", True),
                  ("FLOP/B", True), ("tile", False), ("waves", True), ("wave eff", True), ("TC util", True)]


def fusion_section(results: Mapping[str, Result]) -> str:
    base = results.get("none")
    ref = _num(base.totals["estimate_s"]) if base is not None else None
    rows = []
    for name, r in results.items():
        est = _num(r.totals["estimate_s"])
        speed = f"{ref / est:.2f}x" if ref and est else "-"
        rows.append(f"<tr><td>{_e(name)}</td>{_cell(r.totals['kernels'])}{_cell(r.totals['dram_bytes'])}"
                    f"{_cell(r.totals['bound_s'], show(r.totals['bound_s'], 's'))}"
                    f"{_cell(est, show(est, 's'))}{_cell(ref / est if ref and est else None, speed)}</tr>")
    return ('<section id="fusion"><h2>Fusion strategies</h2>'
            + _table([("strategy", False), ("kernels", True), ("DRAM bytes", True), ("bound", True),
                      ("estimate", True), ("speedup vs none", True)], rows, tid="fusion-table")
            + "</section>")


# The served figures shown as cards at the top of a --serve page, in this order (the keys of
# estimator/report/serving.py's summary); the rest of its rows follow in a table.
SERVED_CARDS = ("TTFT", "TPOT", "E2E", "tokens/s", "tokens/s per GPU", "tokens/s per user",
                "admitted concurrency", "fits", "KV capacity", "memory per GPU: weights",
                "memory per GPU: KV cache", "memory per GPU: device")


def serve_section(serve: Mapping[str, Any]) -> str:
    def text(v: Any) -> str:
        return str(jsonable(v) if isinstance(v, (int, float, sympy.Basic)) else v)

    def card(k: str) -> str:
        value, _, more = text(serve[k]).partition(" (")  # "39.5 ms (queueing 39.2 ms)": the aside below
        aside = f" ({more}" if more else ""
        return f'<div class="card"><b>{_e(value)}</b><span>{_e(k)}</span><span>{_e(aside)}</span></div>'

    cards = "".join(card(k) for k in SERVED_CARDS if k in serve)
    rest = {k: v for k, v in serve.items() if k not in SERVED_CARDS and k != "definitions"}
    rows = [f"<tr><td>{_e(k)}</td><td>{_e(text(v))}</td></tr>" for k, v in rest.items()]
    defs = serve.get("definitions")
    definitions = ""
    if defs:
        items = defs.items() if isinstance(defs, Mapping) else [("", defs)]
        body = "".join(f"<li>{_e(f'{k}: ' if k else '')}{_e(text(v))}</li>" for k, v in items)
        definitions = f"<details><summary>definitions</summary><ul class=\"note\">{body}</ul></details>"
    return ('<section id="serve"><h2>Serving</h2>'
            f'<div class="cards served">{cards}</div>'
            + _table([("quantity", False), ("value", False)], rows, "") + definitions + "</section>")


def render(result: Result, title: str, recommendations: Sequence | None = None, threshold: float = 0.02,
           fusion: Mapping[str, Result] | None = None, sweep_svg: str | None = None,
           serve: Mapping[str, Any] | None = None, measured: Mapping[str, float] | None = None,
           considered: Sequence = (), step: str | None = None) -> str:
    """The page. Optional parts appear when given: `recommendations` (estimator.report.recommend;
    `considered`: every what-if estimated, those not shown are listed in one line),
    `fusion` (strategy -> Result), `sweep_svg` (the sweep plot as SVG), `serve` (the serving summary,
    a flat mapping, placed first), `measured` (kernel name -> measured seconds, for the roofline's hollow
    marks), `step` (what the kernels below are, e.g. a serving page's decode step: the summary's heading)."""
    r = result
    dims = ", ".join(f"{k}={v}" for k, v in r.dims.items()) or "static"
    rows, tips = kernel_rows(r)
    parts = [f"<h1>{_e(title)}</h1>",
             f'<p class="sub">{_e(r.hw.display_name)} ({_e(r.hw.name)}) &middot; precision {_e(r.precision)} '
             f"&middot; dims {_e(dims)} &middot; fusion {_e(r.fusion)} &middot; "
             f"{'tile-level' if r.tiling else 'roofline'} estimate</p>"]
    if serve:
        parts.append(serve_section(serve))
    parts.append(summary(r, f"{step[0].upper()}{step[1:]}: its kernels below" if step else "Summary"))
    if recommendations is not None:
        also = [c for c in considered if c not in recommendations]
        parts.append(recommendations_section(recommendations, _num(r.totals["estimate_s"]) or 0.0, threshold,
                                             also))
    else:
        parts.append('<section id="recs"><h2>Recommendations</h2><p class="note">Not computed: add '
                     "<code>--recommend</code> (every what-if is one more estimate).</p></section>")
    placed, moving = len(figures.placed(r)), len(figures.movers(r))
    caption = (f"{placed + moving} distinct kernels (identical layers share a mark; size: share of the "
               "estimate), filled: estimated" + (", hollow: measured" if measured else "")
               + (f"; the {moving} without FLOPs (data movement) are placed by the DRAM bandwidth they "
                  "reach, at the left" if moving else ""))
    parts.append('<section id="roofline"><h2>Roofline</h2><figure>'
                 + figures.to_svg(figures.roofline(r, measured)) + f"<figcaption>{_e(caption)}</figcaption>"
                 "</figure></section>")
    parts.append('<section id="breakdown"><h2>Time breakdown</h2><figure>'
                 + figures.to_svg(figures.breakdown(r)) + "</figure></section>")
    parts.append(f'<section id="kernels"><h2>Kernels ({len(rows)})</h2>'
                 '<p class="note">Click a column to sort.</p>'
                 + _collapsible(len(rows), "kernels", '<div class="scroll">'
                                + _table(KERNEL_HEADERS, rows, tid="kernel-table") + "</div>") + "</section>")
    if fusion:
        parts.append(fusion_section(fusion))
    if sweep_svg:
        parts.append(f'<section id="sweep"><h2>Sweep</h2><figure>{sweep_svg}</figure></section>')
    data = json.dumps(tips).replace("</", "<\\/")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>" + "".join(parts)
            + f'<div id="tip"></div><script type="application/json" id="kernel-data">{data}</script>'
            f"<script>{JS}</script></body></html>\n")
