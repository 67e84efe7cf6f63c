"""Writes the fitted collective constants into the family files' `collectives` group
(hwdesc/families/<family>.yaml; the loader puts it under each SKU's `interconnect`).

The constants (estimator/calibration/fit_comm.py) are a nested dict:
    {"nccl": {op: {protocol: {"alpha_s", "step_s", "bus_efficiency": [at 2, 4, 8]}}},
     "nvls": {"alpha_s", "bus_efficiency", "min_gpus"},
     "p2p_ll_max_bytes_per_peer": bytes (optional; collectives._p2p),
     "custom": {"oneshot": {...}, "twoshot": {...}}}
Latencies carry over to every GPU of the family as they are; efficiencies are fractions of each GPU's
own link, so a family's fit carries over to its SKUs through the descriptor's bandwidth (B200's to GB200
and B300). A family without a fit of its own may carry the H100 fit (NVLS scaled by NCCL's
nvlsEfficiency ratio, Blackwell 0.74 / Hopper 0.85, serving.md 1.2c); a family fitted on its own tables
(`estimate calibrate --comm --arch b200 --data ../shared/calibration/b200_sxm --write`) is written alone.
"""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = ("estimate calibrate --comm on the {gpu} NCCL and custom all-reduce tables; latencies as fitted, "
          "bus efficiencies as fractions of the GPU's own link (so they carry over to each SKU of the family "
          "through its bandwidth)")
FITTED_ON = {"hopper": "H100 SXM", "blackwell": "B200 SXM"}  # the GPU whose tables fit each family
CARRIED = ("not fitted on a {family} GPU: the H100 fit (hwdesc/families/hopper.yaml) carried over by "
           "estimator/calibration/comm_constants.py, the NVLS and multimem bus efficiencies scaled by NCCL's "
           "nvlsEfficiency "
           "ratio ({family} {ratio} / Hopper 0.85, serving.md 1.2c); rewritten with the Hopper fit by the "
           "same command")
NVLS_CHUNK_NOTE = (
    "nvls.channels: NCCL's NVLS CTAs in one node (src/transport/nvls.cc NVLS_NCHANNELS: sm100 24, sm90 16;",
    "a documented engine rule, read from the family file by the fit); chunk_s: one NVLS op's time per chunk",
    "step, fitted with the all_reduce lines (fit_comm.fit_nccl); the chunk ladder is NCCL's",
    "(collectives.nvls_rate)")
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
    if line.get("chunk_s") is not None:
        parts.append(f"channels: {line['channels']}, chunk_s: {_num(line['chunk_s'])}")
    return "{" + ", ".join(parts) + "}"


def block(consts: dict, family: str, fitted_on: str = "", command: str = "", carried: bool = False,
          kept: tuple[str, ...] = ()) -> str:
    """The top-level `collectives:` group text of the family file of `family`: fitted on its own GPU's
    tables, or (`carried`) the Hopper fit carried over, the NVLS lines scaled by nvlsEfficiency."""
    scale = NVLS_EFFICIENCY.get(family, NVLS_EFFICIENCY["hopper"]) / NVLS_EFFICIENCY["hopper"]
    if not carried:
        scale = 1.0
        gpu = FITTED_ON.get(family, family.capitalize())
        lines = ["collectives:", f"  source: \"{SOURCE.format(gpu=gpu)}\""]
        if fitted_on and command:
            lines += [f"  fitted_on: \"{fitted_on}\"", f"  command: \"{command}\""]
    else:
        ratio = NVLS_EFFICIENCY.get(family, NVLS_EFFICIENCY["hopper"])
        lines = ["collectives:", f"  source: \"{CARRIED.format(family=family.capitalize(), ratio=ratio)}\""]
    lines.append("  nccl:")
    for op, protos in consts["nccl"].items():
        lines.append(f"    {op}:")
        for proto, line in protos.items():
            lines.append(f"      {proto}: {_line(line)}")
    if consts.get("p2p_ll_max_bytes_per_peer") is not None:
        lines.append(f"  p2p_ll_max_bytes_per_peer: {int(consts['p2p_ll_max_bytes_per_peer'])}")
    nvls = dict(consts["nvls"])
    nvls["bus_efficiency"] = min(nvls["bus_efficiency"] * scale, 2.0)
    if nvls.get("chunk_s") is not None:
        lines += [f"  # {text}" for text in NVLS_CHUNK_NOTE]
    lines.append(f"  nvls: {_line(nvls)}")
    lines.append("  custom:")
    if kept:
        lines.append(f"    # not fitted here ({', '.join(kept)}): the table's frameworks never run it; "
                     "kept as it was")
    for name, line in consts["custom"].items():
        if name == "multimem":  # NVLink SHARP too: the same carry-over as NVLS
            line = {**line, "bus_efficiency": min(line["bus_efficiency"] * scale, 2.0)}
        lines.append(f"    {name}: {_line(line)}")
    return "\n".join(lines) + "\n"


def write(consts: dict, directory: Path, fitted_on: str = "", command: str = "",
          family: str = "hopper", kept: tuple[str, ...] = ()) -> list[str]:
    """Replace `collectives` in the family file of `family` (the GPU fitted) under `directory`/families;
    a Hopper fit also rewrites every other family file whose `collectives` is the Hopper fit carried over
    (its source says so; a family with its own fit, or none, is left alone: hwdesc/family.py lets a
    family without one inherit its parent's). Returns the file names written. `fitted_on` and `command`
    (both or neither) go into the fitted family's group; `kept` names its custom kernels not fitted."""
    done = []
    for path in sorted((directory / "families").glob("*.yaml")):
        text = path.read_text()
        found = re.search(r"(?m)^collectives:\n(?:[ ].*\n|\n(?=[ ]))*", text)
        if not found:
            continue
        carried = path.stem != family and family == "hopper" and "not fitted on" in found.group(0)
        if path.stem != family and not carried:
            continue
        group = block(consts, path.stem, fitted_on, command, carried=carried,
                      kept=() if carried else kept)
        path.write_text(text[:found.start()] + group + text[found.end():])
        done.append(f"families/{path.name}")
    return done
