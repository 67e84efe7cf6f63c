"""estimator/serve/waves.py (SGLang's prefill-first waves) and serve() under that scheduler, on hand-made
step costs (numbers worked out beside them)."""

from dataclasses import replace

import pytest
import yaml
from serveutil import FakeSteps

from estimator.serve.frameworks import HERE, FrameworkError, _figures, framework
from estimator.serve.memory import Memory
from estimator.serve.serving import Workload, serve
from estimator.serve.summary import serve_text
from estimator.serve.waves import chunk_tokens, last_chunks, wave


def _sglang(**changes):
    base = framework("sglang")
    values = {**base.values, "max_num_tokens": 2048, "cuda_graph_batch_sizes": [1, 2, 4, 8],
              "cuda_graph_max_batch": 8, "graph_launch_s": 15e-6, "eager_launch_s_per_kernel": 10e-6,
              "step_overhead_s": 0.0, "host_output_tokens_per_s": None, "host_s_per_request": 0.0,
              "prefill_dispatch_s_per_layer": 0.0, **changes}
    return replace(base, values=values)


def _memory(tokens=10**9):
    return Memory(80e9, 0.0, 0.0, None, 0.0, 0.0, 1.0, float(tokens), tokens, 32, "reserve")


def test_schedulers_of_the_frameworks():
    assert framework("sglang").scheduler == "prefill_first"
    assert framework("trtllm").scheduler == framework("vllm").scheduler == "inflight"
    raw = yaml.safe_load((HERE / "frameworks.yaml").read_text())["frameworks"]["sglang"]
    raw["scheduler"] = {"value": "round_robin", "source": "made up"}
    with pytest.raises(FrameworkError, match="scheduler 'round_robin': choose from inflight, prefill_first"):
        _figures(raw, "test")


def test_a_wave_of_four_prompts_in_two_chunks():
    # B 4 prompts of isl 1000 = 4000 tokens in chunks of 2048: 2048 then 4000 - 2048 = 1952 tokens.
    assert chunk_tokens(4, 1000, 2048) == [2048, 1952]
    # prompt r ends at token (r + 1) x 1000: 1000 and 2000 <= 2048 in chunk 1; 3000 and 4000 in chunk 2
    assert last_chunks(4, 1000, 2048) == [1, 1, 2, 2]
    # chunks of 0.1 ms a token: 204.8 and 195.2 ms, P = 400 ms; 99 decode steps of 10 ms: D = 990 ms
    w = wave([0.2048, 0.1952], [1, 1, 2, 2], 0.990, 100)
    assert w.ttft_s == pytest.approx((0.2048 + 0.2048 + 0.4 + 0.4) / 4)  # 302.4 ms
    assert w.stall_s == pytest.approx((0.1952 + 0.1952 + 0 + 0) / 4)  # 97.6 ms of chunks after the token
    assert w.tpot_s == pytest.approx((0.990 + 0.0976) / 99)  # 10.99 ms
    assert w.e2e_s == w.duration_s == pytest.approx(0.4 + 0.990)
    assert w.tokens_per_s == pytest.approx(4 * 100 / 1.390)  # 287.8 tokens/s
    assert w.chunks == 2
    # one prompt a wave: its first token ends the prefill, nothing stalls it
    one = wave([0.1], [1], 0.990, 100)
    assert one.ttft_s == pytest.approx(0.1) and one.tpot_s == pytest.approx(0.010)


def test_serve_runs_sglang_in_waves():
    fw = _sglang()
    r = serve(FakeSteps(), _memory(), fw, Workload(1000, 100, 4), gpus=1)
    # the wave's prefill E_pre(4, 1000) = 1e-5 x 4000 = 40 ms: chunk 1 20.48 ms, chunk 2 19.52 ms
    # (eager: 100 kernels x 10 us = 1 ms of host launch, hidden behind each chunk's GPU time)
    assert r.ttft_s == pytest.approx((0.02048 * 2 + 0.040 * 2) / 4)  # 30.24 ms
    # 99 decode steps at batch 4 (graphed), past 1000 .. 1098: 99 x (1 ms + 4 us + 15 us) + 4 ns x 103851
    decode = 99 * (1e-3 + 4e-6 + 15e-6) + 4e-9 * sum(range(1000, 1099))  # 101.296 ms
    assert r.tpot_s == pytest.approx((decode + (0.01952 * 2) / 4) / 99)  # 1.1218 ms
    assert r.e2e_s == pytest.approx(0.040 + decode)
    assert r.tokens_per_s == pytest.approx(4 * 100 / (0.040 + decode))
    assert r.queue_s == 0.0 and r.scheduler == "prefill_first"
    assert r.prefill.step_s == pytest.approx(0.02048)  # the first chunk
    assert r.notes == ["prefill-first waves: the 4 prompts in 2 steps of up to 2048 tokens, decodes "
                       "stalled (prefill step: the first)"]
    # the same framework with in-flight batching: one prompt joins per step and rides with the decodes
    inflight = serve(FakeSteps(), _memory(), _sglang(scheduler="inflight"), Workload(1000, 100, 4), gpus=1)
    assert inflight.tpot_s != pytest.approx(r.tpot_s)
    assert set(inflight.to_json()) == set(r.to_json())  # the --serve JSON keys stay as they are
    text = serve_text(r, "title")
    assert "scheduler: prefill-first waves (SGLang)" in text
    assert "scheduler: in-flight batching" in serve_text(inflight, "title")


def test_static_batching_ignores_the_scheduler():
    work = Workload(1000, 100, 4, "static")
    waves = serve(FakeSteps(), _memory(), _sglang(), work, gpus=1)
    inflight = serve(FakeSteps(), _memory(), _sglang(scheduler="inflight"), work, gpus=1)
    assert waves.tpot_s == inflight.tpot_s and waves.ttft_s == inflight.ttft_s
    assert waves.scheduler == "static"
