"""estimator/serve/steps.py: layer folding reproduces the full graph's priced steps exactly."""

from dataclasses import replace

import numpy as np
import pytest

import hwdesc
from estimator.frontends.onnx_import import import_model
from estimator.serve.frameworks import framework
from estimator.serve.steps import Options, Steps, sharded_variant
from models import llama
from passes import STRATEGIES

CFG = replace(llama.LLAMA_TINY, num_layers=4)


def _variant(layers: int, weight: int, tp: int):
    cfg = replace(CFG, num_layers=layers)
    dec = import_model(llama.build("t-decode", cfg, "decode"))
    pre = import_model(llama.build("t", cfg, "prefill"))
    return sharded_variant(dec, pre, tp, weight)[0]


@pytest.mark.parametrize("tiling", [False, True])
def test_folded_steps_equal_the_full_model(tiling):
    fw = replace(framework("trtllm"), values={**framework("trtllm").values, "max_num_tokens": 64})
    opts = Options(hwdesc.load("h100-sxm"), 2, "bf16", None, STRATEGIES["tensorrt"], fw, tiling=tiling)
    full = Steps([_variant(4, 1, 2)], opts, ())
    folded = Steps([_variant(1, 2 - 4, 2), _variant(2, 4 - 1, 2)], opts, ())  # f(1) + 3 (f(2) - f(1))
    pasts = np.array([10, 100])
    assert folded.decode(8, pasts) == pytest.approx(full.decode(8, pasts), rel=1e-9)
    assert folded.decode_context(8, pasts) == pytest.approx(full.decode_context(8, pasts), rel=1e-9)
    assert folded.prefill(2, 32) == pytest.approx(full.prefill(2, 32), rel=1e-9)
    assert folded.weights_bytes == pytest.approx(full.weights_bytes)
    assert (
        folded.kv_per_token == full.kv_per_token == 2 * 4 * 1 * 16 * 2
    )  # (k, v) x 4 layers x 1 kv head x bf16
    assert folded.decode_kernels == full.decode_kernels
