"""Tile plans and Timings remembered across `estimate()` calls of one process.

Within one call, kernels of equal signature are planned and priced once (estimator/pricing/plan.py,
estimator/estimate.py). A serving sweep (estimator/serve/steps.py) makes many calls whose graphs share
most kernels: the 1- and 2-layer folded graphs of a model hold the same layer kernels, and every TP size
re-prices the same prefill and decode shapes at each batch. Here a plan is kept per (hardware, full node
signature) and a Timing per (hardware, collective options, full signature, plan key), so a kernel met
again in another graph costs a dictionary look-up instead of a sympy pricing.

The rule that makes this exact is the one the per-call caches already rely on: a kernel's plan and
Timing depend only on its signature (op, attributes, input and output shapes and dtypes, fused members'
signatures) and on the hardware (estimator/kernel.py `signature`). The hardware is keyed by identity
and by its efficiency constants (a descriptor is a frozen value; a tool that builds another one with
`dataclasses.replace` gets its own entries). Plans that depend on more than the signature (L2
residency under --warm-inputs, a compiled kernel from --kernel-sass) are never remembered.
NB: memory grows with the distinct kernels priced; past MAX_ENTRIES the memo starts afresh.

Lowered graphs (estimator/estimate.py `lowered_graph`: dims bound, precision re-typed, the pass pipeline
run, kernels lowered) are kept too, the last MAX_LOWERED of them, keyed by the source graph's identity,
the dims, the precision and the pipeline: none of those steps reads the hardware beyond checking that it
has tensor cores for the precision (which a hit checks again), so the GPUs of one family priced side by
side (a 3-GPU sweep's H100 and H200) lower the model once.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

MAX_ENTRIES = 100_000

_plans: dict[Hashable, Any] = {}
_timings: dict[Hashable, Any] = {}
MAX_LOWERED = 8
_lowered: dict[Hashable, tuple[Any, Any]] = {}  # key -> (source graph, kept alive for its id; value)
_alive: dict[int, Any] = {}  # id -> descriptor: an id in a key must not be reused by another object


def hw_key(hw: Any) -> Hashable:
    """The hardware part of a memo key."""
    _alive[id(hw)] = hw
    return id(hw), tuple(sorted((k, repr(v)) for k, v in hw.efficiency.items()))


def _get(store: dict, key: Hashable, make) -> Any:
    hit = store.get(key)
    if hit is None:
        if len(store) >= MAX_ENTRIES:
            store.clear()
        hit = store[key] = make()
    return hit


def plan(key: Hashable, make) -> Any:
    """The plan remembered under `key` (hw_key, full signature), made by `make()` the first time."""
    return _get(_plans, key, make)


def timing(key: Hashable, make) -> Any:
    """The Timing remembered under `key`, made by `make()` the first time."""
    return _get(_timings, key, make)


def lowered(key: Hashable, source: Any, make) -> Any:
    """The lowering remembered under (id(source), *key), made by `make()` the first time."""
    full = (id(source), key)
    hit = _lowered.get(full)
    if hit is not None and hit[0] is source:
        return hit[1]
    value = make()
    if len(_lowered) >= MAX_LOWERED:
        _lowered.pop(next(iter(_lowered)))  # the oldest
    _lowered[full] = (source, value)
    return value


def clear() -> None:
    _lowered.clear()
    _plans.clear()
    _timings.clear()
    _alive.clear()
