"""Kernels: what the GPU launches after the pass pipeline. Unfused, one Node is one Kernel.

`lower(graph)` prices every node through the cost registry (cached per signature: an 80-layer model has
a few dozen distinct node signatures, not thousands) and sorts nodes into kernels, free ops (views and
host-side shape arithmetic) and uncosted ops (with the reason)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import estimator.cost  # noqa: F401  (registers every cost function)
from estimator import symmath
from estimator.cost.registry import CostError, OpView, Work, lookup
from estimator.dtypes import DtypeError
from estimator.fused import fused_work
from estimator.ir import Graph, Node, Tensor, is_fused, members
from estimator.ops import CONTROL_FLOW, kind_of


@dataclass(frozen=True)
class Kernel:
    name: str
    nodes: tuple[Node, ...]
    kind: str
    op: str  # qualified op type of the (single) node; fusion passes name their own
    work: Work
    signature: Hashable  # equal signatures price identically (used as a cache key)
    tile: Any = None  # set by the tiling pass


@dataclass(frozen=True)
class Uncosted:
    node: str
    op: str
    reason: str


@dataclass
class Lowered:
    kernels: list[Kernel] = field(default_factory=list)
    uncosted: list[Uncosted] = field(default_factory=list)
    free_nodes: int = 0


def _hashable(value: Any) -> Hashable:
    if isinstance(value, np.ndarray):  # all of its bytes: two arrays alike in a prefix are two kernels
        return (value.shape, str(value.dtype), value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, Mapping):  # keys starting with "_" carry names, not what the kernel does
        return tuple(sorted((k, _hashable(v)) for k, v in value.items() if not str(k).startswith("_")))
    return value


def _tensor_sig(t: Tensor | None) -> Hashable:
    return None if t is None else (t.shape, t.dtype, t.is_weight, t.is_const)


def _is_host_side(graph: Graph, node: Node) -> bool:
    outs = [graph.tensors.get(o) for o in node.outputs if o]
    return bool(outs) and all(t is not None and t.is_const and not t.is_weight for t in outs)


def op_view(graph: Graph, node: Node) -> OpView:
    def get(name: str) -> Tensor | None:
        if not name:
            return None
        return graph.tensors.get(name) or Tensor(name, None, "undefined")

    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    opset = graph.opsets.get(domain, graph.opsets.get("ai.onnx", 0)) if domain else graph.opsets.get("", 0)
    return OpView(node, tuple(get(t) for t in node.inputs), tuple(get(t) for t in node.outputs), opset)


def _named_members(node: Node) -> Hashable:
    """The "_" keys of a fused node's attributes that name some of its members (an attention core's
    `_members`, which fused_work prices apart), as positions in its body: names differ from layer to
    layer, the positions say what the kernel does (dropped from the attributes by `_hashable`, they
    must be in the signature, else two nodes of one body and different cores would share a price)."""
    index = {m.name: i for i, m in enumerate(node.body)}
    out = []
    for key, value in sorted(node.attrs.items()):
        if not isinstance(value, Mapping):
            continue
        for sub, names in sorted(value.items()):
            if str(sub).startswith("_") and isinstance(names, (tuple, list, frozenset, set)):
                out.append((key, sub, tuple(sorted(index.get(x, -1) for x in names))))
    return tuple(out)


def signature(view: OpView, graph: Graph | None = None) -> Hashable:
    n = view.node
    attrs = tuple(sorted((k, _hashable(v)) for k, v in n.attrs.items()))
    body = tuple(signature(op_view(graph, m)) for m in n.body) if n.body and graph is not None else ()
    named = _named_members(n) if n.body else ()
    return (n.domain, n.op_type, tuple(_tensor_sig(t) for t in view.inputs),
            tuple(_tensor_sig(t) for t in view.outputs), attrs, view.opset, body, named)


class CostCache:
    """Work per node signature (or the reason it has none)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._cache: dict[Hashable, Work | str] = {}
        self._ids: dict[Hashable, int] = {}
        self._alike: dict[Hashable, Work | str] = {}
        self._by_id: dict[int, Hashable] = {}

    def work(self, view: OpView) -> tuple[int, Work | str]:
        """(signature id, Work or the reason it has none). Ids are small ints: later grouping and
        caching hash them instead of re-hashing tuples of sympy shapes."""
        sig = signature(view, self.graph)
        sig_id = self._ids.setdefault(sig, len(self._ids))
        hit = self._cache.get(sig)
        if hit is None:
            # many unknown dims (symmath.flat): nodes alike up to a renaming of their dims share one
            hit = symmath.renamed(self._alike, sig, lambda: self._price(view)) if symmath.flat() else None
            hit = hit if hit is not None else self._price(view)
            self._cache[sig] = hit
        return sig_id, hit

    def full_signature(self, sig_id: int) -> Hashable:
        """The signature behind an id of `work` (a key valid across graphs, see estimator/pricing/memo.py)."""
        if len(self._by_id) != len(self._ids):
            self._by_id = {i: sig for sig, i in self._ids.items()}
        return self._by_id[sig_id]

    def _price(self, view: OpView) -> Work | str:
        if is_fused(view.node):
            return fused_work(self.graph, view.node, self._member)
        fn = lookup(view.op_type, view.node.domain)
        if fn is None:
            return f"no cost function for {view.node.qualified_op}"
        try:
            return fn(view)
        except (CostError, DtypeError) as exc:
            return str(exc)

    def _member(self, node: Node) -> Work | str | None:
        """A fused member's work; None for members that launch nothing (views, host-side values)."""
        if _is_host_side(self.graph, node):
            return None
        return self.work(op_view(self.graph, node))[1]


def lower(graph: Graph, cache: CostCache | None = None) -> Lowered:
    """One kernel per costed node, in topological order."""
    cache = cache or CostCache(graph)
    out = Lowered()
    for node in graph.topo_nodes():
        if node.op_type in CONTROL_FLOW:
            out.uncosted.append(
                Uncosted(
                    node.name,
                    node.qualified_op,
                    "control flow: its body's cost depends on run-time trip counts or branches",
                )
            )
            continue
        if _is_host_side(graph, node):
            out.free_nodes += 1
            continue
        sig, work = cache.work(op_view(graph, node))
        if isinstance(work, str):
            out.uncosted.append(Uncosted(node.name, node.qualified_op, work))
        elif not work.flops and work.dram_bytes == 0:
            out.free_nodes += 1
        else:
            if is_fused(node):
                kind, op = node.attrs["kind"], "+".join(node.attrs["rules"])
            else:
                kind, op = kind_of(node.op_type), node.qualified_op
            out.kernels.append(Kernel(node.name, members(node), kind, op, work, sig))
    return out
