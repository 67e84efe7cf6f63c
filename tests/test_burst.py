"""estimator/serve/burst.py: the benchmark's first round, a burst of prompts on an idle server, worked
by hand; and serve() averaging it into TTFT and E2E over the benchmark's rounds."""

import pytest

from estimator.serve.burst import benchmark_mean, burst_ttft_s
from estimator.serve.serving import Workload, serve
from tests.test_serving import FakeSteps, _fw, _memory


def test_one_prompt_a_step_with_the_decoders_riding_along():
    # W = 4, k_b = 1, n_c = 1, T_pre = 10 ms, ride(3 decoders) = 3 ms -> 1 ms a decoder:
    # steps 10, 11, 12, 13 ms (0, 1, 2, 3 decoders); first tokens at 10, 21, 33, 46 ms; mean 110 / 4
    assert burst_ttft_s(4, 1, 1, 10e-3, 3e-3, 3) == pytest.approx(27.5e-3)


def test_two_prompts_a_step_and_a_short_last_group():
    # W = 5, k_b = 2: groups of 2, 2, 1; decoders riding 0, 2, 3 (capped at W - k_b = 3), ride 1 ms each;
    # steps 10, 12, 13 ms; first tokens at 10, 22, 35 ms; mean (2 x 10 + 2 x 22 + 35) / 5 = 99 / 5
    assert burst_ttft_s(5, 2, 1, 10e-3, 3e-3, 3) == pytest.approx(19.8e-3)


def test_chunked_prompts_take_n_c_steps_each():
    # W = 2, k_b = 1, n_c = 2 chunk steps of 5 ms, ride 1 ms a decoder (ride_batch 1):
    # steps 5, 5 (group 0), 6, 6 (group 1, one decoder riding); first tokens at 10 and 22 ms; mean 16 ms
    assert burst_ttft_s(2, 1, 2, 5e-3, 1e-3, 1) == pytest.approx(16e-3)


def test_a_lone_request_is_its_own_prefill():
    assert burst_ttft_s(1, 1, 1, 10e-3, 0.0, 0) == pytest.approx(10e-3)


def test_benchmark_mean_over_rounds():
    # 10 rounds: the first at 1.0 s, nine at 0.1 s -> (1.0 + 9 x 0.1) / 10 = 0.19 s
    assert benchmark_mean(0.1, 1.0, 10) == pytest.approx(0.19)
    assert benchmark_mean(0.1, 1.0, None) == 0.1  # the steady state alone
    assert benchmark_mean(0.1, 1.0, 1) == pytest.approx(1.0)  # one round: the burst is the whole run


def test_serve_averages_the_burst_into_ttft_and_e2e_not_tpot():
    fw = _fw(admission_wait="half_step")
    steady = serve(FakeSteps(), _memory(), fw, Workload(500, 11, 6), gpus=1)
    bench = serve(FakeSteps(), _memory(), fw, Workload(500, 11, 6, rounds=4), gpus=1)
    # budget 1000, 5 running decodes: k_max = (1000 - 5) // 500 = 1 -> the burst prefills one prompt a
    # step: T_pre = 10 us x 500 = 5 ms (eager, above 100 kernels x 10 us), the decoders ride at
    # 1 ns x b x 505 (ride(5) priced at W - k = 5, past isl + osl // 2 = 505); half_step admission gives
    # k = ceil(6 / (10 + 1)) = 1 in the steady state too
    t_pre, per = 1e-5 * 500, 1e-9 * 505
    ends = [sum(t_pre + j * per for j in range(i + 1)) for i in range(6)]
    first = sum(ends) / 6
    assert first == pytest.approx(burst_ttft_s(6, 1, 1, t_pre, 5 * per, 5))
    shift = (first - steady.ttft_s) / 4
    assert shift > 1e-3  # the burst's first tokens at about 5, 10, .. 30 ms (mean 17.5) against 12 ms steady
    assert bench.ttft_s == pytest.approx(steady.ttft_s + shift)
    assert bench.ttft_terms["burst_s"] == pytest.approx(shift) and steady.ttft_terms["burst_s"] == 0.0
    assert bench.e2e_s == pytest.approx(steady.e2e_s + shift)
    assert bench.tpot_s == pytest.approx(steady.tpot_s)
    assert bench.tokens_per_s == pytest.approx(steady.tokens_per_s)  # throughput: the steady state's


def test_static_batching_has_no_separate_burst():
    fw = _fw()
    steady = serve(FakeSteps(), _memory(), fw, Workload(100, 11, 4, "static"), gpus=1)
    bench = serve(FakeSteps(), _memory(), fw, Workload(100, 11, 4, "static", rounds=10), gpus=1)
    assert bench.ttft_s == pytest.approx(steady.ttft_s)  # every static round already starts together
