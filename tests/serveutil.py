"""Hand-made step costs for the serving tests (test_serving.py, test_waves.py)."""

import numpy as np


class FakeSteps:
    """decode(b, p) = 1 ms + 1 us x b + 1 ns x b x p; prefill(k, isl) = 10 us x k x isl."""

    decode_kernels = 50
    prefill_kernels = 100

    def decode(self, b, past):
        return 1e-3 + 1e-6 * b + 1e-9 * b * np.asarray(past, dtype=float)

    def decode_context(self, b, past):
        return 1e-9 * b * np.asarray(past, dtype=float)

    def prefill(self, k, isl):
        return 1e-5 * k * isl
