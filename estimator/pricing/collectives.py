"""The collective model: what an all-reduce, all-gather, reduce-scatter, all-to-all or send costs.

    collective_cost(kind, nbytes, group, hw, dtype=..., framework=None, graphed=False) -> CollectiveCost

`nbytes` is the message as nccl-tests counts it (the total buffer): all-reduce and all-to-all the input,
all-gather the gathered output, reduce-scatter the input, send the bytes sent. `group` GPUs take part.
It may be a number or a sympy expression; with free symbols the estimate is a Min / Piecewise over the
algorithms and `algorithm` names every one not provably slower ("a|b").

NCCL (no framework, or where the framework falls back to it), minimum over protocols p (LL, LL128,
Simple) as NCCL's tuner takes it:
    t_p = alpha_p + steps * step_p + F * nbytes / (eta_p(group) * link)
    steps = 2(g-1) all-reduce ring, g-1 all-gather / reduce-scatter / all-to-all
    F (bus factor, nccl-tests PERFORMANCE.md) = 2(g-1)/g all-reduce, (g-1)/g the others
NVLS (NVLink SHARP all-reduce, fp16/bf16/fp32 on a descriptor with `nvlink_sharp`, within the NVLink
domain): t = alpha + nbytes / rate, rate = eta * link (the switch reduces; each GPU sends and receives its
buffer about once), and where the family file has `nvls.channels` / `nvls.chunk_s` at most
channels * g * chunk / chunk_s, chunk from NCCL's ladder by size (nvls_rate: 16 / 32 / 64 KiB chunks
for mid-size messages). Without the p2p threshold below, a send is one all-gather step of two GPUs:
t_p = alpha_p + step_p + nbytes / (eta_p(2) * link).

All-to-all and send on a descriptor with `p2p_ll_max_bytes_per_peer` (NCCL's send/recv kernels, `_p2p`):
the protocol follows NCCL's rule, not a minimum: LL where the bytes for one peer s are at most that
threshold, Simple above (p2p has no LL128). peers = g-1 (a send: 1, on the 2-GPU lines):
    LL      t = alpha + peers * step + s / (eta_ll * link)          (one LL stream per peer, all at once)
    Simple  t = min over the simple lines of alpha + peers * step + peers * s / (eta(g) * link)
s = nbytes / g for an all-to-all (nccl-tests' size is a rank's whole buffer, its own share included).
A send is one such transfer (ncclSend runs the same p2p kernel), on the 2-GPU lines.

A serving framework's all-reduce (framework given, group within one node on NVLink): its routes from
estimator/pricing/custom_allreduce.yaml (the GPU family's own where the framework lists one: TensorRT-LLM's
SM100 strategy table on Blackwell), tried in order, the first whose size limit (per group size) admits
the message (TensorRT-LLM: the faster of that route and NCCL), else NCCL. Kernels:
    one-shot  t = alpha + (g-1) * step + (g-1) * nbytes / (eta * link)        (push to every peer)
    two-shot  t = alpha + (g-1) * step + 2(g-1)/g * nbytes / (eta(g) * link)  (reduce-scatter + gather)
    multimem  t = alpha + (g-1) * step + nbytes / (eta * link)                (symmetric memory on NVLS)
    + the framework's graph_overhead_s. Outside a CUDA graph (graphed=False) every framework call also
    copies its input into the registered buffer (2 * nbytes at DRAM speed) and takes at least the host
    time per call (the framework's by group size, or the route's).
`link` is the per-direction bandwidth per GPU of `hw.interconnect.link_bytes_per_s(group)`; the alphas,
steps and etas are the descriptor's fitted `interconnect.collectives` (estimate calibrate --comm).

Bound (speed of light, no latency): the fewest bytes a GPU must put on its link over the link's peak,
    all-reduce 2(g-1)/g * nbytes ((g-1)/g where the switch can reduce: NVLS hardware and dtype),
    all-gather / reduce-scatter / all-to-all (g-1)/g * nbytes, send nbytes,
and never below the GPU's own DRAM traffic (read the input, write the output) at peak bandwidth.
The estimate is never below the bound.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

import sympy
import yaml

from estimator.errors import UserError
from estimator.ir import Expr
from estimator.pricing.units import provably_greater
from hwdesc import HardwareDescriptor

KINDS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
         "AllToAll": "all_to_all", "Send": "send"}
NVLS_DTYPES = frozenset({"fp16", "bf16", "fp32"})  # NVLink SHARP reduces these, not integers or fp8
PROTOCOL_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple", "simple_wide": "Simple"}
FRAMEWORKS_FILE = Path(__file__).with_name("custom_allreduce.yaml")


class CollectiveError(UserError):
    """A collective the model cannot price: bad group, a descriptor without collective constants..."""


@dataclass(frozen=True)
class CollectiveCost:
    bound_s: Expr
    estimate_s: Expr
    algorithm: str  # ring, nvls, p2p, oneshot, twoshot, local ("a|b" where free symbols leave it open)
    protocol: str  # LL, LL128, Simple (NCCL), custom, "-"


@dataclass(frozen=True)
class Route:
    """One of a framework's all-reduce paths (custom_allreduce.yaml `paths`)."""

    kernels: tuple[str, ...]  # oneshot, twoshot, multimem
    max_bytes: dict[int, float]  # by group size; a group size not listed is not admitted
    oneshot_max_bytes: dict[int, float | None]
    eager_host_s: float | None  # None: the framework's


@dataclass(frozen=True)
class Framework:
    name: str
    routes: tuple[Route, ...]
    versus_nccl: str  # "min" or "first"
    graph_overhead_s: float
    eager_host_s: dict[int, float]  # by group size (the largest listed size <= the group)
    family_routes: dict[str, tuple[Route, ...]] = dataclasses.field(default_factory=dict)

    def routes_for(self, family: str) -> tuple[Route, ...]:
        """The routes the framework takes on a GPU of `family`: its per-family `families.<f>.paths`
        (an engine whose strategy tables differ by SM version: TensorRT-LLM's SM90 / SM100), else
        its `paths`."""
        return self.family_routes.get(family, self.routes)

    def host_s(self, group: int) -> float:
        keys = [k for k in sorted(self.eager_host_s) if k <= group] or sorted(self.eager_host_s)
        return self.eager_host_s[keys[-1]]


@dataclass(frozen=True)
class _Option:
    """A time and the (algorithm, protocol) pairs that may give it."""

    time: Expr
    names: tuple[tuple[str, str], ...]


def collective_cost(kind: str, nbytes, group: int, hw: HardwareDescriptor, *, dtype: str = "bf16",
                    framework: str | None = None, graphed: bool = False) -> CollectiveCost:
    op = KINDS.get(kind, kind)
    if op not in KINDS.values():
        raise CollectiveError(f"unknown collective {kind!r} (known: {', '.join(KINDS)})")
    if not isinstance(group, int) or isinstance(group, bool) or group < 1:
        raise CollectiveError(f"{kind}: group size must be an integer >= 1, got {group!r}")
    ic = hw.interconnect
    if ic is None or ic.collectives is None:
        raise CollectiveError(f"{hw.name}: the descriptor has no interconnect.collectives constants "
                              f"(estimate calibrate --comm --write adds them)")
    nbytes = sympy.sympify(nbytes)
    if group == 1 and op != "send":
        zero = sympy.Integer(0)
        return CollectiveCost(zero, zero, "local", "-")
    link = ic.link_bytes_per_s(max(group, 2))
    bound = _bound(op, nbytes, group, hw, link, dtype)
    best = _nccl(op, nbytes, group, hw, link, dtype)
    fw = frameworks().get(framework) if framework else None
    if framework and fw is None:
        raise CollectiveError(f"unknown framework {framework!r} (known: {', '.join(frameworks())})")
    if fw is not None and not graphed:
        best = _eager(best, nbytes, hw, fw.host_s(group))
    if fw is not None and op == "all_reduce" and _custom_possible(hw, group):
        best = _framework(fw, best, nbytes, group, hw, link, graphed)
    time = best.time
    names = list(dict.fromkeys(best.names))
    algorithm = "|".join(dict.fromkeys(a for a, _ in names))
    protocol = "|".join(dict.fromkeys(p for _, p in names))
    return CollectiveCost(bound, sympy.Max(time, bound), algorithm, protocol)


def bus_factor(op: str, group: int) -> sympy.Rational:
    """nccl-tests' busbw factor: bus bytes per GPU = factor * nbytes."""
    if op == "all_reduce":
        return sympy.Rational(2 * (group - 1), group)
    if op == "send":
        return sympy.Integer(1)
    return sympy.Rational(group - 1, group)


def ring_steps(op: str, group: int) -> int:
    return 2 * (group - 1) if op == "all_reduce" else group - 1


def _bound(op: str, nbytes: Expr, group: int, hw: HardwareDescriptor, link: float, dtype: str) -> Expr:
    factor = bus_factor(op, group)
    if op == "all_reduce" and _nvls_hardware(hw, group) and dtype in NVLS_DTYPES:
        factor = sympy.Rational(group - 1, group)  # the switch reduces: each GPU sends its share once
    reads = {"all_gather": nbytes / group}.get(op, nbytes)
    writes = {"reduce_scatter": nbytes / group, "send": 0}.get(op, nbytes)
    return sympy.Max(factor * nbytes / link, (reads + writes) / hw.dram_bytes_per_s)


def _nvls_hardware(hw: HardwareDescriptor, group: int) -> bool:
    ic = hw.interconnect
    return bool(ic.nvlink_sharp and ic.on_nvlink(group))


def _nccl(op: str, nbytes: Expr, group: int, hw: HardwareDescriptor, link: float, dtype: str) -> _Option:
    consts = hw.interconnect.collectives
    if op in ("all_to_all", "send") and consts.p2p_ll_max_bytes_per_peer is not None:
        return _p2p(op, nbytes, group, consts, link)
    table, g, steps, factor = op, group, ring_steps(op, group), bus_factor(op, group)
    if op == "send":  # one step of a two-GPU all-gather of 2 * nbytes
        table, g, steps, factor = "all_gather", 2, 1, sympy.Integer(1)
    algorithm = "p2p" if op in ("send", "all_to_all") else "ring"
    options = [_Option(line.alpha_s + steps * line.step_s + factor * nbytes / (line.efficiency(g) * link),
                       ((algorithm, PROTOCOL_NAMES[p]),))
               for p, line in consts.nccl[table].items()]
    if (op == "all_reduce" and consts.nvls is not None and dtype in NVLS_DTYPES
            and _nvls_hardware(hw, group) and group >= consts.nvls_min_gpus):
        line = consts.nvls
        time = line.alpha_s + nbytes / nvls_rate(nbytes, group, consts, link)
        options.append(_Option(time, (("nvls", "Simple"),)))
    return _fastest(options)


# NCCL's NVLS chunk ladder (enqueue.cc, the NVLS branch of the chunk computation; a documented engine rule):
# from NVLS_CHUNKSIZE (128 KiB) the chunk halves while the message is under `times` x (concurrent ops x
# chunk), down to the floor. (times, the chunk it applies to, the chunk it gives), in NCCL's order.
NVLS_CHUNK_BYTES = 131072
NVLS_LADDER = ((64, 131072, 65536), (8, 65536, 32768), (2, 32768, 16384))


def nvls_chunk_bytes(nbytes, ops: int):
    """NCCL's NVLS chunk for a message of `nbytes` over `ops` concurrent ops (NVLS channels x heads, a
    head per GPU in one node). Numbers give a number; a sympy expression gives a Piecewise."""
    pieces, chunk = [], NVLS_CHUNK_BYTES
    for times, above, below in NVLS_LADDER:
        if chunk == above:
            pieces.append((below, times * ops * above))
            chunk = below
    nbytes = sympy.sympify(nbytes)
    if nbytes.is_number:
        out = NVLS_CHUNK_BYTES
        for below, limit in pieces:
            if float(nbytes) < limit:
                out = below
        return out
    # the smallest limit the message is under decides (the ladder only ever halves)
    return sympy.Piecewise(*[(below, nbytes < limit) for below, limit in reversed(pieces)],
                           (NVLS_CHUNK_BYTES, True))


def nvls_rate(nbytes, group: int, consts, link: float):
    """NVLS all-reduce bytes per second: the line's eta x link, and with the chunk limit (`nvls.channels`,
    `nvls.chunk_s`) at most ops x chunk / chunk_s, ops = channels x group concurrent ops each moving one
    chunk per chunk_s (NB: a chunk step's multimem round trip through the switch and its flag handshake,
    not overlapped within an op; fitted). So mid-size messages, cut into 16 or 32 KiB chunks by NCCL's
    ladder, run below the link's rate; from 64 KiB chunks the link caps it."""
    rate = consts.nvls.efficiency(group) * link
    if consts.nvls_chunk_s is None or consts.nvls_channels is None:
        return rate
    ops = consts.nvls_channels * group
    limit = ops * nvls_chunk_bytes(nbytes, ops) / consts.nvls_chunk_s
    if sympy.sympify(limit).is_number:
        return min(rate, float(limit))
    return sympy.Min(rate, limit)


def _p2p(op: str, nbytes: Expr, group: int, consts, link: float) -> _Option:
    """NCCL's send/recv kernels: an all-to-all is one send and one receive per peer, every peer at once (each
    on its own channels); a send is one of them. NCCL picks the protocol by the bytes per peer: LL up to
    `p2p_ll_max_bytes_per_peer` (enqueue.cc: NCCL_P2P_LL_THRESHOLD, 16 KiB, times the channels per peer),
    Simple above, where the link carries every peer's bytes (the simple lines: few channels per peer for
    small parts, more for large ones, as NCCL doubles them; the faster is taken).
    NB: the LL streams are not capped by the link: at very large groups the bound (bytes over the link's
    peak) takes over."""
    lines = consts.nccl["all_to_all"]
    g, peers, per_peer = (2, 1, nbytes) if op == "send" else (group, group - 1, nbytes / group)
    simple = [_Option(line.alpha_s + peers * line.step_s + peers * per_peer / (line.efficiency(g) * link),
                      (("p2p", "Simple"),))
              for p, line in lines.items() if p != "ll"]
    ll = lines.get("ll")
    low = None if ll is None else _Option(
        ll.alpha_s + peers * ll.step_s + per_peer / (ll.efficiency(g) * link), (("p2p", "LL"),))
    if not simple:
        return low
    high = _fastest(simple)
    return high if low is None else _when(per_peer <= consts.p2p_ll_max_bytes_per_peer, low, high)


def _custom_possible(hw: HardwareDescriptor, group: int) -> bool:
    """Custom all-reduce needs IPC peers on NVLink: one node, inside the NVLink domain."""
    ic = hw.interconnect
    return ic.on_nvlink(group) and group <= ic.gpus_per_node and bool(ic.collectives.custom)


def _eager(option: _Option, nbytes: Expr, hw: HardwareDescriptor, host_s: float) -> _Option:
    """Outside a CUDA graph: the host's time per call, or the kernel after copying the input into the
    registered buffer. NB: the copy is charged to NCCL calls too (the measured eager rows show it)."""
    copy_s = 2 * nbytes / (hw.dram_bytes_per_s * hw.efficiency["dram"])
    return _Option(sympy.Max(sympy.Float(host_s), option.time + copy_s), option.names)


def _kernel(name: str, nbytes: Expr, group: int, hw: HardwareDescriptor, link: float,
            overhead_s: float) -> _Option | None:
    """A custom kernel's time (None where the GPU has no constants for it, or multimem lacks NVLS)."""
    line = hw.interconnect.collectives.custom.get(name)
    if line is None or (name == "multimem" and not hw.interconnect.nvlink_sharp):
        return None
    traffic = {"oneshot": group - 1, "twoshot": sympy.Rational(2 * (group - 1), group)}.get(name, 1)
    time = (line.alpha_s + (group - 1) * line.step_s + overhead_s
            + traffic * nbytes / (line.efficiency(group) * link))
    return _Option(time, ((name, "custom"),))


def _framework(fw: Framework, nccl: _Option, nbytes: Expr, group: int, hw: HardwareDescriptor,
               link: float, graphed: bool) -> _Option:
    """The framework's choice: its first route that admits the message (versus NCCL as it decides)."""
    chosen = nccl
    for route in reversed(fw.routes_for(hw.family)):
        limit = route.max_bytes.get(group)
        kernels = {k: _kernel(k, nbytes, group, hw, link, fw.graph_overhead_s) for k in route.kernels}
        kernels = {k: v for k, v in kernels.items() if v is not None}
        if limit is None or not kernels:
            continue
        threshold = route.oneshot_max_bytes.get(group, "none")
        if route.oneshot_max_bytes and {"oneshot", "twoshot"} <= set(kernels) and threshold != "none":
            option = kernels["oneshot"] if threshold is None else _when(
                nbytes < threshold, kernels["oneshot"], kernels["twoshot"])
        else:
            option = _fastest(list(kernels.values()))
        if not graphed:
            option = _eager(option, nbytes, hw, route.eager_host_s or fw.host_s(group))
        if fw.versus_nccl == "min":
            option = _fastest([option, nccl])
        chosen = _when(nbytes <= limit, option, chosen)
    return chosen


def _fastest(options: list[_Option]) -> _Option:
    """The minimum; with free symbols a Min, naming every option not provably slower."""
    if all(sympy.sympify(o.time).is_number for o in options):
        return min(options, key=lambda o: float(o.time))
    alive = [o for o in options if not any(provably_greater(o.time, p.time) for p in options if p is not o)]
    return _Option(sympy.Min(*(o.time for o in alive)), tuple(n for o in alive for n in o.names))


def _when(cond, yes: _Option, no: _Option) -> _Option:
    cond = sympy.sympify(cond)
    if cond is sympy.true:
        return yes
    if cond is sympy.false:
        return no
    return _Option(sympy.Piecewise((yes.time, cond), (no.time, True)), yes.names + no.names)


def _value(entry, default=None):
    """A {value, source} entry's value, or a plain value."""
    if entry is None:
        return default
    return entry["value"] if isinstance(entry, dict) and "value" in entry else entry


def _by_group(entry) -> dict:
    return {int(k): (None if v is None else float(v)) for k, v in (_value(entry) or {}).items()}


@functools.lru_cache(maxsize=1)
def frameworks() -> dict[str, Framework]:
    """The frameworks of custom_allreduce.yaml, by name."""
    raw = yaml.safe_load(FRAMEWORKS_FILE.read_text())
    out = {}

    def routes(paths) -> tuple[Route, ...]:
        return tuple(Route(tuple(r["kernels"]), _by_group(r.get("max_bytes")),
                           _by_group(r.get("oneshot_max_bytes")), _value(r.get("eager_host_s")))
                     for r in paths)

    for name, fw in raw.items():
        host = _value(fw.get("eager_host_s"), 0.0)
        host = _by_group(fw["eager_host_s"]) if isinstance(host, dict) else {1: float(host)}
        by_family = {family: routes(spec["paths"]) for family, spec in (fw.get("families") or {}).items()}
        out[name] = Framework(name, routes(fw["paths"]), fw["versus_nccl"],
                              float(_value(fw.get("graph_overhead_s"), 0.0)), host, by_family)
    return out
