"""MoE under tensor parallelism: the routed experts sharded by width (MoE-TP), as --tp sees them.

# before -> after (MoE-TP m):
#   Gather(W_gu[E, 2I, h]) -> MatMul -> act -> Gather(W_d[E, h, I]) -> MatMul -> combine
#   Gather(W_gu[E, 2I/m, h]) -> MatMul -> act -> Gather(W_d[E, h, I/m]) -> MatMul -> combine -> AllReduce
Counting rules (one GPU's graph, called by passes/shard_tp.py with the group's --tp):
- A *MoE block* is the MatMuls that read gathered expert weights (a Gather / GatherND of a rank-3
  weight by run-time ids, passes/moe_gathers.py) sharing one ids tensor; the first in graph order is
  the column projection (gate/up), the last the row projection (down).
- The experts' width is split m = tp / ep ways, ep being the `group_size` of the dispatch `AllToAll`
  that feeds the block (expert parallelism, models/decoder_moe.py; 1 without one): tp % ep == 0 or an
  error. m == 1 (ep == tp): the experts are already spread by expert parallelism and stay whole.
- Under --tp the tokens are replicated on the whole group (attention is head-parallel), so expert
  parallelism moves no tokens: each GPU picks its own experts' pairs locally and holds partial outputs
  of every token. The block's dispatch and combine `AllToAll` (models/decoder_moe.py) are dropped and
  the partial outputs summed by one `AllReduce` over the tp group (EP and MoE-TP shards together), as
  TensorRT-LLM and vLLM do without attention data parallelism. (`--expert-parallel` alone keeps the
  all-to-all: there each GPU holds its own tokens.)
- With m > 1 the column weight loses 2I -> 2I/m on its output axis, the row weight I -> I/m on its
  contracted axis (read off the MatMul operand each feeds), every tensor from the column MatMul to the
  row MatMul one axis (the first whose size is 2I or I), the expert biases gathered into that span on
  axis 1.
- The `AllReduce` (group_size tp) reads the block's combined output: the first ReduceSum after the row
  projection (the sum over a token's k routes, tokens x hidden), or the row projection's output when no
  such ReduceSum follows within a few ops.
NB: the router and the shared experts are not touched here: the router is replicated (its scores feed a
TopK, see shard_tp.region_of), the shared experts are a dense gated MLP that shard_tp splits like any.
NB: a down-projection bias is added on every width shard before the all-reduce (an engine adds it once).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.ir import Graph, Node
from passes.graph_edit import Consumers, producer
from passes.moe_gathers import gathers_expert_rows, ids_root
from passes.shard_error import ShardError

# Ops between the row projection and the per-token sum (squeeze, bias, combine all-to-all, weights).
_TO_COMBINE = frozenset({"Squeeze", "Unsqueeze", "Reshape", "Add", "Mul", "Cast", "AllToAll", "Identity"})
_COMBINE_HOPS = 8


@dataclass(frozen=True)
class MoeBlock:
    column: Node  # the gate/up projection's MatMul
    row: Node  # the down projection's MatMul
    column_gather: Node
    row_gather: Node
    ep: int  # the dispatch AllToAll's group_size (1: no expert parallelism)


def _gathered_operand(graph: Graph, mm: Node) -> tuple[Node, int, tuple[int, ...]] | None:
    """(the expert-weight Gather, operand index of the MatMul it feeds, Transpose perm) or None."""
    for i, t in enumerate(mm.inputs[:2]):
        p = producer(graph, t)
        perm = (0, 1, 2)
        if p is not None and p.op_type == "Transpose":
            perm = tuple(int(a) for a in p.attrs.get("perm", (0, 2, 1)))
            p = producer(graph, p.inputs[0])
        if p is not None and gathers_expert_rows(graph, p, 3):
            return p, i, perm
    return None


def _axes(operand: int, perm: tuple[int, ...]) -> tuple[int, int]:
    """(output axis, contracted axis) in the weight's own [E, a, b] axes, for a MatMul operand."""
    out, inner = (1, 2) if operand == 0 else (2, 1)  # A [p, m, k] @ B [p, k, n]
    return perm[out], perm[inner]


def _dispatch(graph: Graph, mm: Node, operand: int) -> Node | None:
    """The AllToAll the block's activation comes through (a few views back), or None."""
    tensor = mm.inputs[1 - operand]
    for _ in range(4):
        p = producer(graph, tensor)
        if p is None:
            return None
        if p.op_type == "AllToAll":
            return p
        tensor = p.inputs[0] if p.inputs else ""
    return None


def _dispatch_group(graph: Graph, mm: Node, operand: int) -> int:
    """group_size of the dispatch AllToAll (1: no expert parallelism)."""
    node = _dispatch(graph, mm, operand)
    return 1 if node is None else int(node.attrs.get("group_size", 1))


def find_blocks(graph: Graph) -> list[MoeBlock]:
    by_ids: dict[str, list[tuple[Node, Node, int, tuple[int, ...]]]] = {}
    for n in graph.topo_nodes():
        if n.op_type != "MatMul":
            continue
        found = _gathered_operand(graph, n)
        if found is not None:
            gather, operand, perm = found
            by_ids.setdefault(ids_root(graph, gather.inputs[1]), []).append((n, gather, operand, perm))
    blocks = []
    for projections in by_ids.values():
        if len(projections) < 2:
            continue
        (col, cg, c_op, _), (row, rg, _, _) = projections[0], projections[-1]
        blocks.append(MoeBlock(col, row, cg, rg, _dispatch_group(graph, col, c_op)))
    return blocks


def width_sizes(graph: Graph, block: MoeBlock, m: int) -> tuple[dict[int, int], tuple, tuple]:
    """({2I: 2I/m, I: I/m}, (column weight axis, its size), (row weight axis, its size))."""
    _, c_op, c_perm = _gathered_operand(graph, block.column)
    _, r_op, r_perm = _gathered_operand(graph, block.row)
    c_axis = _axes(c_op, c_perm)[0]
    r_axis = _axes(r_op, r_perm)[1]
    c_size = int(graph.tensors[block.column_gather.inputs[0]].shape[c_axis])
    r_size = int(graph.tensors[block.row_gather.inputs[0]].shape[r_axis])
    return {c_size: c_size // m, r_size: r_size // m}, (c_axis, c_size), (r_axis, r_size)


def span(graph: Graph, cons: Consumers, block: MoeBlock) -> list[Node]:
    """The nodes from the column MatMul (inclusive) forward to the row MatMul (exclusive)."""
    seen: dict[str, Node] = {block.column.name: block.column}
    stack = list(block.column.outputs)
    while stack:
        for n in cons.of(stack.pop()):
            if n.name in seen or n.name == block.row.name:
                continue
            seen[n.name] = n
            stack.extend(o for o in n.outputs if o)
    return list(seen.values())


def combine_point(graph: Graph, cons: Consumers, block: MoeBlock) -> tuple[Node, str, list[Node]]:
    """(node, tensor) after which the MoE all-reduce goes (the first ReduceSum past the row MatMul), and
    the AllToAll nodes passed on the way (the combine)."""
    tensor, passed = block.row.outputs[0], []
    for _ in range(_COMBINE_HOPS):
        readers = [n for n in cons.of(tensor) if n.op_type in _TO_COMBINE | {"ReduceSum"}]
        if len(readers) != 1:
            break
        nxt = readers[0]
        if nxt.op_type == "ReduceSum":
            return nxt, nxt.outputs[0], passed
        if nxt.op_type == "AllToAll":
            passed.append(nxt)
        tensor = nxt.outputs[0]
    return block.row, block.row.outputs[0], passed


def shard_block(ed, block: MoeBlock, tp: int) -> str:
    """Shard one block through shard_tp's editor `ed` (its .graph, .shard, .collective); the decision."""
    graph = ed.graph
    where = block.column.name
    if tp % block.ep:
        raise ShardError(f"{where}: --tp {tp} is not a multiple of the expert-parallel size {block.ep} "
                         f"(MoE-TP = tp / ep)")
    m = tp // block.ep
    cons = Consumers(graph)
    after, tensor, combine = combine_point(graph, cons, block)
    moot = [n for n in (_dispatch(graph, block.column, _gathered_operand(graph, block.column)[1]), *combine)
            if n is not None]
    for n in moot:  # replicated tokens: no all-to-all (see the module docstring)
        ed.bypass(n)
    dropped = f"; its {len(moot)} AllToAll dropped (tokens replicated under tp)" if moot else ""
    width = "experts whole (EP = tp)"
    if m > 1:
        width = f"experts width-sharded MoE-TP {m} ({_shard_width(ed, cons, block, m)})"
    ed.collective(after, "AllReduce", tensor, group=tp)
    ep = f", expert parallelism {block.ep}" if block.ep > 1 else ""
    return f"moe: {where} .. {block.row.name}: {width}{ep}{dropped}; AllReduce x{tp} after {after.name}"


def _shard_width(ed, cons: Consumers, block: MoeBlock, m: int) -> str:
    """Divide the experts' width m ways: weights, the gathered [pairs, a, b], the span, expert biases."""
    graph = ed.graph
    sizes, (c_axis, c_size), (r_axis, r_size) = width_sizes(graph, block, m)
    for size in (c_size, r_size):
        if size % m:
            raise ShardError(f"{block.column.name}: expert width {size} is not divisible by MoE-TP {m}")
    ed.shard(block.column_gather.inputs[0], sizes, c_axis)
    ed.shard(block.row_gather.inputs[0], sizes, r_axis)
    for g, axis in ((block.column_gather, c_axis), (block.row_gather, r_axis)):  # same axes as W
        for t in g.outputs:
            ed.shard(t, sizes, axis)
    for n in span(graph, cons, block):
        for t in n.inputs:
            p = producer(graph, t)
            if p is not None and gathers_expert_rows(graph, p, 2):  # an expert bias [E, 2I]
                ed.shard(p.inputs[0], sizes, 1)
                ed.shard(t, sizes, 1)
        for t in n.outputs:
            if t:
                ed.shard(t, sizes)
    return f"{c_size} -> {c_size // m}, {r_size} -> {r_size // m}"
