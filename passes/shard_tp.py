"""Tensor parallelism as a graph pass: shard a decoder the Megatron way and insert its collectives.

# before -> after:  x -> Wq,Wk,Wv -> attention -> Wo -> y        (one GPU)
#                   x -> Wq/tp,Wk/tp,Wv/tp -> attention(H/tp heads) -> Wo/tp -> AllReduce -> y   (per GPU)
Counting rules (one GPU's graph, every GPU of the group runs the same):
- A *linear* is a MatMul (or Gemm) whose second operand is a 2-D weight. Walking forward from a
  linear's output through every non-linear op (views, elementwise, attention MatMuls of two
  activations, softmax, KV concat...) until the next linears gives its *region*. A linear is
  column-parallel when its region reaches other linears and never normalises or reduces over its output
  width (a residual stream does: the next RMSNorm reduces over hidden); the linears its region reaches
  are row-parallel. Column linears whose regions meet (Q, K, V at the attention; gate and up at the
  SwiGLU product) form one group with one row linear (O-proj; down).
- An attention group (its region holds a MatMul of two activations or an attention op) is divided by
  heads: the Reshapes that split an axis into (heads, head_dim) give H query heads and K kv heads;
  query heads become H/tp (H % tp == 0 or an error), kv heads ceil(K/tp), replicated when tp > K
  (tp % K == 0 or an error). Fused QKV (one linear of width (H+2K)*d, then Split) works the same.
  An MLP group divides its width I by tp (I % tp == 0 or an error). The (heads, head_dim) of each column
  are read off the head-split Reshape nearest its output, so columns of different head widths share a
  group: MLA's q_b_proj (heads of 192) and kv_b_proj (128 + 128), its o_proj reading H x 128; the
  absorbed decode's per-head weights W_UK / W_UV [H, ...] lose their head axis too.
- A linear whose output is normalised before any head split (MLA's kv_a_proj_with_mqa: the latent and
  k_pe, its kv_a_layernorm; q_a_proj) is not column-parallel: it and the latent KV cache are replicated
  on every GPU, as TensorRT-LLM and SGLang run MLA under TP. NB: the prefill's k_pe broadcast to H heads
  (an Expand outside any region) keeps all H heads.
- Every tensor of a region, the graph inputs it reads (the past KV cache) and the weights it reads
  (biases) get exactly one axis divided: the first axis whose size is a sharded width (H*d, K*d, H, K,
  I, (H+2K)*d); column weights lose that width on their output axis, row weights on their input axis.
- After each row linear an `AllReduce` (com.microsoft, group_size tp) of its output (tokens x hidden).
- Routed experts (gathered rank-3 expert weights, no linears here) are passes/shard_moe.py's: width-
  sharded by MoE-TP = tp / ep with an AllReduce after the per-token combine; a router (a linear whose
  scores feed a TopK over its width) is replicated.
- The embedding (a Gather of a 2-D weight by an integer graph input) is vocabulary-parallel: V/tp rows
  per GPU and an `AllReduce` of its output. The lm_head (a linear writing a graph output) is column-
  parallel by vocabulary: V/tp columns and an `AllGather` (axis -1) of the logits.
NB: shape-vector constants (Reshape targets) keep their values: costs read shapes, never those values.
NB: with tp > K the repeat_kv Expand keeps its repeat count H/K where the real one is (H/tp)/1; that
tensor is inside the fused attention kernel under every fusing strategy.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import sympy

from estimator.ir import Graph, Node, Tensor
from estimator.ops import ATTENTION, NORMALIZATION, REDUCTION
from estimator.symmath import simplified
from passes.graph_edit import Consumers
from passes.shard_error import ShardError
from passes.shard_moe import find_blocks, shard_block

COMM_DOMAIN = "com.microsoft"
_INT_DTYPES = ("int32", "int64")


@dataclass(frozen=True)
class ShardResult:
    graph: Graph
    modified: bool
    decisions: tuple[str, ...] = ()  # one line per sharding decision, for --explain


@dataclass
class _Group:
    columns: list[Node]
    row: Node
    region: set[str] = field(default_factory=set)
    attention: bool = False


def weight_of(graph: Graph, node: Node) -> tuple[Tensor, int] | None:
    """(the 2-D weight, index of its output axis) of a linear, or None when `node` is no linear."""
    if node.op_type not in ("MatMul", "Gemm") or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return None
    w = graph.tensors.get(node.inputs[1])
    if w is None or not w.is_weight or w.shape is None or len(w.shape) != 2:
        return None
    trans_b = node.op_type == "Gemm" and node.attrs.get("transB", 0)
    return w, 0 if trans_b else 1


def _width(graph: Graph, node: Node) -> sympy.Expr:
    w, axis = weight_of(graph, node)
    return w.shape[axis]


def region_of(graph: Graph, cons: Consumers, start: Node) -> tuple[set[str], list[Node], str | None]:
    """(region node names, the linears it reaches, why `start` is not column-parallel or None)."""
    width = _width(graph, start)
    region: set[str] = set()
    reached: dict[str, Node] = {}
    # (tensor, whether a head-split Reshape lies between `start` and it)
    stack = [(t, False) for t in start.outputs if t]
    while stack:  # a graph output met on the way (a present KV cache) is sharded with its region
        t, split = stack.pop()
        for n in cons.of(t):
            if n.name in region or n.name in reached:
                continue
            if weight_of(graph, n) is not None:
                reached[n.name] = n
                continue
            if n.op_type in REDUCTION | NORMALIZATION and _reduces_width(graph, n, width):
                return region, [], f"{n.op_type} {n.name} normalises over its output width {width}"
            if n.op_type in REDUCTION | NORMALIZATION and not split:  # MLA's kv_a_proj: a latent
                return region, [], (f"{n.op_type} {n.name} normalises a part of its output before any "
                                    "head split (a low-rank latent, replicated)")
            if n.op_type == "TopK" and _reduces_width(graph, n, width):  # a MoE router: replicated
                return region, [], f"TopK {n.name} selects over its output width {width}"
            region.add(n.name)
            below = split or _head_reshape(graph, n) is not None
            stack.extend((o, below) for o in n.outputs if o)
    return region, list(reached.values()), None if reached else "its output reaches no other linear"


def _head_reshape(graph: Graph, n: Node) -> tuple[int, int] | None:
    """(heads, head_dim) when `n` is a Reshape splitting its last axis into (heads, head_dim), else None."""
    if n.op_type != "Reshape":
        return None
    x, y = graph.tensors.get(n.inputs[0]), graph.tensors.get(n.outputs[0])
    if x is None or y is None or not x.shape or not y.shape or len(y.shape) != len(x.shape) + 1:
        return None
    h, d, last = y.shape[-2], y.shape[-1], x.shape[-1]
    if h.is_Integer and d.is_Integer and last.is_Integer and int(h) * int(d) == int(last):
        return int(h), int(d)
    return None


def _reduces_width(graph: Graph, node: Node, width: sympy.Expr) -> bool:
    x = graph.tensors.get(node.inputs[0]) if node.inputs else None
    if x is None or not x.shape:
        return False
    return simplified(x.shape[-1] - width) == 0


def find_groups(graph: Graph) -> tuple[list[_Group], list[Node]]:
    """(column/row groups, column-by-vocabulary lm_heads)."""
    cons = Consumers(graph)
    linears = [n for n in graph.topo_nodes() if weight_of(graph, n) is not None]
    groups: list[_Group] = []
    heads: list[Node] = []
    for lin in linears:
        if any(o in graph.outputs for o in lin.outputs):
            heads.append(lin)
            continue
        region, rows, why = region_of(graph, cons, lin)
        if why is not None:
            continue
        if len(rows) != 1:
            raise ShardError(f"{lin.name}: its output reaches {len(rows)} linears "
                             f"({', '.join(r.name for r in rows[:3])}); expected one row-parallel MatMul")
        row = rows[0]
        mate = next((g for g in groups if g.row.name == row.name or g.region & region), None)
        if mate is None:
            groups.append(_Group([lin], row, region))
        elif mate.row.name != row.name:
            raise ShardError(f"{lin.name}: its region meets {mate.columns[0].name}'s but ends in "
                             f"{row.name}, not {mate.row.name}")
        else:
            mate.columns.append(lin)
            mate.region |= region
    rows = {g.row.name for g in groups}
    for g in groups:
        bad = next((c for c in g.columns if c.name in rows), None)
        if bad is not None:
            raise ShardError(f"{bad.name}: it is both column- and row-parallel")
        g.attention = any(_is_attention(graph, graph.node(n)) for n in g.region)
    return groups, heads


def _is_attention(graph: Graph, node: Node) -> bool:
    if node.op_type in ATTENTION:
        return True
    if node.op_type != "MatMul" or len(node.inputs) < 2:
        return False
    return all(not (graph.tensors.get(t) and graph.tensors[t].is_weight) for t in node.inputs[:2])


def column_heads(graph: Graph, cons: Consumers, column: Node) -> list[tuple[int, int]]:
    """The (heads, head_dim) splits nearest a column linear's output: the first head-split Reshape on
    each path (one for Q, K, V or MLA's q_b_proj / kv_b_proj; one per part after a fused QKV's Split)."""
    found: list[tuple[int, int]] = []
    stack, seen = [t for t in column.outputs if t], set()
    while stack:
        for n in cons.of(stack.pop()):
            if n.name in seen or weight_of(graph, n) is not None:
                continue
            seen.add(n.name)
            split = _head_reshape(graph, n)
            if split is not None:
                found.append(split)
            elif n.op_type not in ("Reshape", *ATTENTION) and not _is_attention(graph, n):
                stack.extend(o for o in n.outputs if o)
    return found


def head_split(graph: Graph, group: _Group) -> tuple[int, int, dict[str, list[tuple[int, int]]]]:
    """(H query heads, K kv heads, each column's (heads, head_dim) splits) from the Reshapes nearest the
    columns (an attention op's num_heads / kv_num_heads where the graph has one: no splits then)."""
    for name in group.region:
        n = graph.node(name)
        if n.op_type in ATTENTION and "num_heads" in n.attrs:
            q = int(n.attrs["num_heads"])
            return q, int(n.attrs.get("kv_num_heads", q)), {}
    cons = Consumers(graph)
    splits = {c.name: column_heads(graph, cons, c) for c in group.columns}
    if not any(splits.values()):
        raise ShardError(f"{group.columns[0].name}: no Reshape splits its output into (heads, head_dim)")
    for c in group.columns:
        parts = splits[c.name]
        if not parts:
            raise ShardError(f"{c.name}: no Reshape splits its output into (heads, head_dim)")
        if len({d for _, d in parts}) != 1 or sum(h * d for h, d in parts) != int(_width(graph, c)):
            raise ShardError(f"{c.name}: its head splits {sorted(set(parts))} do not make up its width "
                             f"{_width(graph, c)}")
    hs = [h for parts in splits.values() for h, _ in parts]
    return max(hs), min(hs), splits


def _attention_map(graph: Graph, group: _Group, tp: int) -> tuple[dict[int, int], str]:
    """Widths -> one GPU's widths: each column's heads divided (kv heads replicated when tp > K), every
    head split's heads x head_dim, the head counts, and the row linear's input (H x its per-head width).
    MLA (q_b_proj 192-wide heads, kv_b_proj 256-wide, the output 128 a head) works the same."""
    q, kv, splits = head_split(graph, group)
    anchor = group.columns[0].name
    if q % tp:
        raise ShardError(f"{anchor}: {q} query heads are not divisible by --tp {tp}")
    if kv % tp and tp % kv:
        raise ShardError(f"{anchor}: {kv} kv heads cannot be split over --tp {tp} "
                         f"(need kv % tp == 0, or tp % kv == 0 to replicate them)")
    q_l, kv_l = q // tp, math.ceil(kv / tp)

    def local(h: int) -> int:
        return q_l if h == q else kv_l if h == kv else h // tp

    sizes: dict[int, int] = {q: q_l, kv: kv_l}
    if not splits:  # an attention op: the widths from its num_heads
        d = int(_width(graph, group.columns[0])) // q
        sizes.update({q * d: q_l * d, kv * d: kv_l * d, (q + 2 * kv) * d: (q_l + 2 * kv_l) * d})
        dims = {d}
    else:
        dims = set()
        for c in group.columns:
            parts = splits[c.name]
            sizes[int(_width(graph, c))] = sum(local(h) * d for h, d in parts)
            for h, d in parts:
                sizes.setdefault(h * d, local(h) * d)
                dims.add(d)
    row_w, row_axis = weight_of(graph, group.row)
    row_in = int(row_w.shape[1 - row_axis])
    if row_in not in sizes and row_in % q == 0:  # MLA: H x v_head_dim into the o_proj
        sizes[row_in] = row_in // q * q_l
    for c in group.columns:
        if int(_width(graph, c)) not in sizes:
            raise ShardError(f"{c.name}: width {_width(graph, c)} is none of Q, KV or fused QKV "
                             f"({q} query / {kv} kv heads)")
    note = (f"{q} query heads -> {q_l}, {kv} kv heads -> {kv_l}"
            + (" (replicated)" if tp > kv else "") + f", head_dim {'/'.join(str(d) for d in sorted(dims))}")
    return sizes, note


def _mlp_map(graph: Graph, group: _Group, tp: int) -> tuple[dict[int, int], str]:
    widths = {int(_width(graph, c)) for c in group.columns}
    for w in widths:
        if w % tp:
            raise ShardError(f"{group.columns[0].name}: width {w} is not divisible by --tp {tp}")
    return {w: w // tp for w in widths}, ", ".join(f"width {w} -> {w // tp}" for w in sorted(widths))


def _shard_dim(d: sympy.Expr, sizes: dict[int, int]) -> sympy.Expr | None:
    if d.is_Integer:
        return sympy.Integer(sizes[int(d)]) if int(d) in sizes else None
    coeff, rest = d.as_coeff_Mul()
    if coeff.is_Integer and int(coeff) in sizes and rest != 1:
        return sizes[int(coeff)] * rest
    return None


def shard_tensor(t: Tensor, sizes: dict[int, int], axis: int | None = None) -> Tensor:
    """`t` with one axis divided: `axis`, or the first whose size is a key of `sizes`."""
    if t.shape is None or (t.is_const and not t.is_weight):
        return t
    order = [axis % len(t.shape)] if axis is not None else range(len(t.shape))
    for i in order:
        new = _shard_dim(t.shape[i], sizes)
        if new is not None:
            return replace(t, shape=(*t.shape[:i], new, *t.shape[i + 1:]))
    return t


class _Editor:
    """Collects tensor rewrites and inserted collectives, then builds the new graph."""

    def __init__(self, graph: Graph, tp: int) -> None:
        self.graph, self.tp = graph, tp
        self.tensors = dict(graph.tensors)
        self.nodes = {n: graph.node(n) for n in graph.nx.nodes}
        self.after: dict[str, list[Node]] = {}
        self.rename: dict[str, str] = {}  # tensor read by consumers -> the collective's output
        self.done: set[str] = set()  # tensors already sharded (each is divided once)

    def shard(self, name: str, sizes: dict[int, int], axis: int | None = None) -> None:
        if name not in self.done:
            self.done.add(name)
            self.tensors[name] = shard_tensor(self.tensors[name], sizes, axis)

    def collective(self, after: Node, op: str, tensor: str, group: int | None = None, **attrs) -> None:
        """Insert `op` reading `tensor` right after `after`; readers of `tensor` read its output."""
        out = f"{tensor}/{op.lower()}"
        src = self.tensors[tensor]
        self.tensors[out] = replace(src, name=out)
        self.rename[tensor] = out
        node = Node(f"{after.name}/{op}", op, COMM_DOMAIN, (tensor,), (out,),
                    {"group_size": group or self.tp, **attrs})
        self.after.setdefault(after.name, []).append(node)

    def bypass(self, node: Node) -> None:
        """Drop a one-in one-out node (a collective made moot); its readers read its input."""
        del self.nodes[node.name]
        self.rename[node.outputs[0]] = node.inputs[0]

    def gather_output(self, after: Node, tensor: str, sizes: dict[int, int]) -> None:
        """The graph output `tensor` becomes an AllGather (axis -1) of the local shard."""
        local = f"{tensor}/shard"
        self.tensors[local] = shard_tensor(replace(self.tensors[tensor], name=local), sizes, -1)
        node = self.nodes[after.name]
        outs = tuple(local if o == tensor else o for o in node.outputs)
        self.nodes[after.name] = replace(node, outputs=outs)
        gather = Node(f"{after.name}/AllGather", "AllGather", COMM_DOMAIN, (local,), (tensor,),
                      {"group_size": self.tp, "axis": -1})
        self.after.setdefault(after.name, []).append(gather)

    def build(self) -> Graph:
        inserted = {n.name for ns in self.after.values() for n in ns}
        out: list[Node] = []
        for name, node in self.nodes.items():
            if self.rename and name not in inserted:
                ins = tuple(self.rename.get(t, t) for t in node.inputs)
                node = replace(node, inputs=ins) if ins != node.inputs else node
            out.append(node)
            out.extend(self.after.get(name, ()))
        g = self.graph
        outputs = tuple(self.rename.get(o, o) for o in g.outputs)
        return Graph(g.name, out, self.tensors, g.inputs, outputs, g.opsets, g.dims)


def _shard_group(ed: _Editor, group: _Group) -> str:
    graph = ed.graph
    sizes, note = (_attention_map if group.attention else _mlp_map)(graph, group, ed.tp)
    for c in group.columns:
        w, axis = weight_of(graph, c)
        ed.shard(w.name, sizes, axis)
        ed.shard(c.outputs[0], sizes)
    for name in group.region:
        n = graph.node(name)
        if n.op_type in ATTENTION:
            attrs = {k: math.ceil(v / ed.tp) if k in ("num_heads", "kv_num_heads") else v
                     for k, v in n.attrs.items()}
            ed.nodes[name] = replace(n, attrs=attrs)
        for t in (*n.inputs, *n.outputs):
            if t and t in ed.tensors and _shardable_input(graph, t, group.region):
                ed.shard(t, sizes)
        if n.op_type == "MatMul":  # per-head weights of MLA's absorbed decode (W_UK, W_UV [H, ...])
            for t in n.inputs[:2]:
                w = graph.tensors.get(t)
                if w is not None and w.is_weight and (w.rank or 0) >= 3:
                    ed.shard(t, sizes, 0)
    w, axis = weight_of(graph, group.row)
    ed.shard(w.name, sizes, 1 - axis)
    ed.collective(group.row, "AllReduce", group.row.outputs[0])
    cols = ", ".join(c.name for c in group.columns)
    kind = "attention" if group.attention else "mlp"
    return f"{kind}: column-parallel {cols}; row-parallel {group.row.name} + AllReduce; {note}"


def _shardable_input(graph: Graph, t: str, region: set[str]) -> bool:
    """Region outputs, graph inputs read by the region (past KV), and 1-D weights it reads (biases)."""
    src, tensor = graph.producer.get(t), graph.tensors[t]
    return src in region or t in graph.inputs or (tensor.is_weight and tensor.rank == 1)


def _embeddings(graph: Graph) -> Iterable[Node]:
    for n in graph.topo_nodes():
        if n.op_type != "Gather" or len(n.inputs) < 2:
            continue
        table, ids = graph.tensors.get(n.inputs[0]), graph.tensors.get(n.inputs[1])
        if (table is not None and table.is_weight and table.shape is not None and len(table.shape) == 2
                and ids is not None and n.inputs[1] in graph.inputs and ids.dtype in _INT_DTYPES):
            yield n


_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> (its size, groups, heads, blocks)


def _found(graph: Graph) -> tuple[list[_Group], list[Node], list]:
    """find_groups and find_blocks of `graph`, remembered per graph object: they read the graph, not the TP
    (the serving search shards one imported graph at every TP), and `shard_tp` only reads them. Keyed
    also by the graph's size, as Graph.topo_nodes' cache (graphs are not edited in place)."""
    size = (graph.nx.number_of_nodes(), graph.nx.number_of_edges(), len(graph.tensors))
    hit = _FOUND.get(graph)
    if hit is None or hit[0] != size:
        groups, heads = find_groups(graph)
        hit = _FOUND[graph] = (size, groups, heads, find_blocks(graph))
    return hit[1], hit[2], hit[3]


def shard_tp(graph: Graph, tp: int) -> ShardResult:
    """One GPU's graph under tensor parallelism `tp` (tp == 1: the same graph, modified=False)."""
    if tp < 1:
        raise ShardError(f"--tp {tp}: the tensor-parallel size must be a positive integer")
    if tp == 1:
        return ShardResult(graph, False, ())
    groups, heads, blocks = _found(graph)
    if not groups and not blocks:
        raise ShardError(f"--tp {tp}: no column-/row-parallel MatMul pair found in {graph.name!r} "
                         "(expected Q/K/V -> attention -> O and gate/up -> down)")
    ed = _Editor(graph, tp)
    decisions = [_shard_group(ed, g) for g in groups]
    decisions += [shard_block(ed, b, tp) for b in blocks]  # routed experts (passes/shard_moe.py)
    for emb in _embeddings(graph):
        vocab = int(graph.tensors[emb.inputs[0]].shape[0])
        if vocab % tp:
            raise ShardError(f"{emb.name}: vocabulary {vocab} is not divisible by --tp {tp}")
        ed.shard(emb.inputs[0], {vocab: vocab // tp}, 0)
        ed.collective(emb, "AllReduce", emb.outputs[0])
        decisions.append(f"embedding: vocab-parallel {emb.name} ({vocab} -> {vocab // tp} rows) + AllReduce")
    for head in heads:
        w, axis = weight_of(graph, head)
        vocab = int(w.shape[axis])
        if vocab % tp:
            raise ShardError(f"{head.name}: output width {vocab} is not divisible by --tp {tp}")
        ed.shard(w.name, {vocab: vocab // tp}, axis)
        ed.gather_output(head, head.outputs[0], {vocab: vocab // tp})
        decisions.append(f"lm_head: column-parallel by vocabulary {head.name} ({vocab} -> {vocab // tp}) "
                         "+ AllGather of the logits")
    return ShardResult(ed.build(), True, tuple(decisions))
