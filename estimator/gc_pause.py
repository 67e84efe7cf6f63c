"""Python's cyclic garbage collector paused around the phases that allocate much and free little.

The collector runs when allocations outnumber deallocations by a threshold, and each full pass walks
every live container object. Start-up (importing sympy, onnx and networkx; building the IR) and pricing
(sympy nodes by the hundred thousand, most of them kept in the Result) allocate far more than they free,
so the collector runs pass after pass over a growing heap and finds little: expression trees, protos and
modules hold few reference cycles and are freed by reference counting. Measured on tools/
bench_unknown_dims.py's graphs: about a third of the CPU time of pricing 2,000 kernels with dims of
their own, no cyclic garbage found after it (~15,000 small objects with named dims); about 0.1 s of
`estimate --model llama-3-8b`'s start-up.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_gc_paused(freeze: bool = False) -> Iterator[None]:
    """The cyclic collector paused for the block, and restored as it was after (a caller's own pause is
    kept). NB: a cycle made meanwhile waits for the collector's first pass after the block; long-running
    modes (sweeps, serving) pause only inside each estimate(), never across their loops.

    With `freeze`, what is alive when the block ends moves to the collector's permanent generation
    (gc.freeze) before it is enabled again. Objects made while the collector is paused all stay in its
    youngest generation, so without it the first young pass after the block walks the whole heap the
    block built: about 55 ms after the CLI's start-up block (imports, descriptor, IR of llama-3-8b),
    measured with gc.callbacks. Frozen objects are still freed by reference counting. NB: for blocks whose
    objects live until the process ends (modules, the one graph a CLI run prices): a reference cycle
    among them is never collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()
