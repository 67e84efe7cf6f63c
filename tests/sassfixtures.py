"""Session fixtures of the estimator/sass tests (loaded with `pytest_plugins = ("sassfixtures",)`):
each probe is compiled once per session (2-core machines: a compile is ~0.5-3 s)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sassutil import DATA

from estimator.sass import tools


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
