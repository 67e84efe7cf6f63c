r"""Instructions of a cubin from one `nvdisasm -c -hex` call, split per function.

Each instruction line is `/*offset*/ [@[!]P] OPCODE[.MODS] operands ; [(*"annotation"*)] /* 0xlow */`,
followed by a line holding the high 64-bit word. Bits 41-44 of the high word are the stall count
(the control-code layout of maxas / turingas; reference/sass.md s.6). Labels (`.L_x_N:`) name branch
targets; `(*"SpillRefill"*)` marks spill code (as opposed to local arrays, which also use LDL/STL). The
annotation is matched as `(*"..."*)` exactly: a looser `\(\*.*?\*\)` made a hostile line quadratic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from estimator.errors import UserError
from estimator.sass import tools

LINE_CHARS = 1 << 12  # nvdisasm's lines are < 300 characters; a hostile one is refused before the pattern

_INS_RE = re.compile(
    r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P[T0-9]+)\s+)?([A-Z0-9_][A-Za-z0-9_.]*)\s*(.*?)\s*(\(\*\"[^\"*]*\"\*\))?\s*;"
    r"\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$"
)
_HIGH_RE = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
_LABEL_RE = re.compile(r"^([.$\w][\w.$]*):\s*$")
_SECTION_RE = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_TARGET_RE = re.compile(r"^\s*\.target\s+(sm_\w+)")
_BRANCH_TARGET_RE = re.compile(r"`\(([^)]+)\)")


@dataclass
class Instruction:
    offset: int
    predicate: str  # "" or "@P0", "@!UP1"
    opcode: str  # with modifiers: "HMMA.16816.F32.BF16"
    operands: str
    annotation: str = ""  # e.g. '(*"SpillRefill"*)'
    stall: int = 0  # cycles the scheduler waits before the next instruction (control code)
    target: str | None = None  # branch/call target label

    @property
    def base(self) -> str:
        """The opcode without modifiers: "HMMA"."""
        return self.opcode.split(".", 1)[0]

    @property
    def spill(self) -> bool:
        return "SpillRefill" in self.annotation


@dataclass
class Function:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)  # label -> offset of the next instruction


@dataclass
class Disassembly:
    sm: str  # exact target from the listing: "sm_90a"
    functions: dict[str, Function]


def disassemble(cubin_path: str) -> Disassembly:
    """Runs nvdisasm once on the cubin and parses its listing."""
    proc = tools.run("nvdisasm", ["-c", "-hex", cubin_path], what=cubin_path)
    return parse(proc.stdout)


def parse(text: str) -> Disassembly:
    sm = ""
    functions: dict[str, Function] = {}
    current: Function | None = None
    pending_labels: list[str] = []
    last: Instruction | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > LINE_CHARS:
            raise UserError(f"line {number} of the listing is {len(line):,} characters long (at most "
                            f"{LINE_CHARS:,}): not nvdisasm output")
        if not sm and (m := _TARGET_RE.match(line)):
            sm = m.group(1)
            continue
        if m := _SECTION_RE.match(line):
            current = functions.setdefault(m.group(1), Function(m.group(1)))
            pending_labels, last = [], None
            continue
        if current is None:
            continue
        if m := _INS_RE.match(line):
            last = _instruction(m)
            for label in pending_labels:
                current.labels[label] = last.offset
            pending_labels = []
            current.instructions.append(last)
        elif (m := _HIGH_RE.match(line)) and last is not None:
            last.stall = (int(m.group(1), 16) >> 41) & 0xF
        elif m := _LABEL_RE.match(line.strip()):
            pending_labels.append(m.group(1))
    return Disassembly(sm=sm, functions=functions)


def _instruction(m: re.Match) -> Instruction:
    offset, pred, opcode, operands, annotation, _low = m.groups()
    target = _BRANCH_TARGET_RE.search(operands)
    return Instruction(
        offset=int(offset, 16),
        predicate=pred or "",
        opcode=opcode,
        operands=operands.strip(),
        annotation=annotation or "",
        target=target.group(1) if target else None,
    )
