"""Sliding-window masks: the window a banded causal mask keeps, read off the ops that build it.

Exporters write a sliding-window mask as the causal comparison plus a band: with query positions q
and key positions k (both from a Range), `k > q - W` (transformers: Greater(k, Sub(q, W))) keeps the W
most recent keys, the query's own included. `window_left` returns the number of keys *left of* the
query a kernel must visit (W - 1 for a strict comparison, W for a non-strict one), the convention of
`estimator.cost.attention.Core.window`, or None when the mask has no band.

NB: a heuristic like the causal test (mask values are run-time data): a comparison of Range-derived
tensors where one side passes through Sub / Add of a host scalar is taken as the band.
"""

from __future__ import annotations

from estimator.ir import Graph
from passes.graph_edit import is_host, producer, upstream

STRICT = frozenset({"Less", "Greater"})
LOOSE = frozenset({"LessOrEqual", "GreaterOrEqual"})


def _scalar(graph: Graph, tensor: str) -> float | None:
    t = graph.tensors.get(tensor)
    if t is None or not is_host(graph, tensor) or t.value is None or len(t.value) != 1:
        return None
    return float(t.value[0])


def _offset(graph: Graph, tensor: str, budget: int = 6) -> float | None:
    """The host scalar subtracted from (or added to) a position tensor on its way to a comparison."""
    for _ in range(budget):
        p = producer(graph, tensor)
        if p is None:
            return None
        if p.op_type in ("Sub", "Add") and len(p.inputs) == 2:
            c = _scalar(graph, p.inputs[1])
            if c is not None:
                return c
            c = _scalar(graph, p.inputs[0]) if p.op_type == "Add" else None
            if c is not None:
                return c
        if p.op_type not in ("Unsqueeze", "Reshape", "Expand", "Cast", "Squeeze"):
            return None
        tensor = p.inputs[0]
    return None


def window_left(graph: Graph, masks: list[str], budget: int = 96) -> int | None:
    """Keys left of the query that a banded mask built from `masks` keeps, or None (no band)."""
    for _, p in upstream(graph, masks, budget):
        if p is not None and p.op_type in STRICT | LOOSE and len(p.inputs) == 2:
            for side in p.inputs:
                w = _offset(graph, side)
                if w is not None and w >= 1:
                    return int(w) - (1 if p.op_type in STRICT else 0)
    return None
