"""The `--serve --report` page (issue 26): the served figures (TTFT, TPOT, tokens/s) and memory come
first, on the first screen of a 1280x800 window, measured in a real headless Chromium (tests/cdp.py);
long tables collapse; recommendations keep one row per action, one quantity per column and formatted
evidence; the breakdown's kind bar never reuses a limiter's colour."""

from __future__ import annotations

import os
import re

import pytest
from cdp import Browser, find_chromium
from test_seams_serve import SERVE

from estimator.report import figures, html
from estimator.report.recommendation import Recommendation, distinct_actions

WIDTH, HEIGHT = 1280, 800


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve-page") / "serve.html"
    code = cli_main(*SERVE, "--recommend", "--report", str(path))
    assert code == 0
    return path


def cli_main(*argv) -> int:
    from estimator.cli.main import main

    return main(list(argv))


def test_served_figures_come_first_and_the_title_is_the_deployment(page):
    text = page.read_text()
    title = re.search(r"<h1>([^<]*)</h1>", text).group(1)
    assert title == "serving llama-tiny on 2 x h100-sxm: isl 64, osl 8, concurrency 4"
    sections = re.findall(r'<section id="([a-z]+)"', text)
    assert sections[0] == "serve" and sections.index("serve") < sections.index("kernels")
    cards = re.findall(r'<div class="card"><b>[^<]*</b><span>([^<]*)</span>', text.split('id="summary"')[0])
    assert cards[:3] == ["TTFT", "TPOT", "E2E"] and "tokens/s" in cards and "memory per GPU: weights" in cards
    # the kernels' summary says which step they are
    assert "<h2>Decode step at batch 4, past_seq 68 (one GPU of 2): its kernels below</h2>" in text


def test_recommendations_one_row_per_action_units_and_evidence(page):
    text = page.read_text()
    table = text[text.index('id="recommendations"'):]
    table = table[:table.index("</table>")]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert heads[:6] == ["#", "action", "quantity", "saves", "saves %", "what-if value"]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    flags = [f for row in rows for f in re.findall(r"<code>([^<]*)</code>", row) if f != "-"]
    assert len(flags) == len(set(flags))  # one row per what-if
    assert "{&#x27;" not in table and "{'" not in table  # no raw dicts
    shown = re.sub(r"<[^>]+>", " ", table)  # the text (data-v attributes keep full floats for sorting)
    assert not re.search(r"\d\.\d{7,}", shown)  # no 16-digit floats


def test_evidence_and_dedupe_by_hand():
    ev = {"base": {"tp": 2, "tpot_s": 0.0059091175699009435, "tokens_per_s_per_gpu": 1201.4101810709308},
          "weight_bytes": 8.098e9, "dram_bytes_per_s": 3.35e12}
    assert html._evidence(ev) == ("base: tp 2, tpot_s 5.91 ms, tokens_per_s_per_gpu 1201; "
                                  "weight_bytes: 8.1 GB; dram_bytes_per_s: 3.35 TB/s")
    a = Recommendation("serve on tp 4", ("--tp", "4"), 7e-4, 1.3e-4, 15.5, "r", {},
                       metric="s_per_token_per_gpu")
    b = Recommendation("serve on tp 4: lower TPOT", ("--tp", "4"), 5.05e-3, 8.6e-4, 14.5, "r", {},
                       metric="tpot_s")  # the same what-if (same flags), another metric
    c = Recommendation("run on b200", ("--arch", "b200"), 3e-3, 2e-3, 40.0, "r", {})
    assert distinct_actions([a, b, c]) == [(a, [b]), (c, [])]
    section = html.recommendations_section([a, b, c], 5e-3, 0.02)
    assert "serve on tp 4</td>" in section and "serve on tp 4: lower TPOT" not in section
    assert "also TPOT -860 us (14.5%)" in section


def test_terminal_recommendations_list_each_what_if_once():
    from estimator.cli.report import format_recommendations

    a = Recommendation("serve on tp 4", ("--tp", "4"), 7e-4, 1.3e-4, 15.5, "r", {},
                       metric="s_per_token_per_gpu")
    b = Recommendation("serve on tp 4: lower TPOT", ("--tp", "4"), 5.05e-3, 8.6e-4, 14.5, "r", {},
                       metric="tpot_s")  # the same what-if by another metric, ranked below the threshold
    c = Recommendation("run on b200", ("--arch", "b200"), 3e-3, 2e-3, 40.0, "r", {})
    d = Recommendation("run on h200", ("--arch", "h200"), 4e-3, 1e-3, 20.0, "r", {})
    text = format_recommendations([a, c], [a, b, c, d], 5e-3, 0.02)
    assert text.count("--tp 4") == 1 and "serve on tp 4: lower TPOT" not in text
    assert "also TPOT -860 us (14.5%)" in text  # the hidden metric of a shown what-if joins its line
    assert text.rstrip().endswith("also estimated, not shown (time change): run on h200 -20.0%")


def test_long_tables_collapse(monkeypatch, page):
    assert "<details><summary>show all" not in page.read_text()  # a few dozen kernels stay open
    monkeypatch.setattr(html, "LONG_TABLE", 3)
    body = html._collapsible(4, "kernels", "<table></table>")
    assert body == "<details><summary>show all 4 kernels</summary><table></table></details>"
    assert html._collapsible(3, "kernels", "<table></table>") == "<table></table>"


def test_breakdown_kind_colours_are_not_limiter_colours(page):
    text = page.read_text()
    svg = text[text.index('<section id="breakdown">'):]
    svg = svg[:svg.index("</section>")]
    fills: dict[str, set[str]] = {"kind": set(), "limiter": set()}
    for key, group in re.findall(r'<g id="breakdown-(kind|limiter)-[^"]*">(.*?)</g>', svg, re.S):
        fills[key] |= set(re.findall(r"fill: ?(#[0-9a-f]{6})", group))
    assert fills["kind"] and fills["limiter"] and not fills["kind"] & fills["limiter"]
    assert not set(figures.KIND_COLORS) & set(figures.LIMITER_COLORS.values())


@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium under CI: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no chromium installed (apt-get install -y chromium); CI never skips this")
    with Browser(exe) as b:
        yield b


def test_the_served_summary_is_on_the_first_screen(page, browser, tmp_path):
    browser.open(page.as_uri(), width=WIDTH, height=HEIGHT)
    assert browser.errors() == []
    where = browser.eval("""(function () {
        var out = {};
        document.querySelectorAll('#serve .card').forEach(function (c) {
            out[c.querySelector('span').textContent] = c.getBoundingClientRect().bottom;
        });
        out.kernels = document.getElementById('kernels').getBoundingClientRect().top;
        return out;
    })()""")
    for key in ("TTFT", "TPOT", "tokens/s", "memory per GPU: device"):
        assert 0 < where[key] <= HEIGHT, (key, where[key])
    assert where["kernels"] > HEIGHT  # the kernel table is below the fold, not before the answer
    shot = tmp_path / "serve.png"
    browser.screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
