"""CFG, dominators and natural loops on hand-written nvdisasm listings; opcode decoding; idesc fields."""

from estimator.sass import cfg, idesc, loops, mix
from estimator.sass.disasm import parse


def listing(*rows: str) -> str:
    """An `nvdisasm -c -hex` style listing: rows are "label:" or "offset|predicate|instruction|stall"."""
    out = ["\t.target\tsm_90a", "\t.section\t.text.k,\"ax\",@progbits", "k:"]
    for row in rows:
        if row.endswith(":"):
            out.append(row)
            continue
        off, pred, text, stall = row.split("|")
        out.append(f"        /*{int(off, 16):04x}*/ {pred:>18} {text} ;   /* 0x0000000000000000 */")
        out.append(f"                                              /* 0x{int(stall) << 41:016x} */")
    return "\n".join(out)


# A main loop whose mbarrier wait retries out of line, after EXIT, and jumps back into the loop's middle
# (0x90 -> 0x30). A "backward branch = loop" scan would invent a loop 0x30..0x90; dominators do not.
RETRY = listing(
    "0000||MOV R0, RZ|1",
    ".L_x_1:",
    "0010||SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2|2",
    "0020|@!P0|BRA `(.L_x_3)|5",
    ".L_x_2:",
    "0030||FFMA R0, R0, R0, 1|4",
    "0040||ISETP.NE.AND P1, PT, R0, RZ, PT|4",
    "0050|@P1|BRA `(.L_x_1)|5",
    "0060||EXIT|5",
    ".L_x_3:",
    "0070||SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2|2",
    "0080|@!P0|BRA `(.L_x_3)|5",
    "0090||BRA `(.L_x_2)|5",
)


def test_parse_listing():
    d = parse(RETRY)
    fn = d.functions["k"]
    assert d.sm == "sm_90a" and len(fn.instructions) == 10
    assert {k: v for k, v in fn.labels.items() if k.startswith(".L")} == {".L_x_1": 0x10, ".L_x_2": 0x30,
                                                                        ".L_x_3": 0x70}
    bra = fn.instructions[2]
    assert (bra.predicate, bra.base, bra.target, bra.stall) == ("@!P0", "BRA", ".L_x_3", 5)


def test_blocks_and_dominators():
    blocks = cfg.build(parse(RETRY).functions["k"])
    starts = [b.start for b in blocks]
    assert starts == [0x00, 0x10, 0x30, 0x60, 0x70, 0x90]
    succ = {b.start: sorted(blocks[s].start for s in b.succs) for b in blocks}
    assert succ == {0x00: [0x10], 0x10: [0x30, 0x70], 0x30: [0x10, 0x60], 0x60: [], 0x70: [0x70, 0x90],
                    0x90: [0x30]}
    idom = cfg.dominators(blocks)
    at = {b.start: b.index for b in blocks}
    assert idom[at[0x30]] == at[0x10]  # 0x30 is reached from 0x10 directly and via the retry path
    assert not cfg.dominates(idom, at[0x30], at[0x90])


def test_natural_loops_not_a_backward_branch_scan():
    fn = parse(RETRY).functions["k"]
    found = {lp["header"]: lp for lp in loops.analyse(fn)}
    assert sorted(found) == ["0x0010", "0x0070"]  # no loop headed at 0x0030
    main, spin = found["0x0010"], found["0x0070"]
    # the main loop's body holds the out-of-line retry blocks: 0x10-0x50 (5) + 0x70-0x90 (3) = 8 instructions
    assert main["instructions"] == 8 and main["kind"] == "trip" and main["hot"]
    assert spin["kind"] == "spin_wait" and spin["parent"] == "0x0010" and spin["depth"] == 2
    assert main["stall_cycles"] == 2 + 5 + 4 + 4 + 5 + 2 + 5 + 5
    assert main["mix"] == {"fp32": 1, "int_alu": 1, "sync": 2, "control": 4}


def test_uniform_branch_predicate_operand_is_conditional():
    fn = parse(listing(
        ".L_x_0:",
        "0000||UIADD3 UR4, UR4, 0x1, URZ|1",
        "0010||BRA.U !UP0, `(.L_x_0)|5",
        "0020||ELECT P2, URZ, PT|1",
        ".L_x_5:",
        "0030||UTMALDG.2D [UR8], [UR6]|1",
        "0040|@P2|BRA.U.ANY `(.L_x_5)|5",
        "0050||BRA `(.L_x_9)|5",
        ".L_x_9:",
        "0060||EXIT|5",
    )).functions["k"]
    blocks = cfg.build(fn)
    assert sorted(blocks[s].start for s in blocks[0].succs) == [0x00, 0x20]  # BRA.U !UP0: taken or not
    kinds = {lp["header"]: lp["kind"] for lp in loops.analyse(fn)}
    assert kinds == {"0x0000": "trip", "0x0030": "lane_serialization"}


def test_classes_and_tensor_ops():
    opcodes = ("HGMMA.64x64x16.F32.BF16", "UTMALDG.2D", "LDTM.x4", "MUFU.EX2", "FFMA", "LDGSTS.E.BYPASS.128",
               "STL.64", "UMOV", "BAR.SYNC.DEFER_BLOCKING")
    assert [mix.class_of(o) for o in opcodes] == [
        "tensor", "tma", "tmem", "sfu", "fp32", "lsu_global", "lsu_local", "uniform", "sync"]
    op = mix.tensor_op("HGMMA.64x128x16.F32.BF16")
    assert (op.family, op.dtype, op.shape, op.flops) == ("wgmma", "bf16", (64, 128, 16), 2 * 64 * 128 * 16)
    assert mix.tensor_op("IMMA.16832.S8.S8").dtype == "int8"
    assert mix.tensor_op("HMMA.1688.F32.TF32").shape == (16, 8, 8)
    assert mix.tensor_op("DMMA.8x8x4").dtype == "fp64"
    assert mix.tensor_op("UTCHMMA.2CTA").cta_group == 2
    assert mix.tensor_op("UTCOMMA.4X").block_scaled


def test_idesc_fields():
    d = idesc.decode("UTCHMMA", 0x08200490)
    # 0x490: bit 4 (D f32), bit 7 (A = 1: bf16), bit 10 (B bf16); (0x08200490 >> 17) & 0x3f = 16 -> N 128;
    # (>> 24) & 0x1f = 8 -> M 128; K = 256 bits / 16-bit bf16 = 16
    assert (d.m, d.n, d.k, d.dtype, d.accumulator) == (128, 128, 16, "bf16", "f32")
    q = idesc.decode("UTCQMMA", (1 << 4) | ((256 >> 3) << 17) | ((128 >> 4) << 24))
    assert (q.m, q.n, q.k, q.dtype) == (128, 256, 32, "fp8")  # A format 0 = e4m3; 256 bits / 8 = 32
