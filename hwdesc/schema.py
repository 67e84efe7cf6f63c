"""The hardware-descriptor schema: the frozen `HardwareDescriptor` value and a hand-written validator.

A descriptor file maps each hardware figure to `{value: <number>, source: "<where from>"}` plus an
optional `confidence` and `note`; units live in the key names. The validator names the file and the
dotted key of the first thing it rejects, so a typo in a user's YAML is one readable line. A GPU's
`efficiency` constants (and its `interconnect.collectives`) are its family's: hwdesc/family.py merges
them in from hwdesc/families/<family>.yaml before `validate` sees the mapping.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hwdesc.interconnect import GROUP as INTERCONNECT
from hwdesc.interconnect import Interconnect
from hwdesc.interconnect import parse as parse_interconnect

SCHEMA_VERSION = 1
FAMILIES = frozenset({"ampere", "hopper", "blackwell", "blackwell-rtx", "cpu"})
CPU_FAMILY = "cpu"  # a host measured by estimator/truth/host.py: no tensor cores, no compute capability
TENSOR_DTYPES = frozenset({"tf32", "bf16", "fp16", "fp8", "fp4", "int8"})
CUDA_DTYPES = ("fp32", "fp16", "fp64")
EFFICIENCY_FRACTIONS = ("tensor", "cuda", "sfu", "dram")
EFFICIENCY_KEYS = (*EFFICIENCY_FRACTIONS, "min_kernel_s")
# Optional: an additive per-kernel cost in the estimate (a CPU runtime's executor time between ops);
# absent means 0, as on GPUs, whose launch cost is the min_kernel_s floor.
OPTIONAL_EFFICIENCY_KEYS = ("op_overhead_s",)
# Optional: the tile model's constants (estimator/pricing; fitted by `estimate calibrate`). A descriptor
# without all of them (or without l2_bytes_per_s) is priced by the roofline estimate alone.
TILE_FRACTIONS = ("l2", "l2_resident", "softmax_overlap")
TILE_SECONDS = ("launch_s", "mem_latency_s", "split_k_s", "attention_cta_s", "attention_step_s",
                "attention_prefill_s", "attention_decode_s", "attention_decode_cta_s", "attention_split_s",
                "attention_decode_row_s", "attention_split_each_s")
# (attention_decode_row_s: per padded Q row x head-dim element of a decode CTA whose kernel sets
# row_cost, absent means 0; attention_decode_cta_s: a decode CTA's fixed cost, absent means
# attention_cta_s, the prefill CTA's;
# attention_split_s: a split-KV decode's combine, absent means the GEMMs' split_k_s;
# attention_split_each_s: the combine's cost per split on top, absent means 0.)
# Optional: the tensor-core fraction for one MMA dtype family where it differs from `tensor` (fp8 GEMMs
# reach a smaller share of their doubled peak: estimate calibrate --fp8); absent means `tensor`.
DTYPE_TENSOR_FRACTIONS = ("tensor_fp8",)
# Optional: attention's own L2 fraction (estimator/pricing/attention.py l2_fraction); absent means `l2`.
# Optional: the GEMM output path and block scales (estimator/pricing/gemm.py): the share of an SM's L2
# bandwidth its epilogue stores reach, of the DRAM bandwidth a GEMM's tile-wise C stores reach, and of the
# SM's fp32 CUDA-core rate a block-scaled GEMM's promotion reaches (Hopper); absent: no such term.
GEMM_STORE_FRACTIONS = ("epilogue_store", "dram_store", "block_scale")
TILE_FRACTIONS = ("l2", "l2_resident", "softmax_overlap", "attention_l2", *DTYPE_TENSOR_FRACTIONS,
                  *GEMM_STORE_FRACTIONS)
# Optional: instructions per 8-bit K/V element a CUDA-core decode kernel spends widening it
# (estimator/pricing/attention.py DEQUANT_OPS, its count, where absent).
TILE_COUNTS = ("attention_dequant_ops",)
TILE_EFFICIENCY_KEYS = (*TILE_FRACTIONS, *TILE_SECONDS, *TILE_COUNTS)
# Optional: the MLA and MoE kernels' fitted constants (estimator/pricing/mla.py, moe.py); a family without
# them prices those kernels as any attention or stream.
MLA_MOE_FRACTIONS = ("mla_overlap", "mla_tensor", "mla_dram", "moe_tensor", "moe_dram", "moe_overlap",
                     "moe_rows", "moe_block_tensor", "moe_block_dram", "mla_bmm_dram", "mla_bmm_fp8_dram")
MLA_MOE_SECONDS = ("mla_decode_s", "mla_decode_seq_s", "mla_decode_row_s", "moe_fixed_s", "moe_gemm_s",
                   "moe_expert_s", "moe_fused_s", "mla_bmm_s", "mla_bmm_wave_s", "mla_bmm_fp8_s",
                   "mla_bmm_fp8_wave_s")
MLA_MOE_COUNTS = ("moe_cta_stream",)  # a CTA's weight stream over its 1 / SMs share of DRAM (>= 1)
MLA_MOE_KEYS = (*MLA_MOE_FRACTIONS, *MLA_MOE_SECONDS, *MLA_MOE_COUNTS)
# Optional, and only in the descriptors of a family whose menu has a library-picked block-scaled kernel
# (hwdesc/tiles/hopper.yaml `block_scaled.pick`, estimator/pricing/gemm.py): a k-step's cost per padded row
# of its partial M tile and per CTA on it, a k-step's extra for a tile straddling two weight-scale blocks
# (seconds), and the share of the DRAM bandwidth its C stores reach; absent: 0, 0 and dram_store's; and
# a round of the 1 x block quantization kernel's grid-stride loop (menu `block_quant`, pricing/quant.py).
BLOCK_KERNEL_SECONDS = ("block_scale_oob_s", "block_scale_straddle_s", "block_quant_round_s")
BLOCK_KERNEL_FRACTIONS = ("block_scale_store",)
BLOCK_KERNEL_KEYS = (*BLOCK_KERNEL_SECONDS, *BLOCK_KERNEL_FRACTIONS)
# Optional, fitted so far on datacenter Blackwell only (hwdesc/families/blackwell.yaml): the tensor-core
# fraction of block-scaled fp4 GEMMs (estimate calibrate --fp8 --fp8-keys tensor_fp4,...; absent means
# `tensor`), the DRAM fraction of attention kernels' K/V streams (estimator/pricing/attention.py
# dram_fraction; absent means `dram`), and the k-step floor and fixed cost of a block-scaled kernel whose
# MMA takes the scales (estimator/pricing/gemm.py _step_floor, _block_fill; absent means 0).
OWN_FRACTIONS = ("tensor_fp4", "attention_dram")
OWN_SECONDS = ("block_scale_step_s", "block_scale_fill_s")
OWN_KEYS = (*OWN_FRACTIONS, *OWN_SECONDS)
CONFIDENCES = frozenset({"low", "medium", "high"})
FIGURE_KEYS = frozenset({"value", "source", "confidence", "note"})
MAX_MIN_KERNEL_S = 1e-3  # a floor of a millisecond or more is a unit mistake, not a GPU

# Top-level figures holding one number each (the groups are checked separately).
SCALAR_FIGURES = ("sm_count", "clock_hz", "sfu_ops_per_s", "dram_bytes_per_s", "dram_bytes",
                  "l2_bytes", "smem_bytes_per_sm", "nvlink_bytes_per_s")
GROUPS = ("tensor_flops_per_s", "cuda_flops_per_s", "efficiency")
TOP_LEVEL_KEYS = frozenset({"schema_version", "name", "display_name", "family", "compute_capability",
                            *SCALAR_FIGURES, *GROUPS})
# Optional top-level figures (absent: the features that need them are off for that descriptor).
OPTIONAL_FIGURES = ("l2_bytes_per_s", "l2_partitions", "l2_cross_partition_bytes_per_s")
# Optional top-level group: per kernel class (a kernel kind such as "movement", or an op type such as
# "Where"), Hockney's model on the roofline replaces the per-unit efficiencies in the estimate:
#   estimate_s = bound_s / roofline + op_overhead_s
# A host descriptor fits these (estimator/truth/host_classes.py); a GPU descriptor gives none.
KERNEL_CLASSES = "kernel_classes"
CLASS_KEYS = ("roofline", "op_overhead_s")
_CLASS_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")
NULLABLE = frozenset({"nvlink_bytes_per_s"})  # PCIe-only parts have no NVLink
_CC_RE = re.compile(r"^\d+\.\d+$")


class HwdescError(ValueError):
    """A descriptor could not be found, read, parsed or validated; the message is one human line."""


@dataclass(frozen=True)
class HardwareDescriptor:
    """One GPU SKU. Rates are peaks (tensor peaks dense); `efficiency` scales them for the estimate."""

    name: str
    display_name: str
    family: str
    compute_capability: str  # "none" for the cpu family
    sm_count: int
    clock_hz: float
    tensor_flops_per_s: Mapping[str, float]  # a missing dtype = no tensor-core support for it
    cuda_flops_per_s: Mapping[str, float]  # "fp32", "fp16", "fp64"
    sfu_ops_per_s: float
    dram_bytes_per_s: float
    dram_bytes: float
    l2_bytes: float
    smem_bytes_per_sm: float
    nvlink_bytes_per_s: float | None
    efficiency: Mapping[str, float]  # "tensor", "cuda", "sfu", "dram" fractions, "min_kernel_s", and
    # "op_overhead_s" only where the file gives it
    sources: Mapping[str, str]  # dotted figure key -> source text
    low_confidence: frozenset[str]  # dotted figure keys marked `confidence: low`
    path: str
    l2_bytes_per_s: float | None = None  # peak L2 read bandwidth; None where the file gives none
    # a two-die L2 (B200/GB200/B300): partitions and the link between them (estimator/pricing/l2.py)
    l2_partitions: int | None = None
    l2_cross_partition_bytes_per_s: float | None = None
    # class -> {"roofline": fraction, "op_overhead_s": seconds (absent: 0)}; empty where the file gives none
    kernel_classes: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))
    # links between GPUs and the fitted collective constants (hwdesc/interconnect.py); None where absent
    interconnect: Interconnect | None = None

    def __hash__(self) -> int:  # the Mapping fields are unhashable; name + file identify a descriptor
        return hash((self.name, self.path))

    @property
    def ridge_flops_per_byte(self) -> Mapping[str, float]:
        """Per tensor dtype, the arithmetic intensity where peak compute and DRAM bandwidth balance."""
        return MappingProxyType({dt: peak / self.dram_bytes_per_s
                                 for dt, peak in self.tensor_flops_per_s.items()})


class Validator:
    """Walks one parsed file, collecting figures, sources and low-confidence keys."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sources: dict[str, str] = {}
        self.low: set[str] = set()

    def fail(self, key: str, message: str) -> HwdescError:
        where = f"{self.path}: {key}: " if key else f"{self.path}: "
        return HwdescError(where + message)

    def mapping(self, node: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(node, Mapping):
            raise self.fail(key, f"must be a mapping, got {_kind(node)}")
        for k in node:
            if not isinstance(k, str):
                raise self.fail(key, f"keys must be strings, got {k!r}")
        return node

    def string(self, raw: Mapping[str, Any], key: str) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {_kind(value)}")
        return value

    def figure(self, node: Any, key: str, nullable: bool = False) -> float | None:
        """One `{value, source, confidence?, note?}` figure; returns its value."""
        fig = self.mapping(node, key)
        unknown = sorted(set(fig) - FIGURE_KEYS)
        if unknown:
            raise self.fail(f"{key}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(FIGURE_KEYS))})")
        source = fig.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.fail(f"{key}.source", "every figure needs a non-empty `source` string")
        confidence = fig.get("confidence", "high")
        if confidence not in CONFIDENCES:
            raise self.fail(f"{key}.confidence", f"must be one of {', '.join(sorted(CONFIDENCES))}, "
                                                 f"got {confidence!r}")
        if "note" in fig and not isinstance(fig["note"], str):
            raise self.fail(f"{key}.note", f"must be a string, got {_kind(fig['note'])}")
        if "value" not in fig:
            raise self.fail(f"{key}.value", "missing")
        value = fig["value"]
        if value is None and nullable:
            pass
        elif not _is_number(value) or not math.isfinite(value) or value <= 0:
            allowed = " or null" if nullable else ""
            raise self.fail(f"{key}.value", f"must be a number > 0{allowed}, got {value!r}")
        self.sources[key] = source
        if confidence == "low":
            self.low.add(key)
        return None if value is None else float(value)

    def group(self, raw: Mapping[str, Any], key: str, allowed: frozenset[str] | tuple[str, ...],
              required: tuple[str, ...], allow_empty: bool = False) -> dict[str, float]:
        node = self.mapping(raw[key], key)
        for sub in node:
            if sub not in allowed:
                raise self.fail(f"{key}.{sub}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        for sub in required:
            if sub not in node:
                raise self.fail(f"{key}.{sub}", "missing")
        if not node and not allow_empty:
            raise self.fail(key, "must list at least one entry")
        return {sub: self.figure(fig, f"{key}.{sub}") for sub, fig in node.items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"


def validate(raw: Any, path: str, expected_name: str | None = None) -> HardwareDescriptor:
    """Checks one parsed descriptor file and builds its HardwareDescriptor.

    `expected_name` (the file stem of a bundled file) must equal the `name` field; a user's own file
    passes None and may name itself freely.
    """
    v = Validator(path)
    raw = v.mapping(raw, "")
    unknown = sorted(set(raw) - TOP_LEVEL_KEYS - set(OPTIONAL_FIGURES) - {KERNEL_CLASSES, INTERCONNECT})
    if unknown:
        raise v.fail(unknown[0], "unknown top-level key (typo?)")
    missing = sorted(TOP_LEVEL_KEYS - set(raw))
    if missing:
        raise v.fail(missing[0], "missing")
    if raw["schema_version"] != SCHEMA_VERSION or isinstance(raw["schema_version"], bool):
        raise v.fail("schema_version", f"must be {SCHEMA_VERSION}, got {raw['schema_version']!r}")
    name = v.string(raw, "name")
    if expected_name is not None and name != expected_name:
        raise v.fail("name", f"must equal the file stem {expected_name!r}, got {name!r}")
    family = v.string(raw, "family")
    if family not in FAMILIES:
        raise v.fail("family", f"must be one of {', '.join(sorted(FAMILIES))}, got {family!r}")
    cc = raw["compute_capability"]
    if cc is None and family == CPU_FAMILY:
        cc = "none"
    elif not isinstance(cc, str) or not _CC_RE.match(cc):
        raise v.fail("compute_capability", f'must be a quoted string like "9.0", got {_kind(cc)}')

    scalars = {key: v.figure(raw[key], key, nullable=key in NULLABLE) for key in SCALAR_FIGURES}
    if not isinstance(raw["sm_count"]["value"], int):
        raise v.fail("sm_count.value", f"must be an integer, got {raw['sm_count']['value']!r}")
    tensor = v.group(raw, "tensor_flops_per_s", TENSOR_DTYPES, (), allow_empty=family == CPU_FAMILY)
    cuda = v.group(raw, "cuda_flops_per_s", CUDA_DTYPES, CUDA_DTYPES)
    efficiency = v.group(raw, "efficiency", (*EFFICIENCY_KEYS, *OPTIONAL_EFFICIENCY_KEYS,
                                             *TILE_EFFICIENCY_KEYS, *BLOCK_KERNEL_KEYS, *OWN_KEYS,
                                             *MLA_MOE_KEYS),
                         EFFICIENCY_KEYS)
    optional = {key: v.figure(raw[key], key) for key in OPTIONAL_FIGURES if key in raw}
    classes = _kernel_classes(v, raw[KERNEL_CLASSES]) if KERNEL_CLASSES in raw else {}
    check_efficiency_ranges(v, efficiency)

    return HardwareDescriptor(
        name=name,
        display_name=v.string(raw, "display_name"),
        family=family,
        compute_capability=cc,
        sm_count=int(scalars["sm_count"]),
        clock_hz=scalars["clock_hz"],
        tensor_flops_per_s=MappingProxyType(tensor),
        cuda_flops_per_s=MappingProxyType(cuda),
        sfu_ops_per_s=scalars["sfu_ops_per_s"],
        dram_bytes_per_s=scalars["dram_bytes_per_s"],
        dram_bytes=scalars["dram_bytes"],
        l2_bytes=scalars["l2_bytes"],
        smem_bytes_per_sm=scalars["smem_bytes_per_sm"],
        nvlink_bytes_per_s=scalars["nvlink_bytes_per_s"],
        efficiency=MappingProxyType(efficiency),
        sources=MappingProxyType(dict(v.sources)),
        low_confidence=frozenset(v.low),
        path=path,
        l2_bytes_per_s=optional.get("l2_bytes_per_s"),
        l2_partitions=_partitions(v, optional),
        l2_cross_partition_bytes_per_s=optional.get("l2_cross_partition_bytes_per_s"),
        kernel_classes=MappingProxyType(classes),
        interconnect=parse_interconnect(v.fail, raw[INTERCONNECT]) if INTERCONNECT in raw else None,
    )


def check_efficiency_ranges(v: Validator, efficiency: Mapping[str, float],
                            group: str = "efficiency") -> None:
    """Fractions in (0, 1], times under MAX_MIN_KERNEL_S, for the constants `efficiency` gives."""
    fractions = (*EFFICIENCY_FRACTIONS, *TILE_FRACTIONS, *BLOCK_KERNEL_FRACTIONS, *OWN_FRACTIONS,
                 *MLA_MOE_FRACTIONS)
    seconds = ("min_kernel_s", *OPTIONAL_EFFICIENCY_KEYS, *TILE_SECONDS, *BLOCK_KERNEL_SECONDS, *OWN_SECONDS,
               *MLA_MOE_SECONDS)
    for key in (k for k in fractions if k in efficiency):
        if efficiency[key] > 1:
            raise v.fail(f"{group}.{key}", f"must be in (0, 1], got {efficiency[key]!r}")
    for key in (k for k in seconds if k in efficiency):
        if efficiency[key] >= MAX_MIN_KERNEL_S:
            raise v.fail(f"{group}.{key}",
                         f"must be in (0, {MAX_MIN_KERNEL_S:g}) seconds, got {efficiency[key]!r}")


def _partitions(v: Validator, optional: dict) -> int | None:
    n = optional.get("l2_partitions")
    if n is None:
        return None
    if n != int(n) or n < 1:
        raise v.fail("l2_partitions.value", f"must be a positive integer, got {n!r}")
    if n > 1 and "l2_cross_partition_bytes_per_s" not in optional:
        raise v.fail("l2_cross_partition_bytes_per_s", "missing (needed with l2_partitions > 1)")
    return int(n)


def _kernel_classes(v: Validator, node: Any) -> dict[str, Mapping[str, float]]:
    node = v.mapping(node, KERNEL_CLASSES)
    out = {}
    for cls in node:
        key = f"{KERNEL_CLASSES}.{cls}"
        if not _CLASS_RE.match(cls):
            raise v.fail(key, "a class is a kernel kind or an op type (letters, digits, '_', '.')")
        figures = _class_group(v, node[cls], key)
        if figures["roofline"] > 1:
            raise v.fail(f"{key}.roofline", f"must be in (0, 1], got {figures['roofline']!r}")
        if figures.get("op_overhead_s", 0.0) >= MAX_MIN_KERNEL_S:
            raise v.fail(f"{key}.op_overhead_s",
                         f"must be in (0, {MAX_MIN_KERNEL_S:g}) seconds, got {figures['op_overhead_s']!r}")
        out[cls] = MappingProxyType(figures)
    return out


def _class_group(v: Validator, node: Any, key: str) -> dict[str, float]:
    node = v.mapping(node, key)
    for sub in node:
        if sub not in CLASS_KEYS:
            raise v.fail(f"{key}.{sub}", f"unknown key (allowed: {', '.join(CLASS_KEYS)})")
    if "roofline" not in node:
        raise v.fail(f"{key}.roofline", "missing")
    return {sub: v.figure(fig, f"{key}.{sub}") for sub, fig in node.items()}
