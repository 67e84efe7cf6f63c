"""The L2 a kernel sees on a two-die GPU (B200, GB200, B300): one L2 split into partitions, one per die.

Model (chosen: a cross-partition bandwidth penalty, not a smaller capacity). Each die's L2 caches the
HBM stacks attached to that die (a memory-side cache), so a line is held once, in its home partition:
the whole `l2_bytes` counts for residency, as on a single die. Addresses interleave over every stack,
so of any SM's L2 traffic the share (P - 1) / P lives in a far partition and crosses the die-to-die
link (NV-HBI, `l2_cross_partition_bytes_per_s`, both directions together). With the traffic spread
evenly over P partitions, each direction of the link carries (P - 1) / P of one die's demand, and the
L2 bandwidth the SMs see is

    l2_effective = min(l2_bytes_per_s, l2_cross_partition_bytes_per_s / ((P - 1) / P))

(P = 2: half of all L2 bytes cross; the link's total carries them when it is at least half the L2
rate). Every tile-model L2 term (GEMM panels, attention K/V steps, streaming kernels) divides by this.

NB: the far partition's extra latency is not modelled (the fitted `mem_latency_s` is Hopper's); nor is
any duplication of far lines in the near partition (which would shrink the capacity, as on H100's
two-partition L2, whose figure stays the calibrated one). A descriptor without `l2_partitions` (every
single-die GPU) sees its `l2_bytes_per_s` unchanged.
"""

from __future__ import annotations

from hwdesc import HardwareDescriptor


def cross_share(partitions: int) -> float:
    """Share of the L2 traffic that lives in a far partition: (P - 1) / P."""
    return (partitions - 1) / partitions


def effective_l2_bytes_per_s(hw: HardwareDescriptor) -> float | None:
    """The L2 bandwidth the SMs see (module doc); the descriptor's figure on a single-partition L2."""
    peak = getattr(hw, "l2_bytes_per_s", None)
    parts = getattr(hw, "l2_partitions", None)
    link = getattr(hw, "l2_cross_partition_bytes_per_s", None)
    if peak is None or not parts or parts < 2 or link is None:
        return peak
    return min(peak, link / cross_share(parts))
