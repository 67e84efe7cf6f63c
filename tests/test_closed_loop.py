"""estimator/serve/closed_loop.py: exact MVA of the benchmark's closed loop, numbers worked by hand."""

import pytest

from estimator.serve.closed_loop import closed_loop, host_demand_s


def test_one_client_never_waits():
    loop = closed_loop(1, 1.0, {"host": 0.2})
    assert loop.wait_s == 0.0  # R(1) = D (1 + Q(0)) = D: nobody ahead of it
    assert loop.throughput_per_s == pytest.approx(1.0)  # X(1) = 1 / (0.8 delay + 0.2)
    assert loop.utilisation["host"] == pytest.approx(0.2)


def test_two_clients_by_hand():
    loop = closed_loop(2, 1.0, {"host": 0.2})
    # n = 1: R = 0.2, X = 1 / (0.8 + 0.2) = 1, Q = 0.2
    # n = 2: R = 0.2 x (1 + 0.2) = 0.24, X = 2 / (0.8 + 0.24)
    assert loop.waits_s["host"] == pytest.approx(0.24 - 0.2)
    assert loop.throughput_per_s == pytest.approx(2 / 1.04)


def test_two_stations_share_the_cycle():
    loop = closed_loop(2, 1.0, {"prefill": 0.2, "host": 0.1})
    # delay 1.0 - 0.3 = 0.7; n = 1: X = 1 / (0.7 + 0.3) = 1, Q = (0.2, 0.1)
    # n = 2: R = (0.2 x 1.2, 0.1 x 1.1) = (0.24, 0.11), X = 2 / (0.7 + 0.35)
    assert loop.waits_s["prefill"] == pytest.approx(0.04)
    assert loop.waits_s["host"] == pytest.approx(0.01)
    assert loop.wait_s == pytest.approx(0.05)
    assert loop.throughput_per_s == pytest.approx(2 / 1.05)


def test_many_clients_saturate_the_busiest_station():
    # N* = cycle / D = 10 clients; at 100 the host serves X -> 1 / D = 10 requests/s and the cycle
    # stretches to C x D = 10 s: each request waits about 10 - 1 = 9 s beyond the unqueued cycle
    loop = closed_loop(100, 1.0, {"host": 0.1})
    assert loop.throughput_per_s == pytest.approx(10.0, rel=1e-3)
    assert loop.wait_s == pytest.approx(9.0, rel=2e-2)
    assert loop.utilisation["host"] == pytest.approx(1.0, rel=1e-3)


def test_no_demand_no_wait():
    loop = closed_loop(8, 2.0, {"prefill": 0.0, "host": 0.0})
    assert loop.waits_s == {"prefill": 0.0, "host": 0.0}
    assert loop.throughput_per_s == pytest.approx(8 / 2.0)  # Little: C / cycle


def test_host_demand_per_request_and_per_token():
    assert host_demand_s(256, 0.015, 14000.0) == pytest.approx(0.015 + 256 / 14000.0)
    assert host_demand_s(256, 0.0, None) == 0.0  # a framework without host figures
