"""--serve / --tp with --recommend, --report and --trace: the serving summary in the report, collectives on
their own track per GPU, and the serving recommenders' what-ifs, each re-served through the same serving
code (estimator/serve/serving.py) with its gain the exact difference of the two figures."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

import numpy as np
import pytest
from cdp import Browser, find_chromium
from cliutil import assert_one_error_line, cli

import hwdesc
from estimator.report.recommend import Context, considered, shown
from estimator.serve.deploy import Deployment
from estimator.serve.frameworks import framework
from estimator.serve.serving import Workload, serve
from estimator.serve.steps import Options
from estimator.serve.whatif import Serving, capturing, prefill_captured
from passes import pipeline_for

H100 = hwdesc.load("h100-sxm")
SERVE = ("--model", "llama-tiny", "--tp", "2", "--serve", "isl=64,osl=8,concurrency=4", "--roofline")


def serving(tp: int = 1, concurrency: int = 4, fw_name: str = "trtllm", **fw_values) -> Serving:
    fw = framework(fw_name)
    fw = replace(fw, values={**fw.values, **fw_values})
    opts = Options(H100, tp, None, None, pipeline_for("tensorrt"), fw, tiling=False)
    dep = Deployment.build("llama-tiny", opts)
    work = Workload(64, 8, concurrency)
    return Serving("llama-tiny", opts, work, dep, dep.serve(work))


def context(sv: Serving) -> Context:
    # the recommenders of this file read only ctx.serve; the base is any estimate (here a placeholder)
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from onnxutil import matmul_model

    g = import_model(matmul_model(64, 64, 64, weight=True))
    return Context(g, H100, estimate(g, H100, roofline=True), serve=sv)


def test_serve_json_carries_serve_recommendations_and_whatifs(capsys):
    code, out, _ = cli(capsys, *SERVE, "--json", "--recommend", "--recommend-only",
                       "serve-latency,serve-throughput,cuda-graphs,fusion")
    assert code == 0
    doc = json.loads(out)
    assert doc["serve"]["admitted_concurrency"] == 4 and doc["parallel"]["tp"] == 2
    assert any(k["kind"] == "communication" for k in doc["kernels"])  # the sharded decode step is the base
    assert doc["dims"] == {"batch": 4, "past_seq": 64 + 8 // 2}  # served batch, mean context isl + osl/2
    metrics = {r["recommender"]: r["metric"] for r in doc["whatifs"]}
    assert metrics["fusion"] == "estimate_s"
    # every serving what-if: gain = base - what-if, of its own metric, exactly
    for r in doc["whatifs"]:
        if r["recommender"] in ("serve-latency", "serve-throughput"):
            base, alt = r["evidence"]["base"], r["evidence"]["whatif"]
            if r["metric"] == "tpot_s":
                assert r["gain_s"] == base["tpot_s"] - alt["tpot_s"]
            else:
                assert r["metric"] == "s_per_token_per_gpu"
                assert r["gain_s"] == 1 / base["tokens_per_s_per_gpu"] - 1 / alt["tokens_per_s_per_gpu"]
            assert r["gain_pct"] == pytest.approx(100 * r["gain_s"] / (r["gain_s"] + r["estimate_s"]),
                                                  rel=1e-12)
            assert r["flags"][:2] == ["--tp", str(alt["tp"])]


def test_a_serving_whatif_is_the_same_serve_code_at_that_point(capsys):
    code, out, _ = cli(capsys, *SERVE, "--json", "--recommend", "--recommend-only", "serve-latency")
    assert code == 0
    (best,) = [r for r in json.loads(out)["recommendations"] if r["recommender"] == "serve-latency"]
    tp, c = best["evidence"]["whatif"]["tp"], best["evidence"]["whatif"]["concurrency"]
    # re-served here from scratch: a Deployment at that TP serving that concurrency
    fw = framework("trtllm")
    dep = Deployment.build("llama-tiny", Options(H100, tp, None, None, pipeline_for("tensorrt"), fw,
                                                  tiling=False))
    assert best["estimate_s"] == dep.serve(Workload(64, 8, c)).tpot_s


def test_report_has_the_serving_summary_and_trace_one_process_per_gpu(capsys, tmp_path):
    page, trace = tmp_path / "r.html", tmp_path / "t.json"
    code, out, err = cli(capsys, *SERVE, "--json", "--report", str(page), "--trace", str(trace))
    assert code == 0 and "report written" in err and "trace written" in err
    doc = json.loads(out)
    s = doc["serve"]
    html = page.read_text()
    section = html[html.index('<section id="serve">'):]
    section = section[:section.index("</section>")]
    rows = dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", section))
    cards = re.findall(r'<div class="card"><b>([^<]*)</b><span>([^<]*)</span><span>([^<]*)</span>', section)
    rows.update((k, v + aside) for v, k, aside in cards)
    assert rows["TTFT"].startswith(f"{s['ttft_s'] * 1e3:.3f} ms")
    assert rows["TPOT"] == f"{s['tpot_s'] * 1e3:.3f} ms"
    assert rows["E2E"] == f"{s['e2e_s'] * 1e3:.3f} ms"
    assert rows["tokens/s per GPU"] == f"{s['tokens_per_s_per_gpu']:,.0f}"
    assert rows["tokens/s per user"] == f"{s['tokens_per_s_per_user']:,.1f}"
    assert rows["admitted concurrency"] == "4" and rows["fits"] == "yes"
    assert rows["KV capacity"].startswith(f"{s['kv_capacity_tokens']:,} tokens")
    assert rows["memory per GPU: weights"] == f"{s['memory_per_gpu_bytes']['weights'] / 1e9:.2f} GB"
    # the trace: the decode step on 2 GPUs, collectives on tid 1 of each
    t = json.loads(trace.read_text())
    slices = [e for e in t["traceEvents"] if e["ph"] == "X"]
    comm = sum(1 for k in doc["kernels"] if k["kind"] == "communication")
    assert comm > 0
    for gpu in (0, 1):
        mine = [e for e in slices if e["pid"] == gpu]
        assert len(mine) == len(doc["kernels"])
        assert sorted(e["tid"] for e in mine if e["cat"] == "communication") == [1] * comm
        assert all(e["tid"] == 0 for e in mine if e["cat"] != "communication")
        assert sum(e["dur"] for e in mine) == pytest.approx(doc["total"]["estimate_s"] * 1e6, rel=1e-9)


def test_tp_alone_traces_the_sharded_graph_on_every_gpu(capsys, tmp_path):
    trace = tmp_path / "t.json"
    code, _, _ = cli(capsys, "--model", "llama-tiny", "--tp", "2", "--roofline", "--trace", str(trace))
    assert code == 0
    t = json.loads(trace.read_text())
    assert {e["pid"] for e in t["traceEvents"]} == {0, 1}
    assert any(e["ph"] == "X" and e["tid"] == 1 for e in t["traceEvents"])


def test_cuda_graphs_prices_an_eager_decode_captured():
    # trtllm figures: eager launch 6 us per kernel, graph launch 15 us; capture only up to batch 2, so
    # the decode at batch 4 runs eagerly
    sv = serving(cuda_graph_max_batch=2)
    r, fw, steps = sv.result, sv.framework, sv.deployment.steps
    assert not r.decode.graphed and r.decode.batch == 4
    gpu = float(steps.decode(4, np.array([64 + 8 // 2]))[0])  # E_dec(4, isl + osl/2)
    kernels = steps.decode_kernels
    assert r.decode.gpu_s == gpu
    assert r.decode.launch_s == max(gpu, kernels * 6.0e-6) - gpu  # host enqueue not hidden by the GPU
    recs = {x.metric: x for x in considered(context(sv), ["cuda-graphs"])}
    rec = recs["tpot_s"]
    alt = serve(steps, sv.deployment.memory, capturing(fw, 4), sv.work, 1)
    assert alt.decode.graphed and alt.decode.launch_s == 15.0e-6
    assert rec.evidence["graphed_step_s"] == gpu + 15.0e-6 + float(fw.step_overhead_s)
    assert rec.gain_s == r.tpot_s - alt.tpot_s and rec.estimate_s == alt.tpot_s
    assert rec.gain_pct == 100 * (r.tpot_s - alt.tpot_s) / r.tpot_s
    assert rec.gain_s > 0  # llama-tiny's decode is launch-bound: 6 us x kernels > its GPU time
    # prefill (eager by default) priced captured: the TTFT what-if
    pre = recs["ttft_s"]
    assert pre.estimate_s == serve(steps, sv.deployment.memory, prefill_captured(fw), sv.work, 1).ttft_s


def test_cuda_graphs_nothing_for_a_graphed_decode_and_nothing_without_serve():
    sv = serving()  # trtllm captures batch 4: only the prefill what-if
    assert sv.result.decode.graphed
    assert [r.metric for r in considered(context(sv), ["cuda-graphs"])] == ["ttft_s"]
    ctx = context(sv)
    ctx.serve = None
    assert considered(ctx, ["cuda-graphs", "serve-latency", "serve-throughput"]) == []


def test_serve_throughput_picks_the_best_point_within_the_tpot_target():
    from estimator.report.serve_recommend import _candidates

    sv = serving(tp=2, concurrency=8, fw_name="vllm")
    recs = considered(context(sv), ["serve-throughput"])
    base = sv.result
    points = [(tp, c, sv.at(tp, c)) for tp, c in _candidates(sv)]
    assert (2, 8) not in [(tp, c) for tp, c, _ in points]  # the base point is no candidate
    ok = [(tp, c, a) for tp, c, a in points if a is not None and a.fits and a.tpot_s <= base.tpot_s
          and a.tokens_per_s_per_gpu > base.tokens_per_s_per_gpu]
    assert ok and len(recs) == len({tp for tp, _, _ in ok})  # the best point of each TP
    tp, c, a = max(ok, key=lambda p: p[2].tokens_per_s_per_gpu)
    assert recs[0].estimate_s == 1 / a.tokens_per_s_per_gpu
    assert recs[0].gain_s == 1 / base.tokens_per_s_per_gpu - 1 / a.tokens_per_s_per_gpu
    assert recs[0].evidence["whatif"]["concurrency"] == c and recs[0].evidence["whatif"]["tp"] == tp
    assert shown(recs, 0.0) == recs[:1] and len(recs) > 1  # best-only: of its TPs, the best shown


def test_serving_report_flags_that_do_not_combine(capsys):
    code, _, err = cli(capsys, "--model", "llama-tiny", "--memory", "--recommend")
    assert_one_error_line(code, err, "need --serve")
    code, _, err = cli(capsys, *SERVE, "--sweep", "concurrency=1,2", "--recommend")
    assert_one_error_line(code, err, "--sweep goes with --report")
    code, _, err = cli(capsys, *SERVE, "--recommend-threshold", "5")
    assert_one_error_line(code, err, "need --recommend")
    code, _, err = cli(capsys, *SERVE, "--report", "x.txt")
    assert_one_error_line(code, err, "ending in .html")


def test_report_with_a_concurrency_sweep_carries_the_pareto_plot(capsys, tmp_path):
    page = tmp_path / "r.html"
    code, out, err = cli(capsys, "--model", "llama-tiny", "--tp", "1,2", "--serve",
                         "isl=64,osl=8,concurrency=4", "--roofline", "--sweep", "concurrency=1,2,4",
                         "--report", str(page), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["parallel"]["tp"] == 1 and doc["serve"]["concurrency"] == 4  # the point: the first --tp
    html = page.read_text()
    sweep = html[html.index('<section id="sweep">'):]
    sweep = sweep[:sweep.index("</section>")]
    assert "<svg" in sweep and 'id="tp:1"' in sweep and 'id="tp:2"' in sweep  # one line per TP
    assert '<section id="serve">' in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # the Pareto SVG shares no id with the roofline's or the breakdown's
    refs = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(r"url\(([^)]*)\)", html)
    assert all(r.startswith("#") for r in refs)  # nothing fetched
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium under CI: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no chromium installed (apt-get install -y chromium); CI never skips this")
    with Browser(exe) as b:
        b.open(page.as_uri())
        assert b.errors() == [] and b.requests() == [page.as_uri()]
        assert b.eval("document.querySelectorAll('#serve tr').length") == len(
            re.findall(r"<tr>", html[html.index('<section id="serve">'):].split("</section>")[0]))
