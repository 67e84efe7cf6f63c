"""Per-SM resource limits (hwdesc/sm/<sm_XX>.yaml) and the `--arch` of `estimate sass`.

An `--arch` is a GPU SKU of hwdesc/ (its `compute_capability` picks the SM file, and its peaks feed the
findings) or a bare SM name (`sm_90a`, `sm_100a`): then there is no descriptor and findings that need a
peak are left out. The SM file says what a `.cu`/`.ptx` is compiled for (`compile_target`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from estimator.errors import UserError

_SM_RE = re.compile(r"^sm_(\d+)([af]?)$")
_SCALARS = (
    "threads_per_sm",
    "ctas_per_sm",
    "regs_per_sm",
    "regs_per_thread_max",
    "reg_alloc_unit_per_warp",
    "sub_partitions",
    "smem_bytes_per_sm",
    "smem_bytes_per_block_optin",
    "smem_reserved_bytes_per_block",
    "smem_alloc_unit_bytes",
    "barrier_factor",
)
_OPTIONAL = ("tmem_columns_per_sm", "mma_sync_dense_flops_per_clk_per_sm")


@dataclass(frozen=True)
class SmLimits:
    """One SM generation's occupancy constants (cuda_occupancy.h's cudaOccDeviceProp, as data)."""

    name: str  # "sm_90"
    compute_capability: str  # "9.0"
    compile_target: str  # "sm_90a"
    threads_per_sm: int
    ctas_per_sm: int
    regs_per_sm: int
    regs_per_thread_max: int
    reg_alloc_unit_per_warp: int
    sub_partitions: int
    smem_bytes_per_sm: int
    smem_bytes_per_block_optin: int
    smem_reserved_bytes_per_block: int
    smem_alloc_unit_bytes: int
    barrier_factor: int
    smem_carveout_kb: tuple[int, ...]
    tmem_columns_per_sm: int | None = None  # sm_100/sm_103: tcgen05 tensor memory
    mma_sync_dense_flops_per_clk_per_sm: int | None = None  # only where mma.sync is not the native path

    @property
    def warps_per_sm(self) -> int:
        return self.threads_per_sm // 32

    @property
    def sm_number(self) -> int:
        return int(self.name.removeprefix("sm_"))


def sm_dir() -> Path:
    from hwdesc.loader import bundled_dir

    return bundled_dir() / "sm"


@functools.lru_cache(maxsize=None)
def load_sm(name: str) -> SmLimits:
    """The limits of `sm_XX` (suffix a/f ignored); UserError naming the known ones when there is no file."""
    m = _SM_RE.match(name)
    base = f"sm_{m.group(1)}" if m else name
    path = sm_dir() / f"{base}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in sm_dir().glob("sm_*.yaml")))
        raise UserError(f"no per-SM limits for {name!r} (known: {known}; add hwdesc/sm/{base}.yaml)")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    values = {}
    for key in (*_SCALARS, "smem_carveout_kb", *_OPTIONAL):
        fig = raw.get(key)
        if fig is None and key in _OPTIONAL:
            continue
        if not isinstance(fig, dict) or "value" not in fig or not fig.get("source"):
            raise UserError(f"hwdesc/sm/{path.name}: {key}: needs {{value, source}}")
        values[key] = tuple(fig["value"]) if key == "smem_carveout_kb" else int(fig["value"])
    return SmLimits(
        name=raw["name"],
        compute_capability=str(raw["compute_capability"]),
        compile_target=str(raw["compile_target"]),
        **values,
    )


def sm_for_cc(cc: str) -> str:
    """`"9.0"` -> `"sm_90"`."""
    major, minor = cc.split(".")
    return f"sm_{major}{minor}"


@dataclass(frozen=True)
class Target:
    """What `--arch` resolved to: the SM limits, the exact SM to compile for / select, and the GPU."""

    limits: SmLimits
    sm: str  # exact target: "sm_90a"
    hw: object | None  # hwdesc.HardwareDescriptor, None for a bare SM name
    label: str  # "h100-sxm (sm_90a)"


def resolve(arch: str) -> Target:
    """A SKU / alias / descriptor path, or a bare `sm_XX[a|f]`."""
    m = _SM_RE.match(arch.strip().lower())
    if m:
        limits = load_sm(arch.strip().lower())
        sm = arch.strip().lower()
        return Target(limits, sm, None, sm)
    import hwdesc
    from hwdesc.schema import HwdescError

    try:
        hw = hwdesc.load(arch)
    except HwdescError as e:
        raise UserError(f"{e} (or give an SM such as sm_90a)") from None
    if hw.compute_capability in ("none", ""):
        raise UserError(f"--arch {arch}: {hw.name} is not an NVIDIA GPU")
    limits = load_sm(sm_for_cc(hw.compute_capability))
    return Target(limits, limits.compile_target, hw, f"{hw.name} ({limits.compile_target})")


def runs_on(cubin_sm: str, target_sm: str) -> bool:
    """Whether SASS built for `cubin_sm` runs on a GPU of `target_sm`.

    Cubins are binary-compatible within one major version for minor <= the GPU's; an `a` (arch-specific)
    cubin runs only on its exact SM; an `f` (family) cubin on the same major and a minor >= its own.
    """
    a, b = _SM_RE.match(cubin_sm), _SM_RE.match(target_sm)
    if not a or not b:
        return False
    num_a, num_b = int(a.group(1)), int(b.group(1))
    if num_a // 10 != num_b // 10 or num_a % 10 > num_b % 10:
        return False
    return a.group(2) != "a" or num_a == num_b
