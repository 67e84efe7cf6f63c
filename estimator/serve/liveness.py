"""Activation memory by liveness over the lowered kernel order, as an inference compiler's memory
planner computes it.

Counting rule: walking the graph's nodes in the order the kernels launch, a tensor is live from the
node that writes it to the last node that reads it (or the end, for a graph output); the activation
memory is the largest sum of live bytes at any kernel, and that kernel is named.
- Only materialised tensors count: the outputs of kernels (a fused kernel's intermediates stay in
  registers and shared memory) and the graph's non-cache inputs (token ids).
- A view (Reshape, Transpose-free reinterpretations: every node lowering to no kernel) aliases its
  input: reading the view keeps the viewed buffer alive; it allocates nothing.
- Weights, host-side constants and the KV cache (past inputs, present outputs, the tensors a cache
  append writes) are accounted elsewhere (estimator/serve/memory.py) and excluded.
NB: a real planner reuses freed blocks with some fragmentation and may run kernels in place; the peak
of live bytes is the lower end of what it allocates.
With free dims the sizes are expressions; the peak is then the Max of the distinct candidate sums and
the kernel is named only where one candidate is provably the largest.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from estimator.ir import Expr, Graph
from estimator.kernel import Kernel
from estimator.pricing.price import provably_greater


@dataclass(frozen=True)
class Liveness:
    peak_bytes: Expr
    peak_kernel: str | None  # where the peak occurs (None when it depends on free dims)
    live_tensors: tuple[str, ...]  # the tensors live at the peak (when the kernel is known)


def cache_tensors(graph: Graph) -> set[str]:
    """The KV cache: past inputs, present outputs and what cache appends (Concat of a past) write."""
    out: set[str] = set()
    for node in graph.topo_nodes():
        if node.op_type in ("KvAppend", "Concat") and node.inputs and node.inputs[0] in graph.inputs:
            out.add(node.inputs[0])
            out.update(o for o in node.outputs if o)
    return out


def liveness(graph: Graph, kernels: list[Kernel]) -> Liveness:
    """Peak live activation bytes over `kernels` (estimator.kernel.lower's order) of `graph`."""
    kernel_nodes = {k.name for k in kernels}
    excluded = cache_tensors(graph)
    alias: dict[str, str] = {}
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    order = list(graph.topo_nodes())
    position = {}
    pos = 0
    for node in order:  # kernels get successive positions; free nodes share the next kernel's
        position[node.name] = pos
        if node.name in kernel_nodes:
            pos += 1
    last = max(pos - 1, 0)

    def root(t: str) -> str:
        while t in alias:
            t = alias[t]
        return t

    for name in graph.inputs:
        if name not in excluded:
            start[name] = 0
    for node in order:
        p = min(position[node.name], last)
        for t in node.inputs:
            if t and root(t) in start:
                end[root(t)] = max(end.get(root(t), p), p)
        if node.name in kernel_nodes:
            for o in node.outputs:
                if o and o not in excluded:
                    start[o], end[o] = p, p
        elif node.inputs and node.inputs[0] and node.outputs:
            alias.update({o: node.inputs[0] for o in node.outputs if o})
    for o in graph.outputs:
        if root(o) in start:
            end[root(o)] = last
    return _peak(graph, start, end, last, kernels)


def _peak(graph: Graph, start: dict[str, int], end: dict[str, int], last: int,
          kernels: list[Kernel]) -> Liveness:
    events: dict[int, list[tuple[int, Expr, str]]] = {}  # position -> (+1 alloc / -1 free, bytes, name)
    for t, s in start.items():
        tensor = graph.tensors.get(t)
        if tensor is None or tensor.shape is None or tensor.is_weight or tensor.is_const:
            continue
        events.setdefault(s, []).append((1, tensor.nbytes, t))
        events.setdefault(end.get(t, s) + 1, []).append((-1, tensor.nbytes, t))
    live = sympy.Integer(0)
    live_set: set[str] = set()
    best: dict[Expr, tuple[int, frozenset[str]]] = {}
    for p in range(last + 1):
        for sign, size, t in sorted(events.get(p, ()), key=lambda e: e[0]):  # frees first
            live += sign * size
            if sign > 0:
                live_set.add(t)
            else:
                live_set.discard(t)
        live = sympy.expand(live)
        best.setdefault(live, (p, frozenset(live_set)))
    candidates = list(best)
    if not candidates:
        return Liveness(sympy.Integer(0), None, ())
    if all(c.is_number for c in candidates):
        top = max(candidates, key=float)
    else:
        top = next((c for c in candidates if all(c == o or provably_greater(c, o) for o in candidates)), None)
    if top is None:
        return Liveness(sympy.Max(*candidates), None, ())
    p, names = best[top]
    return Liveness(top, kernels[p].name if kernels else None, tuple(sorted(names)))
