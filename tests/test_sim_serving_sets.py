"""tools/sim_serving_sets.py's PricedRow: the simulation's step times are the product's priced steps."""

from dataclasses import replace

import pytest
from serveutil import FakeSteps

from estimator.serve.frameworks import framework
from tools.sim_serving_sets import PricedRow


def _row() -> PricedRow:
    base = framework("trtllm")
    fw = replace(base, values={**base.values, "cuda_graph_batch_sizes": [1, 2, 4, 8],
                               "cuda_graph_max_batch": 8, "graph_launch_s": 15e-6,
                               "eager_launch_s_per_kernel": 10e-6, "step_overhead_s": 0.0})
    return PricedRow(FakeSteps(), fw, isl=100, osl=11, max_batch=4, max_prompts=2)


def test_decode_is_launch_decode_step_at_the_padded_batch():
    # batch 3 runs the graph of 4: 1 ms + 1 us x 4 + 1 ns x 4 x 105 = 1.00442 ms, + 15 us graph launch
    assert _row().decode_s(3, 105.0) == pytest.approx(1.01942e-3)


def test_mixed_step_is_the_prefill_step_plus_the_ride():
    # two prompts of 100: 10 us x 200 = 2 ms of GPU, over its 100 kernels x 10 us = 1 ms of eager launch
    # (hidden); the 3 decodes' attention rides along: 1 ns x 3 x 105 = 0.315 us
    row = _row()
    assert row.mixed_s(200, 3, 105.0) == pytest.approx(2.000315e-3)
    # 150 prompt tokens: priced pro rata on the two-prompt step, 2 ms x 150 / 200 = 1.5 ms
    assert row.mixed_s(150, 3, 105.0) == pytest.approx(1.500315e-3)
    assert row.mixed_s(100, 0, 100.0) == pytest.approx(1e-3)  # one prompt: 1 ms GPU = 1 ms launch
