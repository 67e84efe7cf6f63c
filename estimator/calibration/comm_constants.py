"""Writes the fitted collective constants into the descriptors' `interconnect.collectives` group.

The constants (estimator/calibration/fit_comm.py) are a nested dict:
    {"nccl": {op: {protocol: {"alpha_s", "step_s", "bus_efficiency": [at 2, 4, 8]}}},
     "nvls": {"alpha_s", "bus_efficiency", "min_gpus"},
     "p2p_ll_max_bytes_per_peer": bytes (optional; collectives._p2p),
     "custom": {"oneshot": {...}, "twoshot": {...}}}
Latencies carry over to every GPU as they are; efficiencies are fractions of each GPU's own link, so the
H100 fit carries over through the descriptor's bandwidth (NVLS: scaled by NCCL's nvlsEfficiency ratio,
Blackwell 0.74 / Hopper 0.85, serving.md 1.2c).
"""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = ("estimate calibrate --comm, fitted on ../shared/calibration/h100_sxm/"
          "{nccl,custom_allreduce}.csv.gz "
          "(H100 SXM); latencies as fitted, efficiencies as fractions of this GPU's link")
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}  # NCCL tuning.cc nvlsEfficiency (serving.md 1.2c)


def _num(v: float) -> str:
    text = f"{v:.3g}"
    if "e" in text:
        mant, exp = text.split("e")
        mant = mant if "." in mant else mant + ".0"
        return f"{mant}e{'+' if not exp.startswith('-') else ''}{exp}"
    return text


def _line(line: dict) -> str:
    eff = line["bus_efficiency"]
    effs = "[" + ", ".join(_num(e) for e in eff) + "]" if isinstance(eff, list) else _num(eff)
    parts = [f"alpha_s: {_num(line['alpha_s'])}"]
    if line.get("step_s"):
        parts.append(f"step_s: {_num(line['step_s'])}")
    parts.append(f"bus_efficiency: {effs}")
    if "min_gpus" in line:
        parts.append(f"min_gpus: {line['min_gpus']}")
    return "{" + ", ".join(parts) + "}"


def block(consts: dict, family: str) -> str:
    """The `collectives:` group text (indented under `interconnect:`) for a GPU of `family`."""
    lines = ["  collectives:", f"    source: \"{SOURCE}\"", "    nccl:"]
    for op, protos in consts["nccl"].items():
        lines.append(f"      {op}:")
        for proto, line in protos.items():
            lines.append(f"        {proto}: {_line(line)}")
    if consts.get("p2p_ll_max_bytes_per_peer") is not None:
        lines.append(f"    p2p_ll_max_bytes_per_peer: {int(consts['p2p_ll_max_bytes_per_peer'])}")
    nvls = dict(consts["nvls"])
    scale = NVLS_EFFICIENCY.get(family, NVLS_EFFICIENCY["hopper"]) / NVLS_EFFICIENCY["hopper"]
    nvls["bus_efficiency"] = min(nvls["bus_efficiency"] * scale, 2.0)
    lines.append(f"    nvls: {_line(nvls)}")
    lines.append("    custom:")
    for name, line in consts["custom"].items():
        if name == "multimem":  # NVLink SHARP too: the same carry-over as NVLS
            line = {**line, "bus_efficiency": min(line["bus_efficiency"] * scale, 2.0)}
        lines.append(f"      {name}: {_line(line)}")
    return "\n".join(lines) + "\n"


def write(consts: dict, directory: Path) -> list[str]:
    """Replace (or add) `interconnect.collectives` in every descriptor of `directory` that has an
    `interconnect` group; returns the file names written."""
    done = []
    for path in sorted(directory.glob("*.yaml")):
        text = path.read_text()
        if "\ninterconnect:" not in text:
            continue
        family = re.search(r"(?m)^family: (\S+)", text).group(1)
        head, sep, rest = text.partition("\ninterconnect:")
        first, _, body = rest.partition("\n")
        end = re.search(r"(?m)^\S", body)
        group, tail = (body[:end.start()], body[end.start():]) if end else (body, "")
        group = re.sub(r"(?m)^  collectives:\n(?:    .*\n)*", "", group).rstrip("\n") + "\n"
        group += block(consts, family) + "\n"
        path.write_text(head + sep + first + "\n" + group + tail)
        done.append(path.name)
    return done
