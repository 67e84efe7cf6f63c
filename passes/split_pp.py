"""Pipeline parallelism as a graph pass: split the decoder layers into stages and insert the sends.

# before -> after:  emb -> layer 0 .. layer L-1 -> norm -> lm_head           (one GPU)
#                   stage 0: emb, layers 0..L/pp-1 -> Send | ... | stage pp-1: ... -> norm -> lm_head
Counting rules:
- A node's layer is the N of `layers.N` in its name (torch's module path, as the bundled builders and
  transformers exports write it). Layer i goes to stage floor(i * pp / L): contiguous, as even as the
  count allows. Nodes before the first layer (embedding, rotary tables) belong to stage 0, nodes after
  the last (final norm, lm_head) to stage pp - 1: that imbalance is shown, not averaged away. A node
  without a layer in its name sits in the stage of its latest producer.
- Every tensor made in stage s and read in stage t > s crosses once per stage boundary: a `Send`
  (domain estimator, attribute peer_stage) from stage s writes it, and the readers in later stages
  read the sent copy. NB: the small RoPE tables and masks built once in stage 0 are sent too, where a
  real engine rebuilds them on each stage.
The graph stays one graph (all stages' kernels, priced once each); `PipelineStages` attributes every
kernel to its stage and reports per-stage time, the slowest stage and the bubble.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import sympy

from estimator.ir import Graph, Node
from passes.shard_error import ShardError

LAYER = re.compile(r"layers\.(\d+)(?:[./]|$)")
SEND_DOMAIN = "estimator"


def layer_of(name: str) -> int | None:
    m = LAYER.search(name)
    return int(m.group(1)) if m else None


@dataclass
class PipelineStages:
    graph: Graph
    pp: int
    layers: int
    stage_of: dict[str, int]  # node name -> stage

    def kernel_stage(self, kernel) -> int:
        """The stage of a (possibly fused) kernel: of its first member."""
        for n in (kernel.name, *(m.name for m in kernel.nodes)):
            if n in self.stage_of:
                return self.stage_of[n]
        found = layer_of(kernel.name)
        return 0 if found is None else found * self.pp // self.layers

    def stage_times(self, result) -> list[sympy.Expr]:
        times: dict[int, list] = defaultdict(list)
        for p in result.kernels:
            times[self.kernel_stage(p.kernel)].append(p.timing.estimate_s)
        return [sympy.Add(*times.get(s, [])) for s in range(self.pp)]

    def report(self, result, micro_batches: int | None = None) -> dict:
        """Per-stage estimate, the slowest stage, balance, bubble for m micro-batches (default pp)."""
        t = [float(x) for x in self.stage_times(result)]
        m = micro_batches or self.pp
        slowest = max(t)
        return {
            "stages": self.pp,
            "layers": self.layers,
            "stage_estimate_s": t,
            "slowest_stage_s": slowest,
            "traversal_s": sum(t),
            "balance": (sum(t) / self.pp) / slowest if slowest else 1.0,
            "micro_batches": m,
            "bubble_fraction": (self.pp - 1) / (m + self.pp - 1),
            "cycle_s": slowest,
            "micro_batches_time_s": (m + self.pp - 1) * slowest,
        }

    def report_text(self, result) -> str:
        r = self.report(result)
        rows = "  ".join(f"stage {i}: {s * 1e3:.3f} ms" for i, s in enumerate(r["stage_estimate_s"]))
        return (
            f"pipeline: {r['stages']} stages over {r['layers']} layers; {rows}\n"
            f"  slowest stage {r['slowest_stage_s'] * 1e3:.3f} ms, balance {r['balance']:.0%}, "
            f"one micro-batch traverses in {r['traversal_s'] * 1e3:.3f} ms; "
            f"with {r['micro_batches']} micro-batches the bubble is {r['bubble_fraction']:.0%} "
            "((pp - 1) / (m + pp - 1))"
        )


def _stages(graph: Graph, pp: int) -> tuple[dict[str, int], int]:
    order = list(graph.topo_nodes())
    found = [layer_of(n.name) for n in order]
    known = [f for f in found if f is not None]
    if not known:
        raise ShardError(f"--pp {pp}: no decoder layers (node names with 'layers.N') in {graph.name!r}")
    layers = max(known) + 1
    if pp > layers:
        raise ShardError(f"--pp {pp} is larger than the layer count ({layers} layers)")
    stage: dict[str, int] = {}
    for node, lay in zip(order, found, strict=True):
        if lay is not None:
            stage[node.name] = lay * pp // layers
        else:
            stage[node.name] = max((stage[p] for p in graph.nx.predecessors(node.name)), default=0)
    last_layer_pos = max(i for i, f in enumerate(found) if f is not None)
    for node in order[last_layer_pos + 1 :]:  # final norm, lm_head: the last stage
        stage[node.name] = pp - 1
    return stage, layers


def split_pp(graph: Graph, pp: int) -> PipelineStages:
    """Stages and sends for `pp` pipeline stages (pp == 1: the graph unchanged)."""
    if pp < 1:
        raise ShardError(f"--pp {pp}: the number of stages must be a positive integer")
    stage, layers = _stages(graph, pp)
    if pp == 1:
        return PipelineStages(graph, 1, layers, stage)
    tensors = dict(graph.tensors)
    sends: dict[str, list[Node]] = defaultdict(list)
    renamed: dict[tuple[str, int], str] = {}  # (tensor, reading stage) -> the sent copy
    for name in graph.nx.nodes:
        node = graph.node(name)
        for t in (o for o in node.outputs if o):
            readers = {stage[r] for r in graph.nx.successors(name) if t in graph.node(r).inputs}
            later = sorted(s for s in readers if s > stage[name])
            if not later or t not in tensors or tensors[t].is_const:
                continue
            copy = f"{t}/sent"
            tensors[copy] = tensors[t]
            send = Node(f"{name}/Send", "Send", SEND_DOMAIN, (t,), (copy,), {"peer_stage": later[0]})
            sends[name].append(send)
            stage[send.name] = stage[name]
            for s in later:
                renamed[(t, s)] = copy
    nodes = []
    for name in graph.nx.nodes:
        node = graph.node(name)
        ins = tuple(renamed.get((t, stage[name]), t) for t in node.inputs)
        nodes.append(
            node
            if ins == node.inputs
            else Node(node.name, node.op_type, node.domain, ins, node.outputs, dict(node.attrs), node.body)
        )
        nodes.extend(sends.get(name, ()))
    new = Graph(graph.name, nodes, tensors, graph.inputs, graph.outputs, graph.opsets, graph.dims)
    return PipelineStages(new, pp, layers, stage)
