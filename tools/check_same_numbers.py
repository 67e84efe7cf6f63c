"""Check that a change of the estimator changed none of its numbers: run `estimate --json` commands from
two source trees and compare their outputs field by field.

    python -m tools.check_same_numbers --save DIR [--tree PATH]     # outputs of PATH (default: this tree)
    python -m tools.check_same_numbers --against DIR [--tree PATH]  # compare PATH's outputs with DIR's
        [--only NAME,...] [--rel 0] [--list]

The commands: ten hand-picked ones (plain, decode with free dims, bound dims, a sweep, --serve, serving
sweeps), then the matrix of issue 23, every bundled model x {h100-sxm, b200} x {`.dim` a bound point (the
model's defaults with batch=4), `.sweep` a two-point sweep of its sequence dim, `.serve` one --serve point
(decoder models with a -decode variant: once per pair, named after the prefill model, as both names build
the same deployment), `.report` --report at the defaults}: names like `llama-3-8b.b200.report`. --only
takes names or fnmatch patterns (`'llama-3-8b.*'`, `'*.serve'`, `matrix`, `ten`); --list prints them.

A `.report` command compares the JSON it prints and the numbers of the HTML page it writes: every
numeric token of the page once its <style>, <script> and figure <metadata> (the figure's creation date)
and its id / href / clip-path attributes (names) are dropped, split into the text's numbers (cards,
tables, tooltips) and the figures' (inline SVG geometry, which is drawn from the numbers too). Numbers
rather than the whole page, so that a change of wording or styling is not a difference, and tokens
rather than a parse of each table, so that no figure of the page can be missed.

The matrix commands of one model run in one Python process of the tree (`estimator.cli.main.main(argv)`,
as the tests call it), which saves the imports of each command; each of the ten runs in a fresh process
as a user runs it. `--fresh` runs every command in its own process (slower: a check that the in-process
runs print what fresh processes print).

The comparison is exact by default: equal strings (sympy expressions of free dims included), equal
numbers. `--rel R` accepts numbers within a relative difference R (and reports the largest one seen),
for changes that reorder floating-point sums. Exit 0 when everything matches, 1 otherwise (each
differing JSON path is listed, at most 20 per command).
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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

# The matrix: every bundled model (`estimate --list-models`, written out so that both trees run the same
# commands) with its swept dim, and for the decoder pairs the TP of its --serve point: the smallest power
# of two whose GPUs hold the fp8 weights on an 80 GB H100 with room for the KV cache; 1 for the MLA models
# (DeepSeek-V3, Kimi K2), whose TP sharding is refused today ("head_dim differs between Q, K and V"): one
# GPU does not hold them, which the serving figures report (the smallest TP that would fit).
MODELS: dict[str, tuple[str, int | None]] = {
    "bert-base": ("seq=64,512", None),
    "deepseek-v3": ("seq=512,8192", 1),
    "deepseek-v3-decode": ("past_seq=512,16384", None),
    "gpt-oss-120b": ("seq=512,8192", 2),
    "gpt-oss-120b-decode": ("past_seq=512,16384", None),
    "gpt-oss-20b": ("seq=512,8192", 1),
    "gpt-oss-20b-decode": ("past_seq=512,16384", None),
    "gpt2-small": ("seq=128,1024", 1),
    "gpt2-small-decode": ("past_seq=128,1023", None),
    "kimi-k2": ("seq=512,8192", 1),
    "kimi-k2-decode": ("past_seq=512,16384", None),
    "llama-3-70b": ("seq=512,8192", 2),
    "llama-3-70b-decode": ("past_seq=512,16384", None),
    "llama-3-8b": ("seq=512,8192", 1),
    "llama-3-8b-decode": ("past_seq=512,16384", None),
    "llama-3.1-70b": ("seq=512,8192", 2),
    "llama-3.1-70b-decode": ("past_seq=512,16384", None),
    "llama-3.1-8b": ("seq=512,8192", 1),
    "llama-3.1-8b-decode": ("past_seq=512,16384", None),
    "llama-tiny": ("seq=16,128", 1),
    "llama-tiny-decode": ("past_seq=16,127", None),
    "mixtral-8x7b": ("seq=512,8192", 1),
    "mixtral-8x7b-decode": ("past_seq=512,16384", None),
    "qwen3-235b-a22b": ("seq=512,8192", 4),
    "qwen3-235b-a22b-decode": ("past_seq=512,16384", None),
    "qwen3-32b": ("seq=512,8192", 1),
    "qwen3-32b-decode": ("past_seq=512,16384", None),
    "resnet50": ("batch=1,32", None),
}
ARCHS = ("h100-sxm", "b200")
SERVE_POINT = "isl=1024,osl=128,concurrency=8"
REPORT = "{report}"  # replaced by a path in a temporary folder


def matrix() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for model, (sweep, tp) in MODELS.items():
        for arch in ARCHS:
            base = ["--model", model, "--arch", arch]
            out[f"{model}.{arch}.dim"] = [*base, "--dim", "batch=4"]
            out[f"{model}.{arch}.sweep"] = [*base, "--sweep", sweep]
            if tp is not None:
                out[f"{model}.{arch}.serve"] = [*base, "--precision", "fp8", "--tp", str(tp), "--serve",
                                                SERVE_POINT]
            out[f"{model}.{arch}.report"] = [*base, "--report", REPORT]
    return out


ALL: dict[str, list[str]] = {**COMMANDS, **matrix()}

# One process of a tree runs a list of commands through the CLI's main(): argv lists as JSON on stdin,
# one JSON line per command on stdout ({"exit", "stdout", "stderr", "cpu": its CPU seconds}).
DRIVER = r"""
import contextlib, io, json, sys, time
from estimator.cli.main import main
real = sys.stdout
for argv in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        cpu = time.process_time()
        code = main(argv)
        cpu = time.process_time() - cpu
    real.write(json.dumps({"exit": code, "stdout": out.getvalue(), "stderr": err.getvalue(), "cpu": cpu}))
    real.write("\n")
    real.flush()
"""


def run_group(tree: Path, argvs: list[list[str]]) -> list[dict]:
    """Each command's {"exit", "stdout", "stderr"}, all run in one process of `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", DRIVER], cwd=tree, env=env, input=json.dumps(argvs),
                          capture_output=True, text=True)
    done = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    crash = {"exit": f"process died ({proc.returncode})", "stdout": "", "stderr": proc.stderr[-400:]}
    return done + [crash] * (len(argvs) - len(done))


def run_fresh(tree: Path, argv: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", *argv], cwd=tree, env=env,
                          capture_output=True, text=True)
    return {"exit": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


# -- the numbers of an HTML report --------------------------------------------------------------------

_DROP = re.compile(r"<(script|style|metadata)\b.*?</\1>", re.S | re.I)
_NAMES = re.compile(r"""\s(?:id|href|xlink:href|clip-path)=(?:"[^"]*"|'[^']*')""", re.I)
_URL = re.compile(r"url\(#[^)]*\)")
_SVG = re.compile(r"<svg\b.*?</svg>", re.S | re.I)
_NUMBER = re.compile(r"(?<![\w.-])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _tokens(text: str) -> list[list]:
    """[context, number] for every number of `text`; context: up to 24 characters before it."""
    out = []
    for m in _NUMBER.finditer(text):
        ctx = re.sub(r"\s+", " ", text[max(0, m.start() - 24):m.start()])
        value = float(m.group())
        out.append([ctx, int(value) if value.is_integer() and abs(value) < 2**53 else value])
    return out


def html_numbers(page: str) -> dict[str, list[list]]:
    """The numbers of a report page: {"text": [[context, number], ...], "figures": [...]}."""
    page = _URL.sub("", _NAMES.sub("", _DROP.sub(" ", page)))
    figures = "\n".join(_SVG.findall(page))
    return {"text": _tokens(_SVG.sub(" ", page)), "figures": _tokens(figures)}


def collect(tree: Path, names: list[str], fresh: bool) -> Iterator[tuple[str, object]]:
    """(name, what the comparison sees) as each process ends: the JSON printed ({"json", "html"} for a
    report command), or {"exit", "stderr"} when the command failed."""
    groups: dict[str, list[str]] = {}  # a fresh process per key: each of the ten, each model of the matrix
    for name in names:
        key = name if fresh or name in COMMANDS else f"{name.rsplit('.', 2)[0]}.*"  # MODEL.ARCH.MODE
        groups.setdefault(key, []).append(name)
    with tempfile.TemporaryDirectory() as tmp:
        for key, members in groups.items():
            argvs = [[a.replace(REPORT, f"{tmp}/{n}.html") for a in ALL[n]] + ["--json"] for n in members]
            t0 = time.perf_counter()
            if len(members) == 1 and (fresh or key in COMMANDS):
                results = [run_fresh(tree, argvs[0])]
            else:
                results = run_group(tree, argvs)
            cpu = ", ".join(f"{r['cpu']:.1f}" for r in results if "cpu" in r)
            print(f"  ({key}: {len(members)} command(s), {time.perf_counter() - t0:.1f} s"
                  f"{'; CPU s of each: ' + cpu if cpu else ''})", file=sys.stderr)
            for name, res in zip(members, results, strict=True):
                if res["exit"] != 0:
                    yield name, {"exit": res["exit"], "stderr": res["stderr"].strip()[-400:]}
                    continue
                doc = json.loads(res["stdout"])
                page = Path(f"{tmp}/{name}.html")
                yield name, {"json": doc, "html": html_numbers(page.read_text())} if REPORT in ALL[name] \
                    else doc


# -- the comparison -----------------------------------------------------------------------------------

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


def html_differences(a: dict, b: dict, rel: float, out: list[str], worst: list[float]) -> None:
    """The report page's numbers: pairwise when the pages have as many, else the changed runs."""
    for part in ("text", "figures"):
        x, y = a.get(part, []), b.get(part, [])
        if len(x) == len(y):
            for i, ((cx, vx), (cy, vy)) in enumerate(zip(x, y, strict=True)):
                sub: list[str] = []
                differences(vx, vy, rel, "", sub, worst)
                if sub or cx != cy:
                    out.append(f"/html/{part}[{i}]: {cx!r} {vx!r} before, {cy!r} {vy!r} after")
            continue
        out.append(f"/html/{part}: {len(x)} numbers before, {len(y)} after")
        sm = difflib.SequenceMatcher(None, [f"{c}{v}" for c, v in x], [f"{c}{v}" for c, v in y],
                                     autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag != "equal":
                out.append(f"/html/{part}[{i1}:{i2}] -> [{j1}:{j2}] {tag}: {x[i1:i2][:3]} before, "
                           f"{y[j1:j2][:3]} after")


def compare(before: object, after: object, rel: float) -> tuple[list[str], float]:
    diffs: list[str] = []
    worst = [0.0]
    if isinstance(before, dict) and isinstance(after, dict) and "html" in before and "html" in after:
        differences(before["json"], after["json"], rel, "/json", diffs, worst)
        html_differences(before["html"], after["html"], rel, diffs, worst)
    else:
        differences(before, after, rel, "", diffs, worst)
    return diffs, worst[0]


def select(only: str | None) -> list[str]:
    if not only:
        return list(ALL)
    names: list[str] = []
    for pat in (p.strip() for p in only.split(",") if p.strip()):
        found = (list(COMMANDS) if pat == "ten" else [n for n in ALL if n not in COMMANDS] if pat == "matrix"
                 else [n for n in ALL if fnmatch.fnmatchcase(n, pat)])
        if not found:
            raise SystemExit(f"error: --only {pat!r} names no command; see --list")
        names += [n for n in found if n not in names]
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, metavar="DIR")
    mode.add_argument("--against", type=Path, metavar="DIR")
    mode.add_argument("--list", action="store_true", help="print the command names and exit")
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--only", help="comma list of command names or fnmatch patterns (default: all)")
    ap.add_argument("--rel", type=float, default=0.0)
    ap.add_argument("--fresh", action="store_true", help="every command in its own process")
    args = ap.parse_args()
    names = select(args.only)
    if args.list:
        print("\n".join(f"{n}: estimate {' '.join(ALL[n])} --json" for n in names))
        return 0
    if args.against:
        missing = [n for n in names if not (args.against / f"{n}.json").exists()]
        if missing:
            print(f"error: {args.against} has no saved output of {', '.join(missing[:5])}"
                  f"{' ...' if len(missing) > 5 else ''}; --save it first or narrow --only", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    bad = 0
    for name, got in collect(args.tree.resolve(), names, args.fresh):
        if args.save:  # each file as its process ends: an interrupted run keeps what it saved
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.json").write_text(json.dumps(got, indent=1, sort_keys=True))
            failed = isinstance(got, dict) and "exit" in got
            print(f"{name}: saved{' (the command failed: ' + str(got['exit']) + ')' if failed else ''}",
                  flush=True)
            continue
        before = json.loads((args.against / f"{name}.json").read_text())
        diffs, worst = compare(before, got, args.rel)
        bad += bool(diffs)
        status = "same" if not diffs else f"{len(diffs)} difference(s)"
        print(f"{name}: {status} (largest relative difference of a number: {worst:.3g})", flush=True)
        for d in diffs[:20]:
            print(f"  {d}")
    print(f"{len(names)} command(s) in {time.perf_counter() - t0:.0f} s"
          + ("" if args.save else f"; {bad} with differences"), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
