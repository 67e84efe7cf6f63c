"""The one measured-kernel record every reader produces, and the profile that holds them.

A `MeasuredKernel` is one launch (or, from a summary table, `instances` launches of one name): its
names, kind, measured duration, where and when it ran, its launch configuration and whatever hardware
counters the format carries (`counters`, keyed by Nsight Compute metric name in base units: ns, bytes,
bytes/s, %). Fields a format does not have are None, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from estimator.errors import UserError

EMPTY: Mapping[str, float] = MappingProxyType({})  # immutable, so one instance serves every record


class ProfileError(UserError):
    """A profile file that cannot be read: truncated, empty, wrong format, unknown schema, missing columns."""


@dataclass(frozen=True, slots=True)
class MeasuredKernel:
    name: str  # as the tool printed it (demangled where the tool gives that)
    short: str  # normalised (names.normalise): the same kernel spelt by nsys and ncu gives one string
    kind: str  # names.KINDS
    duration_s: float  # summed over `instances`
    instances: int = 1
    start_s: float | None = None  # on the capture's time base
    launch_s: float | None = None  # start of the host API call that launched it (same time base)
    stream: int | None = None
    device: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None  # per thread
    shared_bytes: int | None = None  # static + dynamic, per block
    node: str | None = None  # the graph node (onnxruntime node name, NVTX range) it belongs to
    op: str | None = None  # that node's op type, where the format names it
    run: int = 0  # which iteration of the model (onnxruntime "model_run"), 0 when the format has none
    counters: Mapping[str, float] = field(default_factory=lambda: EMPTY)

    @property
    def end_s(self) -> float | None:
        return None if self.start_s is None else self.start_s + self.duration_s


@dataclass(frozen=True)
class GpuInfo:
    """What the profile says about its GPU (None where it does not say)."""

    name: str
    compute_capability: str | None = None  # "9.0"
    sm_count: int | None = None
    dram_bytes_per_s: float | None = None
    clock_hz: float | None = None
    l2_bytes: float | None = None
    memory_bytes: float | None = None  # device memory (nsys TARGET_INFO_GPU totalMemory)


@dataclass
class Profile:
    path: str
    format: str  # a format of the table in estimator/profile/load.py (nsys-sqlite, ...)
    kernels: list[MeasuredKernel]
    gpu: GpuInfo | None = None
    warnings: list[str] = field(default_factory=list)
    host: bool = False  # CPU execution (onnxruntime CPU provider): "kernels" are host ops
    runs: int = 1  # model iterations the profile holds (onnxruntime model_run events)
    run_wall_s: list[float] = field(default_factory=list)  # end-to-end seconds of each, where recorded
    timeline: bool = False  # start_s are real GPU timestamps (nsys, Kineto), so gaps mean something
    providers: list[str] = field(default_factory=list)  # onnxruntime execution providers seen
    summary: bool = False  # one record per kernel name (nsys cuda_gpu_kern_sum): no launch order

    @property
    def total_s(self) -> float:
        return math.fsum(k.duration_s for k in self.kernels)
