"""Regenerate the command-made tables of a docs page: every `estimate ...` command in a ```text block
directly followed by a `<!-- output -->` ... `<!-- /output -->` pair gets that block replaced with what
the command prints (run from the repository root, as `python -m estimator.cli ...`).

    python -m tools.docs_tables docs/validation.md [--only SUBSTRING]

docs/validation.md's accuracy tables are made this way (`estimate validate ... --markdown`, and the
residuals of `estimate calibrate --no-fit` as text): never typed.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```text\n(estimate [^\n]+)\n```\n+<!-- output -->\n.*?<!-- /output -->", re.S)


def fill(text: str, output_of) -> str:
    """`text` with each command's output block replaced by `output_of(command)` (Markdown as it is, from
    `--markdown`; any other output inside a ```text fence)."""
    def replace(m: re.Match) -> str:
        command = m.group(1)
        out = output_of(command).strip()
        if not command.endswith("--markdown") and not out.startswith("```"):
            out = f"```text\n{out}\n```"
        return f"```text\n{command}\n```\n\n<!-- output -->\n{out}\n<!-- /output -->"

    return BLOCK.sub(replace, text)


def run(command: str) -> str:
    argv = shlex.split(command)[1:]  # `estimate` is `python -m estimator.cli`
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", *argv], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {command}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", type=Path)
    ap.add_argument("--only", default="", help="rerun only the commands containing this text")
    args = ap.parse_args(argv)
    text = args.page.read_text()
    old = {m.group(1): m.group(0) for m in BLOCK.finditer(text)}

    def output_of(command: str) -> str:
        if args.only not in command:  # keep what the page has
            return old[command].split("<!-- output -->\n", 1)[1].rsplit("<!-- /output -->", 1)[0]
        print(f"running {command}", file=sys.stderr, flush=True)
        return run(command)

    args.page.write_text(fill(text, output_of))
    return 0


if __name__ == "__main__":
    sys.exit(main())
