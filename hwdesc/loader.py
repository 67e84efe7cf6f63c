"""Finds and reads hardware descriptors: a bundled SKU by name or alias, or a user's YAML by path."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import yaml

from hwdesc.schema import HardwareDescriptor, HwdescError, validate

ALIASES = {"hopper": "h100-sxm", "blackwell": "b200"}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that also reads YAML 1.2 floats such as `1.98e9`.

    PyYAML follows YAML 1.1, where an exponent needs a dot and a sign (`1.98e+9`); without this a
    user's `value: 1.98e9` would arrive as a string. The C parser (libyaml) where PyYAML has it: the
    same resolver and constructor (Python), ~10x faster scanning; the pure-Python parser took most of
    `estimate --list-archs` (nine files).
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def bundled_dir() -> Path:
    """The folder holding the bundled descriptor YAMLs (this package)."""
    return Path(__file__).resolve().parent


def list_archs() -> list[str]:
    """Bundled SKU names, sorted."""
    return sorted(p.stem for p in bundled_dir().glob("*.yaml"))


def _is_path(arch: str) -> bool:
    return "/" in arch or os.sep in arch or arch.lower().endswith((".yaml", ".yml"))


def load(arch: str | os.PathLike[str]) -> HardwareDescriptor:
    """A descriptor by SKU name (case-insensitive), alias (`hopper`, `blackwell`) or path to a YAML file."""
    if not isinstance(arch, (str, os.PathLike)):
        raise HwdescError(f"GPU must be a SKU name or a path, got {type(arch).__name__} {arch!r}")
    text = os.fspath(arch)
    if isinstance(arch, os.PathLike) or _is_path(text):
        return load_file(Path(text))
    key = text.strip().lower()
    key = ALIASES.get(key, key)
    if key not in list_archs():
        aliases = ", ".join(f"{a} -> {n}" for a, n in sorted(ALIASES.items()))
        raise HwdescError(f"unknown GPU {text!r}; known: {', '.join(list_archs())}; aliases: {aliases}")
    return _load_bundled(key)


@functools.lru_cache(maxsize=None)
def _load_bundled(name: str) -> HardwareDescriptor:
    return load_file(bundled_dir() / f"{name}.yaml")


def load_file(path: Path) -> HardwareDescriptor:
    """Reads and validates one YAML file; a bundled file's `name` must equal its stem."""
    shown = _display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HwdescError(f"{shown}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HwdescError(f"{shown}: cannot read: {e}") from None
    try:
        raw = yaml.load(text, Loader=_Loader)  # safe: _Loader is a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise HwdescError(f"{shown}: not valid YAML{where}: {problem}") from None
    bundled = path.resolve().parent == bundled_dir()
    return validate(raw, shown, expected_name=path.stem if bundled else None)


def _display_path(path: Path) -> str:
    """`hwdesc/x.yaml` for bundled files, the path as given otherwise."""
    try:
        return path.resolve().relative_to(bundled_dir().parent).as_posix()
    except ValueError:
        return str(path)
