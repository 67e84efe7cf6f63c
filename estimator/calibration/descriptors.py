"""`estimate calibrate --write`: the fitted efficiency constants into the fitted GPU's family file,
hwdesc/families/<family>.yaml (every SKU naming that family reads them, and so does every family that
inherits them: hwdesc/family.py)."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import hwdesc
from estimator.errors import UserError

ROOT = Path(__file__).resolve().parents[2]  # the repository root: paths written into files are relative to it
SOURCE = "estimate calibrate, a Nelder-Mead fit on the tables in fitted_on"


def source_line(family: str) -> str:
    """The `source:` of a written constant: how it was fitted and who reads it."""
    return f"{SOURCE}; read by every {family} GPU and by the families inheriting it (hwdesc/family.py)"


def tables_of(data: Path, *names: str, rows: str = "") -> str:
    """The `fitted_on:` of a written constant: the tables, as paths from the repository root."""
    folder = os.path.relpath(Path(data).resolve(), ROOT)
    text = ", ".join(f"{folder}/{n}" for n in names)
    return f"{text} ({rows})" if rows else text


def running_command() -> str:
    """The running command line, its paths from the repository root (no machine path in a file)."""
    argv = [os.path.relpath(a, ROOT) if os.path.isabs(a) and os.path.exists(a) else a for a in sys.argv[1:]]
    return "estimate " + shlex.join(argv)


def yaml_number(value: float) -> str:
    """3 significant digits, as YAML 1.1 readers parse a number (`2.0e-06`, not `2e-06`)."""
    number = f"{value:.3g}"
    if "e" in number and "." not in number.split("e")[0]:
        number = number.replace("e", ".0e", 1)
    return number


def write_descriptors(consts: dict, directory: Path | None = None, *, family: str, fitted_on: str,
                      command: str | None = None) -> list[str]:
    """Set `efficiency.<key>` to {value, source, fitted_on, command} in the family file of the fitted
    GPU's `family` (`families/<family>.yaml` under `directory`, default the bundled hwdesc/); a family
    with a value of its own, or one listing the key under `inherits.except`, keeps its own. The whole
    entry is replaced: value, source, fitted_on, command, confidence and note lines. `command` defaults
    to the running command line. Returns the names of the files written."""
    path = (directory or hwdesc.bundled_dir()) / "families" / f"{family}.yaml"
    if not path.is_file():
        raise UserError(f"--write: no family file {path} for the fitted GPU's family {family!r}")
    command = running_command() if command is None else command
    text = path.read_text()
    head, sep, rest = text.partition("\nefficiency:\n")
    if not sep:  # a family inheriting every constant so far: its first own ones
        head, sep, rest = text.rstrip("\n") + "\n", "\nefficiency:\n", ""
    end = re.search(r"(?m)^\S", rest)  # the block ends at the next top-level key
    block, tail = (rest[:end.start()], rest[end.start():]) if end else (rest, "")
    for key, value in consts.items():
        entry = (f"  {key}:\n    value: {yaml_number(value)}\n    source: \"{source_line(family)}\"\n"
                 f"    fitted_on: \"{fitted_on}\"\n    command: \"{command}\"\n")
        found = re.search(rf"(?m)^  {key}:\n(?:    .*\n)*", block)
        if found:
            block = block[:found.start()] + entry + block[found.end():]
        else:
            block = block.rstrip("\n") + "\n" + entry
    path.write_text(head + sep + block.strip("\n") + "\n" + ("\n" + tail if tail else ""))
    return [f"families/{path.name}"]
