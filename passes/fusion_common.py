"""Helpers the fusion rules share: data inputs, numel comparisons, forward closures over pointwise ops."""

from __future__ import annotations

from collections.abc import Callable

import sympy

from estimator.ir import Graph, Node
from passes.graph_edit import Consumers, is_host, is_weight


def data_inputs(graph: Graph, node: Node) -> list[str]:
    """Inputs that are activations (not host constants, not weights)."""
    return [t for t in node.inputs if t and not is_host(graph, t) and not is_weight(graph, t)]


def numel(graph: Graph, tensor: str) -> sympy.Expr | None:
    t = graph.tensors.get(tensor)
    return None if t is None or t.shape is None else t.numel


def same(a: sympy.Expr | None, b: sympy.Expr | None) -> bool:
    """Provably equal (unknown counts as no). Two monomials (a tensor's numel: a product of dims) are
    equal exactly when sympy's canonical forms are; anything else is expanded."""
    if a is None or b is None:
        return False
    if _monomial(a) and _monomial(b):
        return a == b
    return sympy.expand(a - b) == 0


def _monomial(e) -> bool:
    """A rational, a symbol, or a product of rationals and symbols with integer powers (sympy keeps these in
    one canonical form, so comparing them needs no expansion)."""
    e = sympy.sympify(e)
    factors = e.args if e.is_Mul else (e,)
    return all(f.is_Rational or f.is_Symbol or (f.is_Pow and f.base.is_Symbol and f.exp.is_Integer)
               for f in factors)


def divides(small: sympy.Expr | None, big: sympy.Expr | None) -> bool:
    """`big` is provably a whole multiple of `small` (a broadcast or a row reduction apart)."""
    if small is None or big is None:
        return False
    ratio = sympy.simplify(big / small)
    return bool(ratio.is_integer) and bool(ratio.is_positive)


def closure(
    graph: Graph, cons: Consumers, seeds: list[str], start: set[str], admit: Callable[[Node, set[str]], bool]
) -> set[str]:
    """Grow `start` forward from the tensors in `seeds`: a consumer joins when `admit(node, produced)`
    says so (`produced`: tensors produced inside the region so far, plus the seeds)."""
    region = set(start)
    produced = set(seeds) | {t for n in start for t in graph.node(n).outputs if t}
    frontier = [c for t in produced for c in cons.of(t)]
    while frontier:
        n = frontier.pop()
        if n.name in region or not admit(n, produced):
            continue
        region.add(n.name)
        new = [t for t in n.outputs if t]
        produced.update(new)
        frontier.extend(c for t in new for c in cons.of(t))
    return region


def last_axis_reduction(graph: Graph, node: Node) -> bool:
    """A reduction over the last axis only (read off the shapes: axes may be a run-time input)."""
    src, out = graph.tensors.get(node.inputs[0]), graph.tensors.get(node.outputs[0])
    if src is None or out is None or src.shape is None or out.shape is None or not src.shape:
        return False
    lead = src.shape[:-1]
    return tuple(out.shape) in (tuple(lead) + (sympy.Integer(1),), tuple(lead))
