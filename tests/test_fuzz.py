"""Fuzzing (issue 11): seeded mutants of real exports (the llama-tiny builders and, where transformers is
installed, the tiny transformers exports of tests/conftest.py) and random small graphs, each run through
the CLI in this process. Every case ends with a result (exit 0) or one `error:` line (exit 2), within 10 s
of CPU time (an ITIMER_PROF alarm: load on the machine neither trips nor hides it); never an internal
error or a traceback. The long campaign (thousands of mutants) is tools/fuzz_estimate.py."""

from collections import Counter

import pytest

from tools import fuzz_estimate

MUTANTS = 200
RANDOM_GRAPHS = 40


@pytest.fixture(scope="module")
def seeds(request):
    found = fuzz_estimate.builder_seeds()
    try:
        hf = request.getfixturevalue("hf_exports")
    except pytest.skip.Exception:  # no transformers: the builders' exports alone
        hf = {}
    found.update({f"hf-{family}": m.SerializeToString() for family, m in hf.items()})
    return found


def _campaign(tmp_path, mutants, randoms, seeds):
    outcomes = list(fuzz_estimate.campaign(mutants, randoms, 11, seeds, str(tmp_path)))
    findings = [o for o in outcomes if o.finding]
    assert not findings, "\n".join(f"{o.kind}: {o.case}: {o.detail}" for o in findings[:10])
    return Counter(o.kind for o in outcomes)


def test_mutants_of_real_exports_end_in_a_result_or_one_error_line(tmp_path, seeds):
    counts = _campaign(tmp_path, MUTANTS, 0, seeds)
    assert sum(counts.values()) == MUTANTS
    # the campaign exercises both ends: some mutants still estimate, most are refused
    assert counts["estimated"] > 0 and counts["refused"] > 0


def test_random_small_graphs_end_in_a_result_or_one_error_line(tmp_path):
    counts = _campaign(tmp_path, 0, RANDOM_GRAPHS, {})
    assert sum(counts.values()) == RANDOM_GRAPHS and counts["estimated"] > 0


def test_the_alarm_turns_a_hang_into_a_finding(tmp_path, monkeypatch):
    import importlib

    cli_main = importlib.import_module("estimator.cli.main")  # the module (the package re-exports main)

    def spin(argv):
        while True:
            pass

    monkeypatch.setattr(cli_main, "main", spin)
    outcome = fuzz_estimate.run_case("spin", str(tmp_path / "none.onnx"), [], limit_s=0.2)
    assert outcome.kind == "timeout" and outcome.finding
