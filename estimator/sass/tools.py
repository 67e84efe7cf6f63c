"""Finding and running the CUDA binary utilities: nvcc, ptxas (the toolkit), cuobjdump, nvdisasm (wheels).

Every call has a timeout and turns a missing tool or a tool's own complaint into one UserError line.
cuobjdump and nvdisasm come from the `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm` wheels (installed
under `nvidia/cu13/bin/`), else from PATH or a CUDA toolkit; nvcc and ptxas from PATH, $CUDA_HOME or
/usr/local/cuda.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from estimator.errors import UserError

TIMEOUT_S = 120.0
_HOWTO = {
    "nvcc": "install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`); put nvcc on PATH or set CUDA_HOME",
    "ptxas": "install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`); put ptxas on PATH or CUDA_HOME",
    "cuobjdump": "pip install nvidia-cuda-cuobjdump",
    "nvdisasm": "pip install nvidia-cuda-nvdisasm",
}


def _wheel_dirs() -> list[Path]:
    try:
        import nvidia  # namespace package of NVIDIA's wheels
    except ImportError:
        return []
    return [Path(p) / sub / "bin" for p in nvidia.__path__ for sub in ("cu13", "cu12", "cuda_nvcc")]


def _toolkit_dirs() -> list[Path]:
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return [Path(h) / "bin" for h in homes if h]


@functools.lru_cache(maxsize=None)
def find(tool: str) -> str:
    """The path of `tool`; UserError saying how to get it when absent."""
    wheel_first = tool in ("cuobjdump", "nvdisasm")
    dirs = (_wheel_dirs() if wheel_first else []) + _toolkit_dirs()
    on_path = shutil.which(tool)
    if on_path and not wheel_first:
        return on_path
    for d in dirs:
        candidate = d / tool
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    if on_path:
        return on_path
    raise UserError(f"{tool} not found: {_HOWTO.get(tool, 'install the CUDA toolkit')}")


def available(tool: str) -> bool:
    try:
        find(tool)
    except UserError:
        return False
    return True


def run(
    tool: str, args: list[str], timeout_s: float = TIMEOUT_S, what: str = "", cwd=None
) -> subprocess.CompletedProcess:
    """Runs `tool args`; a non-zero exit becomes UserError with the tool's first error line."""
    exe = find(tool)
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise UserError(f"{tool} timed out after {timeout_s:g} s{' on ' + what if what else ''}") from None
    if proc.returncode != 0:
        raise UserError(
            f"{tool} failed{' on ' + what if what else ''}: {first_error(proc.stderr or proc.stdout)}"
        )
    return proc


def first_error(text: str) -> str:
    """The most telling line of a tool's complaint (an `error`/`fatal` line, else the first line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() or "fatal" in ln.lower():
            return ln
    return lines[0] if lines else "(no message)"
