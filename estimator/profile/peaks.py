"""Per measured kernel: the achieved fraction of the GPU's peaks, and the bottleneck with its number.

Each fraction comes from the first source that has it:
1. **counters** the profile carries (Nsight Compute metric names; Hopper and Blackwell differ):
   tensor pipe = `sm__pipe_tc_cycles_active` (sm_100 tcgen05) or `sm__pipe_tensor_cycles_active`
   (sm_70..12x; wgmma is counted there too) `.avg.pct_of_peak_sustained_active`; DRAM =
   `gpu__dram_throughput` or `dram__throughput` `.avg.pct_of_peak_sustained_elapsed`; L2 =
   `lts__throughput...elapsed`; L2 hit rate = `lts__t_sector_hit_rate.pct`; occupancy =
   `sm__warps_active.avg.pct_of_peak_sustained_active`; SM = `sm__throughput...elapsed`;
2. **op and byte counts** over the measured duration against the descriptor's peaks: tensor ops
   `sm__ops_path_tensor[_op_<mma>]_src_<dt>_dst_<acc>.sum`, DRAM bytes `dram__bytes_{read,write}.sum`,
   SASS FP32/FP16 instruction counts (an FMA is 2 FLOPs);
3. **the estimator's Work** for the joined kernel (`work=`) over the measured time: flops per unit at
   that unit's peak, DRAM bytes at the DRAM peak.

NB: an `sm__ops_path_tensor` op is counted as one FLOP (NVIDIA's metric counts tensor math operations,
multiply and add apart); a peak share from it is only as exact as that reading.

Bottleneck, first rule that holds (thresholds below, the deciding number kept):
communication (the kernel is a collective) > launch gap (the stream sat idle longer before it than it
ran: the host was late) > compute or memory (the busiest unit reaches BUSY of its peak) > latency (no unit
does; occupancy quoted when known) > unknown (no counters, no Work: join to an estimate or give --arch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from estimator.profile.record import MeasuredKernel

BUSY = 0.6  # a unit at >= 60% of its peak is what limits the kernel (ncu's SOL rules use similar marks)

TENSOR_PIPE = (
    "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
)
DRAM_PCT = (
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
L2_PCT = ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)
L2_HIT = ("lts__t_sector_hit_rate.pct",)
OCCUPANCY = ("sm__warps_active.avg.pct_of_peak_sustained_active",)
SM_PCT = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
TENSOR_OPS = re.compile(r"sm__ops_path_tensor_(?:op_[a-z]+_)?src_([a-z0-9]+)_dst_[a-z0-9]+\.sum")
SASS_FLOPS = {  # SASS thread-instruction counters -> (FLOPs per instruction, dtype)
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2 if op == "fma" else 1, dt)
    for p, dt in (("f", "fp32"), ("h", "fp16"), ("d", "fp64"))
    for op in ("add", "mul", "fma")
}
_SRC_DTYPE = {
    "bf16": "bf16",
    "fp16": "fp16",
    "tf32": "tf32",
    "fp8": "fp8e4m3",
    "int8": "int8",
    "fp4": "fp4e2m1",
}


@dataclass(frozen=True)
class Achieved:
    """Fractions of peak (0..1, None = unknown) and where each came from ("counter", "ops", "work")."""

    tensor: float | None = None
    cuda: float | None = None  # CUDA-core FLOPs
    sm: float | None = None  # Nsight Compute's SM throughput (busiest SM pipe)
    dram: float | None = None
    l2: float | None = None
    l2_hit: float | None = None
    occupancy: float | None = None
    sources: tuple[tuple[str, str], ...] = ()

    def source(self, key: str) -> str | None:
        return dict(self.sources).get(key)


NOTHING = Achieved()


@dataclass(frozen=True)
class Bottleneck:
    kind: str  # compute, memory, latency, launch gap, communication, unknown
    value: float | None  # the deciding number (a fraction, or seconds for a launch gap)
    why: str


UNKNOWN = Bottleneck("unknown", None, "no counters and no estimate to derive a fraction of peak from")


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def _pct(c, names) -> float | None:
    return next((c[n] / 100.0 for n in names if n in c), None)


def _tensor_ops_s(c, hw) -> float | None:
    """Tensor-peak seconds of the op counters: sum over source dtypes of ops / peak(dtype). The plain
    `sm__ops_path_tensor_src_*` aggregates are used when present, else the per-instruction
    (`_op_hgmma_`, `_op_utchmma_`, ...) ones, so nothing is counted twice."""
    plain: dict[str, float] = {}
    per_op: dict[str, float] = {}
    for name, v in c.items():
        m = TENSOR_OPS.fullmatch(name)
        if m and v:
            into = per_op if "_op_" in name else plain
            into[m.group(1)] = into.get(m.group(1), 0.0) + v
    from estimator.dtypes import tensor_peak_key  # sympy: only when there are op counters

    total, seen = 0.0, False
    for src, ops in (plain or per_op).items():
        key = tensor_peak_key(_SRC_DTYPE.get(src, src))
        if key and key in hw.tensor_flops_per_s:
            total += ops / hw.tensor_flops_per_s[key]
            seen = True
    return total if seen else None


def _sass_cuda_s(c, hw) -> float | None:
    total, seen = 0.0, False
    for name, (per, dt) in SASS_FLOPS.items():
        if name in c:
            total += c[name] * per / hw.cuda_flops_per_s.get(dt, hw.cuda_flops_per_s["fp32"])
            seen = True
    return total if seen and total > 0 else None


def _work_s(work, hw) -> tuple[float | None, float | None]:
    """(tensor-peak seconds, CUDA-core-peak seconds) of the estimator's Work (numbers only)."""
    from estimator.pricing.price import unit_peak

    tensor = cuda = 0.0
    for (unit, dtype), flops in work.flops.items():
        if not getattr(flops, "is_number", True):
            return None, None
        seconds = float(flops) / unit_peak(hw, unit, dtype)
        if unit == "tensor":
            tensor += seconds
        else:
            cuda += seconds
    return tensor or None, cuda or None


def achieved(k: MeasuredKernel, hw=None, work=None, dram_peak: float | None = None) -> Achieved:
    """The fractions of peak of one kernel (per launch: `instances` launches share the summed time)."""
    c, d = k.counters, k.duration_s
    if not c and work is None:
        return NOTHING  # most timeline records: no counters, not joined
    src: dict[str, str] = {}
    vals: dict[str, float | None] = {
        "tensor": _pct(c, TENSOR_PIPE),
        "dram": _pct(c, DRAM_PCT),
        "l2": _pct(c, L2_PCT),
        "l2_hit": _pct(c, L2_HIT),
        "occupancy": _pct(c, OCCUPANCY),
        "sm": _pct(c, SM_PCT),
        "cuda": None,
    }
    src.update({key: "counter" for key, v in vals.items() if v is not None})
    dram_bw = dram_peak or (hw.dram_bytes_per_s if hw is not None else None)
    if d > 0 and hw is not None:
        derived = {"tensor": _tensor_ops_s(c, hw), "cuda": _sass_cuda_s(c, hw)}
        for key, seconds in derived.items():
            if vals[key] is None and seconds is not None:
                vals[key], src[key] = seconds / d, "ops"
        moved = sum(c.get(n, 0.0) for n in ("dram__bytes_read.sum", "dram__bytes_write.sum"))
        if vals["dram"] is None and moved and dram_bw:
            vals["dram"], src["dram"] = moved / d / dram_bw, "ops"
        if work is not None:
            tensor_s, cuda_s = _work_s(work, hw)
            for key, seconds in (("tensor", tensor_s), ("cuda", cuda_s)):
                if vals[key] is None and seconds is not None:
                    vals[key], src[key] = seconds * k.instances / d, "work"
            dram_bytes = work.dram_bytes
            if vals["dram"] is None and getattr(dram_bytes, "is_number", True) and dram_bw:
                vals["dram"], src["dram"] = float(dram_bytes) * k.instances / d / dram_bw, "work"
    return Achieved(**vals, sources=tuple(sorted(src.items())))


def bottleneck(k: MeasuredKernel, a: Achieved, gap_before_s: float | None = None) -> Bottleneck:
    """The class of one kernel's time, with the number that decided it (rules in the module docstring)."""
    if k.kind == "communication":
        return Bottleneck("communication", k.duration_s, "a collective: its time is the interconnect's")
    per_launch = k.duration_s / max(k.instances, 1)
    if gap_before_s is not None and gap_before_s > per_launch:
        return Bottleneck(
            "launch gap",
            gap_before_s,
            f"stream idle {_time(gap_before_s)} before a {_time(per_launch)} kernel",
        )
    if a is NOTHING:
        return UNKNOWN
    compute = {n: v for n, v in (("tensor", a.tensor), ("cuda", a.cuda), ("sm", a.sm)) if v is not None}
    memory = {n: v for n, v in (("dram", a.dram), ("l2", a.l2)) if v is not None}
    if not compute and not memory:
        return UNKNOWN
    top_c = max(compute.items(), key=lambda kv: kv[1], default=("-", 0.0))
    top_m = max(memory.items(), key=lambda kv: kv[1], default=("-", 0.0))
    name, value = max(top_c, top_m, key=lambda kv: kv[1])
    if value >= BUSY:
        kind = "compute" if (name, value) == top_c else "memory"
        return Bottleneck(kind, value, f"{name} at {100 * value:.0f}% of peak")
    occ = f", occupancy {100 * a.occupancy:.0f}%" if a.occupancy is not None else ""
    return Bottleneck("latency", value, f"busiest unit {name} at {100 * value:.0f}% of peak{occ}")
