"""A compiled kernel's figures as the tile model takes them (`--kernel-sass NODE=FILE[#KERNEL]`): the
record estimator/sass/seam.py builds from `estimate sass`, and which graph kernel it applies to. Kept
here, below the sass package, because the tiling step (estimator/pricing/plan.py) reads it."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from estimator.errors import UserError


@dataclass(frozen=True)
class SassPlan:
    file: str
    kernel: str
    ctas_per_sm: int
    peak_flops_per_s: float | None  # None: the SASS names no dtype the descriptor prices; keep the menu's
    path: str  # "HMMA.16816.F32.BF16 (mma.sync)" or "no tensor core"

    @property
    def label(self) -> str:
        return f"{Path(self.file).name}#{self.kernel}"


def matches(name: str, pattern: str) -> bool:
    """A node name against a --kernel-sass NODE: the name itself or an fnmatch pattern."""
    return name == pattern or (any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern))


def for_kernel(kernel, plans: dict[str, SassPlan] | None) -> SassPlan | None:
    """The SassPlan whose NODE (a name or an fnmatch pattern) matches a node of a graph kernel."""
    if not plans:
        return None
    return next((plan for n in kernel.nodes for pat, plan in plans.items() if matches(n.name, pat)), None)


def check_priced(kernels, plans: dict[str, SassPlan], tiling: bool, tile_plans: list | None = None) -> None:
    """Every NODE of --kernel-sass names a node of a GEMM-like kernel that the tile model priced with it."""
    if not tiling:
        raise UserError("--kernel-sass feeds the tile model: drop --roofline")
    names = [n.name for k in kernels for n in k.nodes]
    for node in plans:
        if not any(matches(name, node) for name in names):
            raise UserError(f"--kernel-sass {node}=...: no node {node!r} in the lowered graph")
    if tile_plans is None:
        return
    for k, plan in zip(kernels, tile_plans, strict=True):
        compiled = for_kernel(k, plans)
        if compiled is not None and (plan is None or plan.sass is None):
            node = next(n.name for n in k.nodes if any(matches(n.name, pat) for pat in plans))
            raise UserError(f"--kernel-sass {node}=...: {node} is in a {k.kind} kernel ({k.name}); only "
                            f"GEMM-like kernels take a compiled kernel")
