"""Instruction classes (which pipeline an opcode occupies) and the tensor-core op an opcode encodes.

Classes: tensor, tma (bulk/tensor async copies), tmem (tensor-memory moves and allocation), fp32,
fp16x2, fp64, sfu (MUFU), conv, int_alu, lsu_global, lsu_shared, lsu_local, const, shuffle, sync,
control, uniform (the U* scalar datapath), special_reg. The opcode tables follow reference/sass.md s.4
(sm_80, sm_89, sm_90a, sm_100a, sm_120a); the same opcode means the same class on every arch, so one
table serves all of them. Anything unlisted is `other`, never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TENSOR = frozenset(
    {
        "HMMA",
        "IMMA",
        "DMMA",
        "QMMA",
        "OMMA",
        "BMMA",
        "HGMMA",
        "QGMMA",
        "IGMMA",
        "BGMMA",
        "UTCHMMA",
        "UTCQMMA",
        "UTCIMMA",
        "UTCOMMA",
        "UTCMMA",
    }
)
_CLASSES = {
    "tma": (
        "UTMALDG",
        "UTMASTG",
        "UTMAPF",
        "UTMACMDFLUSH",
        "UTMACCTL",
        "UTMAREDG",
        "UBLKCP",
        "UBLKRED",
        "UBLKPF",
    ),
    "tmem": ("LDTM", "STTM", "UTCCP", "UTCBAR", "UTCATOMSWS", "UTCSHIFT", "UVIRTCOUNT"),
    "fp32": (
        "FFMA",
        "FADD",
        "FMUL",
        "FMNMX",
        "FSETP",
        "FSEL",
        "FCHK",
        "FSWZADD",
        "FSET",
        "FFMA2",
        "FADD2",
        "FMUL2",
        "FMNMX3",
        "FMNMX2",
        "FRND",
    ),
    "fp16x2": ("HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSETP2", "HSET2"),
    "fp64": ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"),
    "sfu": ("MUFU",),
    "conv": ("F2F", "F2I", "I2F", "F2FP", "I2FP", "F2IP", "I2I", "I2IP"),
    "int_alu": (
        "IMAD",
        "IADD3",
        "IADD",
        "LOP3",
        "LOP",
        "SHF",
        "SHL",
        "SHR",
        "LEA",
        "ISETP",
        "IABS",
        "IMNMX",
        "POPC",
        "FLO",
        "BREV",
        "PRMT",
        "SEL",
        "MOV",
        "SGXT",
        "BMSK",
        "IDP",
        "VIADD",
        "VIMNMX",
        "VIMNMX3",
        "PLOP3",
        "P2R",
        "R2P",
        "IMUL",
        "IMADSP",
        "ISCADD",
        "BFE",
        "BFI",
        "CSET",
        "CSETP",
        "MOV32I",
        "IADD32I",
        "IMAD32I",
        "LOP32I",
        "VABSDIFF",
        "VABSDIFF4",
        "IMNMX3",
    ),
    "lsu_global": ("LDG", "STG", "LD", "ST", "ATOM", "ATOMG", "RED", "REDG", "LDGSTS", "CCTL", "LDGMC"),
    "lsu_shared": ("LDS", "STS", "LDSM", "STSM", "ATOMS", "STAS", "LDSLK", "STSCUL"),
    "lsu_local": ("LDL", "STL"),
    "const": ("LDC", "ULDC", "LDCU"),
    "shuffle": ("SHFL", "VOTE", "VOTEU", "REDUX", "CREDUX", "MATCH"),
    "sync": (
        "BAR",
        "SYNCS",
        "DEPBAR",
        "LDGDEPBAR",
        "MEMBAR",
        "FENCE",
        "WARPSYNC",
        "BSSY",
        "BSYNC",
        "WARPGROUP",
        "ERRBAR",
        "CGAERRBAR",
        "UCGABAR_ARV",
        "UCGABAR_WAIT",
        "ARRIVES",
        "NANOSLEEP",
        "USETMAXREG",
        "ELECT",
        "UCGABAR_GET",
        "UCGABAR_SET",
        "B2R",
        "R2B",
    ),
    "control": (
        "BRA",
        "BRX",
        "JMP",
        "JMX",
        "CALL",
        "RET",
        "EXIT",
        "NOP",
        "BPT",
        "YIELD",
        "KILL",
        "BREAK",
        "ACQBULK",
        "PMTRIG",
    ),
    "special_reg": ("S2R", "CS2R", "S2UR", "R2UR", "GETLMEMBASE", "SETLMEMBASE"),
}
_CLASS_OF = {op: cls for cls, ops in _CLASSES.items() for op in ops}
CLASS_ORDER = ("tensor", *_CLASSES, "uniform", "other")


def class_of(opcode: str) -> str:
    """The pipeline class of an opcode (with or without modifiers)."""
    base = opcode.split(".", 1)[0]
    if base in TENSOR:
        return "tensor"
    if base in _CLASS_OF:
        return _CLASS_OF[base]
    if base.startswith("U") and len(base) > 1:
        return "uniform"
    return "other"


# SASS dtype tokens -> the descriptors' tensor dtype keys (hwdesc tensor_flops_per_s; fp64 from cuda_flops).
_DTYPE = {
    "BF16": "bf16",
    "TF32": "tf32",
    "E4M3": "fp8",
    "E5M2": "fp8",
    "E2M3": "fp6",
    "E3M2": "fp6",
    "E2M1": "fp4",
    "S8": "int8",
    "U8": "int8",
    "S4": "int4",
    "U4": "int4",
    "F16": "fp16",
}
_MMA_SHAPES = {
    "1688": (16, 8, 8),
    "16816": (16, 8, 16),
    "16832": (16, 8, 32),
    "16864": (16, 8, 64),
    "884": (8, 8, 4),
    "8x8x4": (8, 8, 4),
    "16x8x16": (16, 8, 16),
    "16x8x32": (16, 8, 32),
    "1684": (16, 8, 4),
    "16x8x8": (16, 8, 8),
}
_GMMA_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")
FAMILY = {  # opcode -> (family, what it is)
    "HMMA": ("mma.sync", "warp-level HMMA (Ampere-style mma.sync)"),
    "IMMA": ("mma.sync", "warp-level integer IMMA"),
    "DMMA": ("mma.sync", "warp-level fp64 DMMA"),
    "BMMA": ("mma.sync", "warp-level binary BMMA"),
    "QMMA": ("mma.sync", "warp-level fp8 QMMA"),
    "OMMA": ("mma.sync", "warp-level block-scaled fp4 OMMA"),
    "HGMMA": ("wgmma", "Hopper warpgroup HGMMA"),
    "QGMMA": ("wgmma", "Hopper warpgroup fp8 QGMMA"),
    "IGMMA": ("wgmma", "Hopper warpgroup integer IGMMA"),
    "BGMMA": ("wgmma", "Hopper warpgroup binary BGMMA"),
    "UTCHMMA": ("tcgen05", "Blackwell tcgen05 UTCHMMA (f16/bf16/tf32, TMEM accumulator)"),
    "UTCQMMA": ("tcgen05", "Blackwell tcgen05 UTCQMMA (fp8/fp6/fp4, TMEM accumulator)"),
    "UTCIMMA": ("tcgen05", "Blackwell tcgen05 UTCIMMA (int8, TMEM accumulator)"),
    "UTCOMMA": ("tcgen05", "Blackwell tcgen05 UTCOMMA (block-scaled fp4, TMEM accumulator)"),
    "UTCMMA": ("tcgen05", "Blackwell tcgen05 MMA"),
}


@dataclass(frozen=True)
class TensorOp:
    """What one tensor-core opcode says about itself."""

    opcode: str
    family: str  # mma.sync | wgmma | tcgen05
    dtype: str | None  # input dtype key (bf16, fp16, tf32, fp8, fp4, int8, fp64); None: not in the SASS
    accumulator: str | None  # f32 | f16 | s32 | f64
    shape: tuple[int, int, int] | None  # (m, n, k) per instruction; None for tcgen05 (in the idesc)
    cta_group: int = 1  # 2 for tcgen05 .2CTA
    block_scaled: bool = False

    @property
    def flops(self) -> int | None:
        """2*m*n*k per instruction (per warp for mma.sync, per warpgroup for wgmma, per CTA for tcgen05)."""
        return 2 * self.shape[0] * self.shape[1] * self.shape[2] if self.shape else None


def tensor_op(opcode: str) -> TensorOp:
    """Decodes `HMMA.16816.F32.BF16`, `HGMMA.64x64x16.F32.BF16`, `OMMA.SF.16864.F32.E2M1.E2M1.E8`,
    `UTCHMMA.2CTA`."""
    parts = opcode.split(".")
    base, mods = parts[0], parts[1:]
    family = FAMILY.get(base, ("other", ""))[0]
    shape = None
    for m in mods:
        if m in _MMA_SHAPES:
            shape = _MMA_SHAPES[m]
        elif g := _GMMA_SHAPE.match(m):
            shape = (int(g.group(1)), int(g.group(2)), int(g.group(3)))
    types = [m for m in mods if m in _DTYPE or m in ("F32", "F64", "S32")]
    acc = types[0].lower() if types and types[0] in ("F32", "F16", "S32", "F64") else None
    inputs = (
        [_DTYPE[t] for t in types[1:] if t in _DTYPE] if acc else [_DTYPE[t] for t in types if t in _DTYPE]
    )
    dtype = inputs[0] if inputs else None
    if base == "DMMA":
        dtype, acc = "fp64", "f64"
    elif base == "IMMA" or base == "IGMMA":
        acc = "s32"
    elif base in ("HMMA", "HGMMA") and dtype is None:
        dtype = "fp16"  # HMMA.16816.F32 / .F16: f16 inputs carry no input type token
    if base in ("HMMA", "HGMMA") and acc is None and types:
        acc = types[0].lower()
    if family == "tcgen05":
        dtype = {"UTCIMMA": "int8", "UTCOMMA": "fp4"}.get(base)
        acc = "s32" if base == "UTCIMMA" else "f32"
    return TensorOp(
        opcode=opcode,
        family=family,
        dtype=dtype,
        accumulator=acc,
        shape=shape,
        cta_group=2 if "2CTA" in mods else 1,
        block_scaled="SF" in mods or base == "UTCOMMA" or "4X" in mods,
    )
