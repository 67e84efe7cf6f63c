"""Which hardware descriptor a profile's peaks come from: the GPU the profile names, else `--arch`.

The profile's own figures win where it has them (nsys TARGET_INFO_GPU memoryBandwidth, ncu's DRAM peak
from bytes/cycle x DRAM clock): `dram_peak` prefers them to the descriptor's datasheet figure.
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
    (r"RTX PRO 6000", "rtx-pro-6000"),
    (r"RTX 5090", "rtx-5090"),
    (r"A100", "a100"),
)


def sku_for(name: str) -> str | None:
    for pattern, sku in SKU_PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return sku
    return None


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
    what = (gpu.name or f"compute capability {gpu.compute_capability}") if gpu else "no GPU named"
    return None, (
        f"{what}: no bundled descriptor; give --arch for fractions of peak derived from times "
        f"(counter percentages are shown as measured)"
    )


def dram_peak(gpu: GpuInfo | None, hw) -> float | None:
    """DRAM bytes/s peak: the profile's own figure, else the descriptor's."""
    if gpu and gpu.dram_bytes_per_s:
        return float(gpu.dram_bytes_per_s)
    return hw.dram_bytes_per_s if hw is not None else None
