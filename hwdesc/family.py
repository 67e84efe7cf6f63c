"""Family files (hwdesc/families/<family>.yaml): the fitted constants every GPU of one family shares.

    schema_version: 1
    family: blackwell                        # = the file stem, and the SKU files' `family:`
    inherits:                                # optional: no fit of this family's own (yet)
      family: hopper                         #   every constant not given below is hopper's ...
      except: [block_scale_oob_s, ...]       #   ... but these
      source: "H100 fit, not refitted for this family"
    collectives: {source, fitted_on?, command?, nccl, nvls, custom, ...}   # absent: the inherited ones
    efficiency:                              # the family's own constants (override inherited ones)
      tensor: {value, source, fitted_on?, command?, confidence?, note?}

A fitted constant names its table (`fitted_on`) and the command that fits and writes it (`command`),
both or neither; one without them says in its `source` what it is (assumed, an engineering figure).

A SKU file names its family and holds its datasheet figures only: `merge` puts the family's
`efficiency` and `collectives` (under the SKU's `interconnect`) into the SKU's parsed mapping before the
schema validates it, so every `hw.efficiency[...]` reader sees the family's values, and refuses a SKU
file that gives any of them itself. A user's own GPU file (not a bundled one) may replace single
constants in an explicit `efficiency_overrides:` block, e.g. with its own `estimate calibrate` fit;
the collectives are not overridable (a user fitting them has the family file to edit). The `cpu`
family (a host measured by estimator/truth/host.py) has no family file: a host descriptor is its own
fit and gives its `efficiency:` itself. This module does no file IO (hwdesc/loader.py reads the files).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hwdesc.interconnect import GROUP as INTERCONNECT
from hwdesc.interconnect import parse_collectives
from hwdesc.schema import (
    BLOCK_KERNEL_KEYS,
    CPU_FAMILY,
    EFFICIENCY_KEYS,
    FIGURE_KEYS,
    MLA_MOE_KEYS,
    OPTIONAL_EFFICIENCY_KEYS,
    OWN_KEYS,
    SCHEMA_VERSION,
    TILE_EFFICIENCY_KEYS,
    HwdescError,
    Validator,
    check_efficiency_ranges,
)

FAMILIES_FOLDER = "families"
OVERRIDES = "efficiency_overrides"
FIT_KEYS = ("fitted_on", "command")  # a fit's provenance, family files only
EFFICIENCY_ALLOWED = (*EFFICIENCY_KEYS, *OPTIONAL_EFFICIENCY_KEYS, *TILE_EFFICIENCY_KEYS, *BLOCK_KERNEL_KEYS,
                      *OWN_KEYS, *MLA_MOE_KEYS)
_TOP_KEYS = frozenset({"schema_version", "family", "inherits", "collectives", "efficiency"})
_INHERITS_KEYS = frozenset({"family", "except", "source"})


class MissingFamilyError(HwdescError):
    """A descriptor names a family that has no family file."""


@dataclass(frozen=True)
class Family:
    """One family file, inheritance resolved: figure nodes as the file (or its parent) gives them."""

    name: str
    path: str  # as shown in messages: hwdesc/families/<name>.yaml
    efficiency: Mapping[str, Mapping[str, Any]]  # key -> {value, source, fitted_on?, command?, ...}
    collectives: Mapping[str, Any] | None  # the `interconnect.collectives` node; None: the family has none
    inherits: str | None = None  # the family whose constants this one carries where it has none


def parse(raw: Any, path: str, name: str, parent: Callable[[str], Family]) -> Family:
    """Checks one parsed family file named `name`; `parent(family)` gives an inherited family."""
    v = Validator(path)
    raw = v.mapping(raw, "")
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise v.fail(unknown[0], f"unknown key in a family file (allowed: {', '.join(sorted(_TOP_KEYS))})")
    if raw.get("schema_version") != SCHEMA_VERSION or isinstance(raw.get("schema_version"), bool):
        raise v.fail("schema_version", f"must be {SCHEMA_VERSION}, got {raw.get('schema_version')!r}")
    if raw.get("family") != name:
        raise v.fail("family", f"must equal the file stem {name!r}, got {raw.get('family')!r}")
    own = _efficiency(v, raw.get("efficiency", {}), "efficiency")
    collectives = _collectives(v, raw["collectives"]) if raw.get("collectives") is not None else None
    efficiency, inherited_from = dict(own), None
    if "inherits" in raw:
        base, carried, why = _inherited(v, raw["inherits"], name, parent)
        efficiency, inherited_from = {**carried, **own}, base.name
        if collectives is None and base.collectives is not None:
            source = _carried(why, base.collectives["source"], base)
            collectives = MappingProxyType({**base.collectives, "source": source})
    missing = [k for k in EFFICIENCY_KEYS if k not in efficiency]
    if missing:
        raise v.fail(f"efficiency.{missing[0]}", "missing (every family gives it, or inherits it)")
    return Family(name, path, MappingProxyType(efficiency), collectives, inherited_from)


def _efficiency(v: Validator, node: Any, key: str) -> dict[str, Mapping[str, Any]]:
    node = v.mapping(node, key)
    values = {}
    for sub, fig in node.items():
        where = f"{key}.{sub}"
        if sub not in EFFICIENCY_ALLOWED:
            raise v.fail(where, f"unknown key (allowed: {', '.join(sorted(EFFICIENCY_ALLOWED))})")
        fig = v.mapping(fig, where)
        unknown = sorted(set(fig) - FIGURE_KEYS - set(FIT_KEYS))
        if unknown:
            allowed = ", ".join(sorted((*FIGURE_KEYS, *FIT_KEYS)))
            raise v.fail(f"{where}.{unknown[0]}", f"unknown key (allowed: {allowed})")
        _provenance(v, fig, where)
        values[sub] = v.figure(_datasheet_figure(fig), where)
    check_efficiency_ranges(v, values, key)
    return {sub: MappingProxyType(dict(fig)) for sub, fig in node.items()}


def _provenance(v: Validator, node: Mapping[str, Any], key: str) -> None:
    """`fitted_on` and `command`: both non-empty strings, or neither."""
    given = [k for k in FIT_KEYS if k in node]
    if given and len(given) != len(FIT_KEYS):
        other = next(k for k in FIT_KEYS if k not in given)
        raise v.fail(f"{key}.{other}", f"missing: a fitted constant names both {' and '.join(FIT_KEYS)}")
    for k in given:
        if not isinstance(node[k], str) or not node[k].strip():
            raise v.fail(f"{key}.{k}", f"must be a non-empty string, got {node[k]!r}")


def _datasheet_figure(fig: Mapping[str, Any]) -> dict[str, Any]:
    """The figure without its fit provenance: what a descriptor's `{value, source, ...}` holds."""
    return {k: fig[k] for k in fig if k not in FIT_KEYS}


def _collectives(v: Validator, node: Any) -> Mapping[str, Any]:
    node = v.mapping(node, "collectives")
    _provenance(v, node, "collectives")
    plain = {k: node[k] for k in node if k not in FIT_KEYS}
    parse_collectives(v.fail, plain, "collectives")
    return MappingProxyType(plain)


def _inherited(v: Validator, node: Any, name: str, parent: Callable[[str], Family]
               ) -> tuple[Family, dict[str, Mapping[str, Any]], str]:
    """The parent family, the constants carried from it (`except` left out) and why they are."""
    node = v.mapping(node, "inherits")
    unknown = sorted(set(node) - _INHERITS_KEYS)
    if unknown:
        raise v.fail(f"inherits.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(_INHERITS_KEYS))})")
    base_name = node.get("family")
    if not isinstance(base_name, str) or not base_name.strip() or base_name == name:
        raise v.fail("inherits.family", f"must name another family file, got {base_name!r}")
    why = node.get("source")
    if not isinstance(why, str) or not why.strip():
        raise v.fail("inherits.source", "must say why the constants are inherited (a non-empty string)")
    try:
        base = parent(base_name)
    except MissingFamilyError as e:
        raise v.fail("inherits.family", str(e)) from None
    skip = node.get("except", [])
    if not isinstance(skip, list) or not all(isinstance(k, str) for k in skip):
        raise v.fail("inherits.except", f"must be a list of efficiency keys, got {skip!r}")
    for k in skip:
        if k not in base.efficiency:
            raise v.fail("inherits.except", f"{k!r} is not a constant of {base.path}")
    carried = {k: MappingProxyType({**fig, "source": _carried(why, fig["source"], base)})
               for k, fig in base.efficiency.items() if k not in skip}
    return base, carried, why


def _carried(why: str, source: str, base: Family) -> str:
    """The source of an inherited constant: why, then where it came from."""
    return f"{why}: {source} ({base.path})"


def merge(raw: Any, path: str, family_of: Callable[[str], Family], bundled: bool) -> Any:
    """The SKU mapping `raw` with its family's constants put in, ready for `schema.validate`.

    Refuses a SKU file that gives a family constant itself, and a family without a family file
    (`family_of` raises for it); a non-mapping or a cpu host descriptor is returned as it is.
    """
    if not isinstance(raw, Mapping):
        return raw
    v = Validator(path)
    name = raw.get("family")
    if not isinstance(name, str) or not name.strip():
        raise v.fail("family", f"missing: every descriptor names its family, got {name!r}")
    if name == CPU_FAMILY:
        if OVERRIDES in raw:
            raise v.fail(OVERRIDES, "a host descriptor (family cpu) gives its measured constants under "
                                    "`efficiency:` itself")
        return raw
    try:
        family = family_of(name)
    except MissingFamilyError as e:
        raise v.fail("family", str(e)) from None
    _refuse_family_constants(v, raw, family, bundled)
    merged = {k: val for k, val in raw.items() if k != OVERRIDES}
    efficiency = {k: _datasheet_figure(fig) for k, fig in family.efficiency.items()}
    if OVERRIDES in raw:
        if bundled:
            raise v.fail(OVERRIDES, f"a bundled SKU takes its family's constants as they are; a refit goes "
                                    f"to {family.path}")
        efficiency.update(_overrides(v, raw[OVERRIDES]))
    merged["efficiency"] = efficiency
    if isinstance(raw.get(INTERCONNECT), Mapping) and family.collectives is not None:
        merged[INTERCONNECT] = {**raw[INTERCONNECT], "collectives": family.collectives}
    return merged


def _refuse_family_constants(v: Validator, raw: Mapping[str, Any], family: Family, bundled: bool) -> None:
    how = "remove it here" if bundled else f"remove it here, or give your own value under `{OVERRIDES}:`"
    if "efficiency" in raw:
        node = raw["efficiency"]
        keys = list(node) if isinstance(node, Mapping) else []
        repeated = [k for k in keys if k in family.efficiency]
        key = f"efficiency.{(repeated or keys)[0]}" if keys else "efficiency"
        raise v.fail(key, f"repeats a family constant: the efficiency constants of a {family.name} GPU live "
                          f"in {family.path}, a SKU file holds only its datasheet figures ({how})")
    link = raw.get(INTERCONNECT)
    if isinstance(link, Mapping) and "collectives" in link:
        raise v.fail(f"{INTERCONNECT}.collectives",
                     f"repeats a family constant: the fitted collective constants of a {family.name} GPU "
                     f"live in {family.path} (remove them here; they are not overridable per GPU)")


def _overrides(v: Validator, node: Any) -> dict[str, Mapping[str, Any]]:
    node = v.mapping(node, OVERRIDES)
    values = {}
    for sub, fig in node.items():
        if sub not in EFFICIENCY_ALLOWED:
            allowed = ", ".join(sorted(EFFICIENCY_ALLOWED))
            raise v.fail(f"{OVERRIDES}.{sub}", f"unknown key (allowed: {allowed})")
        values[sub] = v.figure(fig, f"{OVERRIDES}.{sub}")
    check_efficiency_ranges(v, values, OVERRIDES)
    return {sub: node[sub] for sub in node}

