"""Shared pieces of the tests of estimator/sass: the probe sources and a once-per-session compile cache.

The probe kernels live in tests/data/sass/*.cu (each with a comment saying what it contains). nvcc/ptxas
and the disassembler wheels are on CI machines; a test that needs them is skipped, with the reason, only
where they are truly absent.
"""

from __future__ import annotations

import subprocess
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


@pytest.fixture(scope="session")
def analysed():
    """`analysed(source_stem, arch, **kw)` -> estimator.sass.analyse.analyse_file's dict, computed once."""
    from estimator.sass.analyse import analyse_file

    cache: dict = {}

    def get(stem: str, arch: str, **kw) -> dict:
        key = (stem, arch, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = analyse_file(str(DATA / f"{stem}.cu"), arch, **kw)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def cubins(tmp_path_factory):
    """`cubins(stem, sm)` -> (path of the cubin nvcc built once for the session, ptxas -v log)."""
    out = tmp_path_factory.mktemp("sass-cubins")
    cache: dict = {}

    def get(stem: str, sm: str) -> tuple[Path, str]:
        if (stem, sm) not in cache:
            path = out / f"{stem}.{sm}.cubin"
            proc = subprocess.run([tools.find("nvcc"), "-cubin", f"-arch={sm}", "-O3", "-Xptxas", "-v", "-o",
                                   str(path), str(DATA / f"{stem}.cu")], capture_output=True, text=True,
                                  timeout=300, check=True)
            cache[stem, sm] = (path, proc.stderr)
        return cache[stem, sm]

    return get


def kernel(result: dict, name: str) -> dict:
    return next(k for k in result["kernels"] if k["name"] == name)


def hot_loops(k: dict) -> list[dict]:
    return [lp for lp in k["loops"] if lp["hot"]]


def finding(k: dict, kind: str) -> dict:
    found = [f for f in k["findings"] if f["kind"] == kind]
    assert found, f"no {kind} finding in {[f['text'] for f in k['findings']]}"
    return found[0]
