"""What a timeline (nsys, Kineto) says beyond per-kernel times: per-stream busy time and gaps, device
idle time, launch latency and overhead, and how much communication overlaps compute.

- per (device, stream), kernels sorted by start: busy = the union of their intervals; a gap is
  start[i] - (latest end so far) when positive; gap_before[i] is that gap for kernel i;
- per device: span = last end - first start, busy = union over all its streams, idle = span - busy;
- launch latency = kernel start - start of its launch call (where the profile joins them), counted only
  for a kernel launched while its stream was idle (the call began after the stream's previous kernel
  ended): a kernel queued behind others starts when they end, and that wait, which reached 421 ms
  median in a trimmed 2-GPU capture, is queueing, not launch latency. Per stream, so two devices'
  queues never mix;
- launch-bound gaps: gaps where the next kernel's launch call began only after the previous kernel had
  ended (the GPU waited for the host), counted while no other stream of the device ran;
  launch_overhead_share = their total / the summed device span;
- comm/compute overlap = communication time covered by compute kernels running on the same device.
All linear after one sort per stream (100,000 kernels summarise in well under a second).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from estimator.profile.record import MeasuredKernel


@dataclass(frozen=True)
class StreamStats:
    device: int | None
    stream: int | None
    kernels: int
    busy_s: float
    gaps_s: float
    gap_count: int
    max_gap_s: float
    median_gap_s: float


@dataclass
class Timeline:
    streams: list[StreamStats]
    span_s: float  # summed over devices
    busy_s: float  # union of kernel intervals, summed over devices
    launch_bound_gaps_s: float
    launch_latency_min_s: float | None
    launch_latency_median_s: float | None
    comm_s: float
    comm_overlap_s: float
    gap_before: dict[int, float] = field(default_factory=dict)  # kernel index -> idle gap on its stream

    @property
    def idle_s(self) -> float:
        return max(self.span_s - self.busy_s, 0.0)

    @property
    def launch_overhead_share(self) -> float:
        return self.launch_bound_gaps_s / self.span_s if self.span_s > 0 else 0.0

    @property
    def comm_overlap_share(self) -> float | None:
        return self.comm_overlap_s / self.comm_s if self.comm_s > 0 else None


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged, sorted intervals."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def covered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Length of `intervals` (merged) lying inside `cover` (merged): a two-pointer sweep."""
    total, j = 0.0, 0
    for a, b in intervals:
        while j < len(cover) and cover[j][1] <= a:
            j += 1
        i = j
        while i < len(cover) and cover[i][0] < b:
            total += max(0.0, min(b, cover[i][1]) - max(a, cover[i][0]))
            i += 1
    return total


def _stream(
    idx: list[int],
    ks: list[MeasuredKernel],
    gap_before: dict[int, float],
    launch_bound: list[tuple[float, float]],
    latencies: list[float],
) -> StreamStats:
    idx.sort(key=lambda i: ks[i].start_s)
    busy, gaps = 0.0, []
    end = None
    for i in idx:
        k = ks[i]
        s, e = k.start_s, k.start_s + k.duration_s
        if k.launch_s is not None and (end is None or k.launch_s >= end) and s >= k.launch_s:
            latencies.append(s - k.launch_s)  # launched onto an idle stream: the latency alone
        if end is None:
            busy += e - s
        else:
            gap = s - end
            if gap > 0:
                gaps.append(gap)
                gap_before[i] = gap
                if k.launch_s is not None and k.launch_s >= end:
                    launch_bound.append((end, s))
            busy += max(0.0, e - max(s, end))
        end = e if end is None else max(end, e)
    first = ks[idx[0]]
    stats = StreamStats(
        first.device,
        first.stream,
        len(idx),
        busy,
        sum(gaps),
        len(gaps),
        max(gaps, default=0.0),
        statistics.median(gaps) if gaps else 0.0,
    )
    return stats


def build(kernels: list[MeasuredKernel]) -> Timeline | None:
    """The timeline of kernels with timestamps (None when none has one)."""
    timed = [i for i, k in enumerate(kernels) if k.start_s is not None]
    if not timed:
        return None
    by_stream: dict[tuple, list[int]] = defaultdict(list)
    by_device: dict[object, list[int]] = defaultdict(list)
    for i in timed:
        by_stream[(kernels[i].device, kernels[i].stream)].append(i)
        by_device[kernels[i].device].append(i)
    gap_before: dict[int, float] = {}
    streams = []
    waits: dict[object, list[tuple[float, float]]] = defaultdict(list)  # launch-bound gaps per device
    lat: list[float] = []
    for key in sorted(by_stream, key=str):
        streams.append(_stream(by_stream[key], kernels, gap_before, waits[key[0]], lat))
    span = busy = comm = overlap = launch_bound = 0.0
    for dev, idx in by_device.items():
        iv = [(kernels[i].start_s, kernels[i].start_s + kernels[i].duration_s) for i in idx]
        span += max(b for _, b in iv) - min(a for a, _ in iv)
        merged = union(iv)
        busy += sum(b - a for a, b in merged)
        # a launch-bound gap on one stream counts only while no other stream of the device runs
        waited = union(waits[dev])
        launch_bound += sum(b - a for a, b in waited) - covered(waited, merged)
        comm_iv = union([iv[n] for n, i in enumerate(idx) if kernels[i].kind == "communication"])
        if comm_iv:
            compute_iv = union([iv[n] for n, i in enumerate(idx) if kernels[i].kind != "communication"])
            comm += sum(b - a for a, b in comm_iv)
            overlap += covered(comm_iv, compute_iv)
    lat.sort()
    return Timeline(
        streams,
        span,
        busy,
        launch_bound,
        lat[0] if lat else None,
        statistics.median(lat) if lat else None,
        comm,
        overlap,
        gap_before,
    )
