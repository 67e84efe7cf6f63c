"""The CLI's start-up block freezes what it built (estimator/gc_pause.py, freeze=True): the imports and the
IR move to the collector's permanent generation, so the first young pass after the block does not walk them.
Run in a subprocess: freezing the test process's own heap would outlive the test."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import gc, sys
from estimator.gc_pause import cyclic_gc_paused

before = gc.get_freeze_count()
with cyclic_gc_paused():
    plain = [[i] for i in range(1000)]
after_plain = gc.get_freeze_count()
with cyclic_gc_paused(freeze=True):
    kept = [[i] for i in range(1000)]
after_freeze = gc.get_freeze_count()
print(before, after_plain, after_freeze, gc.isenabled())

from estimator.cli.main import main
import contextlib, io
frozen = gc.get_freeze_count()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["--model", "llama-tiny"])
print(code, gc.get_freeze_count() - frozen, gc.isenabled())
"""


def test_freeze_moves_the_blocks_objects_to_the_permanent_generation():
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.strip().splitlines()[-2:]
    before, after_plain, after_freeze, enabled = first.split()
    assert int(after_plain) == int(before)  # a plain pause freezes nothing
    # 1,001 lists made in the frozen block (the outer one and 1,000 of one element), all still alive
    assert int(after_freeze) - int(after_plain) >= 1001
    assert enabled == "True"
    code, grown, enabled = second.split()
    # the CLI froze its start-up: at least the modules it imported (sympy alone has hundreds of objects)
    assert code == "0" and int(grown) > 10_000 and enabled == "True"
