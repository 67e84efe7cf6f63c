"""Check that a change of the estimator's speed changed none of its numbers: run a fixed set of `estimate
--json` commands (plain, decode with free dims, bound dims, a sweep, --serve, a serving sweep) from two
source trees and compare their JSON outputs field by field.

    python -m tools.check_same_numbers --save DIR [--tree PATH]     # outputs of PATH (default: this tree)
    python -m tools.check_same_numbers --against DIR [--tree PATH]  # compare PATH's outputs with DIR's
        [--only NAME,...] [--rel 0]

The comparison is exact by default: equal strings (sympy expressions of free dims included), equal
numbers. `--rel R` accepts numbers within a relative difference R (and reports the largest one seen),
for changes that reorder floating-point sums. Exit 0 when everything matches, 1 otherwise (each
differing JSON path is listed, at most 20 per command).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVE = ["--model", "llama-3.1-70b", "--arch", "h100-sxm", "--precision", "fp8"]
COMMANDS: dict[str, list[str]] = {
    "llama-3-8b": ["--model", "llama-3-8b"],
    "llama-3-8b-b200-dims": ["--model", "llama-3-8b", "--arch", "b200", "--dim", "batch=4", "--dim",
                             "seq=2048"],
    "llama-3-8b-decode": ["--model", "llama-3-8b-decode"],
    "llama-3-8b-decode-dims": ["--model", "llama-3-8b-decode", "--dim", "batch=16", "--dim",
                               "past_seq=3000"],
    "llama-3-8b-decode-roofline": ["--model", "llama-3-8b-decode", "--roofline", "--dim", "batch=16"],
    "deepseek-v3-decode": ["--model", "deepseek-v3-decode", "--dim", "batch=64"],
    "sweep": ["--model", "llama-3-8b", "--sweep", "seq=128:8192:x4", "--sweep", "batch=1,8"],
    "serve": [*SERVE, "--tp", "4", "--serve", "isl=2048,osl=256,concurrency=32"],
    "serve-sweep": [*SERVE, "--tp", "2,8", "--serve", "isl=1024,osl=1024,concurrency=8", "--sweep",
                    "concurrency=1,16,128"],
    "serve-sweep-roofline": [*SERVE, "--tp", "1,4", "--roofline", "--serve",
                             "isl=1024,osl=512,concurrency=8", "--sweep", "concurrency=2,64"],
}


def run(tree: Path, argv: list[str]) -> object:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", *argv, "--json"], cwd=tree, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"exit": proc.returncode, "stderr": proc.stderr.strip()[-400:]}
    return json.loads(proc.stdout)


def differences(a: object, b: object, rel: float, path: str, out: list[str], worst: list[float]) -> None:
    """Append to `out` every JSON path where `a` and `b` differ (numbers within `rel` are equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                differences(a[k], b[k], rel, f"{path}/{k}", out, worst)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            differences(x, y, rel, f"{path}[{i}]", out, worst)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if a != b:
            d = abs(a - b) / max(abs(a), abs(b))
            worst[0] = max(worst[0], d)
            if d > rel:
                out.append(f"{path}: {a!r} before, {b!r} after (relative {d:.3g})")
    elif a != b:
        out.append(f"{path}: {str(a)[:120]!r} before, {str(b)[:120]!r} after")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, metavar="DIR")
    mode.add_argument("--against", type=Path, metavar="DIR")
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--only", help="comma list of command names (default: all)")
    ap.add_argument("--rel", type=float, default=0.0)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(COMMANDS)
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        print(f"error: unknown command name(s) {', '.join(unknown)}; known: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    bad = 0
    for name in names:
        got = run(args.tree.resolve(), COMMANDS[name])
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.json").write_text(json.dumps(got, indent=1, sort_keys=True))
            print(f"{name}: saved")
            continue
        before = json.loads((args.against / f"{name}.json").read_text())
        diffs: list[str] = []
        worst = [0.0]
        differences(before, got, args.rel, "", diffs, worst)
        bad += bool(diffs)
        status = "same" if not diffs else f"{len(diffs)} difference(s)"
        print(f"{name}: {status} (largest relative difference of a number: {worst[0]:.3g})")
        for d in diffs[:20]:
            print(f"  {d}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
