"""Dead-code elimination: drop nodes none of whose outputs reach a graph output.

# before -> after:  x -> A -> y(output); x -> B -> z(unused)   =>   x -> A -> y
Returns a new Graph when something was removed (modified=True); the input graph is never mutated.
"""

from __future__ import annotations

from estimator.ir import Graph
from passes.pipeline import PassResult, register_pass


@register_pass("dce")
def dce(graph: Graph) -> PassResult:
    # One reverse walk from every output's producer (per-output nx.ancestors is quadratic in layers).
    live: set[str] = set()
    stack = [graph.producer[o] for o in graph.outputs if o in graph.producer]
    while stack:
        n = stack.pop()
        if n not in live:
            live.add(n)
            stack.extend(graph.nx.predecessors(n))
    dead = [n for n in graph.nx.nodes if n not in live]
    if not dead:
        return PassResult(graph, False)
    keep = [graph.node(n) for n in graph.nx.nodes if n in live]
    members = [m for n in keep for m in (n.body or (n,))]  # a fused node's members keep their tensors
    used = (
        {t for n in (*keep, *members) for t in (*n.inputs, *n.outputs)}
        | set(graph.inputs)
        | set(graph.outputs)
    )
    tensors = {k: v for k, v in graph.tensors.items() if k in used}
    return PassResult(
        Graph(graph.name, keep, tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims), True
    )
