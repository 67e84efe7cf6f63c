"""One module -> one report dict per kernel: resources, tensor path, features, loops, occupancy, findings.

The disassembler runs once per module (its ~0.3-0.5 s start-up dominates); everything else is Python
over that one listing and the cubin's ELF attributes.
"""

from __future__ import annotations

import re
from collections import Counter

from estimator.errors import UserError
from estimator.input_limits import read_bytes
from estimator.sass import disasm, elf, findings, idesc, inputs, loops, mix
from estimator.sass.limits import Target, resolve, runs_on
from estimator.sass.occupancy import occupancy

DEFAULT_ARCH = "h100-sxm"  # as `estimate MODEL`
DEFAULT_BLOCK = 128  # NB: assumed when neither --block nor the cubin's launch bounds give a block size
_UNPACK_FP8 = re.compile(r"^F2FP\..*\.(E4M3|E5M2)\.UNPACK")
_UMOV_IMM = re.compile(r"^(UR\d+),\s*(0x[0-9a-f]+|\d+)$")


def analyse_file(
    path: str,
    arch: str | None = None,
    kernel: str | None = None,
    block: int | None = None,
    dynamic_smem: int | None = None,
    tmem_columns: int | None = None,
    nvcc_args: tuple[str, ...] = (),
    triton=None,
) -> dict:
    """The report of every kernel (or just `kernel`) of the module at `path` for `arch`. `dynamic_smem`
    and `tmem_columns` default to what the compiler reports (Triton), else 0 and the SASS's alloc.
    `triton`: an estimator.sass.triton_src.TritonSpec when `path` is a Triton source."""
    if dynamic_smem is not None and dynamic_smem < 0:
        raise UserError(f"--dynamic-smem must be >= 0 bytes, got {dynamic_smem}")
    target = resolve(arch) if arch else None
    with inputs.scratch_dir() as work:
        if target is None:
            target = _target_of_cubin(path)
        module = inputs.load(path, target.sm, work, nvcc_args, triton)
        if module.source_kind == "listing":
            return _listing(path, target, kernel)
        if dynamic_smem is None:
            dynamic_smem = module.launch_smem_bytes or 0
        if tmem_columns is None:
            tmem_columns = module.launch_tmem_columns
        infos = [(cubin, elf.read(cubin.read_bytes(), str(cubin))) for cubin in module.cubins]
        names = [n for _, info in infos for n in info.kernels]
        if kernel is not None and kernel not in names:
            raise UserError(f"{path}: no kernel {kernel!r} (kernels: {', '.join(names) or 'none'})")
        kernels, sm = [], ""
        for cubin, info in infos:
            wanted = [n for n in info.kernels if kernel is None or n == kernel]
            if not wanted:
                continue  # an executable's empty or unrelated cubin: not disassembled
            listing = disasm.disassemble(str(cubin))  # once per cubin: its start-up dominates
            if module.source_kind == "cubin" and listing.sm and not runs_on(listing.sm, target.sm):
                # the ELF flags cannot tell sm_100 from sm_100a; the listing's `.target` can
                raise UserError(f"{path}: the cubin is for {listing.sm}, which does not run on {target.sm} "
                                f"(give --arch {listing.sm})")
            sm = sm or listing.sm
            kernels += [_kernel(info.kernels[n], info, listing.functions.get(n), module, target, block,
                                dynamic_smem, tmem_columns) for n in wanted]
    return {
        "file": path,
        "arch": target.label,
        "sm": sm or target.sm,
        "gpu": target.hw.name if target.hw is not None else None,
        "source_kind": module.source_kind,
        "ptxas_warnings": module.ptxas_warnings,
        "kernels": kernels,
    }


def _target_of_cubin(path: str) -> Target:
    """Without --arch: a cubin is analysed for its own SM, anything else for DEFAULT_ARCH."""
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a directory, not a file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}") from None
    if elf.is_elf(data) and len(data) > 0x14 and data[0x12] == 190:
        return resolve(f"sm_{elf.read(data, path).sm_number}")
    head = data[:65536].decode("utf-8", "replace")
    if disasm.looks_like_listing(head) and (sm := disasm.parse(head).sm):
        return resolve(sm)  # a saved listing is analysed for the SM it names
    return resolve(DEFAULT_ARCH)


# What a saved listing cannot say: the cubin's ELF attributes (None in its report).
_ELF_ONLY = ("registers", "stack_bytes", "static_smem_bytes", "dynamic_smem_bytes", "barriers", "mbarriers",
             "launch_bounds_threads", "reqntid", "cluster_dims", "setmaxnreg", "param_bytes")


def _listing(path: str, target: Target, kernel: str | None) -> dict:
    """The report of a saved `cuobjdump -sass` / `nvdisasm` listing: everything read from instructions
    (tensor path, features, mix, loops, spill instructions); resources only the cubin holds and the
    occupancy they decide are None."""
    listing = disasm.parse(read_bytes(path).decode("utf-8", "replace"))
    if not listing.functions:
        raise UserError(f"{path}: a SASS listing without a function (no `Function :` or `.text.` section)")
    if kernel is not None and kernel not in listing.functions:
        raise UserError(f"{path}: no kernel {kernel!r} (kernels: {', '.join(listing.functions)})")
    if listing.sm and not runs_on(listing.sm, target.sm):
        raise UserError(f"{path}: the listing is for {listing.sm}, which does not run on {target.sm} "
                        f"(give --arch {listing.sm})")
    kernels = [_listed_kernel(fn, target) for name, fn in listing.functions.items()
               if kernel is None or name == kernel]
    return {
        "file": path,
        "arch": target.label,
        "sm": listing.sm or target.sm,
        "gpu": target.hw.name if target.hw is not None else None,
        "source_kind": "listing",
        "ptxas_warnings": [],
        "kernels": kernels,
    }


def _listed_kernel(fn: disasm.Function, target: Target) -> dict:
    instructions = fn.instructions
    whole = loops.summarize(instructions)
    resources = {key: None for key in _ELF_ONLY}
    resources.update(
        spill_store_bytes=sum(loops.access_bytes(i) for i in instructions if i.spill and i.base == "STL"),
        spill_load_bytes=sum(loops.access_bytes(i) for i in instructions if i.spill and i.base == "LDL"),
        spill_source="sass",
        spill_instructions=whole["spill_instructions"],
        local_instructions=whole["mix"].get("lsu_local", 0),
    )
    report = {
        "name": fn.name,
        "resources": resources,
        "tensor": _tensor(instructions),
        "features": _features(instructions, elf.ElfKernel(fn.name)),
        "mix": whole["mix"],
        "sfu": whole["sfu"],
        "instructions": whole["instructions"],
        "loops": loops.analyse(fn),
        "occupancy": None,
    }
    report["findings"] = [
        *findings.listing_findings(report, target),
        {"kind": "listing", "text": "a SASS listing holds no registers, shared memory or launch bounds: "
                                    "give the cubin for resources and occupancy"},
    ]
    return report


def _kernel(
    k: elf.ElfKernel,
    module: elf.ElfModule,
    fn: disasm.Function | None,
    src: inputs.Module,
    target: Target,
    block: int | None,
    dynamic_smem: int,
    tmem_columns: int | None,
) -> dict:
    instructions = fn.instructions if fn else []
    whole = loops.summarize(instructions)
    features = _features(instructions, k)
    resources = _resources(k, module, instructions, whole, src, dynamic_smem)
    report = {
        "name": k.name,
        "resources": resources,
        "tensor": _tensor(instructions),
        "features": features,
        "mix": whole["mix"],
        "sfu": whole["sfu"],
        "instructions": whole["instructions"],
        "loops": loops.analyse(fn) if fn else [],
        "occupancy": _occupancy(k, resources, features, target, block, tmem_columns),
    }
    report["findings"] = findings.findings(report, target, src.ptxas_warnings)
    return report


def _resources(k: elf.ElfKernel, module: elf.ElfModule, instructions: list, whole: dict, src: inputs.Module,
               dynamic_smem: int) -> dict:
    spill_st, spill_ld = src.ptxas_spills.get(k.name, (None, None))
    if spill_st is None:  # from the SASS: bytes per thread of the annotated STL / LDL, statically
        spill_st = sum(loops.access_bytes(i) for i in instructions if i.spill and i.base == "STL")
        spill_ld = sum(loops.access_bytes(i) for i in instructions if i.spill and i.base == "LDL")
    return {
        "registers": k.registers,
        "stack_bytes": k.stack_bytes,
        "spill_store_bytes": spill_st,
        "spill_load_bytes": spill_ld,
        "spill_source": "ptxas" if k.name in src.ptxas_spills else "sass",
        "spill_instructions": whole["spill_instructions"],
        "local_instructions": whole["mix"].get("lsu_local", 0),
        "static_smem_bytes": elf.static_smem_bytes(k, module),
        "dynamic_smem_bytes": dynamic_smem,
        "barriers": k.barriers,
        "mbarriers": k.mbarriers,
        "launch_bounds_threads": _volume(k.max_threads),
        "reqntid": list(k.reqntid) if k.reqntid else None,
        "cluster_dims": list(k.cluster_dims) if k.cluster_dims else None,
        "setmaxnreg": k.reg_reconfig,
        "param_bytes": k.param_bytes,
    }


def _volume(dims: tuple[int, int, int] | None) -> int | None:
    return dims[0] * dims[1] * dims[2] if dims else None


def _occupancy(k: elf.ElfKernel, res: dict, features: dict, target: Target, block: int | None,
               tmem_columns: int | None) -> dict:
    if tmem_columns is None:
        tmem_columns = features["tmem_columns"]
    tmem = tmem_columns if features["tcgen05"] else None
    threads, block_source = _block(k, block)
    occ = occupancy(target.limits, threads, k.registers, res["static_smem_bytes"], res["dynamic_smem_bytes"],
                    k.barriers, tmem)
    return {
        "block_threads": threads,
        "block_source": block_source,
        "ctas_per_sm": occ.ctas_per_sm,
        "warps_per_sm": occ.warps_per_sm,
        "occupancy": round(occ.occupancy, 4),
        "limiter": occ.limiter,
        "limits": occ.limits,
        "smem_per_cta_bytes": occ.smem_per_cta_bytes,
        "tmem_columns": tmem,
        "upper_bound": bool(k.cluster_dims) or features["tcgen05"],
    }


def _block(k: elf.ElfKernel, block: int | None) -> tuple[int, str]:
    if block is not None:
        return block, "--block"
    if k.reqntid:
        return _volume(k.reqntid), "reqntid"
    if k.max_threads:
        return _volume(k.max_threads), "launch_bounds"
    return DEFAULT_BLOCK, "assumed"


def _tensor(instructions: list[disasm.Instruction]) -> dict:
    """The tensor-core ops with their decoded shape / dtype, the family, and emulated fp8 MMA."""
    ops: dict[str, dict] = {}
    for idx, ins in enumerate(instructions):
        if mix.class_of(ins.opcode) != "tensor":
            continue
        op = mix.tensor_op(ins.opcode)
        entry = ops.get(ins.opcode)
        if entry is None:
            shape, dtype, acc, desc = op.shape, op.dtype, op.accumulator, None
            if op.family == "tcgen05" and (d := idesc.find(instructions, idx)) is not None:
                shape, dtype, acc, desc = (
                    (d.m, d.n, d.k) if d.k else None,
                    d.dtype or dtype,
                    d.accumulator,
                    d.value,
                )
            entry = ops[ins.opcode] = {
                "opcode": ins.opcode,
                "family": op.family,
                "dtype": dtype,
                "accumulator": acc,
                "shape": list(shape) if shape else None,
                "cta_group": op.cta_group,
                "block_scaled": op.block_scaled,
                "idesc": f"0x{desc:08x}" if desc is not None else None,
                "count": 0,
            }
        entry["count"] += 1
    families = Counter(e["family"] for e in ops.values())
    unpack = sum(1 for i in instructions if _UNPACK_FP8.match(i.opcode))
    native_fp8 = any(e["dtype"] in ("fp8", "fp6", "fp4") for e in ops.values())
    hmma = sum(e["count"] for e in ops.values() if e["opcode"].startswith("HMMA"))
    emulated = {"conversions": unpack, "hmma": hmma} if unpack and hmma and not native_fp8 else None
    return {
        "family": max(families, key=families.get) if families else None,
        "families": sorted(families),
        "ops": list(ops.values()),
        "emulated_fp8": emulated,
    }


def _features(instructions: list[disasm.Instruction], k: elf.ElfKernel) -> dict:
    bases = Counter(i.base for i in instructions)
    tcgen05 = any(i.base.startswith("UTC") and i.base.endswith("MMA") for i in instructions) or bool(
        k.tcgen05_cta_group
    )
    return {
        "tma_loads": bases["UTMALDG"],
        "tma_stores": bases["UTMASTG"],
        "cp_async": bases["LDGSTS"],
        "ldmatrix": bases["LDSM"],
        "tcgen05": tcgen05,
        "tmem": bases["LDTM"] + bases["STTM"] + bases["UTCCP"],
        "tcgen05_cta_group": k.tcgen05_cta_group,
        "tmem_columns": _tmem_alloc_columns(instructions),
        "elected_issue": bases["ELECT"] > 0,
    }


def _tmem_alloc_columns(instructions: list[disasm.Instruction]) -> int | None:
    """Columns of the first `tcgen05.alloc` (UTCATOMSWS.FIND_AND_SET) when its size is a constant.

    NB: the allocator's operand counts 32-column units (`UMOV UR4, 0x4` before it = 128 columns), as
    seen in the probes of tests/data/sass/tcgen05.cu.
    """
    for idx, ins in enumerate(instructions):
        if ins.base != "UTCATOMSWS" or "FIND_AND_SET" not in ins.opcode:
            continue
        reg = ins.operands.split(",")[-1].strip()
        for prev in reversed(instructions[max(0, idx - 16) : idx]):
            if prev.operands.startswith(reg + ","):
                m = _UMOV_IMM.match(prev.operands)
                return int(m.group(2), 0) * 32 if prev.base == "UMOV" and m else None
        return None
    return None
