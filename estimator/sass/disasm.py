r"""Instructions of a cubin from one `nvdisasm -c -hex` call, split per function; or of a listing the user
saved (`cuobjdump -sass`, `nvdisasm` with or without `-hex`), which `parse` reads alike.

Each instruction line is `/*offset*/ [@[!]P] OPCODE[.MODS] operands ; [(*"annotation"*)] /* 0xlow */`,
followed by a line holding the high 64-bit word. Bits 41-44 of the high word are the stall count
(the control-code layout of maxas / turingas; reference/sass.md s.6). Labels (`.L_x_N:`) name branch
targets; `(*"SpillRefill"*)` marks spill code (as opposed to local arrays, which also use LDL/STL). The
annotation is matched as `(*"..."*)` exactly: a looser `\(\*.*?\*\)` made a hostile line quadratic.

cuobjdump's listing starts each function with `Function : NAME` (not a `.section .text.NAME`), names the
target in `code for sm_NN`, and writes branch targets as addresses (`BRA 0x220`), which become labels
`.L_addr_220` at that offset. NB: a listing without `-hex` has no control words, so every stall is 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from estimator.errors import UserError
from estimator.sass import tools

LINE_CHARS = 1 << 12  # nvdisasm's lines are < 300 characters; a hostile one is refused before the pattern

_INS_RE = re.compile(
    r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:(@!?U?P[T0-9]+)\s+)?([A-Z0-9_][A-Za-z0-9_.]*)\s*(.*?)\s*(\(\*\"[^\"*]*\"\*\))?\s*;"
    r"\s*(?:/\*\s*0x([0-9a-f]{16})\s*\*/)?\s*$"
)
_HIGH_RE = re.compile(r"^\s*/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
_LABEL_RE = re.compile(r"^([.$\w][\w.$]*):\s*$")
_SECTION_RE = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_TARGET_RE = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)
_BRANCH_TARGET_RE = re.compile(r"`\(([^)]+)\)")
_ANY_SECTION_RE = re.compile(r"^\s*\.section\s")
_FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)\s*$")  # cuobjdump -sass
_CODE_FOR_RE = re.compile(r"^\s*code for (sm_\w+)")  # cuobjdump -sass
_ADDRESS_TARGET_RE = re.compile(r"(?:^|[\s,])0x([0-9a-f]+)\s*$")
_ADDRESS_BRANCHES = frozenset({"BRA", "BSSY", "CALL", "JMP", "SSY", "PBK", "PCNT"})


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


def looks_like_listing(text: str) -> bool:
    """The head of a saved listing: cuobjdump's `code for sm_NN` + `Function :`, or nvdisasm's code
    sections with an instruction line."""
    if _CODE_FOR_RE.search(text) is not None or re.search(r"^\s*Function\s*:", text, re.M):
        return True
    if re.search(r"^\s*\.elftype\s", text, re.M) and _TARGET_RE.search(text):
        return True  # nvdisasm's header: `.target sm_NN`, `.elftype @"ET_EXEC"`
    return ".section\t.text." in text or bool(re.search(r"\.section\s+\.text\.", text)) or bool(
        re.search(r"^\s*/\*[0-9a-f]{4,}\*/\s+[A-Z]", text, re.M))


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
        if not sm and (m := _TARGET_RE.match(line) or _CODE_FOR_RE.match(line)):
            sm = m.group(1)
            continue
        if m := _SECTION_RE.match(line) or _FUNCTION_RE.match(line):
            current = functions.setdefault(m.group(1), Function(m.group(1)))
            pending_labels, last = [], None
            continue
        if _ANY_SECTION_RE.match(line):  # a data section of a full nvdisasm listing: no code
            current = None
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
    for fn in functions.values():  # cuobjdump's address targets: a label at that offset
        for ins in fn.instructions:
            if ins.target and ins.target.startswith(".L_addr_"):
                fn.labels.setdefault(ins.target, int(ins.target[len(".L_addr_"):], 16))
    return Disassembly(sm=sm, functions=functions)


def _instruction(m: re.Match) -> Instruction:
    offset, pred, opcode, operands, annotation, _low = m.groups()
    found = _BRANCH_TARGET_RE.search(operands)
    target = found.group(1) if found else None
    if target is None and opcode.split(".", 1)[0] in _ADDRESS_BRANCHES:
        if address := _ADDRESS_TARGET_RE.search(operands.strip()):
            target = f".L_addr_{int(address.group(1), 16):x}"
    return Instruction(
        offset=int(offset, 16),
        predicate=pred or "",
        opcode=opcode,
        operands=operands.strip(),
        annotation=annotation or "",
        target=target,
    )
