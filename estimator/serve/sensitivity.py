"""Sensitivities of a served deployment to the hardware descriptor's figures and the framework's host
costs: elasticities d ln(TPOT) / d ln(figure) and d ln(TTFT) / d ln(figure).

Each figure is scaled by (1 + h) and (1 - h), the deployment re-priced from scratch on the scaled
descriptor (Deployment.build: the same pricing core and serving model, a new descriptor value so no
memo is shared) and served again; the elasticity is the central difference of the logs,
    e = (ln m(1 + h) - ln m(1 - h)) / (ln(1 + h) - ln(1 - h)),   h = 1 %,
the exact model's own derivative where it is smooth (the piecewise choices, a tile plan or a
collective's protocol, are the model's too: a figure near a switch shows the switch). -1 on HBM
bandwidth means TPOT halves when the bandwidth doubles; 0 means the figure does not bind.
Figures: HBM bandwidth (dram_bytes_per_s), the tensor peak of each dtype the descriptor lists,
NVLink bandwidth (interconnect.nvlink_bytes_per_s_per_direction) and latency (every fitted
collective line's alpha and per-step latency), kernel launch (the framework's graph launch and eager
launch per kernel) and the host front end (seconds per request and per output token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType

H = 0.01


@dataclass(frozen=True)
class Figure:
    name: str
    scale: object  # (hw, fw, factor) -> (hw, fw)


def _hw(hw, **changes):
    # a new path: the descriptor's identity in memo keys and hashes is its own
    return replace(hw, path=f"{hw.path}#scaled", **changes)


def _dram(hw, fw, f):
    return _hw(hw, dram_bytes_per_s=hw.dram_bytes_per_s * f), fw


def _tensor(dtype):
    def scale(hw, fw, f):
        peaks = dict(hw.tensor_flops_per_s)
        peaks[dtype] *= f
        return _hw(hw, tensor_flops_per_s=MappingProxyType(peaks)), fw
    return scale


def _nvlink_bw(hw, fw, f):
    ic = hw.interconnect
    bw = ic.nvlink_bytes_per_s_per_direction
    nv = None if hw.nvlink_bytes_per_s is None else hw.nvlink_bytes_per_s * f
    ic = replace(ic, nvlink_bytes_per_s_per_direction=bw * f)
    return _hw(hw, nvlink_bytes_per_s=nv, interconnect=ic), fw


def _line(line, f):
    return replace(line, alpha_s=line.alpha_s * f, step_s=line.step_s * f)


def _nvlink_latency(hw, fw, f):
    ic = hw.interconnect
    c = ic.collectives
    nccl = MappingProxyType({op: MappingProxyType({p: _line(x, f) for p, x in lines.items()})
                             for op, lines in c.nccl.items()})
    custom = MappingProxyType({k: _line(x, f) for k, x in c.custom.items()})
    nvls = None if c.nvls is None else _line(c.nvls, f)
    return _hw(hw, interconnect=replace(ic, collectives=replace(c, nccl=nccl, custom=custom, nvls=nvls))), fw


def _fw(fw, **values):
    return replace(fw, values={**fw.values, **values})


def _launch(hw, fw, f):
    return hw, _fw(fw, graph_launch_s=float(fw.graph_launch_s) * f,
                   eager_launch_s_per_kernel=float(fw.eager_launch_s_per_kernel) * f)


def _host(hw, fw, f):
    per_token = fw.host_output_tokens_per_s
    return hw, _fw(fw, host_s_per_request=float(fw.host_s_per_request or 0.0) * f,
                   host_output_tokens_per_s=None if not per_token else float(per_token) / f)


def figures(hw, tp: int) -> list[Figure]:
    out = [Figure("HBM bandwidth", _dram)]
    out += [Figure(f"tensor peak {dt}", _tensor(dt)) for dt in sorted(hw.tensor_flops_per_s)]
    ic = hw.interconnect
    if tp > 1 and ic is not None and ic.nvlink_bytes_per_s_per_direction and ic.collectives is not None:
        out += [Figure("NVLink bandwidth", _nvlink_bw), Figure("NVLink latency", _nvlink_latency)]
    out += [Figure("kernel launch", _launch), Figure("host front end", _host)]
    return out


@dataclass
class Elasticity:
    figure: str
    tpot: float
    ttft: float

    def to_json(self) -> dict:
        return {"figure": self.figure, "tpot": self.tpot, "ttft": self.ttft}


def served(model: str, opts, work, hw, fw):
    """`work` on `model` re-priced on descriptor `hw` under framework figures `fw`."""
    from estimator.serve.deploy import Deployment

    return Deployment.build(model, replace(opts, hw=hw, framework=fw)).serve(work)


def _log_slope(lo: float, hi: float, h: float) -> float:
    if not (lo > 0 and hi > 0):
        return 0.0
    return (math.log(hi) - math.log(lo)) / (math.log1p(h) - math.log1p(-h))


def elasticities(model: str, opts, work, h: float = H,
                 only: tuple[str, ...] | None = None) -> list[Elasticity]:
    """The elasticities of every figure (of `only` these names, when given)."""
    out = []
    for fig in (f for f in figures(opts.hw, opts.tp) if only is None or f.name in only):
        up = served(model, opts, work, *fig.scale(opts.hw, opts.framework, 1 + h))
        down = served(model, opts, work, *fig.scale(opts.hw, opts.framework, 1 - h))
        out.append(Elasticity(fig.name, _log_slope(down.tpot_s, up.tpot_s, h),
                              _log_slope(down.ttft_s, up.ttft_s, h)))
    return out


def text(rows: list[Elasticity]) -> str:
    lines = [f"{'figure':<22} {'dTPOT/TPOT per dx/x':>20} {'dTTFT/TTFT per dx/x':>20}"]
    lines += [f"{r.figure:<22} {r.tpot:>20.3f} {r.ttft:>20.3f}" for r in rows]
    lines.append("(elasticities: -1 = the time halves when the figure doubles; central differences of the "
                 f"re-priced model at +-{H:.0%})")
    return "\n".join(lines)
