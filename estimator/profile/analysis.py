"""One profile analysed: every kernel against the peaks (with the estimator's Work where it is joined),
the timeline, the per-kind totals, and the join to an estimate as a validate.Validation."""

from __future__ import annotations

from dataclasses import dataclass, field

from estimator.profile import gpu as gpu_mod
from estimator.profile import peaks, summary, timeline
from estimator.profile.join import Joined, join
from estimator.profile.record import MeasuredKernel, Profile


@dataclass(frozen=True)
class Row:
    index: int  # into Profile.kernels
    kernel: MeasuredKernel
    achieved: peaks.Achieved
    bottleneck: peaks.Bottleneck
    gap_before_s: float | None
    estimate_kernel: int | None  # Result.kernels index when joined 1:1


@dataclass
class Analysis:
    profile: Profile
    hw: object | None  # HardwareDescriptor
    hw_note: str
    rows: list[Row]
    timeline: timeline.Timeline | None
    by_kind: dict[str, dict[str, float]]
    joined: Joined | None = None
    validation: object | None = None  # estimator.truth.validate.Validation
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the device measured vs the one priced (gpu.py)

    def idle_class(self) -> str | None:
        """'idle' when the devices sat idle for most of the captured span."""
        t = self.timeline
        return "idle" if t is not None and t.span_s > 0 and t.idle_s > t.busy_s else None


def analyse(profile: Profile, arch: str | None = None, result=None, model=None) -> Analysis:
    """Peaks per kernel (from the profile's GPU or `arch`), the timeline, and, given an estimator Result
    (and the onnx proto it came from), the join and its Validation."""
    hw, note = gpu_mod.resolve(profile.gpu, arch)
    if profile.host:
        hw, note = None, "host (CPU) execution: no GPU peaks apply"
    tl = timeline.build(profile.kernels) if profile.timeline else None
    joined = validation = None
    warned = gpu_mod.warnings(profile.gpu, result.hw if result is not None else hw, profile.host)
    if result is not None:
        joined = join(profile, result)
        validation = _validation(profile, result, model, joined, tl)
        if profile.host:  # the validation says it itself (a CPU run against a GPU estimate)
            warned = []
        validation.warnings[:0] = warned
    dram = gpu_mod.dram_peak(profile.gpu, hw) if hw is not None else None
    rows = []
    for i, k in enumerate(profile.kernels):
        e = joined.assigned.get(i) if joined else None
        work = result.kernels[e].kernel.work if e is not None else None
        a = peaks.achieved(k, hw, work, dram) if not profile.host else peaks.Achieved()
        gap = tl.gap_before.get(i) if tl else None
        rows.append(
            Row(
                i,
                k,
                a,
                peaks.bottleneck(k, a, gap)
                if not profile.host
                else peaks.Bottleneck("host", None, "a CPU op"),
                gap,
                e,
            )
        )
    return Analysis(profile, hw, note, rows, tl, summary.by_kind(profile.kernels), joined, validation,
                    warnings=warned)


def _validation(profile: Profile, result, model, joined: Joined, tl):
    from estimator.truth.validate import measured_validation

    runs = joined.iterations
    if profile.run_wall_s:
        wall = profile.run_wall_s
    elif tl is not None:
        wall = [tl.span_s / runs]
    else:
        wall = [profile.total_s / runs]
    source = "" if profile.format == "ort-json" else f"{profile.format} {profile.path}"
    ep = _ep(profile)
    v = measured_validation(result, model, joined.times, wall_s=wall, profile_runs=runs, ep=ep, source=source)
    # the unjoined measured kernels are not graph nodes: validate's join reports them as unjoined nodes
    if source:
        v.notes.append(
            f"join by {joined.strategy} over {runs} iteration(s); unjoined measured kernels are "
            f"listed under their kernel names"
        )
    v.notes.extend(joined.notes)
    return v


def _ep(profile: Profile) -> str:
    names = {
        "CPUExecutionProvider": "cpu",
        "CUDAExecutionProvider": "cuda",
        "TensorrtExecutionProvider": "tensorrt",
    }
    eps = [names.get(p, p) for p in profile.providers if p != "CPUExecutionProvider"]
    return eps[0] if eps else ("cpu" if profile.format == "ort-json" else "gpu")
