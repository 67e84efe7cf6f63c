"""The tool's version and the version of its JSON contract, stamped on every JSON object it writes.

`tool_version` is the installed distribution's version (pyproject.toml `version`), "unknown" when the
package runs from a tree that was never installed. `schema_version` numbers the JSON contract of
docs/json.md: it changes when a key is renamed or its meaning changes (keys are only ever added within
one schema version, so a reader of version 1 reads every later object of version 1).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

DISTRIBUTION = "gpu-inference-estimator"
SCHEMA_VERSION = 1


@lru_cache(maxsize=1)
def tool_version() -> str:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def stamped(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with `tool_version` and `schema_version` first (a copy; the object's own keys win)."""
    return {"tool_version": tool_version(), "schema_version": SCHEMA_VERSION, **doc}
