"""moe.power_law_counts draws every draw at once: the same numbers as the draw-by-draw loop it replaced
(kept here as the reference), including the rounding remainder both ways and the EP group swap."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.pricing import moe


def _loop(tokens, topk, experts, alpha, ep=1, draws=moe.POWER_LAW_DRAWS):
    rng = np.random.default_rng(0)
    a = tokens * topk
    lo, hi = (1.0, 0.8 * tokens) if a > experts else (0.01, 2.0)
    hi = max(hi, lo * (1 + 1e-9))
    out = []
    for _ in range(draws):
        u = rng.random(experts)
        x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
        n = np.round(x / x.sum() * a)
        delta = int(a - n.sum())
        order = np.argsort(-n, kind="stable")
        if delta > 0:
            np.add.at(n, order[np.arange(delta) % experts], 1)
        elif delta < 0:
            positive = order[n[order] > 0][::-1]
            np.add.at(n, positive[np.arange(-delta) % len(positive)], -1)
        if experts % ep == 0 and ep > 1:
            groups = n.reshape(ep, -1).copy()
            heavy = int(np.argmax(groups.sum(axis=1)))
            groups[[0, heavy]] = groups[[heavy, 0]]
            n = groups.reshape(-1)
        out.append(n)
    return out


CASES = [(1, 8, 256, 1.01, 1), (3, 8, 256, 1.2, 8), (64, 8, 256, 1.01, 8), (4096, 8, 256, 1.2, 32),
         (16, 2, 8, 1.5, 2), (7, 6, 160, 1.01, 1), (1000, 8, 128, 1.2, 4), (2, 4, 60, 1.2, 3)]


@pytest.mark.parametrize("args", CASES)
def test_power_law_counts_equal_the_draw_loop(args):
    moe.power_law_counts.cache_clear()
    got = moe.power_law_counts(*args)
    ref = _loop(*args)
    assert len(got) == len(ref) == moe.POWER_LAW_DRAWS
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_array_equal(g, r)
        assert not g.flags.writeable


def test_remainder_goes_both_ways_in_the_cases():
    # the cases exercise a positive and a negative rounding remainder (else the test checks less)
    signs = set()
    for tokens, topk, experts, alpha, _ in CASES:
        rng = np.random.default_rng(0)
        a = tokens * topk
        lo, hi = (1.0, 0.8 * tokens) if a > experts else (0.01, 2.0)
        hi = max(hi, lo * (1 + 1e-9))
        for _ in range(moe.POWER_LAW_DRAWS):
            x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * rng.random(experts) + lo ** (1 - alpha)) \
                ** (1 / (1 - alpha))
            signs.add(int(np.sign(a - np.round(x / x.sum() * a).sum())))
    assert {-1, 1} <= signs
