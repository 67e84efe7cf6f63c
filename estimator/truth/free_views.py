"""The executed nodes the estimator prices as free: views and host-side shape arithmetic.

onnxruntime executes a Reshape or a Shape -> Gather -> Concat chain as nodes with a (small) measured
time; the estimator prices them as no kernel (estimator/cost/views.py, host-side constness in the
frontend). In the join they are neither a kernel's time nor a gap of the model: they are the "free
views" bucket, reported apart (count, time, by op) so that a missed join shows as what it is.

An unjoined executed node is a free view when its op is a view or shape op (estimator.ops VIEW | SHAPE)
or when every source node it computes is one the estimator left out of all kernels without listing it as
uncosted (a node it judged free: a view, a host-side value). NB: onnxruntime-inserted nodes with no
source node and another op type stay unjoined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from estimator.estimate import Result
from estimator.ops import SHAPE, VIEW
from estimator.truth.ort_runner import NodeTime


def free_source_nodes(result: Result, model: onnx.ModelProto | None) -> set[str]:
    """Source nodes of `model` in no kernel of `result` and not uncosted: the ones priced as free (none
    without a model: a profile read from a file is joined by name and op type alone)."""
    if model is None:
        return set()
    in_kernels = {n.name for p in result.kernels for n in p.kernel.nodes}
    uncosted = {u.node for u in result.uncosted}
    return {n.name for n in model.graph.node} - in_kernels - uncosted


def split_free_views(result: Result, model: onnx.ModelProto | None, unjoined: Sequence[NodeTime],
                     name_map: Mapping[str, tuple[str, ...]]) -> tuple[list[NodeTime], list[NodeTime]]:
    """(free views, still unjoined) among the executed nodes the join left unjoined."""
    free_sources = free_source_nodes(result, model)
    free, rest = [], []
    for t in unjoined:
        sources = name_map.get(t.name, ())
        is_free = t.op in VIEW | SHAPE or (bool(sources) and all(s in free_sources for s in sources))
        (free if is_free else rest).append(t)
    return free, rest


def by_op(nodes: Sequence[NodeTime]) -> dict[str, dict[str, float]]:
    """{op: {"nodes": count, "measured_s": total}} for the report, largest time first."""
    out: dict[str, dict[str, float]] = {}
    for t in nodes:
        row = out.setdefault(t.op, {"nodes": 0, "measured_s": 0.0})
        row["nodes"] += 1
        row["measured_s"] += t.seconds
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["measured_s"]))
