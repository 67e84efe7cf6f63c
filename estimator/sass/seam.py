"""A compiled kernel priced into the estimate: `estimate MODEL --kernel-sass NODE=FILE[#KERNEL]`.

The tile model normally assumes the family menu's kernel (hwdesc/tiles: wgmma on Hopper, tcgen05 on
Blackwell, its co-resident CTAs per tile). A `SassPlan` replaces two of those assumptions for the graph
kernel holding NODE, with what `estimate sass` read from the compiled kernel:
- the tensor path's peak: the descriptor's dense peak for the SASS's dtype on the fast path (wgmma /
  tcgen05 / sm_80 and sm_120 mma.sync); for mma.sync on an SM whose fast path is wgmma / tcgen05,
  `mma_sync_dense_flops_per_clk_per_sm x sm_count x clock_hz`; a kernel without tensor instructions runs
  at the fp32 CUDA-core peak;
- CTAs per SM: the SASS occupancy (registers, shared memory, block size) caps every menu tile.
NB: the tile shape itself still comes from the menu (the SASS does not spell out the CTA tile), and
the menu tile's own shared-memory fit still applies.
"""

from __future__ import annotations

from estimator.errors import UserError
from estimator.pricing.compiled import SassPlan, check_priced, for_kernel  # noqa: F401 - kept below sass

_FAST_PATH = {90: "wgmma", 100: "tcgen05", 103: "tcgen05"}


def path_peak(tensor: dict, target) -> float | None:
    """FLOP/s of the compiled kernel's MMA path on `target` (an estimator.sass.limits.Target with a GPU)."""
    hw, lim = target.hw, target.limits
    if not tensor["ops"]:
        return hw.cuda_flops_per_s["fp32"]
    op = max(tensor["ops"], key=lambda o: o["count"])
    slow = op["family"] == "mma.sync" and _FAST_PATH.get(lim.sm_number)
    if slow and lim.mma_sync_dense_flops_per_clk_per_sm:
        return lim.mma_sync_dense_flops_per_clk_per_sm * hw.sm_count * hw.clock_hz
    if op["dtype"] == "fp64":
        return hw.cuda_flops_per_s["fp64"]
    return hw.tensor_flops_per_s.get(op["dtype"]) if op["dtype"] else None


def from_report(kernel: dict, target, file: str) -> SassPlan:
    ops = kernel["tensor"]["ops"]
    top = max(ops, key=lambda o: o["count"]) if ops else None
    path = f"{top['opcode']} ({top['family']})" if top else "no tensor core"
    return SassPlan(file=file, kernel=kernel["name"], ctas_per_sm=kernel["occupancy"]["ctas_per_sm"],
                    peak_flops_per_s=path_peak(kernel["tensor"], target), path=path)


def parse_kernel_sass(values: list[str], hw) -> dict[str, SassPlan]:
    """`NODE=FILE[#KERNEL]` flags -> {node name: SassPlan}, each file analysed for `hw`'s SM."""
    import hwdesc
    from estimator.sass.analyse import analyse_file
    from estimator.sass.limits import resolve

    arch = hw.name if hw.name in hwdesc.list_archs() else hw.path
    target = resolve(arch)
    out: dict[str, SassPlan] = {}
    for value in values:
        node, sep, spec = value.partition("=")
        if not sep or not node or not spec:
            raise UserError(f"--kernel-sass {value!r}: expected NODE=FILE[#KERNEL]")
        file, _, name = spec.partition("#")
        result = analyse_file(file, arch, kernel=name or None)
        if len(result["kernels"]) != 1:
            names = ", ".join(k["name"] for k in result["kernels"])
            raise UserError(f"--kernel-sass {value!r}: {file} holds {len(result['kernels'])} kernels "
                            f"({names}); pick one with {node}={file}#KERNEL")
        out[node] = from_report(result["kernels"][0], target, file)
    return out


