"""Per-loop instruction mix: what one iteration of each natural loop issues, statically.

Counting rule: a loop's counts cover every instruction of its body blocks once (nested loops included
once, i.e. "per iteration of this loop, if each inner loop ran once"). Loops are tagged:
- `lane_serialization`: a back edge is `BRA.U.ANY` / `BRA.ANY` (an `ELECT` loop re-issuing an async op once
  per distinct active lane; not a trip loop: one execution per CTA-level issue);
- `spin_wait`: an innermost loop of <= 8 instructions polling an mbarrier / the TMEM allocator
  (TRYWAIT, NANOSLEEP, UTCATOMSWS);
- `trip`: everything else. A `hot` loop is a trip loop with no trip loop inside: the kernel's main loop(s).
Stall cycles are the sum of the control codes' stall counts: a single-warp issue bound, not throughput.
"""

from __future__ import annotations

import re
from collections import Counter

from estimator.sass import cfg, mix
from estimator.sass.disasm import Function, Instruction

_SPIN = ("TRYWAIT", "NANOSLEEP", "UTCATOMSWS")
_WIDTH = re.compile(r"\.(64|128|U8|S8|U16|S16)\b")
_WIDTH_BYTES = {"64": 8, "128": 16, "U8": 1, "S8": 1, "U16": 2, "S16": 2}


def access_bytes(ins: Instruction) -> int:
    """Bytes one thread moves with an LDL/STL (4 unless the opcode says .64/.128/.U8/...)."""
    m = _WIDTH.search(ins.opcode)
    return _WIDTH_BYTES[m.group(1)] if m else 4


def summarize(instructions: list[Instruction]) -> dict:
    """Counts of one instruction sequence: total, by class, tensor and MUFU opcodes, spills, stalls."""
    classes = Counter(mix.class_of(i.opcode) for i in instructions)
    return {
        "instructions": len(instructions),
        "mix": {c: classes[c] for c in mix.CLASS_ORDER if classes[c]},
        "tensor": dict(Counter(i.opcode for i in instructions if mix.class_of(i.opcode) == "tensor")),
        "sfu": dict(Counter(i.opcode for i in instructions if i.base == "MUFU")),
        "tma": dict(Counter(i.opcode for i in instructions if i.base in ("UTMALDG", "UTMASTG"))),
        "opcodes": dict(sorted(Counter(i.base for i in instructions).items())),
        "spill_instructions": sum(i.spill for i in instructions),
        "spill_bytes": sum(access_bytes(i) for i in instructions if i.spill),
        "stall_cycles": sum(i.stall for i in instructions),
    }


def _kind(loop: cfg.Loop, blocks: list[cfg.Block], body: list[Instruction]) -> str:
    if any(".ANY" in blocks[b].instructions[-1].opcode for b in loop.latches):
        return "lane_serialization"
    if not loop.children and len(body) <= 8 and any(any(s in i.opcode for s in _SPIN) for i in body):
        return "spin_wait"
    return "trip"


def analyse(fn: Function) -> list[dict]:
    """One dict per natural loop of `fn` (outermost first): span, depth, kind, hot, counts."""
    blocks = cfg.build(fn)
    loops = cfg.natural_loops(blocks)
    bodies = [[i for b in sorted(lp.body) for i in blocks[b].instructions] for lp in loops]
    kinds = [_kind(lp, blocks, body) for lp, body in zip(loops, bodies, strict=False)]

    def has_trip_inside(i: int) -> bool:
        return any(kinds[c] == "trip" or has_trip_inside(c) for c in loops[i].children)

    out = []
    for i, (lp, body) in enumerate(zip(loops, bodies, strict=False)):
        offsets = [ins.offset for ins in body]
        out.append(
            {
                "header": f"0x{blocks[lp.header].start:04x}",
                "start": f"0x{min(offsets):04x}",
                "end": f"0x{max(offsets):04x}",
                "depth": lp.depth,
                "kind": kinds[i],
                "hot": kinds[i] == "trip" and not has_trip_inside(i),
                "parent": None if lp.parent is None else f"0x{blocks[loops[lp.parent].header].start:04x}",
                **summarize(body),
            }
        )
    return out
