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

Before the join is trusted it is scored (`Joined.match`, `MatchScore`): a profile of another program
joins "by order" just as readily, since an `other` record fits any kernel and WINDOW lets the walk skip.
The score is the product of three shares, each in [0, 1]:
- coverage: the estimator's kernels that received a record, over all of them (per iteration): a capture
  of 19 kernels against a model of 600 covers 3 % of it;
- order: the joined records that took the very next kernel of the walk (no skip);
- kinds: the joined measured time whose record named its kind (gemm, norm, ...) rather than `other`,
  counted in full, plus half the time of `other` records (a name that says nothing is half the evidence).
A join by node name scores the share of the named records' time whose name is a node of the model.
Below MATCH_THRESHOLD the command refuses with the score (`--force-join` joins anyway). NB: launch shapes
are not scored (few formats record them, and a library's grid is not the estimator's tile choice).

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
# A join scoring below this is refused (see the module docstring). 0.5: a profile of the model itself
# scores near 1 (every kernel covered, in order, kinds named); one that covers half the model, or whose
# records are all unnamed `other` kernels taken out of order, does not pass.
MATCH_THRESHOLD = 0.5
_ORT_NVTX = re.compile(r"^[\w.]+\.\d+\((.*)\)$")  # OpType.Index(NodeName)


@dataclass(frozen=True)
class MatchScore:
    """How well a profile matches the model it is joined to (see the module docstring)."""

    coverage: float
    order: float
    kinds: float
    detail: str  # the counts behind the shares, for the refusal message

    @property
    def score(self) -> float:
        return self.coverage * self.order * self.kinds

    def to_json(self) -> dict[str, float | str]:
        return {"score": self.score, "coverage": self.coverage, "order": self.order, "kinds": self.kinds,
                "threshold": MATCH_THRESHOLD, "detail": self.detail}


PERFECT = MatchScore(1.0, 1.0, 1.0, "")


@dataclass
class Joined:
    strategy: str  # "node" or "order"
    times: list[NodeTime]  # per source node (joined) or per measured kernel name (unjoined)
    unjoined_names: set[str]  # NodeTime names that are measured kernels, not graph nodes
    iterations: int
    # record index -> Result.kernels index, where the record is that kernel's whole time in its iteration
    assigned: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    match: MatchScore = PERFECT


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
    named_s = sum(k.duration_s for k, n in zip(profile.kernels, named, strict=True) if n)
    joined_s = sum(k.duration_s for k, n in zip(profile.kernels, named, strict=True) if n in kernel_of)
    share = joined_s / named_s if named_s > 0 else 1.0
    match = MatchScore(share, 1.0, 1.0, f"{100 * share:.0f} % of the named records' time names a node "
                                        f"of the model")
    return Joined("node", _median_per_run(items), loose, profile.runs, assigned, match=match)


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
    in_order = typed_s = other_s = 0.0
    for i in _order(profile):
        k = profile.kernels[i]
        found = _next_match(est, j, k.kind) if device is None or k.device == device else None
        if found is None:
            loose.append((k.short, k.kind, 0, k.duration_s))
            continue
        in_order += found == j
        if k.kind == "other":
            other_s += k.duration_s
        else:
            typed_s += k.duration_s
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
    records = sum(len(idx) for idx in hits.values())
    match = MatchScore(
        len(hits) / len(est) if est else 0.0,
        in_order / records if records else 0.0,
        (typed_s + other_s / 2) / (typed_s + other_s) if typed_s + other_s > 0 else 0.0,
        f"{len(hits)} of the model's {len(est)} kernels received a record; {int(in_order)} of {records} "
        f"joined records in order; {100 * other_s / (typed_s + other_s or 1):.0f} % of the joined time in "
        f"kernels whose name gives no kind",
    )
    return Joined("order", times + unjoined, {t.name for t in unjoined}, iterations, assigned, notes, match)
