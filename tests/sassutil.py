"""Shared pieces of the tests of estimator/sass: the probe sources, the tool check, report lookups.

The probe kernels live in tests/data/sass/*.cu (each with a comment saying what it contains). nvcc/ptxas
and the disassembler wheels are on CI machines; a test that needs them is skipped, with the reason, only
where they are truly absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from estimator.sass import tools

DATA = Path(__file__).resolve().parent / "data" / "sass"


def _missing() -> str | None:
    for tool in ("nvcc", "ptxas", "cuobjdump", "nvdisasm"):
        if not tools.available(tool):
            return f"{tool} not installed"
    return None


needs_cuda_tools = pytest.mark.skipif(_missing() is not None, reason=f"CUDA binary utilities: {_missing()}")


def kernel(result: dict, name: str) -> dict:
    return next(k for k in result["kernels"] if k["name"] == name)


def hot_loops(k: dict) -> list[dict]:
    return [lp for lp in k["loops"] if lp["hot"]]


def finding(k: dict, kind: str) -> dict:
    found = [f for f in k["findings"] if f["kind"] == kind]
    assert found, f"no {kind} finding in {[f['text'] for f in k['findings']]}"
    return found[0]
