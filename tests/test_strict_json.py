"""Every JSON the tool writes is strict JSON (no NaN / Infinity), and a deployment that does not fit is a
finding (fits false, the smallest fit, null figures) in every mode (issues 25 and 26)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cliutil import cli

from estimator import jsonout


def strict(text: str):
    """json.loads refusing NaN, Infinity and -Infinity (Python's json reads them by default)."""
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_the_writer_turns_non_finite_figures_into_null():
    doc = {"a": float("nan"), "b": [float("inf"), np.float64(2.5), np.int64(3)], "c": np.array([1.0, np.nan])}
    assert strict(jsonout.dumps(doc)) == {"a": None, "b": [None, 2.5, 3], "c": [1.0, None]}
    with pytest.raises(ValueError, match="not strict JSON: NaN"):
        strict(json.dumps({"a": math.nan}))  # what json.dumps alone writes


@pytest.mark.parametrize("argv", [
    ("--model", "llama-tiny", "--json"),
    ("--model", "llama-tiny", "--json", "--compare-fusion", "none,tensorrt"),
    ("--model", "llama-tiny", "--json", "--sweep", "seq=16"),
    ("--model", "llama-tiny", "--json", "--tp", "2"),
    ("--model", "llama-tiny", "--json", "--serve", "isl=64,osl=8,concurrency=4"),
    ("--model", "llama-tiny", "--json", "--memory"),
    ("--model", "llama-tiny", "--json", "--serve", "isl=64,osl=8,concurrency=4",
     "--sweep", "concurrency=1,4"),
])
def test_every_json_mode_is_strict(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    strict(out)


def test_the_trace_file_is_strict(capsys, tmp_path):
    path = tmp_path / "t.json"
    code, _, err = cli(capsys, "--model", "llama-tiny", "--precision", "bf16", "--trace", str(path))
    assert code == 0, err
    strict(path.read_text())


def test_a_profile_join_json_is_strict(capsys, tmp_path):
    from estimator.profile import synthetic
    from tests.test_profile_join import _iteration, _model

    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 100, 20, 5) + _iteration(2_000_000, 110, 22, 5))
    code, out, err = cli(capsys, "profile", path, "--model", _model(tmp_path), "--json")
    assert code == 0, err
    strict(out)


def test_the_default_mode_says_a_model_does_not_fit(capsys):
    # llama-3-8b in fp32: 32.1 GB of weights on the RTX 5090's 32 GB; with TensorRT-LLM's 3.5 GiB reserve
    # beside them, 32.1 / 2 + 3.76 + 0.34 = 20.1 GB fits at TP 2 (`estimate --model llama-3-70b --arch
    # rtx-5090 --precision bf16` says the same of 141.1 GB: smallest fit --tp 8)
    argv = ("--model", "llama-3-8b", "--arch", "rtx-5090", "--precision", "fp32", "--dim", "seq=128")
    code, out, err = cli(capsys, *argv, "--top", "1")
    assert code == 0, err
    assert "does not fit: 32.1 GB of weights on 32.0 GB" in out and "smallest fit: --tp 2" in out
    code, out, err = cli(capsys, *argv, "--json")
    fit = strict(out)["memory_fit"]
    assert fit["fits"] is False and fit["smallest_fit"] == {"tp": 2}
    assert fit["weights_bytes"] == pytest.approx(32.1e9, rel=2e-3)


def test_a_model_that_fits_says_so(capsys):
    code, out, _ = cli(capsys, "--model", "llama-tiny", "--json")
    assert strict(out)["memory_fit"]["fits"] is True and strict(out)["memory_fit"]["smallest_fit"] is None
    code, out, _ = cli(capsys, "--model", "llama-tiny")
    assert "does not fit" not in out


def test_serve_of_a_deployment_that_does_not_fit_is_a_finding(capsys):
    # llama-3.1-8b in fp32: 32 GB of weights on a 32 GB RTX 5090; bf16 at TP 1 fits (16 GB)
    argv = ("--model", "llama-3.1-8b", "--arch", "rtx-5090", "--precision", "fp32",
            "--serve", "isl=1024,osl=128,concurrency=8")
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    doc = strict(out)
    serve = doc["serve"]
    assert serve["fits"] is False and serve["ttft_s"] is None and serve["tpot_s"] is None
    assert serve["ttft_terms_s"] is None and serve["smallest_fit"] == {"tp": 2}
    assert doc["memory"]["fits"] is False and doc["memory"]["smallest_fit"] == {"tp": 2}
    code, out, err = cli(capsys, *argv)
    assert code == 0 and "does not fit:" in out and "smallest fit: --tp 2" in out


def test_serve_prints_and_writes_each_ttft_term(capsys):
    argv = ("--model", "llama-tiny", "--serve", "isl=64,osl=8,concurrency=4,rounds=10")
    code, out, _ = cli(capsys, *argv, "--json")
    serve = strict(out)["serve"]
    assert sum(serve["ttft_terms_s"].values()) == pytest.approx(serve["ttft_s"])
    assert set(serve["ttft_terms_s"]) >= {"kv_queue_s", "join_s", "prefill_s", "burst_s"}
    code, out, _ = cli(capsys, *argv)
    assert "wait to join a step" in out and "prefill" in out and "benchmark start (burst)" in out


def test_the_sweep_mode_says_a_model_does_not_fit():
    # the sweep mode's per-GPU finding (estimator/cli/sweep.py _fits) on a priced result's weight bytes:
    # 141.1 GB on the RTX 5090 (32 GB) fits from TP 8 (141.1 / 8 + 3.76 + 0.39 = 21.8 GB; TP 4: 39.4 GB)
    from types import SimpleNamespace

    import sympy

    import hwdesc
    from estimator.cli.sweep import _fits

    result = SimpleNamespace(totals={"weight_bytes": sympy.Float(141.1e9)}, hw=hwdesc.load("rtx-5090"))
    text, doc = [], {}
    _fits([(result, None)], text, doc)
    assert strict(jsonout.dumps(doc))["memory_fit"]["rtx-5090"]["smallest_fit"] == {"tp": 8}
    assert text == ["rtx-5090: does not fit: 141.1 GB of weights on 32.0 GB (144.9 GB with the framework's "
                    "reserve, before any KV cache); smallest fit: --tp 8 (weights split evenly)"]
