"""The estimator's IR: frozen Tensors and Nodes, a Graph holding structure in a networkx DiGraph.

Shapes are tuples of sympy expressions in positive-integer symbols (`Dim`s) named after the model's
free dimensions (`batch`, `seq`, `past_seq`, ...). A dimension that shape inference could not name
becomes a symbol too (e.g. ``unk__3``); `Graph.unknown_dims` lists those so reports can ask the user
to bind them instead of guessing.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Any

import networkx as nx
import sympy
from sympy.parsing.sympy_parser import parse_expr

from estimator.dtypes import itemsize

Expr = sympy.Expr
Shape = tuple[Expr, ...]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Names that may appear in dim expressions written by shape inference and are functions, not dims.
_FUNCS = {"Min": sympy.Min, "Max": sympy.Max, "floor": sympy.floor, "ceiling": sympy.ceiling,
          "Mod": sympy.Mod, "CeilToInt": sympy.ceiling, "FloorToInt": sympy.floor}


@lru_cache(maxsize=None)
def dim(name: str) -> sympy.Symbol:
    """The symbol for a free dimension. Every dim is a positive integer; that lets sympy prove
    `seq + past_seq > seq` and simplify `Max(2*seq, seq)`."""
    return sympy.Symbol(name, integer=True, positive=True)


class DimParseError(ValueError):
    pass


@lru_cache(maxsize=4096)
def parse_dim(text: str) -> Expr:
    """Parse an ONNX dim_param ('batch', 'batch*seq', 'past_seq + 1') into a sympy expression.

    Every identifier that is not a known function becomes a positive-integer `dim`."""
    text = text.strip()
    if not text:
        raise DimParseError("empty dimension name")
    if _IDENT.fullmatch(text):
        return dim(text)
    names = {tok: dim(tok) for tok in _IDENT.findall(text) if tok not in _FUNCS}
    try:
        expr = parse_expr(text, local_dict={**names, **_FUNCS}, evaluate=True)
    except Exception as exc:  # sympy raises a zoo of types (SyntaxError, TokenError, TypeError...)
        # NB: an unparsable dim_param (e.g. 'sequence length') is still a free dimension; treat the
        # whole string as one symbol rather than fail, so the user can bind it by its name.
        if re.fullmatch(r"[^\s=]+( [^\s=]+)*", text):
            return dim(text)
        raise DimParseError(f"cannot parse dimension {text!r}: {exc}") from None
    if not isinstance(expr, sympy.Expr):
        raise DimParseError(f"dimension {text!r} is not an expression")
    return expr


@dataclass(frozen=True)
class Tensor:
    """A value in the graph. `shape` is None when its rank is unknown."""

    name: str
    shape: Shape | None
    dtype: str
    is_weight: bool = False  # an initializer: read from DRAM, never written
    is_const: bool = False  # value known before run time (initializer, Constant, shape arithmetic)
    # the flattened values of a small host constant (axes, scalars such as a sliding window), when known
    value: tuple | None = field(default=None, compare=False, repr=False)

    @cached_property  # a frozen value: computed once (fusion rules and costs ask often)
    def numel(self) -> Expr:
        if self.shape is None:
            raise ValueError(f"tensor {self.name!r} has no shape")
        return sympy.Mul(*self.shape) if self.shape else sympy.Integer(1)

    @property
    def nbytes(self) -> Expr:
        return self.numel * itemsize(self.dtype)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)


@dataclass(frozen=True)
class Node:
    """One source op. Attribute values are plain Python (int, float, str, bytes, lists as tuples,
    small tensors as numpy arrays). `body` holds the member nodes of a fused node (empty otherwise)."""

    name: str
    op_type: str
    domain: str = ""
    inputs: tuple[str, ...] = ()  # "" marks an omitted optional input
    outputs: tuple[str, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    body: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.attrs, MappingProxyType):
            object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    def __hash__(self) -> int:  # attrs may hold numpy arrays: hash on identity-like fields only
        return hash((self.name, self.op_type, self.domain, self.inputs, self.outputs))

    @property
    def qualified_op(self) -> str:
        return self.op_type if self.domain in ("", "ai.onnx") else f"{self.domain}.{self.op_type}"


# A fused node (what the fusion passes make, passes/graph_edit.py) is a Node of this op in this domain;
# its `body` holds its member nodes. Here beside Node, as lowering (estimator/kernel.py) and the reports
# ask what a node is without the passes.
FUSED_OP, FUSED_DOMAIN = "Fused", "estimator"


def is_fused(node: Node) -> bool:
    return node.op_type == FUSED_OP and node.domain == FUSED_DOMAIN


def members(node: Node) -> tuple[Node, ...]:
    """The nodes a kernel of `node` runs: a fused node's body, else the node itself."""
    return node.body if is_fused(node) else (node,)


class Graph:
    """Nodes in a networkx DiGraph keyed by node name (attribute ``node``), producer -> consumer edges
    labelled with the tensors they carry. Tensors live in `tensors`. Passes build new Graphs (or say
    they mutate): see passes/pipeline.py."""

    def __init__(self, name: str, nodes: Iterable[Node], tensors: Mapping[str, Tensor],
                 inputs: Iterable[str], outputs: Iterable[str], opsets: Mapping[str, int] | None = None,
                 dims: Mapping[str, sympy.Symbol] | None = None) -> None:
        self.name = name
        self.tensors: dict[str, Tensor] = dict(tensors)
        self.inputs: tuple[str, ...] = tuple(inputs)
        self.outputs: tuple[str, ...] = tuple(outputs)
        self.opsets: dict[str, int] = dict(opsets or {})
        self.dims: dict[str, sympy.Symbol] = dict(dims or {})  # the model's declared free dims
        # invented dims the frontend merged (name -> representative) and the merges it refused
        # (estimator/frontends/unify_dims.py), for --explain
        self.dim_merges: dict[str, Expr] = {}
        self.dim_conflicts: list[str] = []
        self.nx = nx.DiGraph()
        self.producer: dict[str, str] = {}
        # the nodes go straight into networkx's own dicts (what DiGraph.add_node fills, without its
        # per-call cache clearing: a pass builds a new Graph of every node, hundreds of thousands a search)
        succ, pred, data = self.nx._succ, self.nx._pred, self.nx._node
        for node in nodes:
            if node.name in succ:
                raise ValueError(f"duplicate node name {node.name!r}")
            succ[node.name], pred[node.name], data[node.name] = {}, {}, {"node": node}
            for out in node.outputs:
                if out:
                    self.producer[out] = node.name
        if (clear := getattr(nx, "_clear_cache", None)) is not None:  # networkx >= 3.3 caches views
            clear(self.nx)
        # one edge per (producer, consumer) with the tensors it carries, in first-use order; added in one
        # call (networkx's per-edge calls were most of building a 60-layer graph)
        edges: dict[tuple[str, str], list[str]] = {}
        for name, data in self.nx.nodes.items():
            for tname in data["node"].inputs:
                src = self.producer.get(tname)
                if src is not None:
                    edges.setdefault((src, name), []).append(tname)
        self.nx.add_edges_from((a, b, {"tensors": ts}) for (a, b), ts in edges.items())

    def node(self, name: str) -> Node:
        # networkx's own node-attribute dict: its NodeView's __getitem__ costs a few calls per look-up,
        # and passes look nodes up by the hundred thousand
        return self.nx._node[name]["node"]

    def topo_nodes(self) -> Iterator[Node]:
        """Nodes in a deterministic topological order; raises ValueError on a cycle. The order is sorted
        once and kept (the structure is only built in __init__; passes make new Graphs), re-sorted if
        the node or edge count ever changes."""
        size = (self.nx.number_of_nodes(), self.nx.number_of_edges())
        cached = self.__dict__.get("_topo_order")
        if cached is None or cached[0] != size:
            order = _lexicographic_order(self.nx, self._index)
            if len(order) != size[0]:
                cycle = nx.find_cycle(self.nx)
                raise ValueError(f"graph has a cycle through nodes {[e[0] for e in cycle][:5]}")
            cached = self.__dict__["_topo_order"] = (size, order)
        return (self.node(n) for n in cached[1])

    def _order_key(self, name: str) -> str:
        # Keep source order where possible (insertion index), so reports follow the model.
        return f"{self._index.get(name, 0):09d}"

    @property
    def _index(self) -> dict[str, int]:
        idx = self.__dict__.get("_index_cache")
        if idx is None or len(idx) != len(self.nx):
            idx = {n: i for i, n in enumerate(self.nx.nodes)}
            self.__dict__["_index_cache"] = idx
        return idx

    @property
    def topo_index(self) -> dict[str, int]:
        """Node name -> position in a topological order (cached; graphs are not mutated in place)."""
        idx = self.__dict__.get("_topo_cache")
        if idx is None or len(idx) != len(self.nx):
            idx = {n.name: i for i, n in enumerate(self.topo_nodes())}
            self.__dict__["_topo_cache"] = idx
        return idx

    def free_symbols(self) -> set[sympy.Symbol]:
        syms: set[sympy.Symbol] = set()
        seen: set = set()  # each distinct dim expression asked once (an 80-layer graph repeats a few)
        for t in self.tensors.values():
            for d in t.shape or ():
                if not d.is_Number and d not in seen:
                    seen.add(d)
                    syms |= d.free_symbols
        return syms

    @property
    def unknown_dims(self) -> list[str]:
        """Symbols shape inference invented (not declared on the graph's inputs), sorted by name."""
        return sorted(s.name for s in self.free_symbols() if s.name not in self.dims)

    def with_tensors(self, tensors: Mapping[str, Tensor]) -> Graph:
        """A copy with some tensors replaced (same nodes)."""
        merged = {**self.tensors, **tensors}
        g = Graph(self.name, (self.node(n) for n in self.nx.nodes), merged, self.inputs, self.outputs,
                  self.opsets, self.dims)
        g.dim_merges, g.dim_conflicts = self.dim_merges, self.dim_conflicts
        return g

    def __len__(self) -> int:
        return self.nx.number_of_nodes()


def _lexicographic_order(g: nx.DiGraph, index: Mapping[str, int]) -> tuple[str, ...]:
    """Kahn's algorithm taking, among the ready nodes, the one of least insertion index: the order of
    networkx's lexicographical_topological_sort keyed by that index, on integers. Fewer nodes than
    the graph's when it has a cycle."""
    indegree = {n: d for n, d in g.in_degree()}
    ready = [(index[n], n) for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    succ = g.succ
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for m in succ[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(ready, (index[m], m))
    return tuple(order)


def substitute_shape(shape: Shape | None, binding: Mapping[sympy.Symbol, int]) -> Shape | None:
    if shape is None or not binding:
        return shape
    return tuple(sympy.sympify(d).xreplace(binding) for d in shape)


def bind(graph: Graph, values: Mapping[str, int]) -> Graph:
    """A copy of `graph` with the named dims replaced by integers (shapes re-simplified)."""
    binding = {dim(k): sympy.Integer(v) for k, v in values.items()}
    new = {name: replace(t, shape=substitute_shape(t.shape, binding)) for name, t in graph.tensors.items()}
    g = graph.with_tensors(new)
    return g
