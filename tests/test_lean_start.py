"""Lean start (issue 11): `estimate --list-archs` imports neither sympy, onnx, numpy, networkx nor
onnxruntime (the structural half of its start-up target; tools/bench_estimate.py measures the time), and
the demo installs no torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("sympy", "onnx", "numpy", "networkx", "onnxruntime", "matplotlib", "torch")

PROBE = """
import sys
from estimator.cli.main import main
code = main(sys.argv[1:])
print(code, *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def _imported(*argv):
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], cwd=ROOT,
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    code, *mods = proc.stdout.strip().splitlines()[-1].split()
    return int(code), mods


def test_list_archs_imports_nothing_heavy():
    code, mods = _imported("--list-archs")
    assert code == 0 and mods == []


def test_a_bad_precision_still_names_the_choices():
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", "--list-archs", "--precision", "fp9"],
                          cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: argument --precision: invalid choice: 'fp9' (choose from 'fp32', 'tf32', 'bf16', 'fp16', "
        "'fp8', 'fp4', 'fp8-w8a8', 'fp8-block', 'nvfp4', 'w4a16')"]


def test_demo_installs_the_core_and_onnxruntime_only():
    make = (ROOT / "Makefile").read_text()
    demo_install = [line for line in make.splitlines() if "pip install" in line and "'.[" in line]
    # one install line for the demo (the core + ort), one for the tests (the extras)
    assert any("'.[ort]'" in line for line in demo_install)
    assert all("torch" not in line for line in demo_install if "'.[ort]'" in line)
    assert any("torch" in line for line in demo_install)
    demo = make.split("\ndemo:")[1].splitlines()[0]
    assert "DEMO_STAMP" in demo and "TEST_STAMP" not in demo
