"""`estimate calibrate --write`: the fitted efficiency constants into the GPU descriptors' `efficiency`.

NB: this writes every bundled hwdesc/*.yaml (or one family's) in place, as tools/calibrate.py did; the
per-family constants files (issue 23, item 5) will move the target, not the values.
"""

from __future__ import annotations

import re
from pathlib import Path

import hwdesc

SOURCE = "estimate calibrate, fitted on the H100 SXM tables; the same on every GPU"


def source_line(family: str | None) -> str:
    """The `source:` of a written constant: where it was fitted and where it is carried."""
    if family is None:
        return SOURCE
    return SOURCE.replace("every GPU", f"every {family} GPU (written to that family only)")


def write_descriptors(consts: dict, directory: Path | None = None, family: str | None = None) -> list[str]:
    """Set `efficiency.<key>` to {value, source} in every GPU descriptor of `directory` (default: the
    bundled ones), or only in those of `family`; the whole entry is replaced: value, source, confidence
    and note lines."""
    done = []
    for path in sorted((directory or hwdesc.bundled_dir()).glob("*.yaml")):
        text = path.read_text()
        if "\nefficiency:\n" not in text:
            continue
        if family is not None and not re.search(rf"(?m)^family: {re.escape(family)}\s*$", text):
            continue
        head, _, block = text.partition("\nefficiency:\n")
        for key, value in consts.items():
            entry = f"  {key}:\n    value: {value:.3g}\n    source: \"{source_line(family)}\"\n"
            found = re.search(rf"(?m)^  {key}:\n(?:    .*\n|      .*\n)*", block)
            if found:
                block = block[:found.start()] + entry + block[found.end():]
            else:
                block = block.rstrip("\n") + "\n" + entry
        path.write_text(head + "\nefficiency:\n" + block)
        done.append(path.name)
    return done
