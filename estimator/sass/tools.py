"""Finding and running the CUDA binary utilities: nvcc, ptxas (the toolkit), cuobjdump, nvdisasm (wheels).

Every call has a timeout and turns a missing tool or a tool's own complaint into one UserError line.
cuobjdump and nvdisasm come from the `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm` wheels (installed
under `nvidia/cu13/bin/`), else from PATH or a CUDA toolkit; nvcc and ptxas from PATH, $CUDA_HOME or
/usr/local/cuda.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from estimator.errors import UserError
from estimator.input_limits import TOOL_OUTPUT_BYTES, TOOL_SECONDS

TIMEOUT_S = None  # ESTIMATOR_TOOL_TIMEOUT_S (estimator/input_limits.py), 120 s unless set
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
    tool: str, args: list[str], timeout_s: float | None = TIMEOUT_S, what: str = "", cwd=None
) -> subprocess.CompletedProcess:
    """Runs `tool args` (no shell) within TOOL_SECONDS, its output and the files it writes within
    TOOL_OUTPUT_BYTES each (RLIMIT_FSIZE: the output goes to files, so a listing that would not fit in
    memory never reaches it); a non-zero exit becomes UserError with the tool's first error line."""
    exe = find(tool)
    timeout_s = timeout_s or TOOL_SECONDS.value()
    cap = TOOL_OUTPUT_BYTES.value()
    on = f" on {what}" if what else ""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            code = subprocess.run([exe, *args], stdout=out, stderr=err, timeout=timeout_s, cwd=cwd,
                                  preexec_fn=lambda: _cap(cap, timeout_s)).returncode
        except subprocess.TimeoutExpired:
            raise TOOL_SECONDS.refuse(f"{tool}{on}") from None
        printed = max(os.fstat(out.fileno()).st_size, os.fstat(err.fileno()).st_size)
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and not printed > cap:
            raise TOOL_SECONDS.refuse(f"{tool}{on}", "CPU time")
        if code == -signal.SIGXFSZ or printed > cap:
            raise TOOL_OUTPUT_BYTES.refuse(f"{tool}{on}")
        proc = subprocess.CompletedProcess([exe, *args], code, _text(out), _text(err))
    if proc.returncode != 0:
        raise UserError(
            f"{tool} failed{' on ' + what if what else ''}: {first_error(proc.stderr or proc.stdout)}"
        )
    return proc


def _cap(cap: int, seconds: float) -> None:
    """In the child, before exec: no file (its stdout and stderr files included) past `cap` bytes, and no
    more CPU time than the wall-clock timeout (a tool that forks its own, as nvcc does, caps each)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    cpu = max(1, int(seconds))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _text(f) -> str:
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def first_error(text: str) -> str:
    """The most telling line of a tool's complaint (an `error`/`fatal` line, else the first line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() or "fatal" in ln.lower():
            return ln
    return lines[0] if lines else "(no message)"
