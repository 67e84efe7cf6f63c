"""Deployment search, disaggregated units, inversions and sensitivities (estimator/serve/search.py,
disagg.py, solve.py, sensitivity.py; estimator/cli/search.py), on llama-tiny (2 layers: fast)."""

import json
import math
from dataclasses import asdict, replace

import pytest

import hwdesc
from estimator.serve.closed_loop import host_demand_s
from estimator.serve.deploy import Deployment
from estimator.serve.disagg import Disagg, prefetch, serve_disagg
from estimator.serve.frameworks import framework
from estimator.serve.search import Deployment as Record
from estimator.serve.search import SearchError, options_of, pareto_flags, parse_budget, parse_sla
from estimator.serve.serving import Workload
from estimator.serve.steps import Options
from passes import DEFAULT_STRATEGY, pipeline_for
from tests.cliutil import assert_one_error_line, cli

MODEL = "llama-tiny"
WORK = Workload(128, 16, 1)


def _opts(arch="h100-sxm", tp=1) -> Options:
    hw = hwdesc.load(arch)
    return Options(hw, tp, None, None, pipeline_for(DEFAULT_STRATEGY, hw.family), framework("trtllm"))


@pytest.fixture(scope="module")
def deps():
    return {tp: Deployment.build(MODEL, _opts(tp=tp)) for tp in (1, 2)}


def test_sla_and_budget_parse():
    sla = parse_sla("ttft=500ms,tpot=20ms")
    assert (sla.ttft_s, sla.tpot_s) == (0.5, 0.02)
    assert parse_sla("ttft=1s").tpot_s is None and parse_sla("tpot=1500us").tpot_s == pytest.approx(1.5e-3)
    assert parse_budget("gpus=8") == 8
    assert sla.met(0.5, 0.02) and not sla.met(0.5001, 0.01)
    with pytest.raises(SearchError):
        parse_sla("ttft=fast")
    with pytest.raises(SearchError):
        parse_budget("nodes=2")


def test_bad_search_input_is_one_error_line(capsys):
    base = ("--model", MODEL, "--serve", "isl=128,osl=16")
    code, _, err = cli(capsys, *base, "--search", "gpus=2", "--sla", "tpot=-3ms")
    assert_one_error_line(code, err, "must be a positive time")
    code, _, err = cli(capsys, *base, "--disagg", "prefill=2x4")
    assert_one_error_line(code, err, "expected XxtpN")
    code, _, err = cli(capsys, *base, "--solve", "temperature", "--sla", "tpot=1ms")
    assert_one_error_line(code, err, "choose from concurrency, batch, context, gpus")


def test_record_to_the_serving_model_and_pareto():
    base = _opts()
    assert options_of(Record(tp=4, concurrency=8), base).tp == 4
    dp = options_of(Record(tp=1, attention_dp=8, ep=8), base)  # the split through Parallelism
    assert (dp.tp, dp.parallel.attention_dp, dp.parallel.moe_tp, dp.parallel.ep) == (1, 8, 1, 8)
    with pytest.raises(SearchError):
        options_of(Record(tp=2, pp=2), base)
    # (tokens/s/GPU, tokens/s/user): (3, 1) and (1, 3) trade off; (1, 1) is beaten by both
    rows = [type("R", (), {"tokens_per_s_per_gpu": g, "tokens_per_s_per_user": u})() for g, u in
            ((3, 1), (1, 3), (1, 1))]
    assert pareto_flags(rows) == [True, True, False]


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"{name} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_every_listed_deployment_re_estimates_alone(capsys, deps):
    """The search's figures are the serving model's: every listed row, served alone from its record
    (aggregated: Deployment.serve at its tp and concurrency; disaggregated: serve_disagg of its unit)
    gives the same TTFT, TPOT and tokens/s/GPU, and the first of each through the CLI (--tp/--serve,
    --disagg SPEC) too."""
    code, out, _ = cli(capsys, "--model", MODEL, "--arch", "h100-sxm", "--search", "gpus=2", "--disagg",
                       "--serve", "isl=128,osl=16", "--sla", "ttft=1s", "--json")
    assert code == 0
    rows = _strict(out)["search"][0]["deployments"]
    agg = [r for r in rows if r["mode"] == "agg"]
    dis = [r for r in rows if r["mode"] == "disagg"]
    assert agg and dis and all(r["ttft_s"] <= 1.0 for r in rows)
    for r in agg:
        rec = Record(**r["record"]["agg"])
        alone = deps[rec.tp].serve(replace(WORK, concurrency=rec.concurrency))
        assert (alone.ttft_s, alone.tpot_s, alone.tokens_per_s_per_gpu) == (
            r["ttft_s"], r["tpot_s"], r["tokens_per_s_per_gpu"])
    for r in dis:
        spec = Disagg(**r["record"]["disagg"])
        alone = serve_disagg(deps[spec.prefill_tp], deps[spec.decode_tp], spec, WORK)
        assert (alone.ttft_s, alone.tpot_s, alone.tokens_per_s_per_gpu) == (
            r["ttft_s"], r["tpot_s"], r["tokens_per_s_per_gpu"])
    rec = agg[0]["record"]["agg"]
    code, out, _ = cli(capsys, "--model", MODEL, "--arch", "h100-sxm", "--tp", str(rec["tp"]), "--serve",
                       f"isl=128,osl=16,concurrency={rec['concurrency']}", "--json")
    alone = _strict(out)["serve"]
    assert (alone["ttft_s"], alone["tpot_s"]) == (agg[0]["ttft_s"], agg[0]["tpot_s"])
    s = dis[0]["record"]["disagg"]
    spec = (f"prefill={s['prefill_workers']}xtp{s['prefill_tp']},decode={s['decode_workers']}xtp"
            f"{s['decode_tp']},prefill_batch={s['prefill_batch']},decode_batch={s['decode_batch']}")
    code, out, _ = cli(capsys, "--model", MODEL, "--arch", "h100-sxm", "--serve", "isl=128,osl=16",
                       "--disagg", spec, "--json")
    alone = _strict(out)["serve"]
    assert (alone["ttft_s"], alone["tpot_s"]) == (dis[0]["ttft_s"], dis[0]["tpot_s"])
    code, out, _ = cli(capsys, "--model", MODEL, "--arch", "h100-sxm", "--serve", "isl=128,osl=16",
                       "--solve", "concurrency", "--sla", "tpot=1s", "--json")
    solved = _strict(out)["solve"]  # every admitted concurrency meets 1 s: the KV capacity binds
    assert code == 0 and solved["value"] >= 512 and solved["binding"].startswith("the KV capacity")


def test_disagg_unit_hangs_together(deps):
    """TPOT = the decode pool's step + the KV transfer over osl - 1; the closed loop's throughput is
    clients / (E2E + the host's share) (MVA: X = C / (delay + residences)); 1 prefill + 1 decode GPU
    sit in one NVLink domain, 16 + 16 do not."""
    spec = Disagg(1, 1, 1, 1, 1, 8)
    pre, dec = deps[1], deps[1]
    prefetch(pre, dec, spec, WORK)
    r = serve_disagg(pre, dec, spec, WORK)
    from estimator.serve.disagg import decode_tpot

    assert r.fits and r.clients == 8 and r.kv_transfer_link == "nvlink"
    assert r.tpot_s == pytest.approx(decode_tpot(dec, WORK, math.ceil(r.decode_batch)) + r.kv_transfer_s / 15)
    host = host_demand_s(16, dec.framework.host_s_per_request, dec.framework.host_output_tokens_per_s)
    assert r.tokens_per_s / 16 == pytest.approx(8 / (r.e2e_s + host), rel=1e-9)
    assert r.e2e_s == pytest.approx(r.ttft_s + 15 * r.tpot_s)
    wide = serve_disagg(pre, dec, replace(spec, prefill_workers=16, decode_workers=16), WORK, clients=8)
    assert wide.kv_transfer_link == "network" and wide.kv_transfer_s > r.kv_transfer_s


def test_solve_concurrency_is_the_boundary_of_the_re_estimated_model(deps):
    from estimator.serve.solve import solve_concurrency

    dep = deps[1]
    at = {c: dep.serve(replace(WORK, concurrency=c)).tpot_s for c in (1, 64)}
    target = (at[1] + at[64]) / 2
    sol = solve_concurrency(dep, WORK, parse_sla(f"tpot={target * 1e3}ms"))
    v = sol.value
    assert 1 <= v < 64
    assert dep.serve(replace(WORK, concurrency=v)).tpot_s == sol.at_value_s <= target
    assert dep.serve(replace(WORK, concurrency=v + 1)).tpot_s == sol.at_next_s > target
    assert sol.binding and f"concurrency {v}" in sol.text


def test_sensitivity_agrees_with_re_estimated_points(deps):
    """An elasticity e predicts TPOT at 1.05 x the figure as TPOT x 1.05^e: within 1 % of the model
    re-priced there."""
    from estimator.serve.sensitivity import _dram, elasticities, served

    opts, work = _opts(), replace(WORK, concurrency=8)
    rows = {r.figure: r for r in elasticities(MODEL, opts, work, only=("HBM bandwidth", "host front end"))}
    assert set(rows) == {"HBM bandwidth", "host front end"}
    base = deps[1].serve(work)
    hw, fw = _dram(opts.hw, opts.framework, 1.05)
    moved = served(MODEL, opts, work, hw, fw)
    e = rows["HBM bandwidth"].tpot
    assert e < 0
    assert moved.tpot_s == pytest.approx(base.tpot_s * 1.05 ** e, rel=0.01)
    assert moved.ttft_s == pytest.approx(base.ttft_s * 1.05 ** rows["HBM bandwidth"].ttft, rel=0.01)


def test_fan_out_on_a_local_cluster_gives_the_serial_results():
    from estimator.serve.fanout import SearchTask, fan_out

    tasks = [SearchTask(MODEL, arch, hwdesc.load(arch).path, None, None,
                        pipeline_for(DEFAULT_STRATEGY, hwdesc.load(arch).family), "trtllm", True, 128, 16, 1,
                        1.0, None, disagg=False) for arch in ("h100-sxm", "b200")]
    serial = fan_out(tasks)
    cluster = fan_out(tasks, local=True, workers=2, processes=False)
    assert serial == cluster and len(serial) == 2 and all(serial)


def test_validate_disagg_reads_a_row_as_its_unit():
    """A measured xPyD row (e2e_serving.csv.gz columns) as the unit it describes ("stated"), each pool's
    attention-DP and EP included; a row without worker / batch counts is the search's candidates of the
    stated pools ("searched": one worker each, every decode batch); a row without pools names why."""
    from estimator.calibration.validate_disagg import unit_of
    from estimator.serve.search import DECODE_BATCHES

    row = {f"{p}_{k}": v for p in ("prefill", "decode") for k, v in
           (("num_workers", "2"), ("tp_size", "4"), ("batch_size", "1"), ("attention_dp_size", "1"),
            ("moe_tp_size", "4"), ("moe_ep_size", "1"))}
    row.update(decode_num_workers="3", decode_batch_size="48")
    rule, spec, clients = unit_of(row)
    assert rule == "stated"
    assert (spec.prefill_workers, spec.prefill_tp, spec.decode_workers, spec.decode_batch) == (2, 4, 3, 48)
    assert clients == 3 * 48 and spec.gpus == 2 * 4 + 3 * 4
    # DeepSeek-V3's prefill pool: tp 1 x attention-DP 16, moe-tp 1 x EP 16 (one worker of 16 GPUs)
    wide = {**row, "prefill_num_workers": "1", "prefill_tp_size": "1", "prefill_attention_dp_size": "16",
            "prefill_moe_tp_size": "1", "prefill_moe_ep_size": "16"}
    rule, spec, clients = unit_of(wide)
    assert (spec.prefill_tp, spec.prefill_attention_dp, spec.prefill_ep) == (1, 16, 16)
    assert spec.gpus == 1 * 16 + 3 * 4 and clients == 3 * 48 * 1
    blank = {**row, "decode_batch_size": "", "prefill_num_workers": "", "backend": "trtllm", "isl": "1024"}
    rule, specs, clients = unit_of(blank)
    assert rule == "searched" and clients is None
    per_step = int(framework("trtllm").max_num_tokens) // 1024  # the step budget's prompts of 1024 tokens
    assert {s.prefill_batch for s in specs} == {1, per_step} and len(specs) == 2 * len(DECODE_BATCHES)
    assert {(s.prefill_workers, s.decode_workers, s.prefill_tp, s.decode_tp) for s in specs} == {(1, 1, 4, 4)}
    assert unit_of({**row, "prefill_tp_size": ""}) == (None, "no pool parallelism in the row", None)


def test_search_layouts_include_attention_dp_and_expert_parallel():
    """The budget of 8 GPUs: attention TP 1, 2, 4, 8, each t > 1 also with EP t, attention-DP t with EP t,
    attention-DP t with MoE-TP t (3 x 3 + 4 = 13 layouts), every one through Parallelism; a dense model
    refuses the EP / attention-DP ones (kept with their reason), the TP ones build."""
    from estimator.serve.search import layouts, price_model, record

    lays = layouts(8)
    assert len(lays) == 4 + 3 * 3
    assert record(1, 8, ep=8) in lays and record(8, ep=8) in lays and record(1, 8, ep=1) in lays
    base = _opts()
    par = options_of(record(1, 8, ep=1), base).parallel
    assert (par.tp, par.attention_dp, par.moe_tp, par.ep, par.gpus) == (1, 8, 8, 1, 8)
    assert record(2) == Record(tp=2) and record(2, 1, 1) == Record(tp=2)
    priced = price_model(MODEL, base)
    assert priced.at(record(2)) is not None
    assert priced.at(record(2, ep=2)) is None and "mixture-of-experts" in priced.refused["tp 2 ep 2"]


def test_disagg_attention_dp_ranks_are_workers_of_the_formulas(deps):
    """A worker of attention-DP d is d ranks, each its own prefill server / decode batch: one decode
    worker of 2 ranks x batch 4 serves what two 1-rank workers of batch 4 serve (8 clients, the same
    TTFT, TPOT and tokens/s); 1 prefill worker of 2 ranks as 2 workers. The unit's GPUs are tp x dp."""
    pre, dec = deps[1], deps[1]
    ranks = Disagg(1, 1, 1, 1, 1, 4, prefill_attention_dp=2, decode_attention_dp=2)
    workers = Disagg(2, 1, 1, 2, 1, 4)
    prefetch(pre, dec, ranks, WORK)
    a, b = serve_disagg(pre, dec, ranks, WORK), serve_disagg(pre, dec, workers, WORK)
    assert a.clients == b.clients == 2 * 4 and ranks.gpus == workers.gpus == 2 + 2
    assert (a.ttft_s, a.tpot_s, a.tokens_per_s) == pytest.approx((b.ttft_s, b.tpot_s, b.tokens_per_s))
    assert ranks.label == "1p(tp1,adp2,b1) 1d(tp1,adp2,b4)"


def test_disagg_units_of_mixed_pools():
    """4 GPUs from pools of 1 GPU (tp 1) and 2 GPUs (attention-DP 2, EP 2): (1,1) x = 1..3; (1,2) x = 2,
    y = 1; (2,1) x = 1, y = 2; (2,2) x = y = 1: 6 units, each exactly 4 GPUs."""
    from estimator.serve.disagg import units
    from estimator.serve.search import record

    out = units(4, [record(1), record(1, 2, ep=2)])
    assert len(out) == 3 + 1 + 1 + 1 and all(u.gpus == 4 for u in out)
    assert Disagg(2, 1, 1, 1, 1, 1, 1, 2, 1, 2) in out and Disagg(1, 1, 1, 2, 1, 1, 2, 1, 2, 1) in out


def test_attention_dp_and_ep_rows_re_estimate_alone(capsys):
    """A MoE model's search lists attention-DP / EP / MoE-TP layouts; each such row, re-estimated alone
    with the flags its engine settings name (--tp, --attention-dp, --expert-parallel, --moe-tp, --serve at
    the row's concurrency), gives the row's TTFT and TPOT; a disaggregated unit of attention-DP pools
    through --disagg ... prefill_adp=,decode_adp=,*_ep= is served like the search's record of it."""
    base = ["--model", "mixtral-8x7b", "--arch", "h200"]
    code, out, _ = cli(capsys, *base, "--search", "gpus=2", "--serve", "isl=512,osl=64", "--sla", "tpot=1s",
                       "--json")
    assert code == 0
    rows = _strict(out)["search"][0]["deployments"]
    labels = {r["label"] for r in rows}
    assert {"tp 1 adp 2 ep 2", "tp 1 adp 2 moe-tp 2", "tp 2 ep 2"} <= labels
    for label in ("tp 1 adp 2 ep 2", "tp 1 adp 2 moe-tp 2", "tp 2 ep 2"):
        r = next(r for r in rows if r["label"] == label)
        st = r["settings"]
        flags = ["--tp", str(st["tp_size"]), "--attention-dp", str(st["attention_dp_size"]),
                 "--expert-parallel", str(st["ep_size"]), "--moe-tp", str(st["moe_tp_size"])]
        code, out, _ = cli(capsys, *base, *flags, "--serve", f"isl=512,osl=64,concurrency={r['concurrency']}",
                           "--json")
        alone = _strict(out)
        assert code == 0 and alone["parallel"]["gpus"] == 2
        assert (alone["serve"]["ttft_s"], alone["serve"]["tpot_s"]) == (r["ttft_s"], r["tpot_s"])
        # the row's headroom is one attention-DP rank's (one GPU's KV cache), the served figure the ranks'
        dp = st["attention_dp_size"]
        assert r["kv_headroom_tokens"] == alone["serve"]["kv_headroom_tokens"] // dp
        per_token = alone["serve"]["memory_per_gpu_bytes"]["kv_per_token"]
        assert r["memory_headroom_bytes"] == pytest.approx(r["kv_headroom_tokens"] * per_token, rel=1e-12)
    spec = Disagg(1, 1, 1, 1, 1, 4, prefill_attention_dp=2, decode_attention_dp=2, prefill_ep=2, decode_ep=2)
    code, out, _ = cli(capsys, *base, "--serve", "isl=512,osl=64", "--disagg",
                       "prefill=1xtp1,decode=1xtp1,decode_batch=4,prefill_adp=2,decode_adp=2,prefill_ep=2,"
                       "decode_ep=2", "--json")
    served = _strict(out)["serve"]
    assert code == 0 and served["disagg"] == asdict(spec)
    assert served["gpus"] == 2 + 2 and served["clients"] == 2 * 4



def test_validate_disagg_summary_splits_by_rule_with_p90():
    """Two rows of one (framework, model, rule): TTFT +10 % and -20 %, TPOT +50 % and +30 %."""
    from collections import Counter

    from estimator.calibration.validate_disagg import _stats, summary

    row = {"backend": "trtllm", "model": "x/DeepSeek-V3", "rule": "stated", "ttft_ms": 100.0, "tpot_ms": 10.0}
    pts = [{**row, "pred_ttft_ms": 110.0, "pred_tpot_ms": 15.0},
           {**row, "pred_ttft_ms": 80.0, "pred_tpot_ms": 13.0}]
    t_med, t_p90, t_signed, o_med, o_p90, o_signed = _stats(pts)
    assert (t_med, t_signed, o_med, o_signed) == pytest.approx((0.15, -0.05, 0.40, 0.40))
    assert t_p90 == pytest.approx(0.1 + 0.9 * (0.2 - 0.1))  # numpy's linear p90 of |errors| 0.1, 0.2
    assert o_p90 == pytest.approx(0.3 + 0.9 * (0.5 - 0.3))
    text = summary([{"model_path": "x/DeepSeek-V3"}] * 2, pts, Counter(), markdown=False)
    assert "rule 'stated' (2 rows): |TTFT| median 15.0%, |TPOT| median 40.0%" in text
