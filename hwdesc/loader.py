"""Finds and reads hardware descriptors: a bundled SKU by name or alias, or a user's YAML by path.

A SKU file names its family; the family's fitted constants (hwdesc/families/<family>.yaml, see
hwdesc/family.py) are merged into it here, before the schema validates the whole.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import yaml

from hwdesc.family import FAMILIES_FOLDER, Family, MissingFamilyError, merge, parse
from hwdesc.schema import CPU_FAMILY, HardwareDescriptor, HwdescError, validate

ALIASES = {"hopper": "h100-sxm", "blackwell": "b200"}


# What a descriptor file may be (hwdesc imports nothing of estimator: the depth mirrors
# estimator/input_limits.py's NESTING, read from the same variable). A descriptor is ~10 KB; the size limit
# is smaller than config.json's because PyYAML's pure-Python parser takes ~2.5 CPU s per MiB.
MAX_BYTES_ENV, MAX_BYTES = "ESTIMATOR_MAX_YAML_BYTES", 1 << 20
MAX_DEPTH_ENV, MAX_DEPTH = "ESTIMATOR_MAX_NESTING", 256


def _limit(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    try:
        n = int(text.replace("_", "")) if text else default
    except ValueError:
        raise HwdescError(f"{env}={text!r}: not a whole number") from None
    if n <= 0:
        raise HwdescError(f"{env}={text!r}: must be > 0")
    return n


class _Refused(yaml.YAMLError):
    """What the loader will not build: an alias, or a node nested past MAX_DEPTH."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats such as `1.98e9`, and refuses anchors' aliases (a
    "billion laughs" file expands them into more values than memory holds) and nesting past MAX_DEPTH
    (the composer recurses once per level).

    PyYAML follows YAML 1.1, where an exponent needs a dot and a sign (`1.98e+9`); without this a
    user's `value: 1.98e9` would arrive as a string.
    """

    _depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise _Refused(f"line {mark.line + 1}: a YAML alias (*name); a descriptor writes every value out")
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                mark = self.peek_event().start_mark
                raise _Refused(f"line {mark.line + 1}: nested deeper than {self._max_depth} levels (set "
                               f"{MAX_DEPTH_ENV} to raise the limit)")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _BundledLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same safe loader for the package's own files (hwdesc/*.yaml, hwdesc/families/*.yaml) with
    libyaml's C parser where PyYAML has it: the same resolver and constructor (Python), ~10x faster
    scanning (the pure-Python parser took most of `estimate --list-archs`, nine files). A user's file
    (`--arch path.yaml`) goes through `_Loader`, whose Python composer refuses aliases and deep nesting."""


for _cls in (_Loader, _BundledLoader):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )


def bundled_dir() -> Path:
    """The folder holding the bundled descriptor YAMLs (this package)."""
    return Path(__file__).resolve().parent


def families_dir() -> Path:
    """The folder holding the bundled family files (the fitted constants per GPU family)."""
    return Path(__file__).resolve().parent / FAMILIES_FOLDER


def list_families() -> list[str]:
    """Bundled GPU family names (each with a family file), sorted; `cpu` hosts have none."""
    return sorted(p.stem for p in families_dir().glob("*.yaml"))


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


def load_file(path: Path, families: Path | None = None) -> HardwareDescriptor:
    """Reads and validates one YAML file, its family's constants merged in (from `families`, default
    the bundled family files); a bundled file's `name` must equal its stem."""
    raw, shown = _read(path)
    bundled = path.resolve().parent == bundled_dir()
    folder = families or families_dir()
    raw = merge(raw, shown, lambda name: load_family(name, folder), bundled)
    return validate(raw, shown, expected_name=path.stem if bundled else None)


def load_family(name: str, folder: Path | None = None) -> Family:
    """One family file by name, its `inherits` resolved; refuses a family without a file. The bundled
    families are read once per process (as the bundled SKUs are); another folder's on every call."""
    folder = (folder or families_dir()).resolve()
    if folder == families_dir():
        return _bundled_family(name)
    return _family(name, folder, ())


@functools.lru_cache(maxsize=None)
def _bundled_family(name: str) -> Family:
    return _family(name, families_dir(), ())


def _family(name: str, folder: Path, seen: tuple[str, ...]) -> Family:
    if name in seen:
        circle = " -> ".join((*seen, name))
        raise HwdescError(f"family {seen[0]!r}: `inherits` goes round in a circle: {circle}")
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise MissingFamilyError(f"{name!r} has no family file {_display_path(path)} (known: {known}; "
                            f"{CPU_FAMILY} for a host measured with `estimate --calibrate-host`)")
    raw, shown = _read(path)
    return parse(raw, shown, name, lambda parent: _family(parent, folder, (*seen, name)))


def _read(path: Path) -> tuple[object, str]:
    """The parsed YAML of `path` and the path as messages show it."""
    shown = _display_path(path)
    most = _limit(MAX_BYTES_ENV, MAX_BYTES)
    try:
        with open(path, "rb") as f:
            data = f.read(most + 1)
        if len(data) > most:
            raise HwdescError(f"{shown}: file size over the limit of {most:,} bytes; set {MAX_BYTES_ENV} "
                              f"to raise it")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise HwdescError(f"{shown}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HwdescError(f"{shown}: cannot read: {' '.join(str(e).split())[:300]}") from None
    loader = None
    own = path.resolve().parent in (bundled_dir(), families_dir())
    try:
        # safe: both are SafeLoader subclasses; the package's own files are read by the C parser
        loader = _BundledLoader(text) if own else _Loader(text)
        loader._max_depth = _limit(MAX_DEPTH_ENV, MAX_DEPTH)
        raw = loader.get_single_data()
    except _Refused as e:
        raise HwdescError(f"{shown}: {e}") from None
    except RecursionError:
        raise HwdescError(f"{shown}: nested too deep for the YAML parser") from None
    except ValueError as e:  # the constructor's int() of a 5000-digit number
        raise HwdescError(f"{shown}: not valid YAML: {str(e)[:80]}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise HwdescError(f"{shown}: not valid YAML{where}: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return raw, shown


def _display_path(path: Path) -> str:
    """`hwdesc/<sku>.yaml` (`hwdesc/families/<family>.yaml`) for bundled files, the path as given
    otherwise."""
    try:
        return path.resolve().relative_to(bundled_dir().parent).as_posix()
    except ValueError:
        return str(path)
