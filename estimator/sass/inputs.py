"""Turning what the user gave (.cu, .ptx, .cubin, fatbin, executable / .so) into the cubin(s) for the SM.

- `.cu`: `nvcc -cubin -arch=<sm> -O3 -Xptxas -v` (the ptxas log gives spill bytes per kernel);
- PTX (text with `.version` / `.target`): `ptxas -arch=<sm> -v`;
- a cubin (CUDA ELF): used as is, when its SM runs on the target;
- a saved listing (`cuobjdump -sass`, `nvdisasm` text): read as it is (`source_kind` "listing"); it
  holds the instructions, not the cubin's resource attributes (registers, shared memory, launch bounds);
- a fatbin or a host ELF: `cuobjdump -lelf` lists the embedded cubins, `-xelf` extracts those that run on
  the target (an executable holds one per translation unit); failing that, PTX that the driver would JIT
  for the target is extracted and ptxas'd.
Every input is at most INPUT_BYTES (estimator/input_limits.py); the tools run with tools.run's limits.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from estimator.errors import UserError
from estimator.input_limits import check_size, read_bytes
from estimator.sass import elf, tools
from estimator.sass.limits import runs_on

_FATBIN_MAGIC = b"\x50\xed\x55\xba"
_LIST_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(\S+)$")
_SM_IN_NAME = re.compile(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)$")
_PTXAS_FUNC = re.compile(r"Function properties for (\S+)")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")


@dataclass
class Module:
    """One cubin ready for analysis, with how it was obtained."""

    cubin: Path  # the first (or only) cubin
    source_kind: str  # cu | ptx | cubin | fatbin
    ptxas_spills: dict[str, tuple[int, int]] = field(default_factory=dict)  # kernel -> (store B, load B)
    ptxas_warnings: list[str] = field(default_factory=list)
    more_cubins: list[Path] = field(default_factory=list)  # the other cubins of a fatbin / executable
    launch_smem_bytes: int | None = None  # dynamic shared memory the compiler asks for (Triton metadata)
    launch_tmem_columns: int | None = None  # TMEM columns (Triton metadata, sm_100)

    @property
    def cubins(self) -> list[Path]:
        return [self.cubin, *self.more_cubins]


def load(path: str, sm: str, workdir: str, nvcc_args: tuple[str, ...] = (), triton=None) -> Module:
    """The cubin of `path` for `sm` (e.g. "sm_90a"), written under `workdir` when it must be built.
    `triton`: an estimator.sass.triton_src.TritonSpec for a `.py` Triton source."""
    p = Path(path)
    try:
        check_size(path)  # every input is read whole, by this reader or by the tool it hands it to
        with open(p, "rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a directory, not a file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    if p.suffix in (".cu", ".cuh"):
        return _compile_cu(p, sm, Path(workdir), nvcc_args)
    if p.suffix == ".py" or triton is not None:
        return _compile_triton(p, sm, Path(workdir), triton)
    if elf.is_elf(head) and len(head) > 0x14 and head[0x12] == 190 and head[0x13] == 0:
        return _cubin(p, sm)
    if head.startswith(_FATBIN_MAGIC) or elf.is_elf(head):
        return _from_fatbin(p, sm, Path(workdir))
    text = head.decode("utf-8", "replace")
    if ".version" in text and ".target" in text:
        return _assemble_ptx(p, sm, Path(workdir))
    from estimator.sass.disasm import looks_like_listing

    if looks_like_listing(text):
        return Module(p, "listing")
    raise UserError(f"{path}: not a cubin, fatbin, executable, PTX, .cu file or SASS listing "
                    f"(cuobjdump -sass / nvdisasm output)")


def _cubin(p: Path, sm: str) -> Module:
    module = elf.read(read_bytes(str(p)), str(p))
    have = f"sm_{module.sm_number}"
    if not runs_on(have, sm) and not runs_on(have + "a", sm):
        raise UserError(f"{p}: the cubin is for {have}, which does not run on {sm} (give --arch {have})")
    return Module(p, "cubin")


def _compile_cu(p: Path, sm: str, work: Path, nvcc_args: tuple[str, ...]) -> Module:
    out = work / f"{p.stem}.{sm}.cubin"
    proc = tools.run(
        "nvcc",
        ["-cubin", f"-arch={sm}", "-O3", "-Xptxas", "-v", *nvcc_args, "-o", str(out), str(p)],
        what=str(p),
    )
    return Module(out, "cu", *_ptxas_log(proc.stderr))


def _compile_triton(p: Path, sm: str, work: Path, spec) -> Module:
    if spec is None:
        raise UserError(f"{p}: a Triton source needs --triton-kernel NAME (and --triton-arg per parameter)")
    if p.suffix != ".py":
        raise UserError(f"{p}: --triton-kernel needs a Python source file (.py)")
    from estimator.sass.triton_src import compile_kernel

    build = compile_kernel(p, spec, int(re.sub(r"\D", "", sm)), work)
    return Module(build.cubin, "triton", launch_smem_bytes=build.shared_bytes,
                  launch_tmem_columns=build.tmem_columns)


def _assemble_ptx(p: Path, sm: str, work: Path) -> Module:
    out = work / f"{p.stem}.{sm}.cubin"
    proc = tools.run("ptxas", [f"-arch={sm}", "-v", "-o", str(out), str(p)], what=str(p))
    return Module(out, "ptx", *_ptxas_log(proc.stderr))


def _from_fatbin(p: Path, sm: str, work: Path) -> Module:
    listing = tools.run("cuobjdump", ["-lelf", "-lptx", str(p)], what=str(p)).stdout
    entries = [m.groups() for line in listing.splitlines() if (m := _LIST_RE.match(line.strip()))]
    if not entries:
        raise UserError(f"{p}: holds no CUDA code (no cubin or PTX in its fatbin)")
    have: dict[str, list] = {"ELF": [], "PTX": []}
    for kind, name in entries:
        have[kind].append((name, _SM_IN_NAME.search(name)))
    runnable = [name for name, m in have["ELF"] if m and runs_on(m.group(1), sm)]
    if runnable:
        tools.run("cuobjdump", ["-xelf", ",".join(runnable), str(p.resolve())], what=str(p), cwd=work)
        return Module(work / runnable[0], "fatbin", more_cubins=[work / n for n in runnable[1:]])
    for name, m in have["PTX"]:
        if m and runs_on(m.group(1), sm):
            tools.run("cuobjdump", ["-xptx", name, str(p.resolve())], what=str(p), cwd=work)
            built = _assemble_ptx(work / name, sm, work)
            built.source_kind = "fatbin"
            return built
    found = ", ".join(sorted({m.group(1) for kind in have.values() for _, m in kind if m})) or "none"
    raise UserError(f"{p}: no cubin or PTX for {sm} (it holds: {found})")


def _ptxas_log(text: str) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per kernel (spill store bytes, spill load bytes) and the warning lines of a `ptxas -v` log."""
    spills: dict[str, tuple[int, int]] = {}
    current = None
    for line in text.splitlines():
        if m := _PTXAS_ENTRY.search(line) or _PTXAS_FUNC.search(line):
            current = m.group(1)
        elif (m := _PTXAS_SPILL.search(line)) and current:
            spills[current] = (int(m.group(2)), int(m.group(3)))
    warnings = [ln.strip() for ln in text.splitlines() if "warning" in ln.lower() or "C7508" in ln]
    return spills, warnings


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="estimate-sass-")
