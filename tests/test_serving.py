"""estimator/serve/serving.py and launch.py on hand-made step costs (numbers worked out beside them)."""

from dataclasses import replace

import numpy as np
import pytest
from serveutil import FakeSteps

from estimator.serve.closed_loop import closed_loop
from estimator.serve.frameworks import Framework, framework
from estimator.serve.memory import Memory
from estimator.serve.serving import ServeError, Workload, parse_workload, prompts_per_step, serve


def _fw(**changes) -> Framework:
    base = framework("trtllm")
    values = {
        **base.values,
        "max_num_tokens": 1000,
        "cuda_graph_batch_sizes": [1, 2, 4, 8],
        "cuda_graph_max_batch": 8,
        "graph_launch_s": 15e-6,
        "eager_launch_s_per_kernel": 10e-6,
        "step_overhead_s": 0.0,
        "max_batch_size": 64,
        "host_output_tokens_per_s": None,
        "host_s_per_request": 0.0,
        **changes,
    }
    return replace(base, values=values)


def _memory(tokens=10**9):
    """A memory plan with room for `tokens` cached tokens (blocks of 32, reserved per sequence)."""
    return Memory(80e9, 0.0, 0.0, None, 0.0, 0.0, 1.0, float(tokens), tokens, 32, "reserve")


def test_parse_workload_and_its_errors():
    assert parse_workload("isl=2048,osl=256,concurrency=32") == Workload(2048, 256, 32)
    with pytest.raises(ServeError, match="missing key concurrency"):
        parse_workload("isl=2048,osl=256")
    with pytest.raises(ServeError, match="expected isl=I,osl=O,concurrency=C"):
        parse_workload("isl=1,osl=2,concurrency=3,beams=2")
    with pytest.raises(ServeError, match="must be an integer"):
        parse_workload("isl=1k,osl=2,concurrency=3")
    assert parse_workload("isl=2048,osl=256,concurrency=32,rounds=10") == Workload(2048, 256, 32, rounds=10)
    with pytest.raises(ServeError, match="rounds >= 1"):
        parse_workload("isl=1,osl=2,concurrency=3,rounds=0")


def test_static_batching_sums_every_decode_step():
    fw = _fw()
    r = serve(FakeSteps(), _memory(), fw, Workload(100, 11, 4, "static"), gpus=2)
    prefill = 1e-5 * 4 * 100  # k = min(4, 1000 // 100) prompts in one step: 4 ms; host 100 x 10 us < GPU
    assert r.ttft_s == pytest.approx(prefill)
    past_sum = sum(range(100, 110))  # the 10 decode steps see past 100 .. 109
    decode = 10 * (1e-3 + 4e-6) + 4e-9 * past_sum + 10 * 15e-6  # graphed at batch 4: + graph launch each
    assert r.e2e_s == pytest.approx(prefill + decode)
    assert r.tpot_s == pytest.approx(decode / 10)  # (E2E - TTFT) / (osl - 1)
    assert r.tokens_per_s == pytest.approx(4 * 11 / (prefill + decode))
    assert r.tokens_per_s_per_gpu == pytest.approx(r.tokens_per_s / 2)
    assert r.decode.graphed and r.decode.batch == 4


def test_inflight_batching_staggers_prefill_groups():
    fw = _fw(admission_wait="half_step")  # vLLM-like: requests join at every step
    r = serve(FakeSteps(), _memory(), fw, Workload(500, 11, 6), gpus=1)
    # k_max = (1000 - 5 decodes) // 500 = 1; arrivals per step ceil(6 / (10 + 1)) = 1 -> g = 6 groups;
    # each request sees the other five groups' prefills as mixed steps:
    # T_mix = 10 us x 1 x 500 + E_ctx(6 - 1, 500 + 5)
    t_mix = 1e-5 * 1 * 500 + 1e-9 * 5 * 505
    gen = sum(1e-3 + 8e-6 + 8e-9 * p + 15e-6 for p in range(500, 510))  # padded to the captured 8
    decode_total = gen * (10 - 5) / 10 + 5 * t_mix
    assert r.tpot_s == pytest.approx(decode_total / 10)
    avg = (decode_total + t_mix) / 11  # S = max(10 + 1, 6) = 11 steps: no idle steps, half a step to join
    unqueued = 0.5 * avg + t_mix
    # the prefill slot is a closed-loop station: each request holds t_mix / k_max of it
    slot = closed_loop(6, unqueued + decode_total, {"prefill": t_mix / 1, "host": 0.0})
    assert slot.wait_s > 0.0
    assert r.ttft_s == pytest.approx(unqueued + slot.wait_s)
    assert r.admitted == 6 and r.queue_s == pytest.approx(0.5 * avg + slot.wait_s)
    assert r.tokens_per_s == pytest.approx(6 * 11 / (unqueued + slot.wait_s + decode_total))


def test_trtllm_joins_after_its_overlap_step():
    fw = _fw(admission_wait="overlap_step", max_num_tokens=1005)
    r = serve(FakeSteps(), _memory(), fw, Workload(500, 11, 6), gpus=1)
    # k_max = (1005 - 5 decode tokens) // 500 = 2 prompts a step; in phase (the benchmark's start packs 2
    # a step, and those 2 finish and come back together) -> g = 3 groups, 2 mixed steps per decode phase.
    # The overlap scheduler: a request joins the third step after its predecessor's last; the 2 steps
    # before its own are, in phase, the mixed steps of the groups before it: group j waits min(j, 2)
    # mixed steps and 2 - min(j, 2) plain ones: mean (0 + 1 + 2) / 3 = 1 of each
    t_mix = 1e-5 * 2 * 500 + 1e-9 * 4 * 505
    gen = sum(1e-3 + 8e-6 + 8e-9 * p + 15e-6 for p in range(500, 510))
    decode_total = gen * (10 - 2) / 10 + 2 * t_mix
    join = 1.0 * t_mix + 1.0 * gen / 10
    slot = closed_loop(6, join + t_mix + decode_total, {"prefill": t_mix / 2, "host": 0.0})
    assert r.ttft_terms["join_s"] == pytest.approx(join)
    assert r.ttft_terms["prefill_s"] == pytest.approx(t_mix)
    assert r.ttft_terms["slot_queue_s"] == pytest.approx(slot.wait_s)
    assert r.ttft_s == pytest.approx(join + t_mix + slot.wait_s)
    assert sum(r.ttft_terms.values()) == pytest.approx(r.ttft_s)
    assert not any("wait to join" in n for n in r.notes)  # no fitted wait any more


def test_a_lone_trtllm_client_waits_two_plain_steps():
    fw = _fw(admission_wait="overlap_step")
    r = serve(FakeSteps(), _memory(), fw, Workload(500, 11, 1), gpus=1)
    # W = 1: its prefill 10 us x 500 = 5 ms (eager: above the 100 kernels x 10 us = 1 ms of host launch),
    # no decoder riding; 10 decode steps at batch 1 (graphed), and no other prefill before its own: it
    # waits 2 plain decode steps; one client never queues at a station
    decode_total = sum(1e-3 + 1e-6 + 1e-9 * p + 15e-6 for p in range(500, 510))
    assert r.ttft_s == pytest.approx(5e-3 + 2 * decode_total / 10)
    assert r.ttft_terms["slot_queue_s"] == 0.0 and r.ttft_terms["kv_queue_s"] == 0.0


def test_two_requests_share_the_token_budget():
    # budget 1000, isl 600: one prompt a step ((1000 - 1) // 600 = 1), so the 2 requests form 2 groups
    # and each sees the other's prefill as one mixed step: T_mix = 10 us x 600 + E_ctx(1, 605)
    fw = _fw(admission_wait="half_step")
    r = serve(FakeSteps(), _memory(), fw, Workload(600, 11, 2), gpus=1)
    t_mix = 1e-5 * 600 + 1e-9 * 1 * 605
    gen = sum(1e-3 + 2e-6 + 2e-9 * p + 15e-6 for p in range(600, 610))  # batch 2, graphed
    decode_total = gen * 9 / 10 + t_mix
    avg = (decode_total + t_mix) / 11
    assert r.ttft_terms["budget_queue_s"] == 0.0  # S = max(10 + 1, 2 x 1) = 11: the lifetime covers both
    assert r.ttft_terms["join_s"] == pytest.approx(0.5 * avg)
    assert r.ttft_terms["prefill_s"] == pytest.approx(t_mix)
    # MVA, 2 clients at one station of demand D = t_mix / k_max: the second waits D^2 / Z, Z the cycle
    z = 0.5 * avg + t_mix + decode_total
    assert r.ttft_terms["slot_queue_s"] == pytest.approx(t_mix ** 2 / z)
    assert r.ttft_s == pytest.approx(0.5 * avg + t_mix + t_mix ** 2 / z)
    assert r.tpot_s == pytest.approx(decode_total / 10)


def test_prompts_beyond_the_budget_queue_for_steps():
    # 6 requests, isl 500, osl 3: one prompt a step ((1000 - 5) // 500 = 1) and arrivals
    # ceil(6 / (2 + 1)) = 2 a step capped at 1 -> 6 groups; a request's own steps are 2 + 1 = 3, the
    # cycle is S = max(3, 6) = 6 steps: it waits 3 steps for the token budget
    fw = _fw(admission_wait="half_step")
    r = serve(FakeSteps(), _memory(), fw, Workload(500, 3, 6), gpus=1)
    t_mix = 1e-5 * 500 + 1e-9 * 5 * 501
    decode_total = 2 * t_mix  # both decode steps are mixed: min((6 - 1) x 1, 2) = 2
    avg = (decode_total + t_mix) / 3
    assert r.ttft_terms["budget_queue_s"] == pytest.approx(3 * avg)
    assert r.ttft_terms["join_s"] == pytest.approx(0.5 * avg)


def test_prompts_per_step_leaves_a_token_per_running_decode():
    assert prompts_per_step(8192, 128, 1024, "inflight") == 7  # (8192 - 127) // 1024
    assert prompts_per_step(8192, 128, 1024, "static") == 8  # static: the prompts have the whole budget
    assert prompts_per_step(8192, 128, 4096, "inflight") == 1  # (8192 - 127) // 4096
    assert prompts_per_step(2000, 128, 4096, "inflight") == 1  # never fewer than one prompt
    assert prompts_per_step(8192, 3, 1024, "inflight") == 3  # never more than the admitted requests


def test_requests_beyond_the_kv_capacity_queue():
    fw = _fw()
    mem = _memory(4 * 1024 + 100)  # room for 4 sequences of ceil_32(1000 + 10) = 1024 tokens
    assert mem.max_concurrency(1000, 10) == 4
    small = serve(FakeSteps(), mem, fw, Workload(1000, 10, 4), gpus=1)
    big = serve(FakeSteps(), mem, fw, Workload(1000, 10, 8), gpus=1)
    assert big.admitted == 4 and big.notes
    assert big.ttft_s == pytest.approx(small.ttft_s + (8 / 4 - 1) * small.e2e_s)  # Little: one cycle more
    assert big.tpot_s == pytest.approx(small.tpot_s)


def test_decode_beyond_the_captured_sizes_runs_eager():
    from estimator.serve.launch import decode_step

    fw = _fw()
    graphed = decode_step(FakeSteps(), fw, 3, np.array([100]))
    eager = decode_step(FakeSteps(), fw, 9, np.array([100]))
    assert graphed.graphed and graphed.batch == 4 and graphed.first().launch_s == 15e-6
    gpu = 1e-3 + 9e-6 + 9e-9 * 100
    assert not eager.graphed and eager.first().gpu_s == pytest.approx(gpu)
    assert eager.first().launch_s == pytest.approx(max(gpu, 50 * 10e-6) - gpu)  # the GPU hides the host


def test_host_front_end_is_a_closed_loop_queue():
    free = _fw()
    work = Workload(100, 11, 2, "static")
    base = serve(FakeSteps(), _memory(), free, work, gpus=1)
    host = serve(FakeSteps(), _memory(), _fw(host_s_per_request=1e-3), work, 1)
    # MVA over 2 clients, D = 1 ms < the unqueued E2E E (about 12 ms): n = 1: R = D, X = 1 / E, Q = D / E;
    # n = 2: R = D x (1 + D / E): each request waits D^2 / E before its prefill
    wait = 1e-3 ** 2 / base.e2e_s
    assert host.ttft_s == pytest.approx(base.ttft_s + wait)
    assert host.e2e_s == pytest.approx(base.e2e_s + wait)
    assert host.tpot_s == pytest.approx(base.tpot_s)  # the wait is before the first token
    assert host.tokens_per_s == pytest.approx(2 * 11 / (base.e2e_s + wait))
    per_token = serve(FakeSteps(), _memory(), _fw(host_output_tokens_per_s=11000.0), work, 1)
    assert per_token.ttft_s == pytest.approx(base.ttft_s + wait)  # 11 tokens / 11,000 per s = the same 1 ms


def test_a_saturated_host_is_named_in_the_notes():
    work = Workload(100, 11, 64, "static")
    base = serve(FakeSteps(), _memory(), _fw(), work, 1)
    r = serve(FakeSteps(), _memory(), _fw(host_s_per_request=1.0), work, 1)
    assert any(n.startswith("host-bound") for n in r.notes)
    # D = 1 s beyond the whole unqueued cycle E: no delay left, R(n) = n x D, so each request waits
    # 63 x D behind the other 63 and the loop runs at about 1 / D requests/s
    assert r.ttft_s == pytest.approx(base.ttft_s + 63 * 1.0)
    assert r.tokens_per_s == pytest.approx(64 * 11 / (base.e2e_s + 63 * 1.0))


def test_join_wait_counts_the_mixed_steps_before_a_group():
    from estimator.serve.serving import join_wait

    # 3 groups of 1 prompt, 2 chunk steps each, 2 steps before a group's prefill: group 0 sees 0 mixed
    # steps, groups 1 and 2 see 2 (the chunks of the group before): mean 4 / 3 mixed x 10 + (2 - 4 / 3)
    # plain x 1 = 14
    assert join_wait(2.0, 3, 1, 2, 10.0, 1.0) == pytest.approx(14.0)
    assert join_wait(2.0, 1, 1, 1, 10.0, 1.0) == pytest.approx(2.0)  # alone: two plain steps
    # 5 requests, 2 a step: groups of 2, 2, 1 see 0, 1, 2 mixed steps: per request (0 + 2 + 2) / 5 = 0.8
    assert join_wait(2.0, 5, 2, 1, 10.0, 1.0) == pytest.approx(0.8 * 10 + 1.2 * 1)
