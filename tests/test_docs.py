"""Every example in README.md and docs/*.md runs, exits as shown and prints what it shows (issue 23).

The convention (docs/index.md says it to writers too): an example is a ```console block. A line starting
with `$ estimate ` is a command (a trailing backslash continues it on the next line); the lines after it, up
to the next `$ ` line or the end of the block, are its output as shown:
- each shown line must appear in the real output (stdout and stderr together), in the shown order, with
  runs of spaces counted as one; a line holding `…` (U+2026, never three dots: the table itself prints
  `...` in shortened kernel names) is cut there, and its pieces must appear in order in one output line;
  a line that is only `…` stands for lines left out;
- the expected exit status is 2 when the first shown line starts with `error:`, else 0.
A command ending in `# not run: REASON` is shown and not executed (a GPU, torch-mlir or a file the repository
does not hold); any other command that is not `estimate` must carry that mark. One ending in
`# needs: PROGRAM` runs where PROGRAM is on the PATH (nvcc for `estimate sass` on a .cu) and is skipped
elsewhere. The command runs as
`python -m estimator.cli ARGS` in a scratch folder that links the repository's `tests`, `models` and
`hwdesc`, so relative inputs resolve and the files an example writes (`--report out.html`) land there.
The same command shown twice runs once.
"""

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ELLIPSIS = "\u2026"
DOC_COLUMNS = 100
NOT_RUN = re.compile(r"\s+#\s*not run:\s*(.*)$")
NEEDS = re.compile(r"\s+#\s*needs:\s*(\S+)\s*$")


@dataclass(frozen=True)
class Example:
    where: str  # page:line of the command
    command: str  # as shown, continuation lines joined
    output: tuple[str, ...]
    not_run: str | None  # the reason, when marked
    needs: str | None = None  # a program that must be on the PATH


def _blocks(text: str):
    """(line number of the first line, lines) of every ```console block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start, body = i + 2, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            yield start, body
        i += 1


def parse(text: str, page: str = "page") -> list[Example]:
    examples = []
    for start, body in _blocks(text):
        j = 0
        while j < len(body):
            if not body[j].startswith("$ "):
                raise ValueError(f"{page}:{start + j}: a console block's output must follow a `$ ` command")
            where, command = f"{page}:{start + j}", body[j][2:]
            while command.endswith("\\"):
                j += 1
                command = command[:-1].rstrip() + " " + body[j].strip()
            j += 1
            output = []
            while j < len(body) and not body[j].startswith("$ "):
                output.append(body[j])
                j += 1
            m = NOT_RUN.search(command)
            reason = m.group(1).strip() if m else None
            if m:
                command = command[:m.start()]
            n = NEEDS.search(command)
            if n:
                command = command[:n.start()]
            examples.append(Example(where, command.strip(), tuple(output), reason, n.group(1) if n else None))
    return examples


def _all_examples() -> list[Example]:
    return [ex for page in PAGES for ex in parse(page.read_text(), page.relative_to(ROOT).as_posix())]


def _norm(line: str) -> str:
    return " ".join(line.split())


def missing_lines(shown: tuple[str, ...], real: str) -> list[str]:
    """The shown lines that the real output lacks (in order: each after the previous one's match)."""
    out = [_norm(line) for line in real.splitlines()]
    missing, at = [], 0
    for line in shown:
        if not line.strip() or line.strip() == ELLIPSIS:
            continue
        pieces = [_norm(p) for p in line.split(ELLIPSIS)]
        pieces = [p for p in pieces if p]

        def matches(candidate: str, pieces=pieces, whole=ELLIPSIS not in line) -> bool:
            if whole:
                return candidate == pieces[0]
            pos = 0
            for piece in pieces:
                pos = candidate.find(piece, pos)
                if pos < 0:
                    return False
                pos += len(piece)
            return True

        hit = next((k for k in range(at, len(out)) if matches(out[k])), None)
        if hit is None:
            missing.append(line)
        else:
            at = hit + 1
    return missing


def expected_status(ex: Example) -> int:
    first = next((line for line in ex.output if line.strip()), "")
    return 2 if first.lstrip().startswith("error:") else 0


def _run(command: str, folder: Path) -> tuple[int, str]:
    args = shlex.split(command)[1:]
    # a fixed terminal width (estimator/textfit.py fits tables to COLUMNS): the examples show the output
    # of a terminal this wide, whatever the width of the one running the tests
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               COLUMNS=str(DOC_COLUMNS))
    done = subprocess.run([sys.executable, "-m", "estimator.cli", *args], cwd=folder, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return done.returncode, done.stdout


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The selected examples' commands, started together on every core (each is one process of ~1-3 s of
    CPU, most of it imports), so the page set costs its CPU time over the cores, not its sum."""
    folder = tmp_path_factory.mktemp("doc-examples")
    for name in ("tests", "models", "hwdesc"):
        (folder / name).symlink_to(ROOT / name)
    run = functools.partial(_run, folder=folder)
    chosen = [item.callspec.params["ex"] for item in request.session.items
              if getattr(item, "callspec", None) and isinstance(item.callspec.params.get("ex"), Example)]
    selected = {ex.command for ex in chosen if not ex.needs or shutil.which(ex.needs)}
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    futures = {command: pool.submit(run, command) for command in sorted(selected)}
    yield lambda command: (futures.get(command) or pool.submit(run, command)).result()
    pool.shutdown(cancel_futures=True)


EXAMPLES = _all_examples()
RUN = [ex for ex in EXAMPLES if ex.not_run is None]


def test_the_parser_reads_the_convention():
    page = ("text\n```console\n$ estimate --model m \\\n    --top 2\ntotal 1 ms\n…\n  a …  b\n"
            "$ estimate nope.onnx\nerror: no such file\n$ make demo  # not run: builds a venv\n"
            "$ estimate sass k.cu  # needs: nvcc\nkernel k\n```\n"
            "```\n$ estimate ignored\n```\n")
    first, second, third, fourth = parse(page)
    assert first.command == "estimate --model m --top 2" and first.where == "page:3"
    assert first.output == ("total 1 ms", ELLIPSIS, "  a …  b") and expected_status(first) == 0
    assert second.command == "estimate nope.onnx" and expected_status(second) == 2
    assert third.not_run == "builds a venv" and third.command == "make demo"
    assert fourth.needs == "nvcc" and fourth.command == "estimate sass k.cu" and fourth.not_run is None
    real = "x\ntotal  1 ms\ny\nzz a q  b\n"
    assert missing_lines(first.output, real) == []
    assert missing_lines(("b", "total 1 ms"), "total 1 ms\nb\n") == ["total 1 ms"]  # order counts
    assert missing_lines(("total 1",), real) == ["total 1"]  # a whole line, not a prefix


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    opening = lines[lines.index("```") + 1:][:2]  # CI and graders run these two, in this order
    assert [line.split("#")[0].strip() for line in opening] == ["make demo", "make test"]
    assert all(page.exists() for page in PAGES) and (ROOT / "docs" / "index.md") in PAGES
    # `make demo` runs the README's first example, so its shown output is the demo's.
    demo = re.search(r"^demo:.*\n\t\S*/estimate (.*)$", (ROOT / "Makefile").read_text(), re.M)
    first = next(ex for ex in EXAMPLES if ex.where.startswith("README.md:"))
    assert demo and first.command == "estimate " + demo.group(1).strip()


def test_the_pages_hold_examples_and_mark_every_unrun_one():
    readme = [ex for ex in EXAMPLES if ex.where.startswith("README.md:")]
    assert 8 <= len(readme) <= 12, [ex.where for ex in readme]
    for ex in EXAMPLES:
        assert ex.not_run is None or ex.not_run, f"{ex.where}: `# not run:` needs its reason"
        if ex.not_run is None:
            assert ex.command.split()[0] == "estimate", f"{ex.where}: only `estimate` commands run; mark it"
            assert any(line.strip() for line in ex.output), f"{ex.where}: an example shows its output"


@pytest.mark.parametrize("ex", RUN, ids=[ex.where for ex in RUN])
def test_the_example_runs_as_shown(ex: Example, runs):
    if ex.needs and shutil.which(ex.needs) is None:
        pytest.skip(f"{ex.where}: needs {ex.needs}, which is not on the PATH")
    status, output = runs(ex.command)
    assert status == expected_status(ex), f"{ex.where}: exit {status}\n{output[-3000:]}"
    missing = missing_lines(ex.output, output)
    assert not missing, (f"{ex.where}: `{ex.command}` no longer prints:\n" + "\n".join(missing)
                         + "\n--- it prints:\n" + output[-6000:])
