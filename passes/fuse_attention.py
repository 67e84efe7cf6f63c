"""fuse-attention: scaled-dot-product attention written out as ops becomes one flash-attention kernel.

# before -> after:  MatMul(Q, K^T) -> [Mul scale] -> [Add|Where mask] -> [Concat sinks] -> Softmax
#                   -> [Where nan] [Slice sinks off] -> MatMul(V)
#                   with the Transpose / Expand / Reshape around Q, K, V and O   =>   Fused(attention)
The kernel reads Q, K, V (K and V before the grouped-query Expand, so at kv heads) and the mask, writes
O, and never materializes the S x S scores; FLOPs are the flash-attention core's (4 * d per score),
halved (the exact triangle) when the mask is recognized as causal, capped at the window when the
causal mask also has a sliding-window band (passes/mask_window.py).

Legality (each refusal returns its reason): the softmax input must come from a MatMul through elementwise
ops only; the softmax output may only feed elementwise ops that end in the PV MatMul; no intermediate may
be read outside the pattern; fusing must not create a cycle.
"""

from __future__ import annotations

import sympy

from estimator.ir import Graph, Node
from estimator.ops import ELEMENTWISE
from estimator.symmath import simplified
from passes.dce import dce
from passes.fusion_common import same
from passes.graph_edit import (
    Consumers,
    Group,
    Refusal,
    apply_groups,
    convexity_violation,
    is_fused,
    is_host,
    is_weight,
    producer,
    upstream,
)
from passes.mask_window import window_left
from passes.pipeline import PassResult, register_pass

RULE = "fuse-attention"
# Layout and scaling ops exporters put around Q, K, V and O; absorbed when the kernel is their only reader.
# Slice: MLA's values are the first kv_lora_rank columns of the latent cache the keys read whole.
PREP_OPS = frozenset({"Transpose", "Reshape", "Expand", "Unsqueeze", "Squeeze", "Cast", "Mul", "Div",
                      "Slice"})
COMPARISONS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
CAUSAL_NAME_HINTS = ("causal", "tril", "bias", "mask")


def _numel(graph: Graph, tensor: str) -> sympy.Expr | None:
    t = graph.tensors.get(tensor)
    return None if t is None or t.shape is None else t.numel


def _score_chain(graph: Graph, cons: Consumers, softmax: Node) -> tuple[Node, list[Node], list[str]] | str:
    """Walk up from the softmax to the QK^T MatMul: (matmul, elementwise chain, mask inputs) or a reason."""
    chain: list[Node] = []
    masks: list[str] = []
    current = softmax.inputs[0]
    while True:
        p = producer(graph, current)
        if p is None or is_fused(p):
            return "softmax input is not computed by a MatMul"
        if cons.only(current) is None:
            return "scores are read outside the attention pattern"
        if p.op_type == "MatMul":
            return p, chain, masks
        sink = _sink_column(graph, p)
        if sink is not None:  # gpt-oss: Concat(scores, sink logit column) before the softmax
            masks.append(sink)
            chain.append(p)
            current = p.inputs[0]
            continue
        if p.op_type not in ELEMENTWISE:
            return f"softmax input passes through {p.op_type}, not an elementwise op"
        data = [t for t in p.inputs if t and not is_host(graph, t)]
        # The scores are the input as big as the op's output (a mask may broadcast up to it).
        main = next((t for t in data if same(_numel(graph, t), _numel(graph, p.outputs[0]))), None)
        if main is None:
            return f"{p.op_type} on the score path has no input the size of the scores"
        masks += [t for t in p.inputs if t and t != main]
        chain.append(p)
        current = main


def _rank(graph: Graph, tensor: str) -> int:
    t = graph.tensors.get(tensor)
    return 4 if t is None or t.shape is None else len(t.shape)  # unknown: still a candidate


def _sink_column(graph: Graph, node: Node) -> str | None:
    """The sink input of Concat(scores, sinks[..., 1]) along the last axis (attention sinks), or None."""
    if node.op_type != "Concat" or len(node.inputs) != 2 or int(node.attrs.get("axis", 0)) not in (-1, 3):
        return None
    sink = graph.tensors.get(node.inputs[1])
    if sink is None or sink.shape is None or not sink.shape or sink.shape[-1] != 1:
        return None
    return node.inputs[1]


def _probs_chain(graph: Graph, cons: Consumers, softmax: Node) -> tuple[Node, set[str]] | str:
    """Walk down from the softmax to the PV MatMul: (matmul, names of the elementwise ops between).
    Readers are admitted once all their activation inputs are inside (IsNaN -> Where(isnan, 0, p))."""
    inside = {softmax.name}
    produced = set(softmax.outputs)
    pending = {n.name: n for n in cons.of(softmax.outputs[0])}
    pv = None
    progress = True
    while pending and progress:
        progress = False
        for name, n in list(pending.items()):
            data = [t for t in n.inputs if t and not is_host(graph, t) and not is_weight(graph, t)]
            if n.op_type == "MatMul" and n.inputs[0] in produced:
                if pv is not None and pv.name != n.name:
                    return "attention probabilities feed two MatMuls"
                pv = n
            elif (n.op_type in ELEMENTWISE or n.op_type == "Slice") and all(t in produced for t in data):
                # Slice: dropping the sink column again
                inside.add(name)
                produced.update(n.outputs)
                pending.update({c.name: c for o in n.outputs for c in cons.of(o) if c.name not in inside})
            else:
                continue
            del pending[name]
            progress = True
    if pending:
        n = next(iter(pending.values()))
        return f"attention probabilities are read by {n.op_type} outside the pattern"
    if pv is None:
        return "softmax output does not reach a MatMul"
    if produced & set(graph.outputs):
        return "attention probabilities are a graph output"
    return pv, inside


def _prep(graph: Graph, cons: Consumers, tensor: str, taken: set[str]) -> list[Node]:
    """Layout/scale ops feeding `tensor` that the kernel can absorb (each read only by the group)."""
    absorbed = []
    while True:
        p = producer(graph, tensor)
        if p is None or is_fused(p) or p.op_type not in PREP_OPS:
            return absorbed
        readers = cons.of(tensor)
        if tensor in graph.outputs or any(r.name not in taken and r.name != p.name for r in readers):
            return absorbed
        data = [t for t in p.inputs if t and not is_host(graph, t)]
        if len(data) != 1:  # a Mul of two activations is not a scale
            return absorbed
        absorbed.append(p)
        taken.add(p.name)
        tensor = data[0]


def _output_ops(cons: Consumers, pv: Node) -> list[Node]:
    """The Transpose (and Reshape) merging heads after PV, when the kernel is their only producer; a
    Reshape before the Transpose too (torch's exporter writes a same-shape view there: DeepSeek-V3)."""
    out, tensor = [], pv.outputs[0]
    for op_types in (("Reshape",), ("Transpose",), ("Reshape",)):
        c = cons.only(tensor)
        if c is None or c.op_type not in op_types:
            if not out and op_types == ("Reshape",):
                continue  # no leading view: the Transpose comes first
            break
        out.append(c)
        tensor = c.outputs[0]
    return out if any(n.op_type == "Transpose" for n in out) else []  # never a lone view


def is_causal(graph: Graph, masks: list[str], budget: int = 64) -> bool:
    """NB: a heuristic, since mask values are run-time data. A mask is taken as causal when what builds
    it contains a Trilu, a comparison of two position (Range-derived) tensors, or a square 2-D buffer
    whose name says causal/tril/bias/mask (GPT-2's `attn.bias`)."""
    for t, p in upstream(graph, masks, budget):
        info = graph.tensors.get(t)
        if p is None:
            if (
                info is not None
                and info.is_weight
                and info.shape is not None
                and len(info.shape) == 2
                and info.shape[0] == info.shape[1]
                and any(h in t.lower() for h in CAUSAL_NAME_HINTS)
            ):
                return True
            continue
        if p.op_type == "Trilu":
            return True
        if p.op_type in COMPARISONS and all(_from_range(graph, i) for i in p.inputs[:2]):
            return True
    return False


def _from_range(graph: Graph, tensor: str, budget: int = 24) -> bool:
    return any(p is not None and p.op_type == "Range" for _, p in upstream(graph, [tensor], budget))


def kv_group(graph: Graph, kv: tuple, preps: tuple[list[Node], list[Node]]) -> int:
    """Query heads per K/V head of a fused attention: numel(K as the kernel's QK^T reads it) /
    numel(K where it enters the kernel), before a grouped-query Expand (HF repeat_kv). 1 when K and V
    disagree, when the ratio is not a provable integer, or without GQA."""
    groups = []
    for t, prep in zip(kv, preps, strict=True):
        entry = _entry(graph, prep) if prep else t.name
        n = _numel(graph, entry)
        ratio = simplified(t.numel / n) if n else None
        groups.append(int(ratio) if ratio is not None and ratio.is_Integer and ratio > 1 else 1)
    return groups[0] if groups[0] == groups[1] else 1


def _entry(graph: Graph, prep: list[Node]) -> str:
    """The tensor entering the last absorbed prep op (its one activation input)."""
    last = prep[-1]
    return next(t for t in last.inputs if t and not is_host(graph, t))


def _kv_batch_heads(graph: Graph, kt: str, names: set[str], per_head: sympy.Expr) -> sympy.Expr | None:
    """batch x K heads of the K tensor the kernel reads (before the grouped-query Expand it absorbed),
    when that provably divides the query's batch x heads; None otherwise."""
    tensor = kt
    while (p := producer(graph, tensor)) is not None and p.name in names and p.op_type in PREP_OPS:
        data = [t for t in p.inputs if t and not is_host(graph, t)]
        if len(data) != 1:
            break
        tensor = data[0]
    t = graph.tensors.get(tensor)
    if t is None or t.shape is None:
        return None
    heads = simplified(t.numel / per_head)
    return heads if heads.is_integer else None


def match(graph: Graph, cons: Consumers, softmax: Node, taken: set[str]) -> Group | str:
    """The attention group anchored at `softmax`, or why there is none."""
    up = _score_chain(graph, cons, softmax)
    if isinstance(up, str):
        return up
    qk, chain, masks = up
    down = _probs_chain(graph, cons, softmax)
    if isinstance(down, str):
        return down
    pv, probs = down
    q, kt, v, scores = (
        graph.tensors.get(t) for t in (qk.inputs[0], qk.inputs[1], pv.inputs[1], qk.outputs[0])
    )
    if any(t is None or t.shape is None or len(t.shape) < 2 for t in (q, kt, v, scores)):
        return "Q, K, V or the scores have no shape"
    core = {qk.name, pv.name, *probs, *(n.name for n in chain)}
    names = set(core)
    if names & taken:
        return "already part of another fused kernel"
    absorbed = {}
    for t in (qk.inputs[0], qk.inputs[1], pv.inputs[1]):
        absorbed[t] = _prep(graph, cons, t, names)
        names |= {n.name for n in absorbed[t]}
    names |= {n.name for n in _output_ops(cons, pv)}
    reason = convexity_violation(graph, names)
    if reason:
        return reason
    kv_bh = _kv_batch_heads(graph, qk.inputs[1], names, scores.shape[-1] * q.shape[-1])
    causal = is_causal(graph, masks)
    window = window_left(graph, masks) if causal else None
    info = {
        "batch_heads": sympy.Mul(*scores.shape[:-2]),
        "seq_q": scores.shape[-2],
        "seq_kv": scores.shape[-1],
        "dk": q.shape[-1],
        "dv": v.shape[-1],
        "causal": causal,
        "dtype": q.dtype,
        "kv_dtype": kt.dtype,  # the cache's (MLA: an fp8 latent under a bf16 query, pricing/mla.py)
        "kv_group": kv_group(graph, (kt, v), (absorbed[qk.inputs[1]], absorbed[pv.inputs[1]])),
        "window": -1 if window is None else window,
        "kv_batch_heads": kv_bh,  # K/V heads (x batch) the kernel reads: grouped-query / MLA sharing
        "_members": tuple(sorted(core)),  # underscore: names, not part of the kernel's signature
    }
    # A causal (or banded) kernel builds its mask from tile indices: it does not read the mask tensor.
    return Group(RULE, frozenset(names), "attention", {"attention": info}, anchor=qk.name,
                 drop_inputs=frozenset(masks) if causal else frozenset())


@register_pass(RULE)
def fuse_attention(graph: Graph) -> PassResult:
    cons = Consumers(graph)
    groups, refusals, taken = [], [], set()
    for node in graph.topo_nodes():
        if node.op_type != "Softmax" or node.name in taken or _rank(graph, node.inputs[0]) < 3:
            continue  # rank < 3: a router or classifier softmax, not attention scores (no refusal)
        found = match(graph, cons, node, taken)
        if isinstance(found, str):
            refusals.append(Refusal(RULE, (node.name,), found))
            continue
        groups.append(found)
        taken |= found.names
    if not groups:
        return PassResult(graph, False, tuple(refusals))
    # dce: a causal mask nobody reads any more is not built either.
    return PassResult(dce(apply_groups(graph, groups)).graph, True, tuple(refusals))
