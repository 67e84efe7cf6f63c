"""Which hardware descriptor a profile's peaks come from: the GPU the profile names, else `--arch`.

The profile's own figures win where it has them (nsys TARGET_INFO_GPU memoryBandwidth, ncu's DRAM peak
from bytes/cycle x DRAM clock): `dram_peak` prefers them to the descriptor's datasheet figure.

A profile that names only a compute capability (ncu CSV exports carry `CC`, not the device name) maps to
the bundled descriptor of that compute capability; where several share it (12.0: rtx-5090 and
rtx-pro-6000) the first of SKU_PATTERNS' order is taken and a warning names the others. `warnings` says
where the GPU measured and the GPU priced differ: another SKU under `--arch`, a CPU run against a GPU
estimate, or a device whose memory size, DRAM bandwidth or SM count differs from its descriptor's (an
A100-SXM4-40GB has 40 GB at 1.56 TB/s; the bundled a100 is the 80 GB part at 2.04 TB/s).
"""

from __future__ import annotations

import re

from estimator.profile.record import GpuInfo, ProfileError

# device name -> bundled SKU; first match wins (GB200 before B200, H100 PCIe/NVL before H100).
# NB: H800 is an H100 SXM with fewer NVLink lanes; its SMs, clocks and HBM3 match h100-sxm.
SKU_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"GB200", "gb200"),
    (r"B300", "b300"),
    (r"B200", "b200"),
    (r"H200", "h200"),
    (r"H100.*(PCIe|NVL)", "h100-pcie"),
    (r"H100|H800", "h100-sxm"),
    (r"RTX 5090", "rtx-5090"),  # before RTX PRO 6000: the commoner part of compute capability 12.0
    (r"RTX PRO 6000", "rtx-pro-6000"),
    (r"A100", "a100"),
)
# A figure of the profile's device that differs from its descriptor's by more than this fraction is
# worth a warning. 0.15: wider than the decimal-GB vs reported-bytes rounding of memory sizes (an H100's
# 80 GB datasheet figure against its 85e9 bytes reported is 6 %), narrower than the gap between two
# memory configurations of one chip (A100 40 GB HBM2 1.56 TB/s vs 80 GB HBM2e 2.04 TB/s: 24 %).
DIFFERS = 0.15


def sku_for(name: str) -> str | None:
    for pattern, sku in SKU_PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return sku
    return None


def skus_for_cc(cc: str) -> list[str]:
    """Bundled SKUs of compute capability `cc`, in SKU_PATTERNS order (the rest after, sorted)."""
    import hwdesc

    order = [sku for _, sku in SKU_PATTERNS]
    found = [name for name in hwdesc.list_archs() if hwdesc.load(name).compute_capability == cc]
    return sorted(found, key=lambda n: (order.index(n) if n in order else len(order), n))


def resolve(gpu: GpuInfo | None, arch: str | None):
    """(HardwareDescriptor or None, a note saying where it came from)."""
    import hwdesc

    named = sku_for(gpu.name) if gpu and gpu.name else None
    if arch:
        try:
            hw = hwdesc.load(arch)
        except hwdesc.HwdescError as exc:
            raise ProfileError(f"--arch {arch}: {exc}") from None
        said = f"; the profile says {gpu.name}" if gpu and gpu.name and named != hw.name else ""
        return hw, f"--arch {arch}{said}"
    if named:
        return hwdesc.load(named), f"from the profile ({gpu.name} -> {named})"
    if gpu and not gpu.name and gpu.compute_capability:
        skus = skus_for_cc(gpu.compute_capability)
        if skus:
            others = f"; also {', '.join(skus[1:])}: give --arch to choose" if len(skus) > 1 else ""
            return hwdesc.load(skus[0]), (
                f"from the profile's compute capability {gpu.compute_capability} -> {skus[0]} (the profile "
                f"names no device{others})"
            )
    what = (gpu.name or f"compute capability {gpu.compute_capability}") if gpu else "no GPU named"
    return None, (
        f"{what}: no bundled descriptor; give --arch for fractions of peak derived from times "
        f"(counter percentages are shown as measured)"
    )


def warnings(gpu: GpuInfo | None, hw, host: bool = False) -> list[str]:
    """What differs between the device measured (`gpu`; a CPU when `host`) and the descriptor `hw`."""
    from hwdesc.schema import CPU_FAMILY

    if hw is None:
        return []
    if host:
        if hw.family == CPU_FAMILY:
            return []
        return [f"a CPU measurement compared with a GPU estimate ({hw.name}): the error compares two "
                f"machines, not the estimate (give --arch host for this machine's CPU)"]
    out = []
    if gpu and gpu.name:
        named = sku_for(gpu.name)
        if named != hw.name:
            out.append(f"the profile ran on {gpu.name}"
                       f"{' (' + named + ')' if named else ''}, but is priced for {hw.name}: "
                       f"the comparison mixes two GPUs")
            return out
    if gpu and gpu.compute_capability and hw.compute_capability != gpu.compute_capability:
        out.append(f"the profile's compute capability {gpu.compute_capability} is not {hw.name}'s "
                   f"({hw.compute_capability}): the comparison mixes two GPUs")
        return out
    diffs = []
    for what, mine, theirs, unit, scale in (
        ("memory", gpu.memory_bytes if gpu else None, hw.dram_bytes, "GB", 1e9),
        ("DRAM bandwidth", gpu.dram_bytes_per_s if gpu else None, hw.dram_bytes_per_s, "TB/s", 1e12),
        ("SMs", gpu.sm_count if gpu else None, hw.sm_count, "", 1),
    ):
        if mine and theirs and abs(mine - theirs) > DIFFERS * theirs:
            u = f" {unit}" if unit else ""
            diffs.append(f"{what} {mine / scale:.3g}{u} vs {theirs / scale:.3g}{u}")
    if diffs:
        out.append(f"the profile's {gpu.name or 'GPU'} is not the descriptor's {hw.display_name} "
                   f"({hw.name}): {', '.join(diffs)}; fractions of peak use the profile's DRAM figure, "
                   f"an estimate is priced for the descriptor")
    return out


def dram_peak(gpu: GpuInfo | None, hw) -> float | None:
    """DRAM bytes/s peak: the profile's own figure, else the descriptor's."""
    if gpu and gpu.dram_bytes_per_s:
        return float(gpu.dram_bytes_per_s)
    return hw.dram_bytes_per_s if hw is not None else None
