"""Measured kernels -> the estimator's kernels, then the same Validation (and report) as `--validate`.

Strategies, the first that applies:
1. **node**: the records name their graph node (onnxruntime's `<node>_kernel_time`, or an NVTX range,
   onnxruntime's `OpType.Index(NodeName)` or the bare node name) and some of those names are source
   nodes of the estimate: every node's time is the median over runs of its per-run sum.
2. **order**: otherwise the records are walked in time order beside the estimator's kernels, and each
   record takes the next kernel (within WINDOW) of a compatible kind (`other` fits any kind); when the
   estimate's kernel list runs out the walk starts again (the next iteration of the model), and times
   are averaged over the iterations walked. NB: shapes are not compared (few formats record them), so a
   kernel the library splits in two joins its first half by order and leaves the second unjoined.

A summary table (`cuda_gpu_kern_sum`: one record per name) has no order to walk: it is compared in total
only. A profile of several devices joins the first device's kernels (one copy of the graph); the other
devices' kernels are shown as unjoined.

Unjoined records are never dropped: they become unjoined NodeTimes (named by their short kernel name)
and the report shows their time. The joined NodeTimes go through validate.measured_validation with the
name map by node name, so the table and JSON are validate_report's.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from estimator.profile.ort_json import OP_KINDS
from estimator.profile.record import Profile
from estimator.truth.ort_runner import NodeTime

WINDOW = 8  # estimator kernels looked ahead for a measured kernel of the same kind
_ORT_NVTX = re.compile(r"^[\w.]+\.\d+\((.*)\)$")  # OpType.Index(NodeName)


@dataclass
class Joined:
    strategy: str  # "node" or "order"
    times: list[NodeTime]  # per source node (joined) or per measured kernel name (unjoined)
    unjoined_names: set[str]  # NodeTime names that are measured kernels, not graph nodes
    iterations: int
    # record index -> Result.kernels index, where the record is that kernel's whole time in its iteration
    assigned: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def node_name(label: str | None) -> str | None:
    if not label:
        return None
    m = _ORT_NVTX.match(label)
    return m.group(1) if m else label


def estimate_kind(kind: str) -> str:
    return OP_KINDS.get(kind, "other")


def join(profile: Profile, result) -> Joined:
    kernel_of = {n.name: i for i, p in enumerate(result.kernels) for n in p.kernel.nodes}
    named = [node_name(k.node) for k in profile.kernels]
    if any(n in kernel_of for n in named if n):
        return _by_node(profile, named, kernel_of)
    if profile.summary or any(k.instances > 1 for k in profile.kernels):
        loose = [(k.short, k.kind, 0, k.duration_s) for k in profile.kernels]
        return Joined("none", _median_per_run(loose), {k.short for k in profile.kernels}, 1,
                      notes=["a summary table has no launch order to join by: totals only, every kernel "
                             "listed as unjoined"])
    devices = sorted({k.device for k in profile.kernels if k.device is not None})
    if len(devices) > 1:  # one graph per device: walk the first device's kernels, show the others unjoined
        return _by_order(profile, result, devices[0], len(devices))
    return _by_order(profile, result)


def _median_per_run(items: list[tuple[str, str, int, float]]) -> list[NodeTime]:
    """(name, op, run, seconds) -> one NodeTime per name (first-seen order): the median over the runs
    it ran in of its per-run sums."""
    per: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    ops: dict[str, str] = {}
    for name, op, run, s in items:
        per[name][run] += s
        ops.setdefault(name, op)
    return [NodeTime(n, ops[n], statistics.median(r.values())) for n, r in per.items()]


def _by_node(profile: Profile, named: list[str | None], kernel_of: dict[str, int]) -> Joined:
    """Records with a node name time that node; the others are unjoined under their kernel name
    (onnxruntime node records: their node name, so unjoined nodes read as in --validate)."""
    items, loose = [], set()
    counts: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))  # node, run -> records
    for i, (k, n) in enumerate(zip(profile.kernels, named, strict=True)):
        if n in kernel_of:
            items.append((n, k.op or k.kind, k.run, k.duration_s))
            counts[n][k.run].append(i)
        else:
            items.append((k.short, k.op or k.kind, k.run, k.duration_s))
            loose.add(k.short)
    # a node that launched one kernel per run owns that kernel's Work; several kernels share it (not 1:1)
    assigned = {
        i: kernel_of[n]
        for n, runs in counts.items()
        if all(len(r) == 1 for r in runs.values())
        for r in runs.values()
        for i in r
    }
    return Joined("node", _median_per_run(items), loose, profile.runs, assigned)


def _order(profile: Profile) -> list[int]:
    ks = profile.kernels
    if profile.timeline:
        return sorted(range(len(ks)), key=lambda i: (ks[i].start_s is None, ks[i].start_s or 0.0))
    return list(range(len(ks)))  # ncu and onnxruntime records are in launch order


def _next_match(est: list[str], j: int, kind: str) -> int | None:
    """The first estimator kernel from j on (cyclically, within WINDOW) that a `kind` record can be."""
    for step in range(min(WINDOW, len(est))):
        e = (j + step) % len(est)
        if kind == "other" or est[e] == kind:
            return e
    return None


def _by_order(profile: Profile, result, device: int | None = None, devices: int = 1) -> Joined:
    est = [estimate_kind(p.kernel.kind) for p in result.kernels]
    measured: dict[int, float] = defaultdict(float)
    hits: dict[int, list[int]] = defaultdict(list)
    loose = []
    j, wraps, wrapped = 0, 0, False
    for i in _order(profile):
        k = profile.kernels[i]
        found = _next_match(est, j, k.kind) if device is None or k.device == device else None
        if found is None:
            loose.append((k.short, k.kind, 0, k.duration_s))
            continue
        if wrapped or found < j:  # this kernel starts the model's next iteration
            wraps += 1
        measured[found] += k.duration_s
        hits[found].append(i)
        j, wrapped = found + 1, found + 1 == len(est)
        j %= len(est)
    iterations = wraps + 1
    times = [
        NodeTime(result.kernels[e].kernel.nodes[0].name, result.kernels[e].kernel.op, s / iterations)
        for e, s in sorted(measured.items())
    ]
    unjoined = [NodeTime(t.name, t.op, t.seconds / iterations) for t in _median_per_run(loose)]
    assigned = {i: e for e, idx in hits.items() for i in idx}  # one record per kernel and iteration
    notes = [f"{devices} devices in the profile: device {device}'s kernels joined, the others' listed as "
             f"unjoined"] if device is not None else []
    return Joined("order", times + unjoined, {t.name for t in unjoined}, iterations, assigned, notes)
