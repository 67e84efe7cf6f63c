"""The tcgen05 instruction descriptor: shape and dtypes of a UTC*MMA, which its opcode does not carry.

A UTC*MMA reads its 32-bit descriptor from a uniform register (`idesc[UR21]`); when the descriptor is a
compile-time constant, ptxas materialises it with `UMOV UR21, 0x8200490` shortly before. Fields (PTX ISA
9.0, "Instruction descriptor" of tcgen05.mma, kind::f16 / tf32 / f8f6f4 / i8): bits 4-5 D format
(0 f16, 1 f32, 2 s32), 7-9 A format, 10-12 B format, 17-22 N >> 3, 24-28 M >> 4. K is 32 bytes of the A
type per instruction (16 bf16, 32 fp8, 64 fp4, 8 tf32).
NB: only a constant written by a UMOV in the same function is decoded; a descriptor computed at run time
(or loaded from memory) leaves the op's shape unknown. For cta_group::2 M is the CTA pair's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from estimator.sass.disasm import Instruction

_IDESC_RE = re.compile(r"idesc\[(UR\d+)\]")
_UMOV_RE = re.compile(r"^(UR\d+),\s*(0x[0-9a-f]+|\d+)$")
_A_FORMATS = {  # kind -> A/B format code -> dtype key
    "UTCHMMA": {0: "fp16", 1: "bf16", 2: "tf32"},
    "UTCQMMA": {0: "fp8", 1: "fp8", 3: "fp6", 4: "fp6", 5: "fp4"},
    "UTCIMMA": {0: "int8", 1: "int8"},
    "UTCOMMA": {1: "fp4", 5: "fp4"},
}
_K_BITS = {
    "fp16": 16,
    "bf16": 16,
    "tf32": 32,
    "fp8": 8,
    "fp6": 8,
    "fp4": 4,
    "int8": 8,
}  # bits per element, as K
_D_FORMATS = {0: "f16", 1: "f32", 2: "s32"}


@dataclass(frozen=True)
class Descriptor:
    value: int
    m: int
    n: int
    k: int | None
    dtype: str | None
    accumulator: str | None


def decode(base: str, value: int) -> Descriptor:
    """Fields of a descriptor value for a UTC*MMA of kind `base` (UTCHMMA, UTCQMMA, ...)."""
    a = (value >> 7) & 0x7
    dtype = _A_FORMATS.get(base, {}).get(a)
    n = ((value >> 17) & 0x3F) << 3
    m = ((value >> 24) & 0x1F) << 4
    k = 256 // _K_BITS[dtype] if dtype in _K_BITS else None
    return Descriptor(value, m, n, k, dtype, _D_FORMATS.get((value >> 4) & 0x3))


def find(instructions: list[Instruction], index: int) -> Descriptor | None:
    """The constant descriptor feeding instructions[index] (a UTC*MMA), searching back for its UMOV."""
    ins = instructions[index]
    m = _IDESC_RE.search(ins.operands)
    if not m:
        return None
    reg = m.group(1)
    for prev in reversed(instructions[max(0, index - 64) : index]):
        if not prev.operands.startswith(reg + ","):  # the destination is the first operand
            continue
        um = _UMOV_RE.match(prev.operands)
        if prev.base != "UMOV" or not um:
            return None  # written by something else: computed at run time
        return decode(ins.base, int(um.group(2), 0))
    return None
