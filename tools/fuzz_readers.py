"""Fuzz every reader of a user's file (issue 28): seeded mutants of the shipped fixtures, each handed to
the reader's entry point in this process under a CPU-time alarm. Every case must end with a result or one
bad-input error (a UserError / HwdescError: the CLI's one `error:` line, exit 2): an internal error (any
other exception), a multi-line or empty message, or a case past the CPU limit is a finding.

Formats (FORMATS): nsys SQLite and CSV, ncu CSV and .ncu-rep, onnxruntime JSON, PyTorch/Kineto JSON
(plain and gzip), config.json, hardware YAML, cubin, fatbin, PTX, SASS text (nvdisasm's listing) and
torch-mlir text. Mutations (MUTATORS, plus each format's own): truncation, bit flips, byte runs, spliced,
deleted and repeated chunks, swapped fields and lines, huge and non-finite numbers, deep nesting, wrong
magic, zero length; an SQLite database whose tables have the right names and the wrong columns or types,
a gzip bomb, a corrupt gzip member, ELF headers pointing past the file.

    python -m tools.fuzz_readers --cases 2000 [--seed N] [--format NAME ...] [--deep]

runs each format in a child process of its own (so a crash in a native library is a finding, not the end
of the run, and each format's peak RSS is its own) and prints per format: cases, results, refusals,
findings (tracebacks / internal errors, timeouts, crashes), the slowest case's CPU s and the peak RSS.
`--deep` also disassembles the cubins that parse (nvdisasm; slow). tests/test_fuzz_readers.py runs a
hundred-odd cases per format.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
LIMIT_S = 10.0
# The CUDA tools' limit during a case: the product's default (120 s, for a real kernel's nvcc) would let
# ptxas spend 110 CPU s on a PTX of 100,000 branches; each case asks the limit to stop it first.
TOOL_SECONDS = "8"
# How big a repeated or nested mutant may grow: the long run's; tests/test_fuzz_readers.py makes it smaller
# (a 4 MB YAML takes the pure-Python YAML parser seconds, legitimately).
BIG_BYTES = 4_000_000


class CaseTimeout(BaseException):  # not an Exception: a reader's catch-all must not swallow it
    pass


@dataclass(frozen=True)
class Outcome:
    case: str
    kind: str  # "result", "refused", or a finding: "internal", "timeout", "bad-error", "crash", "bad-seed"
    cpu_s: float
    detail: str = ""
    child_rss: int = 0  # peak RSS of the forked child the reader ran in, if any

    @property
    def finding(self) -> bool:
        return self.kind not in ("result", "refused")


# ---- the readers ----------------------------------------------------------------------------------

def _profile(path: str, _work: str, _deep: bool) -> object:
    from estimator.profile.load import load

    return load(path)


def _hf_config(path: str, _work: str, _deep: bool) -> object:
    from estimator.frontends import hf_config

    return hf_config.load(path)


def _hw_yaml(path: str, _work: str, _deep: bool) -> object:
    import hwdesc

    return hwdesc.load_file(Path(path))


def _sass_input(path: str, work: str, deep: bool) -> object:
    """inputs.load (a cubin: the ELF reader; a fatbin: cuobjdump; PTX: ptxas), then the ELF reader on
    every cubin it gives; with `deep`, nvdisasm and the listing's analysis too."""
    from estimator.input_limits import read_bytes
    from estimator.sass import disasm, elf, inputs

    module = inputs.load(path, "sm_90", work)
    infos = [elf.read(read_bytes(str(c)), str(c)) for c in module.cubins]
    if deep:
        for c in module.cubins:
            _listing_analysis(disasm.disassemble(str(c)))
    return infos


def _sass_text(path: str, _work: str, _deep: bool) -> object:
    from estimator.input_limits import read_bytes
    from estimator.sass import disasm

    return _listing_analysis(disasm.parse(read_bytes(path).decode("utf-8", "replace")))


def _listing_analysis(listing) -> list:
    from estimator.sass import loops

    return [(loops.summarize(fn.instructions), loops.analyse(fn)) for fn in listing.functions.values()]


def _mlir(path: str, _work: str, _deep: bool) -> object:
    from estimator.frontends.mlir_import import import_mlir_file

    return import_mlir_file(path)


# ---- the seeds ------------------------------------------------------------------------------------

def _files(*names: str) -> Callable[[], dict[str, bytes]]:
    return lambda: {Path(n).name: (DATA / n).read_bytes() for n in names}


def _ort_seed() -> dict[str, bytes]:
    """A small onnxruntime profile (CUPTI build): two runs of two nodes, each with its kernel."""
    def ev(cat, name, ts, dur, **args):
        return {"cat": cat, "pid": 1, "tid": 1, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": args}

    events = []
    for run, t0 in enumerate((0, 1000)):
        events.append(ev("Session", "model_run", t0, 900))
        for i, (node, op) in enumerate((("mm", "MatMul"), ("sm", "Softmax"))):
            ts = t0 + 10 + 400 * i
            events.append(ev("Node", f"{node}_kernel_time", ts, 300, op_name=op,
                             provider="CUDAExecutionProvider"))
            events.append(ev("Kernel", f"{op.lower()}_kernel_{run}", ts, 250, stream=7, grid_x=132, grid_y=1,
                             grid_z=1, block_x=128, block_y=1, block_z=1))
    host = [ev("Session", "model_run", 0, 500), ev("Node", "add_kernel_time", 5, 40, op_name="Add",
                                                   provider="CPUExecutionProvider")]
    return {"ort_cuda.json": json.dumps(events, indent=1).encode(), "ort_cpu.json": json.dumps(host).encode()}


def _torch_plain_seed() -> dict[str, bytes]:
    out = {}
    for n in ("pytorch_kineto_a100_alexnet_trace.json.gz",
              "pytorch_kineto_a100_cupti_counters_trace.json.gz"):
        out[n.removesuffix(".gz")] = gzip.decompress((DATA / "profiles" / n).read_bytes())
    return out


def _nsys_sqlite_seed() -> dict[str, bytes]:
    from estimator.profile import synthetic

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.sqlite")
        synthetic.write(path, [synthetic.Launch("gemm_kernel", 1000 * i, 500, 1000 * i - 50, nvtx="layer")
                               for i in range(1, 6)])
        small = Path(path).read_bytes()
    return {"synthetic.sqlite": small, **_files("profiles/nsys_export_a100_saxpy_schema2.9_trimmed.sqlite")()}


def _nsys_csv_seed() -> dict[str, bytes]:
    trace = (
        "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),"
        "Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name\n"
        '1000,500,11,132,1,1,128,1,1,64,0.0,0.1,,,,,NVIDIA H100 80GB HBM3 (0),1,,7,"gemm_kernel"\n'
        '2000,40,12,,,,,,,,,,1.0,25000.0,Device,Device,NVIDIA H100 80GB HBM3 (0),1,,7,"[CUDA memcpy DtoD]"\n'
        '3000,70,13,64,1,1,256,1,1,32,0.0,0.0,,,,,NVIDIA H100 80GB HBM3 (0),1,,7,"softmax_kernel"\n'
    )
    return {"trace.csv": trace.encode(), **_files("profiles/nsys_cuda_gpu_kern_sum_rtx5090_projector.csv",
                                                  "profiles/nsys_cuda_gpu_kern_sum_rtx5090_decode.csv")()}


def _ncu_csv_seed() -> dict[str, bytes]:
    raw = (
        '"ID","Process ID","Device","Stream","Grid Size","Block Size","Kernel Name","CC",'
        '"gpu__time_duration.sum","dram__bytes.sum","launch__registers_per_thread"\n'
        '"","","","","","","","","nsecond","byte","register/thread"\n'
        '"0","42","0","7","(132, 1, 1)","(128, 1, 1)","gemm_kernel","9.0","12,345","1,048,576","128"\n'
        '"1","42","0","7","(64, 1, 1)","(256, 1, 1)","softmax_kernel","9.0","2,000","65,536","32"\n'
    )
    return {"raw.csv": raw.encode(), **_files("profiles/ncu_details_rtx5090_cublas_gemv.csv")()}


# Public config.json values (the models' cards on huggingface.co), trimmed to the keys the readers use.
_CONFIGS = {
    "llama.json": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                   "vocab_size": 128256, "max_position_embeddings": 8192, "rope_theta": 500000.0,
                   "rms_norm_eps": 1e-5},
    "mixtral.json": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                     "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
                     "sliding_window": None, "rope_theta": 1e6},
    "deepseek_v3.json": {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
                         "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
                         "moe_intermediate_size": 2048, "vocab_size": 129280, "n_routed_experts": 256,
                         "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
                         "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                         "qk_rope_head_dim": 64, "v_head_dim": 128},
    "gpt_oss.json": {"model_type": "gpt_oss", "num_hidden_layers": 24, "hidden_size": 2880,
                     "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
                     "intermediate_size": 2880, "vocab_size": 201088, "num_local_experts": 32,
                     "num_experts_per_tok": 4, "sliding_window": 128,
                     "quantization_config": {"quant_method": "mxfp4"},
                     "layer_types": ["sliding_attention", "full_attention"] * 12},
    "gemma2.json": {"architectures": ["Gemma2ForCausalLM"], "text_config": {
        "model_type": "gemma2", "num_hidden_layers": 26, "hidden_size": 2304, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216, "vocab_size": 256000,
        "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}},
}


def _config_seed() -> dict[str, bytes]:
    return {n: json.dumps(c, indent=2).encode() for n, c in _CONFIGS.items()}


def _yaml_seed() -> dict[str, bytes]:
    return {n: (ROOT / "hwdesc" / n).read_bytes() for n in ("h100-sxm.yaml", "rtx-5090.yaml")}


# ---- the mutators ---------------------------------------------------------------------------------

Mutator = Callable[[random.Random, bytes], bytes]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_HUGE = (b"99999999999999999999999999", b"-1", b"0", b"1e400", b"-1e400", b"NaN", b"Infinity", b"4294967296",
         b"18446744073709551616", b"1" * 5000, b"0.0", b"-0")


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)] if data else data


def zero_length(_rng: random.Random, _data: bytes) -> bytes:
    return b""


def bit_flips(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.choice((1, 2, 4, 8, 32))):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def byte_run(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    at, n = rng.randrange(len(data)), rng.choice((1, 4, 16, 256))
    fill = rng.choice((b"\x00", b"\xff", b"\x7f", bytes([rng.randrange(256)])))
    return data[:at] + fill * n + data[at + n:]


def splice(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 2:
        return data
    a = rng.randrange(len(data))
    chunk = data[a: a + rng.randrange(1, 4096)]
    b = rng.randrange(len(data))
    return data[:b] + chunk + data[b:]


def delete_chunk(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    a = rng.randrange(len(data))
    return data[:a] + data[a + rng.randrange(1, 4096):]


def repeat_chunk(rng: random.Random, data: bytes) -> bytes:
    """A line (or chunk) repeated up to ~4 MB: huge counts of rows / events."""
    lines = data.splitlines(keepends=True)
    if len(lines) < 2:
        return data * rng.choice((2, 100))
    i = rng.randrange(len(lines))
    times = min(rng.choice((10, 1000, 100_000)), BIG_BYTES // max(len(lines[i]), 1))
    return b"".join(lines[:i]) + lines[i] * times + b"".join(lines[i:])


def swap_fields(rng: random.Random, data: bytes) -> bytes:
    """Two comma/space/colon-separated fields of one line swapped, or two lines swapped."""
    lines = data.splitlines(keepends=True)
    if not lines:
        return data
    if rng.random() < 0.3 and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return b"".join(lines)
    i = rng.randrange(len(lines))
    sep = rng.choice((b",", b" ", b":"))
    parts = lines[i].split(sep)
    if len(parts) > 1:
        a, b = rng.randrange(len(parts)), rng.randrange(len(parts))
        parts[a], parts[b] = parts[b], parts[a]
        lines[i] = sep.join(parts)
    return b"".join(lines)


def huge_number(rng: random.Random, data: bytes) -> bytes:
    found = list(_NUMBER.finditer(data[:1 << 20]))
    if not found:
        return data + rng.choice(_HUGE)
    out = data
    for m in sorted(rng.sample(found, min(len(found), rng.choice((1, 3, 20)))), key=lambda m: -m.start()):
        out = out[: m.start()] + rng.choice(_HUGE) + out[m.end():]
    return out


def deep_nesting(rng: random.Random, data: bytes) -> bytes:
    n = rng.choice((100, 1000, 10_000, 200_000))
    opener, closer = rng.choice(((b"[", b"]"), (b"{", b"}"), (b"(", b")"), (b'{"a":', b"}"), (b"- ", b""),
                                 (b"<", b">")))
    n = min(n, BIG_BYTES // (len(opener) + len(closer)))
    at = rng.randrange(len(data) + 1)
    nest = opener * n + b"1" + closer * n if rng.random() < 0.7 else opener * n
    return data[:at] + nest + data[at:]


def wrong_magic(rng: random.Random, data: bytes) -> bytes:
    magic = rng.choice((b"SQLite format 3\x00", b"NVR\x00", b"\x1f\x8b\x08\x00", b"\x7fELF",
                        b"\x50\xed\x55\xba",
                        b"ML\xefR", b"PK\x03\x04", b"\x00\x00\x00\x00", b"{", b"[", b'"ID"', b"%YAML 1.2\n"))
    return magic + data[len(magic) if rng.random() < 0.5 else 0:]


def random_bytes(rng: random.Random, data: bytes) -> bytes:
    return rng.randbytes(rng.choice((1, 64, 4096, len(data) or 1)))


MUTATORS: tuple[Mutator, ...] = (
    truncate, zero_length, bit_flips, byte_run, splice, delete_chunk, repeat_chunk, swap_fields, huge_number,
    deep_nesting, wrong_magic, random_bytes)


# format-specific mutants -----------------------------------------------------------------------------

def sqlite_wrong_columns(rng: random.Random, _data: bytes) -> bytes:
    """An SQLite database whose tables have the right names (an nsys export's) and the wrong columns,
    the right columns holding the wrong types, or no rows."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "w.sqlite")
        db = sqlite3.connect(path)
        meta = rng.choice(("META_DATA_EXPORT", "EXPORT_META_DATA"))
        db.execute(f"create table {meta} (name text, value text)")
        version = rng.choice(("3.1", "2.9", "x"))
        db.execute(f"insert into {meta} values ('EXPORT_SCHEMA_VERSION', ?)", (version,))
        good = "start, end, deviceId, streamId, correlationId, globalPid, demangledName"
        shape = rng.choice(("wrong-columns", "wrong-types", "empty", "no-strings", "bad-joins"))
        if shape == "wrong-columns":
            db.execute("create table CUPTI_ACTIVITY_KIND_KERNEL (a, b, c)")
            db.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL values (1, 2, 3)")
        else:
            db.execute(f"create table CUPTI_ACTIVITY_KIND_KERNEL ({good}, gridX, blockX, registersPerThread)")
            bad = rng.choice(("text", None, 1e308, -(2**63), b"\x00blob", 2**63 - 1))
            if shape != "empty":
                for i in range(rng.choice((1, 5))):
                    row = [1000 * i, 1000 * i + 500, 0, 7, i, 1 << 24, 1, 132, 128, 64]
                    row[rng.randrange(len(row))] = bad
                    db.execute("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?,?,?,?,?,?,?,?,?,?)", row)
        if shape != "no-strings":
            db.execute("create table StringIds (id, value)")
            db.execute("insert into StringIds values (1, ?)", (rng.choice(("gemm", None, 5, b"\xff")),))
        if shape == "bad-joins":
            db.execute("create table CUPTI_ACTIVITY_KIND_RUNTIME (correlationId, globalTid, start)")
            db.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME values ('x', 'y', 'z')")
            db.execute("create table NVTX_EVENTS (globalTid, start, end, text, eventType)")
            db.execute("insert into NVTX_EVENTS values (?, 'a', NULL, 5, 59)", (1 << 24,))
            db.execute("create table TARGET_INFO_GPU (id, name, computeMajor)")
            db.execute("insert into TARGET_INFO_GPU values ('zero', 7, NULL)")
        db.commit()
        db.close()
        return Path(path).read_bytes()


def gzip_of(mutator: Mutator) -> Mutator:
    """The seed inflated, mutated, then deflated again (a well-formed gzip of a bad trace)."""
    def mutate(rng: random.Random, data: bytes) -> bytes:
        try:  # at most 64 MiB: the case may already be a bomb
            inflater = zlib.decompressobj(31)
            plain = inflater.decompress(data, 64 << 20)
            if not inflater.eof:
                raise EOFError
        except (EOFError, zlib.error):  # an earlier mutator broke the gzip, or it is a bomb: as it is
            return mutator(rng, data)
        return gzip.compress(mutator(rng, plain), compresslevel=1)

    mutate.__name__ = f"gzip_of_{mutator.__name__}"
    return mutate


def gzip_corrupt(rng: random.Random, data: bytes) -> bytes:
    """A bad CRC or length trailer, a second member that is garbage, or a cut member."""
    kind = rng.randrange(3)
    if kind == 0:
        return data[:-8] + rng.randbytes(8)
    if kind == 1:
        return data + b"\x1f\x8b" + rng.randbytes(64)
    return data[: max(10, len(data) // 2)]


def gzip_bomb_bytes(inflated: int, prefix: bytes = b'{"traceEvents": [') -> bytes:
    """A gzip file that inflates to about `inflated` bytes: `prefix`, then members of one precompressed
    64 MiB block of spaces, written again and again (cheap: one block is compressed once)."""
    block, member = _spaces_member()
    return gzip.compress(prefix) + member * max(1, inflated // block)


@functools.lru_cache(maxsize=1)
def _spaces_member() -> tuple[int, bytes]:
    block = 64 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return block, c.compress(b" " * block) + c.flush()


def gzip_bomb(rng: random.Random, _data: bytes) -> bytes:
    return gzip_bomb_bytes(rng.choice((256 << 20, 2 << 30)))


def _elf_field(rng: random.Random, data: bytes) -> bytes:
    """An ELF header or section-header field pointing somewhere it must not: past the end, huge counts."""
    if len(data) < 0x40:
        return data
    out = bytearray(data)
    fields = [(0x28, "<Q"), (0x3A, "<H"), (0x3C, "<H"), (0x3E, "<H"), (0x12, "<H"), (0x30, "<I"),
              (0x04, "<B")]
    shoff, shentsize, shnum = int.from_bytes(data[0x28:0x30], "little"), data[0x3A] | data[0x3B] << 8, \
        data[0x3C] | data[0x3D] << 8
    if shoff + shnum * shentsize <= len(data) and shentsize and shnum:
        i = rng.randrange(shnum)
        base = shoff + i * shentsize
        fields += [(base + 0x18, "<Q"), (base + 0x20, "<Q"), (base + 0x28, "<I"), (base + 0x38, "<Q"),
                   (base + 0x00, "<I")]
    at, fmt = rng.choice(fields)
    size = struct.calcsize(fmt)
    value = rng.choice((0, 1, 24, 2**(8 * size) - 1, len(data), len(data) - 1, 2**(8 * size - 1)))
    out[at: at + size] = struct.pack(fmt, value % 2**(8 * size))
    return bytes(out)


def elf_field(rng: random.Random, data: bytes) -> bytes:
    if data.startswith(b"\x50\xed\x55\xba"):  # a fatbin: its embedded ELF
        at = data.find(b"\x7fELF")
        return data if at < 0 else data[:at] + _elf_field(rng, data[at:])
    return _elf_field(rng, data)


def fatbin_header(rng: random.Random, data: bytes) -> bytes:
    """The fatbin container's header / first entry: sizes past the end, a bad version, a huge count."""
    out = bytearray(data)
    at, fmt = rng.choice(((4, "<H"), (6, "<H"), (8, "<Q"), (16, "<H"), (20, "<I"), (24, "<Q"), (32, "<I")))
    size = struct.calcsize(fmt)
    if at + size <= len(out):
        value = rng.choice((0, 1, 2**(8 * size) - 1, len(data) * 4)) % 2**(8 * size)
        out[at: at + size] = struct.pack(fmt, value)
    return bytes(out)


def yaml_alias(rng: random.Random, data: bytes) -> bytes:
    """A "billion laughs": anchors whose aliases expand exponentially."""
    lines = [b"a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"] + [
        f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(9))}]".encode() for i in range(1, 9)]
    if rng.random() < 0.5:
        return b"\n".join(lines) + b"\n" + data
    return data + b"\nlaughs:\n  " + b"\n  ".join(lines)


def ptx_directive(rng: random.Random, data: bytes) -> bytes:
    """A PTX directive changed: an unknown .target / .version, a huge .reg count or array."""
    repl = rng.choice(((rb"\.target\s+\S+", b".target sm_999"), (rb"\.version\s+\S+", b".version 99.9"),
                       (rb"\.reg \.(\w+) %(\w+)<\d+>", rb".reg .\1 %\2<2147483647>"),
                       (rb"\.shared \.align (\d+) \.b8 (\w+)\[\d+\]",
                        rb".shared .align \1 .b8 \2[4294967295]")))
    return re.sub(repl[0], repl[1], data, count=1)


# ---- the formats ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Format:
    name: str
    suffix: str
    seeds: Callable[[], dict[str, bytes]]
    read: Callable[[str, str, bool], object]  # (path, scratch folder, deep) -> anything
    extra: tuple[Mutator, ...] = ()  # this format's own mutators, drawn as often as all generic ones
    needs: tuple[str, ...] = ()  # modules (import name) or CUDA tools the reader needs
    cli: tuple[str, ...] = ()  # `estimate` arguments around {path} for the end-to-end check


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("nsys-sqlite", ".sqlite", _nsys_sqlite_seed, _profile, (sqlite_wrong_columns,),
           cli=("profile", "{path}", "--json")),
    Format("nsys-csv", ".csv", _nsys_csv_seed, _profile, cli=("profile", "{path}", "--json")),
    Format("ncu-csv", ".csv", _ncu_csv_seed, _profile, cli=("profile", "{path}", "--json")),
    Format("ncu-rep", ".ncu-rep", _files("profiles/ncu_report_a10g_sm86_esmm.ncu-rep"), _profile,
           needs=("ncu_report",), cli=("profile", "{path}", "--json")),
    Format("ort-json", ".json", _ort_seed, _profile, cli=("profile", "{path}", "--json")),
    Format("torch-json", ".json", _torch_plain_seed, _profile, cli=("profile", "{path}", "--json")),
    Format("torch-gzip", ".json.gz", _files("profiles/pytorch_kineto_a100_alexnet_trace.json.gz"), _profile,
           tuple(gzip_of(m) for m in MUTATORS if m is not repeat_chunk) + (gzip_corrupt, gzip_bomb),
           cli=("profile", "{path}", "--json")),
    Format("config-json", ".json", _config_seed, _hf_config, cli=("--hf-config", "{path}", "--json")),
    Format("hw-yaml", ".yaml", _yaml_seed, _hw_yaml, (yaml_alias,),
           cli=("--model", "llama-tiny", "--arch", "{path}", "--json")),
    Format("cubin", ".cubin", _files("fuzz/fma.sm_90.cubin"), _sass_input, (elf_field,),
           cli=("sass", "{path}", "--arch", "sm_90a", "--json")),
    Format("fatbin", ".fatbin", _files("fuzz/fma.fatbin"), _sass_input, (elf_field, fatbin_header),
           needs=("cuobjdump", "ptxas"), cli=("sass", "{path}", "--arch", "sm_90a", "--json")),
    Format("ptx", ".ptx", _files("fuzz/fma.sm_90.ptx"), _sass_input, (ptx_directive,), needs=("ptxas",),
           cli=("sass", "{path}", "--arch", "sm_90a", "--json")),
    Format("sass-text", ".sass", _files("fuzz/fma.sm_90.sass"), _sass_text),
    Format("mlir", ".mlir", _files("fuzz/linear.mlir"), _mlir, needs=("torch_mlir",),
           cli=("{path}", "--json")),
)}


def missing(fmt: Format) -> list[str]:
    """What `fmt` needs that this machine lacks (a module or a CUDA tool)."""
    import importlib.util

    from estimator.sass import tools

    out = []
    for need in fmt.needs:
        if need in tools._HOWTO:
            if not tools.available(need):
                out.append(need)
        elif importlib.util.find_spec(need) is None:
            out.append(need)
    return out


# ---- running ---------------------------------------------------------------------------------------

def mutants(fmt: Format, n: int, seed: int):
    """`n` (case name, bytes) of `fmt`, one at a time: each a seed with one to three mutators stacked,
    the format's own drawn half of the time. Deterministic in `seed`."""
    seeds = sorted(fmt.seeds().items())
    for i in range(n):
        rng = random.Random(f"{seed}:{fmt.name}:{i}")
        name, data = rng.choice(seeds)
        steps = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            m = rng.choice(fmt.extra) if fmt.extra and rng.random() < 0.5 else rng.choice(MUTATORS)
            data = m(rng, data)
            steps.append(m.__name__)
        yield f"{fmt.name}:{name}:{'+'.join(steps)}:{seed}:{i}", data


def _alarm(_signum, _frame):
    raise CaseTimeout


def bad_input_errors() -> tuple[type[BaseException], ...]:
    from estimator.errors import UserError
    from hwdesc import HwdescError

    return (UserError, HwdescError)


def run_case(fmt: Format, name: str, data: bytes, work: str, limit_s: float = LIMIT_S,
             deep: bool = False) -> Outcome:
    """`fmt`'s reader on `data` (written to a file under `work`), stopped after `limit_s` seconds of
    this process's CPU time (ITIMER_PROF: load on the machine neither trips nor hides it)."""
    path = os.path.join(work, f"case{fmt.suffix}")
    scratch = tempfile.mkdtemp(dir=work)
    with open(path, "wb") as f:
        f.write(data)
    bad_input = bad_input_errors()
    own_timeout = "ESTIMATOR_TOOL_TIMEOUT_S" not in os.environ
    if own_timeout:  # for this case only (TOOL_SECONDS); a limit the caller set stands
        os.environ["ESTIMATOR_TOOL_TIMEOUT_S"] = TOOL_SECONDS
    previous = signal.signal(signal.SIGPROF, _alarm)
    t0, children0 = time.process_time(), _children_cpu()
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    try:
        fmt.read(path, scratch, deep)
        kind, detail = "result", ""
    except CaseTimeout:
        kind, detail = "timeout", f"over {limit_s:g} CPU s"
    except bad_input as exc:
        text = str(exc)
        one_line = text and "\n" not in text and "Traceback" not in text
        kind, detail = ("refused", text) if one_line else ("bad-error", repr(text[:300]))
    except Exception:  # an internal error: what the CLI would print as exit 1
        kind, detail = "internal", traceback.format_exc(limit=-4)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        if own_timeout:
            del os.environ["ESTIMATOR_TOOL_TIMEOUT_S"]
    # the CPU of the tools it ran (ptxas, cuobjdump) and of a forked child (.ncu-rep) counts too
    cpu = time.process_time() - t0 + _children_cpu() - children0
    if cpu > limit_s and kind != "timeout":
        kind, detail = "timeout", f"{cpu:.1f} CPU s with the tools it ran (over {limit_s:g})"
    shutil.rmtree(scratch, ignore_errors=True)
    child = _child_usage()
    return Outcome(name, kind, cpu, detail, int(child.get("peak_rss_bytes", 0)))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child_usage() -> dict:
    from estimator.profile import ncu_rep

    usage = dict(ncu_rep.LAST_CHILD)
    ncu_rep.LAST_CHILD.clear()
    return usage


def warm(fmt: Format, work: str, deep: bool = False) -> list[Outcome]:
    """Each seed unmutated (they must all give a result): imports the reader's modules, so that no
    mutant's CPU time holds them."""
    return [run_case(fmt, f"{fmt.name}:{name}:seed", data, work, deep=deep)
            for name, data in sorted(fmt.seeds().items())]


def campaign(fmt: Format, n: int, seed: int, work: str, deep: bool = False,
             progress: Callable[[str], None] | None = None):
    for o in warm(fmt, work, deep):
        if o.kind != "result":
            yield Outcome(o.case, "bad-seed", o.cpu_s, o.detail)
    for name, data in mutants(fmt, n, seed):
        if progress:
            progress(name)
        yield run_case(fmt, name, data, work, deep=deep)


def run_cli(fmt: Format, data: bytes, work: str, timeout_s: float = 120) -> tuple[int, str]:
    """`estimate` on `data` as a user would run it: (exit code, stderr)."""
    path = os.path.join(work, f"cli{fmt.suffix}")
    Path(path).write_bytes(data)
    argv = [a.replace("{path}", path) for a in fmt.cli]
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", *argv], capture_output=True, text=True,
                          timeout=timeout_s, cwd=ROOT)
    return proc.returncode, proc.stderr


# ---- the long run ----------------------------------------------------------------------------------

def _child(fmt: Format, n: int, seed: int, deep: bool, progress_file: str) -> dict:
    counts: Counter = Counter()
    findings, slowest, child_rss = [], (0.0, ""), 0
    with tempfile.TemporaryDirectory(prefix="fuzz-readers-") as work:
        def note(name: str) -> None:
            with open(progress_file, "w") as f:
                f.write(name)

        for o in campaign(fmt, n, seed, work, deep, note):
            counts[o.kind] += 1
            slowest = max(slowest, (o.cpu_s, o.case))
            child_rss = max(child_rss, o.child_rss)
            if o.finding:
                findings.append(f"{o.kind}: {o.case}: {o.detail}")
    rss = max(peak_rss_bytes(), child_rss)
    return {"format": fmt.name, "cases": n, "counts": dict(counts), "max_cpu_s": slowest[0],
            "slowest": slowest[1], "peak_rss_bytes": rss, "findings": findings[:50]}


def peak_rss_bytes() -> int:
    """This process's peak resident set: VmHWM (the high-water mark of this program's memory; Linux keeps
    ru_maxrss across exec, so a child started by a big process would report its parent's), else
    ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run_format(name: str, n: int, seed: int, deep: bool) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".progress") as prog:
        cmd = [sys.executable, "-m", "tools.fuzz_readers", "--child", name, "--cases", str(n), "--seed",
               str(seed), "--progress", prog.name] + (["--deep"] if deep else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode == 0 and proc.stdout.strip():
            return json.loads(proc.stdout.strip().splitlines()[-1])
        last = Path(prog.name).read_text()
        return {"format": name, "cases": n, "counts": {"crash": 1}, "max_cpu_s": None, "slowest": "",
                "peak_rss_bytes": None,
                "findings": [f"crash: exit {proc.returncode} in case {last}: {proc.stderr[-2000:]}"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.fuzz_readers", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=2000, help="mutants per format (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", action="append", choices=sorted(FORMATS), help="only these formats")
    p.add_argument("--deep", action="store_true", help="also disassemble the cubins that parse (nvdisasm)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--progress", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(FORMATS[args.child], args.cases, args.seed, args.deep, args.progress)))
        return 0
    rows = []
    for name in args.format or list(FORMATS):
        fmt = FORMATS[name]
        if missing(fmt):
            rows.append({"format": name, "skipped": f"needs {', '.join(missing(fmt))}"})
            print(f"{name}: skipped (needs {', '.join(missing(fmt))})", file=sys.stderr)
            continue
        t0 = time.time()
        row = _run_format(name, args.cases, args.seed, args.deep)
        row["wall_s"] = round(time.time() - t0, 1)
        rows.append(row)
        print(f"{name}: {_line(row)}", file=sys.stderr)
    if args.json:
        print(json.dumps({"seed": args.seed, "cases": args.cases, "formats": rows}, indent=1))
    else:
        print(_table(rows))
        for row in rows:
            for f in row.get("findings", []):
                print(f"{row['format']}: {f}")
    return 1 if any(row.get("findings") for row in rows) else 0


def _line(row: dict) -> str:
    c = row.get("counts", {})
    rss = row.get("peak_rss_bytes")
    return (f"{row['cases']} cases, {c.get('result', 0)} results, {c.get('refused', 0)} refused, "
            f"{sum(v for k, v in c.items() if k not in ('result', 'refused'))} findings, max "
            f"{row.get('max_cpu_s') or 0:.2f} CPU s, peak RSS {(rss or 0) / 2**20:.0f} MiB")


def _table(rows: list[dict]) -> str:
    head = ("| format | cases | results | refusals | internal | bad error | timeouts | crashes | max CPU s "
            "| peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['format']} | {r['skipped']} |")
            continue
        c = r["counts"]
        lines.append(f"| {r['format']} | {r['cases']} | {c.get('result', 0)} | {c.get('refused', 0)} | "
                     f"{c.get('internal', 0)} | {c.get('bad-error', 0)} | {c.get('timeout', 0)} | "
                     f"{c.get('crash', 0)} | {r['max_cpu_s'] or 0:.2f} | "
                     f"{(r['peak_rss_bytes'] or 0) / 2**20:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
