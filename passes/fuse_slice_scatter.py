"""fuse-slice-scatter: a fresh buffer filled by slice_scatter writes along one axis is one concatenation.

# before -> after:
#   buf = Transpose(ConstantOfShape(shape), p)   (host-known: the exporter may share it between layers)
#   buf = Transpose(ScatterND(buf, idx_0, Transpose(part_0, p)), p^-1)
#   repeat: buf = Transpose(ScatterND(Transpose(buf, p), idx_i, Transpose(part_i, p)), p^-1)
#                                                                    =>   Fused(movement): Concat(parts)
transformers writes DeepSeek-V3's query / key assembly (`key_states[..., :nope] = k_pass;
key_states[..., nope:] = k_rot` into `new_empty`) this way, and torch's exporter lowers each
slice_scatter to a ScatterND on the axis moved to the front by a Transpose pair (ScatterND indexes the
leading axes). Priced as written, each write copies the whole buffer twice through transposes (four
times the bytes of the result per part). A serving engine builds the same tensor with one concat
kernel (or feeds the parts to the attention kernel apart): the fused kernel reads each part once and
writes the result once; the buffer's zero fill, the transposes and the intermediate buffers never
reach DRAM.

Legality (a reason when refused): every tensor inside the chain is read only by the next op of the
chain (a Shape of it aside: it reads no data; not a graph output); each ScatterND's update is a
Transpose by the same perm as its buffer's (or the part itself); the writes' index counts add up to
the buffer's axis size. NB: the index values (host-computed Range slices) are not read: the parts are
taken to tile the axis, as slice_scatter of consecutive slices does; a chain that writes fewer rows
than the axis holds is refused.
"""

from __future__ import annotations

import sympy

from estimator.ir import Graph, Node
from passes.fuse_patterns import run_matcher
from passes.graph_edit import Consumers, Group, convexity_violation, is_host, producer
from passes.pipeline import PassResult, register_pass

RULE = "fuse-slice-scatter"


def _perm(node: Node) -> tuple[int, ...] | None:
    perm = node.attrs.get("perm")
    return tuple(int(a) for a in perm) if perm is not None else None


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _only(cons: Consumers, tensor: str) -> Node | None:
    """The one reader of `tensor`'s data (a Shape or Size reads only its shape: ignored)."""
    readers = [r for r in cons.of(tensor) if r.op_type not in ("Shape", "Size")]
    return readers[0] if len(readers) == 1 and tensor not in cons.graph.outputs else None


Write = tuple[list[Node], str, sympy.Expr]  # (the write's nodes, the buffer after it, rows written)


def _scatter(graph: Graph, cons: Consumers, scatter: Node, perm: tuple[int, ...]) -> Write | str:
    """A ScatterND of whole rows into a buffer transposed by `perm`, transposed back: (its nodes, the
    buffer after it, rows written) or a near-miss reason."""
    if str(scatter.attrs.get("reduction", "none")) not in ("none", "b'none'"):
        return f"near miss (slice_scatter): {scatter.name} reduces ({scatter.attrs.get('reduction')})"
    t_out = _only(cons, scatter.outputs[0])
    if t_out is None or t_out.op_type != "Transpose" or _perm(t_out) != _inverse(perm):
        return f"near miss (slice_scatter): {scatter.name}'s result is not transposed back"
    idx = graph.tensors.get(scatter.inputs[1])
    if idx is None or idx.shape is None or len(idx.shape) != 2 or idx.shape[1] != 1:
        return f"near miss (slice_scatter): {scatter.name} does not index whole rows of one axis"
    nodes = [scatter, t_out]
    upd = producer(graph, scatter.inputs[2])
    if upd is not None and upd.op_type == "Transpose" and _perm(upd) == perm and _only(cons, upd.outputs[0]):
        nodes.append(upd)
    return nodes, t_out.outputs[0], idx.shape[0]


def _next_write(graph: Graph, cons: Consumers, buf: str) -> Write | str | None:
    """The next slice_scatter write of `buf` (Transpose, ScatterND, Transpose back), a near-miss
    reason, or None when the chain ends here."""
    t_in = _only(cons, buf)
    if t_in is None or t_in.op_type != "Transpose" or _perm(t_in) is None:
        return None
    scatter = _only(cons, t_in.outputs[0])
    if scatter is None or scatter.op_type != "ScatterND" or scatter.inputs[0] != t_in.outputs[0]:
        return None
    found = _scatter(graph, cons, scatter, _perm(t_in))
    return found if isinstance(found, str) else ([t_in, *found[0]], found[1], found[2])


def _fresh_buffer(graph: Graph, scatter: Node) -> tuple[int, ...] | None:
    """The perm of the Transpose(ConstantOfShape) a first write scatters into, or None. The buffer is
    host-known (a fill), so it costs no DRAM read and may be shared by several chains."""
    t = producer(graph, scatter.inputs[0])
    if t is None or t.op_type != "Transpose" or _perm(t) is None or not is_host(graph, t.outputs[0]):
        return None
    fill = producer(graph, t.inputs[0])
    return _perm(t) if fill is not None and fill.op_type == "ConstantOfShape" else None


def match(graph: Graph, cons: Consumers, scatter: Node) -> Group | str | None:
    """The concat group anchored at the first write into a fresh buffer, a near-miss reason, or None."""
    if scatter.op_type != "ScatterND" or len(scatter.inputs) < 3:
        return None
    perm = _fresh_buffer(graph, scatter)
    if perm is None:
        return None
    found = _scatter(graph, cons, scatter, perm)
    if isinstance(found, str):
        return found
    nodes, buf, rows = found
    axis = graph.tensors[scatter.inputs[0]].shape
    last = nodes[1]
    while (found := _next_write(graph, cons, buf)) is not None:
        if isinstance(found, str):
            return found
        write, buf, n = found
        nodes += write
        rows += n
        last = write[2]  # the Transpose back: the chain's result so far
    if not axis or sympy.simplify(rows - axis[0]) != 0:
        return f"near miss (slice_scatter): the writes cover {rows} of {axis[0] if axis else '?'} rows"
    names = {n.name for n in nodes}
    reason = convexity_violation(graph, names)
    if reason:
        return reason
    return Group(RULE, frozenset(names), "movement", anchor=last.name)


@register_pass(RULE)
def fuse_slice_scatter(graph: Graph) -> PassResult:
    """Every slice_scatter chain over a fresh buffer becomes one concatenation kernel."""
    return run_matcher(graph, RULE, match)
