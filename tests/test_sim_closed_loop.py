"""tools/sim_closed_loop.py on hand-worked tiny cases: fixed step times, exact TTFT / TPOT by hand."""

import pytest

from tools.sim_closed_loop import Knobs, simulate


class Fixed:
    """Every decode step 10 ms, every step with prompt tokens 30 ms, whatever the batch."""

    first_token_extra_s = 0.0

    def decode_s(self, batch, past):
        return 0.010

    def mixed_s(self, tokens, batch, past):
        return 0.030


def test_two_clients_without_overlap():
    # 2 clients, 4 requests, isl 100, osl 3 (a token from the prefill, two decodes).
    # 0-30 ms both prompts (one mixed step); 30-40, 40-50 the two decodes: last tokens at 50 ms.
    # Without the overlap scheduler the host knows at 50 ms that both finished; the next two prompts
    # arrive at 50 ms on an idle engine: prefill 50-80, decodes to 100: the same as the first round.
    # TTFT = 30 ms, E2E = 50 ms, TPOT = (50 - 30) / 2 = 10 ms.
    res = simulate(Fixed(), 100, 3, 2, 4, Knobs(max_batch=2, max_num_tokens=1000, overlap=False))
    assert res.ttft_s == pytest.approx(0.030)
    assert res.e2e_s == pytest.approx(0.050)
    assert res.tpot_s == pytest.approx(0.010)
    assert res.iterations == 6


def test_two_clients_with_overlap():
    # The overlap scheduler schedules m at the end of m - 2. Round 1 as above (iterations 0-2, last
    # tokens at 50 ms), but iteration 3 (40 ms -> 50-60 ms) was scheduled before the host knew: a wasted
    # decode of the two finished requests. The next prompts arrive at 50 ms, find the engine idle and are
    # launched behind it: prefill 60-90 ms (TTFT 40 ms), decodes to 100, 110 (E2E 60 ms).
    # TTFT = (30 + 30 + 40 + 40) / 4 = 35 ms, E2E = (50 + 50 + 60 + 60) / 4 = 55 ms,
    # TPOT = (55 - 35) / 2 = 10 ms.
    res = simulate(Fixed(), 100, 3, 2, 4, Knobs(max_batch=2, max_num_tokens=1000, overlap=True))
    assert res.ttft_s == pytest.approx(0.035)
    assert res.e2e_s == pytest.approx(0.055)
    assert res.tpot_s == pytest.approx(0.010)
    assert res.iterations == 7


def test_token_budget_splits_the_burst():
    # max_num_tokens 150 holds one prompt of 100 a step: prompt A 0-30 ms, prompt B 30-60 ms (A's
    # decode rides along), then decodes 60-70 (A's last token), 70-80 (B's). No overlap, 2 requests.
    # TTFT = (30 + 60) / 2 = 45 ms; E2E = (70 + 80) / 2 = 75 ms; TPOT = (75 - 45) / 2 = 15 ms.
    res = simulate(Fixed(), 100, 3, 2, 2, Knobs(max_batch=2, max_num_tokens=150, overlap=False))
    assert res.ttft_s == pytest.approx(0.045)
    assert res.e2e_s == pytest.approx(0.075)
    assert res.tpot_s == pytest.approx(0.015)


def test_one_slot_short_waits_for_a_departure():
    # 2 clients, 1 slot (slots_short 1 of max_batch 2), osl 3, no overlap, 2 requests: A runs 0-30
    # (prefill), 30-40, 40-50 (last token); B waits for A's departure, prefill 50-80, decodes to 100.
    # TTFT = (30 + 80) / 2 = 55 ms; E2E = (50 + 100) / 2 = 75 ms; TPOT = (75 - 55) / 2 = 10 ms.
    knobs = Knobs(max_batch=2, max_num_tokens=1000, overlap=False, slots_short=1)
    res = simulate(Fixed(), 100, 3, 2, 2, knobs)
    assert res.ttft_s == pytest.approx(0.055)
    assert res.tpot_s == pytest.approx(0.010)


def test_front_end_delays_delivery_and_intake():
    # 1 client, 2 requests, no overlap; intake 5 ms per request, delivery 1 ms per token.
    # Request 1: sent 0, at the engine 5; prefill 5-35, first token delivered 35-36; decodes 35-45,
    # 45-55; the last token delivered 55-56. Request 2: sent 56, at the engine 61, prefill 61-91, its first
    # token at 92, decodes to 111, delivered at 112. TTFT = (36 + 36) / 2 = 36 ms; E2E = 56 ms each.
    knobs = Knobs(max_batch=1, max_num_tokens=1000, overlap=False, host_s_per_request=0.005,
                  host_s_per_token=0.001)
    res = simulate(Fixed(), 100, 3, 1, 2, knobs)
    assert res.ttft_s == pytest.approx(0.036)
    assert res.e2e_s == pytest.approx(0.056)
    assert res.tpot_s == pytest.approx(0.010)


def test_unchunked_prompt_beyond_the_budget_is_refused():
    with pytest.raises(ValueError, match="never fits"):
        simulate(Fixed(), 2000, 3, 1, 1, Knobs(max_batch=1, max_num_tokens=1000))


@pytest.mark.parametrize(("overlap", "e2e_ms"), [(False, 61.0), (True, 57.0)])
def test_engine_loop_host_work(overlap, e2e_ms):
    # 1 client, 1 request, osl 3; the engine loop spends 5 ms per prompt before launching its step and
    # 2 ms per token after a step. Prefill launched at 5, ends 35, its token out at 37 (TTFT 37 ms).
    # Without overlap each decode waits for the host: 37-47 (out 49), 49-59 (out 61): E2E 61 ms.
    # With overlap the host prepares a step while the GPU runs the one before: decodes 35-45, 45-55,
    # the last token out at 57: E2E 57 ms, the per-token work hidden.
    knobs = Knobs(max_batch=1, max_num_tokens=1000, overlap=overlap, loop_s_per_prompt=0.005,
                  loop_s_per_token=0.002)
    res = simulate(Fixed(), 100, 3, 1, 1, knobs)
    assert res.ttft_s == pytest.approx(0.037)
    assert res.e2e_s == pytest.approx(e2e_ms * 1e-3)


def test_client_jitter_is_outside_the_measured_time():
    # 1 client on an idle engine: whenever a request is sent (jittered up to 20 ms), it is prefilled at
    # once, so TTFT stays 30 ms and E2E 50 ms; the run is longer than 2 x 50 ms by the jitter alone.
    knobs = Knobs(max_batch=1, max_num_tokens=1000, overlap=False, client_jitter_s=0.020)
    res = simulate(Fixed(), 100, 3, 1, 2, knobs)
    assert res.ttft_s == pytest.approx(0.030)
    assert res.e2e_s == pytest.approx(0.050)
    assert 2 / 0.140 <= res.requests_per_s < 2 / 0.100


@pytest.mark.parametrize(("split", "ttft_ms", "e2e_ms"),
                         [(False, 250 / 3, 340 / 3), (True, 230 / 3, 320 / 3)])
def test_front_end_shared_or_split(split, ttft_ms, e2e_ms):
    # 2 clients, 3 requests, osl 2, no overlap; intake 10 ms a request, delivery 20 ms a token.
    # Intake A 0-10, B 10-20. A's prefill 10-40 (its token out 40-60); B's prefill with A's decode 40-70
    # (two tokens out 70-110: A's last, B's first); B's decode 70-80 (out 110-130: B's last).
    # C is sent at 110. One front end: its intake queues behind B's last token, 130-140; prefill 140-170,
    # out 170-190; decode 170-180, out 190-210: C's TTFT 80, E2E 100 ms.
    # Split: C's intake 110-120; prefill 120-150, out 150-170; decode 150-160, out 170-190: TTFT 60, E2E 80.
    # TTFT (60 + 110 + 80) / 3 or (60 + 110 + 60) / 3; E2E (110 + 130 + 100) / 3 or (110 + 130 + 80) / 3.
    knobs = Knobs(max_batch=2, max_num_tokens=1000, overlap=False, host_s_per_request=0.010,
                  host_s_per_token=0.020, split_front_end=split)
    res = simulate(Fixed(), 100, 2, 2, 3, knobs)
    assert res.ttft_s == pytest.approx(ttft_ms * 1e-3)
    assert res.e2e_s == pytest.approx(e2e_ms * 1e-3)


def test_warmup_requests_are_not_measured():
    # 2 clients, overlap, 2 warm-up requests then 2 measured: the warm-up is the first round of
    # test_two_clients_with_overlap (TTFT 30 ms), the measured ones its second (TTFT 40, E2E 60 ms).
    res = simulate(Fixed(), 100, 3, 2, 2, Knobs(max_batch=2, max_num_tokens=1000, overlap=True), warmup=2)
    assert res.ttft_s == pytest.approx(0.040)
    assert res.e2e_s == pytest.approx(0.060)
