"""Control-flow graph of one function: basic blocks, dominators and natural loops.

Leaders are the first instruction, every branch target and the instruction after a block terminator
(BRA, EXIT, RET, BRX/JMX, BPT). A branch is conditional when it carries a predicate (`@P0`, `@!P1`) or,
on sm_100+, a uniform predicate operand (`BRA.U !UP0, ...`); EXIT/RET with a predicate fall through.
CALL returns, so it does not end a block. NB: indirect branches (BRX, JMX) get no successors.

Loops are natural loops of back edges u -> h where h dominates u (Cooper-Harvey-Kennedy iterative
dominators). A plain "backward branch" scan is wrong here: an mbarrier retry block placed after the
kernel's exit jumps back into the middle of the main loop without being a loop of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimator.errors import UserError
from estimator.sass.disasm import Function, Instruction

_TERMINATORS = ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "BPT")
_INDIRECT = ("BRX", "JMX")
MAX_LOOPS = 512  # loop headers per function (nesting them is quadratic); real kernels have a few dozen
MAX_BLOCKS = 65536  # basic blocks per function; a big CUTLASS kernel has a few thousand
DOMINATOR_STEPS = 5_000_000  # ~1 s of Python; compiled kernels take a few times their block count


@dataclass
class Block:
    index: int
    instructions: list[Instruction]
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)

    @property
    def start(self) -> int:
        return self.instructions[0].offset


@dataclass
class Loop:
    header: int  # block index
    body: frozenset[int]  # block indices, header included
    latches: tuple[int, ...]  # sources of the back edges
    parent: int | None = None  # index into the loop list
    depth: int = 1
    children: list[int] = field(default_factory=list)


def _conditional(ins: Instruction) -> bool:
    if ins.predicate and ins.predicate not in ("@PT", "@UPT"):
        return True
    first = ins.operands.split(",", 1)[0].strip()
    return "," in ins.operands and first.lstrip("!").startswith(("UP", "P")) and first not in ("UPT", "PT")


def build(fn: Function) -> list[Block]:
    """Basic blocks with successor/predecessor edges, in address order."""
    ins = fn.instructions
    if not ins:
        return []
    targets = {fn.labels[i.target] for i in ins if i.target in fn.labels and i.base not in ("CALL",)}
    leaders = {ins[0].offset} | targets
    for a, b in zip(ins, ins[1:], strict=False):
        if a.base in _TERMINATORS:
            leaders.add(b.offset)
    blocks: list[Block] = []
    for i in ins:
        if i.offset in leaders or not blocks:
            blocks.append(Block(len(blocks), []))
        blocks[-1].instructions.append(i)
    at = {b.start: b.index for b in blocks}
    for b in blocks:
        last = b.instructions[-1]
        nxt = b.index + 1 if b.index + 1 < len(blocks) else None
        succs: list[int] = []
        if last.base == "BRA" and last.target in fn.labels:
            succs.append(at[fn.labels[last.target]])
            if _conditional(last) and nxt is not None:
                succs.append(nxt)
        elif last.base in ("EXIT", "RET", "BPT") or last.base in _INDIRECT:
            if last.base not in _INDIRECT and _conditional(last) and nxt is not None:
                succs.append(nxt)
        elif nxt is not None:
            succs.append(nxt)
        b.succs = list(dict.fromkeys(succs))
    for b in blocks:
        for s in b.succs:
            blocks[s].preds.append(b.index)
    return blocks


def _rpo(blocks: list[Block]) -> list[int]:
    seen, order = set(), []
    stack = [(0, iter(blocks[0].succs))]
    seen.add(0)
    while stack:
        node, it = stack[-1]
        nxt = next((s for s in it if s not in seen), None)
        if nxt is None:
            order.append(node)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(blocks[nxt].succs)))
    return order[::-1]


def dominators(blocks: list[Block]) -> dict[int, int]:
    """Immediate dominator of every block reachable from the entry (the entry maps to itself)."""
    if not blocks:
        return {}
    if len(blocks) > MAX_BLOCKS:
        raise UserError(f"a function of {len(blocks):,} basic blocks (at most {MAX_BLOCKS:,}): not a listing "
                        f"this analysis takes")
    rpo = _rpo(blocks)
    pos = {b: i for i, b in enumerate(rpo)}
    idom = {0: 0}
    budget = [DOMINATOR_STEPS]

    def intersect(a: int, b: int) -> int:
        # Cooper-Harvey-Kennedy: near-linear on compiled code, quadratic on a hostile graph (a branch
        # repeated 30k times to one label): past DOMINATOR_STEPS the function is refused.
        while a != b:
            while pos[a] > pos[b]:
                a = idom[a]
                budget[0] -= 1
            while pos[b] > pos[a]:
                b = idom[b]
                budget[0] -= 1
            if budget[0] < 0:
                raise UserError(f"a control-flow graph of {len(blocks):,} blocks whose dominators take more "
                                f"than {DOMINATOR_STEPS:,} steps: not a listing this analysis takes")
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            done = [p for p in blocks[b].preds if p in idom]
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def dominates(idom: dict[int, int], a: int, b: int) -> bool:
    """Whether a dominates b, walking up the tree (natural_loops asks _intervals instead)."""
    while True:
        if a == b:
            return True
        if b == 0 or b not in idom:
            return False
        b = idom[b]


def _intervals(idom: dict[int, int]) -> dict[int, tuple[int, int]]:
    """Each block's (entry, exit) times in a depth-first walk of the dominator tree: a dominates b iff
    a's interval holds b's. O(1) per question, where walking up the tree is O(depth) (a chain of 30k
    blocks made that quadratic)."""
    children: dict[int, list[int]] = {}
    for b, d in idom.items():
        if b != d:
            children.setdefault(d, []).append(b)
    times: dict[int, tuple[int, int]] = {}
    clock, stack = 0, [(0, False)]
    enter: dict[int, int] = {}
    while stack:
        node, leaving = stack.pop()
        clock += 1
        if leaving:
            times[node] = (enter[node], clock)
            continue
        enter[node] = clock
        stack.append((node, True))
        stack.extend((c, False) for c in children.get(node, ()))
    return times


def natural_loops(blocks: list[Block]) -> list[Loop]:
    """Natural loops (back edges merged per header), outermost first, with parent/child links."""
    idom = dominators(blocks)
    times = _intervals(idom)
    latches: dict[int, list[int]] = {}
    for b in blocks:
        if b.index not in times:
            continue
        for s in b.succs:
            if s in times and times[s][0] <= times[b.index][0] and times[b.index][1] <= times[s][1]:
                latches.setdefault(s, []).append(b.index)  # s dominates b: a back edge
    if len(latches) > MAX_LOOPS:
        raise UserError(f"a function with {len(latches):,} loop headers (at most {MAX_LOOPS:,}): not a "
                        f"listing this analysis takes")
    loops = []
    for header, srcs in latches.items():
        body, work = {header}, list(srcs)
        while work:
            n = work.pop()
            if n not in body:
                body.add(n)
                work.extend(p for p in blocks[n].preds if p in idom)
        loops.append(Loop(header, frozenset(body), tuple(srcs)))
    loops.sort(key=lambda lp: (-len(lp.body), blocks[lp.header].start))
    for i, inner in enumerate(loops):
        parents = [j for j in range(i) if inner.body <= loops[j].body]
        if parents:
            inner.parent = min(parents, key=lambda j: len(loops[j].body))
            loops[inner.parent].children.append(i)
            inner.depth = loops[inner.parent].depth + 1
    return loops
