"""Layer folding of the serving steps over layers that alternate or start with a dense prefix
(estimator/serve/steps.py fold_depths), and the KV bytes of sliding-window layers (serve/memory.py)."""

from dataclasses import replace

from estimator.frontends.onnx_import import import_model
from estimator.serve.memory import kv_bytes_per_token
from estimator.serve.steps import bundled_config, fold_depths


def _cfg(name):
    return bundled_config(name)[1]


def test_identical_layers_fold_to_one_and_two():
    # Llama-3.1-8B: 32 identical layers -> f(1) + 31 (f(2) - f(1)): weights 1 - 31 = -30 and 31
    assert fold_depths(_cfg("llama-3.1-8b"), 32) == [(1, -30), (2, 31)]


def test_alternating_windows_fold_by_period_two():
    # gpt-oss-20b: sliding (128) / full layers alternate, 24 layers: n1 = 2, n2 = 4, m = (24 - 2) / 2 = 11
    assert fold_depths(_cfg("gpt-oss-20b"), 24) == [(2, 1 - 11), (4, 11)]


def test_dense_prefix_folds_after_it():
    # DeepSeek-V3: 3 dense layers then 58 MoE ones, 61 layers: n1 = 4, n2 = 5, m = 61 - 4 = 57
    assert fold_depths(_cfg("deepseek-v3"), 61) == [(4, 1 - 57), (5, 57)]


def test_no_fold_below_two_periods():
    assert fold_depths(_cfg("llama-3.1-8b"), 2) == [(2, 1)]
    assert fold_depths(_cfg("gpt-oss-20b"), 4) == [(4, 1)]  # n2 = 4 is not below 4 layers


def test_folded_weights_rebuild_the_layer_count():
    # every folded pair sums its layer counts back to the model's: n1 (1 - m) + n2 m = L
    for name in ("llama-3.1-8b", "gpt-oss-20b", "gpt-oss-120b", "deepseek-v3", "qwen3-235b-a22b"):
        build, cfg, layers = bundled_config(name)
        assert sum(n * w for n, w in fold_depths(cfg, layers)) == layers


def test_sliding_window_layers_add_no_kv_per_token():
    # gpt-oss-20b with 2 layers: layer 0 slides over 128 tokens (cache Min(128, past) + 1 rows: a fixed
    # cost per sequence), layer 1 is full: 1 layer x (k, v) x 8 kv heads x 64 x 2 bytes (bf16) per token
    build, cfg, _ = bundled_config("gpt-oss-20b")
    g = import_model(build("gpt-oss-20b-decode", replace(cfg, num_layers=2), "decode"))
    assert kv_bytes_per_token(g, "bf16") == 1 * 2 * 8 * 64 * 2
