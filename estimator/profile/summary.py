"""Per-name and per-kind totals of measured kernels.

`by_name` groups by the name exactly as the tool printed it (what `nsys stats cuda_gpu_kern_sum` does
with the demangled name) and gives instances, total, average, median, min, max and the sample standard
deviation, in integer nanoseconds where the source counted nanoseconds.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from estimator.profile.record import MeasuredKernel


@dataclass(frozen=True)
class NameRow:
    name: str
    short: str
    kind: str
    instances: int
    total_s: float
    avg_s: float
    med_s: float | None  # None for summary-table records (one record per name: no per-launch times)
    min_s: float | None
    max_s: float | None
    std_s: float | None


def by_name(kernels: list[MeasuredKernel]) -> list[NameRow]:
    """Rows sorted by total time, largest first (ties by name)."""
    groups: dict[str, list[MeasuredKernel]] = defaultdict(list)
    for k in kernels:
        groups[k.name].append(k)
    rows = []
    for name, ks in groups.items():
        n = sum(k.instances for k in ks)
        total = sum(k.duration_s for k in ks)
        per = [k.duration_s for k in ks] if all(k.instances == 1 for k in ks) else None
        rows.append(
            NameRow(
                name,
                ks[0].short,
                ks[0].kind,
                n,
                total,
                total / n,
                statistics.median(per) if per else None,
                min(per) if per else None,
                max(per) if per else None,
                (statistics.stdev(per) if len(per) > 1 else 0.0) if per else None,
            )
        )
    return sorted(rows, key=lambda r: (-r.total_s, r.name))


def by_kind(kernels: list[MeasuredKernel]) -> dict[str, dict[str, float]]:
    """{kind: {"kernels": launches, "total_s": seconds, "share": of all measured time}}, largest first."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"kernels": 0, "total_s": 0.0})
    for k in kernels:
        out[k.kind]["kernels"] += k.instances
        out[k.kind]["total_s"] += k.duration_s
    total = sum(v["total_s"] for v in out.values()) or 1.0
    return {
        kind: {**v, "share": v["total_s"] / total}
        for kind, v in sorted(out.items(), key=lambda kv: -kv[1]["total_s"])
    }
