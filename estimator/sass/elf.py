"""The cubin's ELF: its SM, kernels and their `.nv.info` attributes (EIATTR_*), read with `struct` alone.

Where each number comes from (reference/sass.md s.5):
- registers, stack frame: the module-wide `.nv.info` records EIATTR_REGCOUNT / FRAME_SIZE / MIN_STACK_SIZE /
  MAX_STACK_SIZE, each `(symbol index, value)`;
- launch bounds (`__launch_bounds__` -> MAX_THREADS, `.reqntid` -> REQNTID), cluster dims (CTA_PER_CLUSTER,
  EXPLICIT_CLUSTER), barriers (NUM_BARRIERS), mbarriers, `setmaxnreg` (REG_RECONFIG), tcgen05 use: the
  per-kernel `.nv.info.<kernel>` section;
- static shared memory: the size of `.nv.shared.<kernel>`. NB: on sm_90+ it includes the 1 KB
  system-reserved block when the module has `.nv.shared.reserved.0` (`static_smem_bytes` subtracts it).
A record is `u8 format, u8 attribute` then a u16 value, or (format 4, EIFMT_SVAL) a u16 size and that many
bytes. The attribute codes below were checked against `cuobjdump -elf`'s names (tests/test_sass_elf.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from estimator.errors import UserError

EIATTR = {
    0x05: "MAX_THREADS",
    0x10: "REQNTID",
    0x11: "FRAME_SIZE",
    0x12: "MIN_STACK_SIZE",
    0x17: "KPARAM_INFO",
    0x1B: "MAXREG_COUNT",
    0x1C: "EXIT_INSTR_OFFSETS",
    0x23: "MAX_STACK_SIZE",
    0x2F: "REGCOUNT",
    0x37: "CUDA_API_VERSION",
    0x38: "NUM_MBARRIERS",
    0x3D: "CTA_PER_CLUSTER",
    0x3E: "EXPLICIT_CLUSTER",
    0x41: "RESERVED_SMEM_USED",
    0x4A: "VRC_CTA_INIT_COUNT",
    0x4C: "NUM_BARRIERS",
    0x51: "TCGEN05_1CTA_USED",
    0x52: "TCGEN05_2CTA_USED",
    0x54: "REG_RECONFIG",
}
_FMT_SVAL = 0x04
_SYM_BYTES = 24  # an Elf64_Sym
_SHDR_BYTES = 64  # an Elf64_Shdr
NAME_BYTES = 1 << 16  # a section or symbol name (a mangled template name is a few KB at most)
_EM_CUDA = 190
_SHT_NOBITS = 8


@dataclass
class ElfKernel:
    """One entry function's resources as the cubin records them."""

    name: str
    registers: int = 0
    stack_bytes: int = 0  # EIATTR_FRAME_SIZE: spills and local arrays alike
    shared_section_bytes: int = 0  # size of .nv.shared.<name> (see static_smem_bytes)
    max_threads: tuple[int, int, int] | None = None  # __launch_bounds__ max threads per block
    reqntid: tuple[int, int, int] | None = None
    cluster_dims: tuple[int, int, int] | None = None
    barriers: int = 0
    mbarriers: int = 0
    maxreg_count: int | None = None
    reg_reconfig: bool = False  # setmaxnreg kept by ptxas
    tcgen05_cta_group: int | None = None  # 1 or 2 when the kernel uses tcgen05
    param_bytes: int = 0


@dataclass
class ElfModule:
    sm_number: int  # 90 for sm_90 / sm_90a
    kernels: dict[str, ElfKernel]
    has_reserved_smem: bool  # .nv.shared.reserved.0 present


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def read(data: bytes, what: str = "cubin") -> ElfModule:
    """Parses a CUDA ELF; UserError for anything that is not one or is cut short."""
    if not is_elf(data):
        raise UserError(f"{what}: not an ELF file")
    try:
        return _read(data)
    except UserError as e:
        raise UserError(f"{what}: {e}") from None
    except (struct.error, IndexError, ValueError, OverflowError, KeyError) as e:
        raise UserError(f"{what}: truncated or corrupt ELF ({e})") from None


def _read(data: bytes) -> ElfModule:
    if data[4] != 2:
        raise ValueError("not a 64-bit ELF")
    (machine,) = struct.unpack_from("<H", data, 0x12)
    if machine != _EM_CUDA:
        raise UserError(f"not a CUDA ELF (e_machine {machine}, CUDA is {_EM_CUDA})")
    (flags,) = struct.unpack_from("<I", data, 0x30)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shentsize < _SHDR_BYTES:
        raise ValueError("section table past the end of the file, or its entries too small")
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = sections[shstrndx][4]
    names = [_cstr(data, strtab_off + s[0]) for s in sections]
    symbols = _symbols(data, sections, names)
    kernels: dict[str, ElfKernel] = {}
    for name in names:
        if name.startswith(".text."):
            kernels.setdefault(name[6:], ElfKernel(name[6:]))
    for (_, typ, _, _, off, size, _, _, _, _), name in zip(sections, names, strict=False):
        if typ != _SHT_NOBITS and off + size > len(data):
            raise ValueError(f"section {name} past the end of the file")
        if name == ".nv.info":
            _module_info(data[off : off + size], symbols, kernels)
        elif name.startswith(".nv.info.") and name[9:] in kernels:
            _kernel_info(data[off : off + size], kernels[name[9:]])
        elif name.startswith(".nv.shared.") and name[11:] in kernels:
            kernels[name[11:]].shared_section_bytes = size
    sm = (flags >> 8) & 0xFF or flags & 0xFF
    entries = {k: v for k, v in kernels.items() if k in symbols.get("__entries__", {})} or kernels
    return ElfModule(sm_number=sm, kernels=entries, has_reserved_smem=".nv.shared.reserved.0" in names)


def _cstr(data: bytes, off: int) -> str:
    """The NUL-terminated name at `off`, at most NAME_BYTES long (ValueError past that or the end)."""
    return data[off : data.index(b"\0", off, off + NAME_BYTES)].decode("utf-8", "replace")


def _symbols(data: bytes, sections: list, names: list[str]) -> dict:
    """symbol index -> name, plus "__entries__": the names of STO_CUDA_ENTRY functions."""
    out: dict = {"__entries__": {}}
    for s, name in zip(sections, names, strict=False):
        if name != ".symtab":
            continue
        _, _, _, _, off, size, link, _, _, entsize = s
        if entsize not in (0, _SYM_BYTES) or off + size > len(data):
            raise ValueError(f".symtab entries of {entsize} bytes, or past the end of the file")
        str_off = sections[link][4]
        for i in range(size // _SYM_BYTES):
            st_name, st_info, st_other, _, _, _ = struct.unpack_from("<IBBHQQ", data, off + i * _SYM_BYTES)
            sym = _cstr(data, str_off + st_name)
            out[i] = sym
            if st_info & 0xF == 2 and st_other & 0x10:  # STT_FUNC with STO_CUDA_ENTRY
                out["__entries__"][sym] = True
    return out


def _records(blob: bytes):
    """(attribute code, payload bytes) for each `.nv.info` record."""
    p = 0
    while p + 4 <= len(blob):
        fmt, attr = blob[p], blob[p + 1]
        if fmt == _FMT_SVAL:
            (size,) = struct.unpack_from("<H", blob, p + 2)
            yield attr, blob[p + 4 : p + 4 + size]
            p += 4 + size
        else:
            yield attr, blob[p + 2 : p + 4]
            p += 4


def _module_info(blob: bytes, symbols: dict, kernels: dict[str, ElfKernel]) -> None:
    for attr, payload in _records(blob):
        name = EIATTR.get(attr)
        if name not in ("REGCOUNT", "FRAME_SIZE") or len(payload) < 8:
            continue
        index, value = struct.unpack_from("<II", payload)
        kernel = kernels.get(symbols.get(index, ""))
        if kernel is None:
            continue
        if name == "REGCOUNT":
            kernel.registers = value
        else:
            kernel.stack_bytes = value


def _kernel_info(blob: bytes, k: ElfKernel) -> None:
    for attr, payload in _records(blob):
        name = EIATTR.get(attr, f"0x{attr:02x}")
        u16 = struct.unpack_from("<H", payload)[0] if len(payload) == 2 else None
        dims = struct.unpack_from("<III", payload) if len(payload) == 12 else None
        if name == "MAX_THREADS" and dims:
            k.max_threads = dims
        elif name == "REQNTID" and dims:
            k.reqntid = dims
        elif name == "CTA_PER_CLUSTER" and dims:
            k.cluster_dims = dims
        elif name == "NUM_BARRIERS":
            k.barriers = payload[0]
        elif name == "NUM_MBARRIERS" and u16 is not None:
            k.mbarriers = u16
        elif name == "MAXREG_COUNT" and u16 is not None:
            k.maxreg_count = u16
        elif name == "REG_RECONFIG":
            k.reg_reconfig = True
        elif name in ("TCGEN05_1CTA_USED", "TCGEN05_2CTA_USED"):
            k.tcgen05_cta_group = max(k.tcgen05_cta_group or 0, 1 if name.startswith("TCGEN05_1") else 2)
        elif name == "KPARAM_INFO" and len(payload) >= 12:
            k.param_bytes += struct.unpack_from("<I", payload, 8)[0] >> 18  # size: the top 14 bits


def static_smem_bytes(k: ElfKernel, module: ElfModule) -> int:
    """Static shared memory the kernel declares, without the 1 KB reserve sm_90+ folds into its section.

    NB: rule from reference/sass.md s.5 (matched ptxas `-v` in every probe): subtract 1024 when the SM is
    >= 90, the module has `.nv.shared.reserved.0` and the section holds at least 1024 bytes.
    """
    size = k.shared_section_bytes
    if module.sm_number >= 90 and module.has_reserved_smem and size >= 1024:
        return size - 1024
    return size
