"""--report FILE.html: structure of the page, then the page in a real headless Chromium (tests/cdp.py).

The browser tests skip when no Chromium is installed, except under CI (env CI set, as .ci/run sets it
after installing Debian's `chromium` package): there a missing browser is a failure, never a skip."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

import pytest
from cdp import Browser, find_chromium
from cliutil import assert_one_error_line, cli

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.report import figures, html
from passes import pipeline_for

ARGS = ["--model", "llama-tiny", "--precision", "bf16", "--arch", "h100-sxm"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(path of the page, the --json document of the same run, the Result) for llama-tiny with a sweep
    and the recommendations."""
    from estimator.cli.main import main

    path = tmp_path_factory.mktemp("report") / "r.html"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*ARGS, "--recommend", "--recommend-threshold", "0", "--sweep", "seq=16:128:x2",
                     "--report", str(path), "--json"])
    assert code == 0, err.getvalue()
    out = out.getvalue()
    result = estimate(import_model(models.MODELS["llama-tiny"].build()), hwdesc.load("h100-sxm"),
                      precision="bf16", dims={"batch": 1, "seq": 128}, pipeline=pipeline_for("tensorrt"))
    return path, json.loads(out), result


def test_page_is_self_contained(report):
    path, _, _ = report
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    # nothing is fetched: src / href / url() only name fragments of the page itself (the SVGs' clip
    # paths and markers), no CSS imports, no external scripts
    refs = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', page) + re.findall(r"url\(([^)]*)\)", page)
    assert refs and all(r.startswith("#") for r in refs)
    assert "@import" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # two inline SVGs never share a clip-path or marker id
    assert "<link" not in page and "<img" not in page and "<iframe" not in page
    for section in ("summary", "recs", "roofline", "breakdown", "kernels", "fusion", "sweep"):
        assert f'<section id="{section}">' in page
    assert "@media print" in page


def test_table_rows_and_roofline_marks_match_the_estimate(report):
    path, doc, result = report
    page = path.read_text()
    assert page.count("<tr data-group=") == len(doc["kernels"])  # one row per kernel of the JSON
    roofline = page[page.index('<section id="roofline">'):page.index('<section id="breakdown">')]
    marks = set(re.findall(r'<g id="kernel-(\d+)"', roofline))
    assert len(marks) == len(figures.distinct_kernels(result)) > 0  # one mark per distinct kernel
    groups = set(re.findall(r'<tr data-group="(\d+)"', page))
    assert len(groups) == len(figures.distinct_kernels(result))


def test_render_without_optional_parts():
    r = estimate(import_model(models.MODELS["llama-tiny"].build()), hwdesc.load("h100-sxm"), precision="bf16",
                 dims={"batch": 1, "seq": 16}, pipeline=pipeline_for("tensorrt"))
    page = html.render(r, "tiny <&>", serve={"tpot_s": 0.012, "gpus": 2})
    assert "<title>tiny &lt;&amp;&gt;</title>" in page  # escaped
    assert '<section id="serve">' in page and "tpot_s" in page
    assert "Not computed: add <code>--recommend</code>" in page and '<section id="sweep">' not in page


def test_report_errors(capsys, tmp_path):
    code, _, err = cli(capsys, *ARGS, "--report", str(tmp_path / "r.pdf"))
    assert_one_error_line(code, err, "ending in .html")
    code, _, err = cli(capsys, *ARGS, "--report", str(tmp_path / "missing" / "r.html"))
    assert_one_error_line(code, err, "--report")
    code, _, err = cli(capsys, *ARGS, "--report", str(tmp_path / "r.html"), "--arch", "h100-sxm,b200")
    assert_one_error_line(code, err, "one GPU")


# ---- in a real browser ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium under CI: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no chromium installed (apt-get install -y chromium); CI never skips this")
    with Browser(exe) as b:
        yield b


def test_page_loads_without_errors_or_network(report, browser):
    path, _, _ = report
    url = path.as_uri()
    browser.open(url)
    assert browser.errors() == []
    assert browser.requests() == [url]  # the page itself and nothing else
    assert browser.eval("document.title") == "llama-tiny on h100-sxm"


def test_table_rows_marks_and_sorting_in_the_browser(report, browser):
    path, doc, result = report
    browser.open(path.as_uri())
    rows = "document.querySelectorAll('#kernel-table tbody tr')"
    assert browser.eval(f"{rows}.length") == len(doc["kernels"])
    assert browser.eval("document.querySelectorAll('#roofline svg g[id^=\"kernel-\"]').length") \
        == len(figures.distinct_kernels(result))
    col = [h for h, _ in html.KERNEL_HEADERS].index("estimate")
    values = f"Array.from({rows}).map(r => parseFloat(r.cells[{col}].getAttribute('data-v')))"
    before = browser.eval(values)
    browser.eval(f"document.querySelectorAll('#kernel-table th')[{col}].click()")
    asc = browser.eval(values)
    assert asc == sorted(before) and asc != before
    browser.eval(f"document.querySelectorAll('#kernel-table th')[{col}].click()")
    assert browser.eval(values) == sorted(before, reverse=True)
    name_col = [h for h, _ in html.KERNEL_HEADERS].index("kernel")
    browser.eval(f"document.querySelectorAll('#kernel-table th')[{name_col}].click()")
    names = browser.eval(f"Array.from({rows}).map(r => r.cells[{name_col}].textContent)")
    assert names[0] <= names[-1]
    assert browser.errors() == []


def test_tooltip_and_print(report, browser):
    path, _, _ = report
    browser.open(path.as_uri())
    shown = browser.eval("""(function () {
        var g = document.querySelector('#roofline svg g[id^="kernel-"]');
        g.dispatchEvent(new MouseEvent('mousemove', {clientX: 10, clientY: 10, bubbles: true}));
        var tip = document.getElementById('tip');
        return [tip.style.display, tip.textContent];
    })()""")
    assert shown[0] == "block" and "FLOP/B" in shown[1]
    pdf = browser.pdf()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") >= 2  # prints, over several pages


def test_flags_of_other_modes_are_refused_not_ignored(capsys, tmp_path):
    code, _, err = cli(capsys, *ARGS, "--recommend", "--sweep", "seq=16,32")
    assert_one_error_line(code, err, "--sweep goes with --report")
    code, _, err = cli(capsys, *ARGS, "--report", str(tmp_path / "r.html"), "--sweep", "seq=16,32",
                       "--crossover")
    assert_one_error_line(code, err, "--crossover is the sweep mode's")
    code, _, err = cli(capsys, *ARGS, "--trace", str(tmp_path / "t.json"), "--validate")
    assert_one_error_line(code, err, "--validate is its own mode")
