"""L2 residency: which of a kernel's input bytes are already in L2 when it starts.

L2 is modelled as an LRU cache of whole tensors. A read of tensor X hits when X plus every distinct
tensor touched (read or written) since X was last touched fits in the capacity (X's LRU stack distance).
A tensor is touched when a kernel reads or writes it. With `warm_inputs`, every graph input (not the
weights) counts as touched just before the first kernel, as in a benchmark that re-runs a kernel on the
same activations (the H100 calibration tables rotate weights, not activations).

Two capacities are used: the whole L2 (`l2_bytes`) for the bound, so that no real run can find more
resident than the bound assumes, and `l2_bytes * efficiency.l2_resident` for the estimate (the part of
L2 a tensor can hold in practice: set-associativity, the two partitions of Hopper's L2, other traffic).
Writes always count at DRAM (a dirty line is written back eventually; in steady state every write
reaches DRAM), so residency only lowers read traffic.

NB: sizes that are still symbolic are never assumed resident (the question is undecidable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from estimator.ir import Graph


@dataclass(frozen=True)
class Residency:
    """Per kernel: bytes of its boundary inputs found in L2, for the estimate and for the bound."""

    resident: dict[str, float]  # input tensor name -> bytes (estimate's capacity)
    resident_bound: dict[str, float]  # input tensor name -> bytes (whole L2)

    @property
    def bytes(self) -> float:
        return float(sum(self.resident.values()))

    @property
    def bytes_bound(self) -> float:
        return float(sum(self.resident_bound.values()))


def _size(graph: Graph, name: str) -> float | None:
    t = graph.tensors.get(name)
    if t is None or t.shape is None or (t.is_const and not t.is_weight):
        return None
    try:
        n = sympy.sympify(t.nbytes)
    except Exception:  # an unsized dtype: never resident
        return None
    return float(n) if n.is_number else None


def stack_hits(accesses: Sequence[tuple[Iterable[str], Iterable[str]]], sizes: dict[str, Any],
               capacity: float, warm: Iterable[str] = ()) -> list[dict[str, Any]]:
    """For each kernel (reads, writes) in order, {tensor read: hit} on an LRU cache of `capacity` bytes,
    `hit` a bool (or a numpy bool array when the sizes are arrays: calibration/tables.py prices thousands
    of shapes at once). `warm` tensors count as touched one after the other, in order, before the first
    kernel (so together they must fit: the last of them is the most recent)."""
    warm = [t for t in warm if t in sizes]
    accesses = [((), (t,)) for t in warm] + list(accesses)
    last: dict[str, int] = {}
    touched: list[list[str]] = []  # per access, the tensors it touched
    hits = []
    for i, (reads, writes) in enumerate(accesses):
        reads, writes = list(reads), list(writes)
        found: dict[str, Any] = {}
        for t in reads:
            if t not in last or t not in sizes:
                continue
            between = {u for kernel in touched[last[t] + 1:i] for u in kernel} - {t}
            hit = sizes[t] + sum(sizes[u] for u in sorted(between)) <= capacity
            if isinstance(hit, np.ndarray) or hit:
                found[t] = hit
        hits.append(found)
        here = list(dict.fromkeys(t for t in (*reads, *writes) if t in sizes))
        touched.append(here)
        for t in here:
            last[t] = i
    return hits[len(warm):]


def resident_bytes(hits: dict[str, Any], sizes: dict[str, Any]) -> Any:
    """Bytes of the reads that hit (a number, or an array with the sizes)."""
    return sum(np.where(h, sizes[t], 0) if isinstance(h, np.ndarray) else sizes[t] for t, h in hits.items())


def warm_list(graph: Graph, warm_inputs: bool | Iterable[str]) -> list[str]:
    """The graph inputs that start resident: every non-weight input (True), none (False), or the named
    ones, in graph-input order."""
    if warm_inputs is False or warm_inputs is None:
        return []
    names = set(graph.inputs) if warm_inputs is True else set(warm_inputs)
    return [t for t in graph.inputs if t in names and not (t in graph.tensors and graph.tensors[t].is_weight)]


def residency(graph: Graph, kernels: Sequence, l2_bytes: float, usable_fraction: float,
              warm_inputs: bool | Iterable[str] = False) -> list[Residency]:
    """Residency of every kernel's boundary inputs, kernels in launch (topological) order.
    Weights are never resident at the start (benchmarks rotate them; a real model streams them)."""
    accesses = []
    sizes: dict[str, float] = {}
    for k in kernels:
        reads, writes = boundary(graph, k)
        for t in (*reads, *writes):
            if t not in sizes:
                s = _size(graph, t)
                if s is not None:
                    sizes[t] = s
        accesses.append((reads, writes))
    warm = warm_list(graph, warm_inputs)
    est = stack_hits(accesses, sizes, l2_bytes * usable_fraction, warm)
    bound = stack_hits(accesses, sizes, l2_bytes, warm)
    return [Residency({t: sizes[t] for t in e}, {t: sizes[t] for t in b})
            for e, b in zip(est, bound, strict=True)]


def boundary(graph: Graph, kernel) -> tuple[list[str], list[str]]:
    """(inputs, outputs) crossing a kernel's boundary: those of its (possibly fused) node."""
    node = graph.node(kernel.name)
    return [t for t in node.inputs if t], [t for t in node.outputs if t]
