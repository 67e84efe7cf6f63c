"""GEMM and convolution epilogues: pointwise consumers of a MatMul/Gemm/Conv output run in its epilogue.

fuse-bias-act (what onnxruntime's CUDA fusions cover: bias, activation such as GELU in any exported form,
scaling; no second activation tensor)
# before -> after:  MatMul -> Add(bias) -> Div -> Erf -> Add -> Mul -> Mul   =>   Fused(matmul)
fuse-epilogue (CUTLASS/TensorRT-style: also a residual Add or gating Mul with an activation computed
before the GEMM, (de)quantization, and already-fused pointwise kernels such as the SwiGLU product)
# before -> after:  MatMul -> Add(bias) -> Add(residual)   =>   Fused(matmul)

The epilogue region is grown forward from the GEMM output over pointwise ops whose result has the GEMM
output's element count (an epilogue cannot broadcast to a bigger tile), and through views of that size
(GPT-2's export reshapes between the Gemm and its GELU). A GEMM left without an epilogue although one
pointwise op of its size reads it is a near miss, reported with the op that broke the pattern. A second
activation input is only admitted when it is produced before the GEMM (so fusing cannot create a cycle).
"""

from __future__ import annotations

from estimator.ir import Graph, Node
from estimator.ops import CONTRACTION, CONVOLUTION, ELEMENTWISE, QUANTIZATION, VIEW
from passes.fusion_common import closure, data_inputs, numel, same
from passes.graph_edit import (
    Consumers,
    Group,
    Refusal,
    apply_groups,
    convexity_violation,
    is_fused,
    node_kind,
)
from passes.pipeline import PassResult, register_pass

GEMMS = CONTRACTION | CONVOLUTION
POINTWISE_KINDS = frozenset({"elementwise"})


def _anchor(node: Node) -> bool:
    return (
        node.op_type in GEMMS
        if not is_fused(node)
        else node_kind(node) in ("matmul", "conv")
        and "fuse-epilogue" not in node.attrs["rules"]
        and "fuse-bias-act" not in node.attrs["rules"]
    )


def _epilogue(graph: Graph, cons: Consumers, gemm: Node, residual: bool) -> set[str]:
    out = gemm.outputs[0]
    size = numel(graph, out)
    order = graph.topo_index

    def admit(n: Node, produced: set[str]) -> bool:
        if _view_of(graph, n, size, produced):
            return True
        pointwise = (
            (node_kind(n) in POINTWISE_KINDS)
            if is_fused(n)
            else (n.op_type in ELEMENTWISE or (residual and n.op_type in QUANTIZATION))
        )
        if (
            not pointwise
            or (is_fused(n) and not residual)
            or not all(same(numel(graph, o), size) for o in n.outputs)
        ):
            return False
        for t in data_inputs(graph, n):
            if t in produced:
                continue
            src = graph.producer.get(t)
            before = src is None or order[src] < order[gemm.name]
            if not (residual and before):
                return False
        return True

    return closure(graph, cons, [out], {gemm.name}, admit)


def _view_of(graph: Graph, n: Node, size, produced: set[str]) -> bool:
    """A view (Reshape...) of a region tensor that keeps the GEMM output's size: GPT-2's export puts a
    Reshape between the Gemm and its GELU. Free inside the kernel: the epilogue indexes the tile."""
    return (not is_fused(n) and n.op_type in VIEW and bool(n.inputs) and n.inputs[0] in produced
            and all(same(numel(graph, o), size) for o in n.outputs if o))


def near_miss(graph: Graph, cons: Consumers, gemm: Node) -> str | None:
    """Why a GEMM whose output (through views) is read by one pointwise op of its size got no epilogue."""
    tensor = gemm.outputs[0]
    while (c := cons.only(tensor)) is not None and not is_fused(c) and c.op_type in VIEW:
        tensor = c.outputs[0]
    if c is None or is_fused(c) or c.op_type not in ELEMENTWISE:
        return None
    if not all(same(numel(graph, o), numel(graph, gemm.outputs[0])) for o in c.outputs):
        return f"near miss: the epilogue {c.op_type} broadcasts beyond the GEMM tile"
    return f"near miss: the epilogue {c.op_type} reads a second activation produced after the GEMM"


def _run(graph: Graph, rule: str, residual: bool) -> PassResult:
    cons = Consumers(graph)
    groups, refusals, taken = [], [], set()
    for node in graph.topo_nodes():
        if node.name in taken or not _anchor(node):
            continue
        region = _epilogue(graph, cons, node, residual) - taken
        if len([n for n in region if graph.node(n).op_type not in VIEW]) < 2:
            why = near_miss(graph, cons, node)
            if why:
                refusals.append(Refusal(rule, (node.name,), why))
            continue
        reason = convexity_violation(graph, region)
        if reason:
            refusals.append(Refusal(rule, tuple(sorted(region)), reason))
            continue
        groups.append(Group(rule, frozenset(region), node_kind(node), anchor=node.name))
        taken |= region
    if not groups:
        return PassResult(graph, False, tuple(refusals))
    return PassResult(apply_groups(graph, groups), True, tuple(refusals))


@register_pass("fuse-bias-act")
def fuse_bias_act(graph: Graph) -> PassResult:
    return _run(graph, "fuse-bias-act", residual=False)


@register_pass("fuse-epilogue")
def fuse_epilogue(graph: Graph) -> PassResult:
    return _run(graph, "fuse-epilogue", residual=True)
