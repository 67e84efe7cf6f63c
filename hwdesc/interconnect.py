"""The `interconnect:` group of a descriptor: how GPUs talk to each other, and the fitted collective
constants.

    interconnect:
      nvlink_generation:                  {value: 4 | null, source: ...}   # null: no NVLink (PCIe only)
      nvlink_bytes_per_s_per_direction:   {value: 450.0e+9 | null, source: ...}
      nvlink_domain_gpus:                 {value: 8, source: ...}  # GPUs on one NVLink fabric (72: NVL72)
      nvlink_sharp:                       {value: true, source: ...}  # NVLS: in-switch reduction
      gpus_per_node:                      {value: 8, source: ...}   # one OS node (IPC / custom all-reduce)
      host_link:                          {value: "pcie-gen5-x16", source: ...}
      host_link_bytes_per_s_per_direction: {value: 64.0e+9, source: ...}
      scaleout_bytes_per_s_per_gpu:       {value: 50.0e+9, source: ...}  # NIC bandwidth per GPU
      collectives: {source: ..., nccl: {...}, nvls: {...}, custom: {...}}  # fitted, see below

`collectives` holds the constants of estimator/pricing/collectives.py, fitted by estimate calibrate --comm on
the H100 tables and written into the family files (hwdesc/families/<family>.yaml; a SKU file gives none,
hwdesc/family.py merges its family's in): latencies in seconds and bus efficiencies as
fractions of this GPU's own link bandwidth (so they carry over to another GPU through its bandwidth).
    nccl:   {<op>: {<protocol>: {alpha_s, step_s, bus_efficiency: [at 2, 4, 8 GPUs]}}}
            op in all_reduce, all_gather, reduce_scatter, all_to_all; protocol in ll, ll128, simple
            (all_to_all, NCCL's p2p kernels: ll, simple and simple_wide, Simple over more channels per
            peer; its `ll` efficiency is one peer's LL stream, every peer's running at once)
    p2p_ll_max_bytes_per_peer: bytes   (a p2p transfer of at most this many bytes per peer takes LL,
            a larger one Simple; absent: the all-to-all takes the fastest line, as the collectives do)
    nvls:   {alpha_s, bus_efficiency, min_gpus, channels?, chunk_s?}   (all-reduce with NVLink SHARP,
            fp16/bf16/fp32; channels + chunk_s: the chunk-size limit, pricing/collectives.py nvls_rate)
    custom: {oneshot | twoshot | multimem: {alpha_s, step_s, bus_efficiency}}  (framework all-reduce
            kernels: estimator/pricing/custom_allreduce.yaml)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

GROUP = "interconnect"
NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
PROTOCOLS = ("ll", "ll128", "simple")
P2P_PROTOCOLS = ("ll", "simple", "simple_wide")  # NCCL's send/recv kernels have no LL128
EFFICIENCY_GROUPS = (2, 4, 8)  # the group sizes the bus efficiencies are fitted at (nearest smaller used)
CUSTOM_ALGORITHMS = ("oneshot", "twoshot", "multimem")
_FIGURE_KEYS = frozenset({"value", "source", "confidence", "note"})


@dataclass(frozen=True)
class Line:
    """One latency-bandwidth line: time = alpha_s + steps * step_s + bus_bytes / (bus_efficiency * link)."""

    alpha_s: float
    step_s: float
    bus_efficiency: tuple[float, ...]  # at EFFICIENCY_GROUPS (one entry: the same for every group)

    def efficiency(self, group: int) -> float:
        """The efficiency fitted at the largest fitted group size <= `group` (the smallest one below it)."""
        if len(self.bus_efficiency) == 1:
            return self.bus_efficiency[0]
        fitted = [e for n, e in zip(EFFICIENCY_GROUPS, self.bus_efficiency, strict=True) if n <= group]
        return fitted[-1] if fitted else self.bus_efficiency[0]


@dataclass(frozen=True)
class CollectiveConstants:
    nccl: Mapping[str, Mapping[str, Line]]  # op -> protocol -> line
    nvls: Line | None
    nvls_min_gpus: int
    custom: Mapping[str, Line]  # "oneshot" / "twoshot"
    source: str
    p2p_ll_max_bytes_per_peer: float | None = None  # None: the all-to-all takes its fastest line
    nvls_channels: int | None = None  # NCCL's NVLS CTAs (NVLS_NCHANNELS); None: no chunk limit
    nvls_chunk_s: float | None = None  # one NVLS head's time per chunk step (fitted); None: no chunk limit


@dataclass(frozen=True)
class Interconnect:
    nvlink_generation: int | None
    nvlink_bytes_per_s_per_direction: float | None
    nvlink_domain_gpus: int
    nvlink_sharp: bool
    gpus_per_node: int
    host_link: str
    host_link_bytes_per_s_per_direction: float
    scaleout_bytes_per_s_per_gpu: float
    collectives: CollectiveConstants | None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def link_bytes_per_s(self, group: int) -> float:
        """Per-direction bandwidth per GPU of a collective over `group` GPUs: NVLink inside the NVLink
        domain, the host link (PCIe) inside a node without NVLink, the scale-out NIC beyond.
        NB: a group spanning nodes is priced at its slowest hop for every byte (a flat ring)."""
        if self.nvlink_bytes_per_s_per_direction is not None and group <= self.nvlink_domain_gpus:
            return self.nvlink_bytes_per_s_per_direction
        if group <= self.gpus_per_node:
            return self.host_link_bytes_per_s_per_direction
        return self.scaleout_bytes_per_s_per_gpu

    def on_nvlink(self, group: int) -> bool:
        return self.nvlink_bytes_per_s_per_direction is not None and group <= self.nvlink_domain_gpus


def parse(fail, node: Any) -> Interconnect:
    """Validate the `interconnect` group; `fail(key, message)` returns the exception to raise."""
    node = _mapping(fail, node, GROUP)
    allowed = {"nvlink_generation", "nvlink_bytes_per_s_per_direction", "nvlink_domain_gpus", "nvlink_sharp",
               "gpus_per_node", "host_link", "host_link_bytes_per_s_per_direction",
               "scaleout_bytes_per_s_per_gpu", "collectives"}
    for key in node:
        if key not in allowed:
            raise fail(f"{GROUP}.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(allowed - {"collectives"}):
        if key not in node:
            raise fail(f"{GROUP}.{key}", "missing")
    sources: dict[str, str] = {}

    def fig(key: str, kind: str, nullable: bool = False):
        return _figure(fail, node[key], f"{GROUP}.{key}", kind, nullable, sources)

    gen = fig("nvlink_generation", "int", nullable=True)
    bw = fig("nvlink_bytes_per_s_per_direction", "number", nullable=True)
    if (gen is None) != (bw is None):
        raise fail(f"{GROUP}.nvlink_bytes_per_s_per_direction",
                   "must be null exactly when nvlink_generation is null (no NVLink)")
    collectives = parse_collectives(fail, node["collectives"]) if "collectives" in node else None
    return Interconnect(
        nvlink_generation=gen, nvlink_bytes_per_s_per_direction=bw,
        nvlink_domain_gpus=fig("nvlink_domain_gpus", "int"), nvlink_sharp=fig("nvlink_sharp", "bool"),
        gpus_per_node=fig("gpus_per_node", "int"), host_link=fig("host_link", "str"),
        host_link_bytes_per_s_per_direction=fig("host_link_bytes_per_s_per_direction", "number"),
        scaleout_bytes_per_s_per_gpu=fig("scaleout_bytes_per_s_per_gpu", "number"),
        collectives=collectives, sources=MappingProxyType(sources))


def _mapping(fail, node: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(node, Mapping):
        raise fail(key, f"must be a mapping, got {type(node).__name__} {node!r}")
    return node


def _figure(fail, node: Any, key: str, kind: str, nullable: bool, sources: dict[str, str]):
    fig = _mapping(fail, node, key)
    unknown = sorted(set(fig) - _FIGURE_KEYS)
    if unknown:
        raise fail(f"{key}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(_FIGURE_KEYS))})")
    source = fig.get("source")
    if not isinstance(source, str) or not source.strip():
        raise fail(f"{key}.source", "every figure needs a non-empty `source` string")
    if "value" not in fig:
        raise fail(f"{key}.value", "missing")
    value = fig["value"]
    sources[key] = source
    if value is None and nullable:
        return None
    ok = {"int": isinstance(value, int) and not isinstance(value, bool) and value > 0,
          "number": _positive(value),
          "bool": isinstance(value, bool),
          "str": isinstance(value, str) and bool(value.strip())}[kind]
    if not ok:
        want = {"int": "an integer > 0", "number": "a number > 0", "bool": "true or false",
                "str": "a non-empty string"}[kind]
        raise fail(f"{key}.value", f"must be {want}{' or null' if nullable else ''}, got {value!r}")
    return float(value) if kind == "number" else value


def _positive(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def _line(fail, node: Any, key: str) -> Line:
    node = _mapping(fail, node, key)
    for sub in node:
        if sub not in ("alpha_s", "step_s", "bus_efficiency"):
            raise fail(f"{key}.{sub}", "unknown key (allowed: alpha_s, bus_efficiency, step_s)")
    alpha, step, eff = node.get("alpha_s"), node.get("step_s", 0.0), node.get("bus_efficiency")
    if not _positive(alpha) or alpha >= 1e-2:
        raise fail(f"{key}.alpha_s", f"must be in (0, 0.01) seconds, got {alpha!r}")
    if not (step == 0 or _positive(step)) or step >= 1e-3:
        raise fail(f"{key}.step_s", f"must be in [0, 0.001) seconds, got {step!r}")
    effs = eff if isinstance(eff, list) else [eff]
    if len(effs) not in (1, len(EFFICIENCY_GROUPS)) or not all(_positive(e) and e <= 2 for e in effs):
        raise fail(f"{key}.bus_efficiency", f"must be a fraction of the link in (0, 2] or a list of "
                                            f"{len(EFFICIENCY_GROUPS)} (at {EFFICIENCY_GROUPS} GPUs), "
                                            f"got {eff!r}")
    return Line(float(alpha), float(step), tuple(float(e) for e in effs))


def parse_collectives(fail, node: Any, key: str = f"{GROUP}.collectives") -> CollectiveConstants:
    """Validate a `collectives` group (a family file's, or the one merged into `interconnect`)."""
    node = _mapping(fail, node, key)
    for sub in node:
        if sub not in ("source", "nccl", "nvls", "custom", "p2p_ll_max_bytes_per_peer"):
            raise fail(f"{key}.{sub}", "unknown key (allowed: custom, nccl, nvls, p2p_ll_max_bytes_per_peer, "
                                       "source)")
    source = node.get("source")
    if not isinstance(source, str) or not source.strip():
        raise fail(f"{key}.source", "the fitted constants need a non-empty `source` string")
    nccl_node = _mapping(fail, node.get("nccl"), f"{key}.nccl")
    nccl = {}
    for op in NCCL_OPS:
        protos = _mapping(fail, nccl_node.get(op), f"{key}.nccl.{op}")
        known = dict.fromkeys(PROTOCOLS + (P2P_PROTOCOLS if op == "all_to_all" else ()))
        nccl[op] = MappingProxyType({p: _line(fail, protos[p], f"{key}.nccl.{op}.{p}")
                                     for p in known if p in protos})
        if not nccl[op]:
            raise fail(f"{key}.nccl.{op}", f"needs at least one protocol of {', '.join(known)}")
    nvls, nvls_min, nvls_channels, nvls_chunk = None, 2, None, None
    if node.get("nvls") is not None:
        raw = dict(_mapping(fail, node["nvls"], f"{key}.nvls"))
        nvls_min = raw.pop("min_gpus", 2)
        if not isinstance(nvls_min, int) or nvls_min < 2:
            raise fail(f"{key}.nvls.min_gpus", f"must be an integer >= 2, got {nvls_min!r}")
        nvls_channels, nvls_chunk = raw.pop("channels", None), raw.pop("chunk_s", None)
        if (nvls_channels is None) != (nvls_chunk is None):
            raise fail(f"{key}.nvls.channels", "channels and chunk_s go together (both or neither)")
        bad_channels = not isinstance(nvls_channels, int) or isinstance(nvls_channels, bool)
        if nvls_channels is not None and (bad_channels or not 1 <= nvls_channels <= 64):
            raise fail(f"{key}.nvls.channels", f"must be an integer in [1, 64], got {nvls_channels!r}")
        if nvls_chunk is not None and (not _positive(nvls_chunk) or nvls_chunk >= 1e-3):
            raise fail(f"{key}.nvls.chunk_s", f"must be in (0, 0.001) seconds, got {nvls_chunk!r}")
        nvls = _line(fail, raw, f"{key}.nvls")
    custom_node = _mapping(fail, node.get("custom", {}), f"{key}.custom")
    custom = {a: _line(fail, custom_node[a], f"{key}.custom.{a}")
              for a in CUSTOM_ALGORITHMS if a in custom_node}
    ll_max = node.get("p2p_ll_max_bytes_per_peer")
    if ll_max is not None and (not _positive(ll_max) or ll_max >= 2**30):
        raise fail(f"{key}.p2p_ll_max_bytes_per_peer", f"must be a byte count in (0, 1 GiB), got {ll_max!r}")
    return CollectiveConstants(MappingProxyType(nccl), nvls, nvls_min, MappingProxyType(custom), source,
                               None if ll_max is None else float(ll_max), nvls_channels,
                               None if nvls_chunk is None else float(nvls_chunk))
