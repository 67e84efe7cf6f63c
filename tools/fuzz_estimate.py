"""Fuzz `estimate`: seeded mutants of real exports and random small graphs, each run through the CLI in
this process with a 10 s alarm on its CPU time. Every run must end with a result (exit 0) or one
`error:` line (exit 2): an internal error (exit 1), a traceback or a run past the limit is a finding.

Seeds: the bundled llama-tiny builders (prefill and decode) and, when given (--hf DIR with the .onnx
files models/hf_tiny.py exports), the transformers exports. Mutations, on the serialized bytes or on the
proto (see MUTATORS): byte flips, truncations, splices, a renamed edge (a node reading a tensor nothing
produces: the class of the mutants that hung the estimator), a dropped node, a duplicated output, a cycle,
corrupt dims / element types / attributes / opsets. Random graphs: small DAGs of common ops over random
shapes, consistent or not.

    python -m tools.fuzz_estimate --mutants 2000 [--random 200] [--seed 0] [--hf DIR]

prints the outcome counts, the slowest case and every finding (tests/test_fuzz.py runs a few hundred).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LIMIT_S = 10


class CaseTimeout(BaseException):  # not an Exception: the CLI's catch-all must not swallow it
    pass


@dataclass(frozen=True)
class Outcome:
    case: str
    kind: str  # "estimated", "refused", or a finding: "internal", "traceback", "timeout", "bad-error"
    seconds: float
    detail: str = ""

    @property
    def finding(self) -> bool:
        return self.kind not in ("estimated", "refused")


# ---- running one case -----------------------------------------------------------------------------

def run_case(name: str, path: str, argv: list[str], limit_s: float = LIMIT_S) -> Outcome:
    """`estimate path argv...` in this process, stopped after `limit_s` seconds of this process's CPU time
    (an ITIMER_PROF alarm: other load on the machine neither trips nor hides it). Outcome.seconds is the
    case's CPU time."""
    from estimator.cli.main import main

    out, err = io.StringIO(), io.StringIO()

    def on_alarm(signum, frame):
        raise CaseTimeout

    previous = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, limit_s)
    t0 = time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([path, *argv])
    except CaseTimeout:
        return Outcome(name, "timeout", time.process_time() - t0, f"ran past {limit_s} CPU s")
    except BaseException as exc:  # noqa: BLE001 - anything escaping main is a traceback for the user
        return Outcome(name, "traceback", time.process_time() - t0, f"{type(exc).__name__}: {exc}"[:300])
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    seconds = time.process_time() - t0
    lines = err.getvalue().strip().splitlines()
    if code == 0:
        return Outcome(name, "estimated", seconds)
    if code == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        return Outcome(name, "refused", seconds, lines[0][:200])
    kind = "internal" if code == 1 else "bad-error"
    return Outcome(name, kind, seconds, f"exit {code}: {err.getvalue().strip()[:300]}")


# ---- seeds and mutations --------------------------------------------------------------------------

def builder_seeds() -> dict[str, bytes]:
    import models

    names = ("llama-tiny", "llama-tiny-decode")
    return {name: models.MODELS[name].build().SerializeToString() for name in names}


def hf_seeds(folder: str | os.PathLike[str]) -> dict[str, bytes]:
    return {f"hf-{p.stem}": p.read_bytes() for p in sorted(Path(folder).glob("*.onnx"))}


def _flip(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def _truncate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    return data[:rng.randrange(len(data))]


def _splice(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    other = rng.choice(seeds)
    i, j = sorted(rng.randrange(len(data)) for _ in range(2))
    k = rng.randrange(len(other))
    return data[:i] + other[k:k + rng.randint(1, 256)] + data[j:]


def _proto(fn):
    """A mutator on the parsed proto (the bytes re-serialized after)."""
    def mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
        m = onnx.ModelProto()
        m.ParseFromString(data)
        fn(rng, m)
        return m.SerializeToString()
    mutate.__name__ = fn.__name__
    return mutate


def _some_node(rng: random.Random, m: onnx.ModelProto, need_inputs: bool = True) -> onnx.NodeProto:
    nodes = [n for n in m.graph.node if n.input or not need_inputs]
    return rng.choice(nodes)


@_proto
def rename_edge(rng, m):  # a node reads a tensor nothing produces
    n = _some_node(rng, m)
    n.input[rng.randrange(len(n.input))] = f"dangling_{rng.randrange(10**6)}"


@_proto
def drop_node(rng, m):
    del m.graph.node[rng.randrange(len(m.graph.node))]


@_proto
def duplicate_output(rng, m):
    a, b = rng.sample(list(m.graph.node), 2)
    if a.output and b.output:
        b.output[0] = a.output[0]


@_proto
def make_cycle(rng, m):
    i = rng.randrange(len(m.graph.node) - 1)
    j = rng.randrange(i + 1, len(m.graph.node))
    early, late = m.graph.node[i], m.graph.node[j]
    if early.input and late.output:
        early.input[0] = late.output[0]


@_proto
def corrupt_dim(rng, m):
    vi = rng.choice([*m.graph.input, *m.graph.output])
    dims = vi.type.tensor_type.shape.dim
    if dims:
        d = dims[rng.randrange(len(dims))]
        choice = rng.randrange(3)
        if choice == 0:
            d.dim_value = rng.choice([0, 1, 7, 2**31, 2**40])
        elif choice == 1:
            d.dim_param = rng.choice(["", "seq*", "a b", "2*seq", "seq+past", "é", "seq//0"])
        else:
            d.Clear()


@_proto
def corrupt_dtype(rng, m):
    if rng.random() < 0.5 and m.graph.initializer:
        m.graph.initializer[rng.randrange(len(m.graph.initializer))].data_type = rng.randrange(0, 30)
    else:
        vi = rng.choice([*m.graph.input, *m.graph.output])
        vi.type.tensor_type.elem_type = rng.randrange(0, 30)


@_proto
def corrupt_attribute(rng, m):
    nodes = [n for n in m.graph.node if n.attribute]
    if not nodes:
        return
    n = rng.choice(nodes)
    a = n.attribute[rng.randrange(len(n.attribute))]
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice([-100, -1, 0, 1, 99, 2**40])
    elif a.type == onnx.AttributeProto.INTS:
        del a.ints[:]
        a.ints.extend(rng.choice([[], [99], [-7, 3], [0, 0, 0, 0, 0, 0, 0]]))
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([0.0, -1.0, float("nan"), float("inf")])
    else:
        n.attribute.remove(a)


@_proto
def corrupt_opset(rng, m):
    m.opset_import[0].version = rng.choice([0, 1, 12, 99, 10**6])


@_proto
def swap_inputs(rng, m):
    n = _some_node(rng, m)
    if len(n.input) >= 2:
        n.input[0], n.input[1] = n.input[1], n.input[0]
    else:
        n.op_type = rng.choice(["MatMul", "Softmax", "Unknown", "Conv", "Loop"])


MUTATORS = [_flip, _truncate, _splice, rename_edge, drop_node, duplicate_output, make_cycle, corrupt_dim,
            corrupt_dtype, corrupt_attribute, corrupt_opset, swap_inputs]


def mutant(rng: random.Random, seeds: dict[str, bytes]) -> tuple[str, bytes]:
    name = rng.choice(sorted(seeds))
    data = seeds[name]
    applied = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        fn = rng.choice(MUTATORS)
        try:
            data = fn(rng, data, list(seeds.values())) or data
        except Exception:  # noqa: BLE001 - a proto mutator on bytes that no longer parse: use a byte one
            data = _flip(rng, data, [])
            fn = _flip
        applied.append(fn.__name__.strip("_"))
    return f"{name}:{'+'.join(applied)}", data


# ---- random small graphs --------------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Gelu", "Softmax", "Neg", "Sqrt", "Erf"]
BINARY = ["Add", "Mul", "Sub", "Div", "MatMul", "Max", "Pow"]
OTHER = ["Transpose", "ReduceMean", "ReduceSum", "LayerNormalization", "Concat", "Reshape", "Cast", "Where",
         "Unknown"]


def random_graph(rng: random.Random) -> onnx.ModelProto:
    """A small random DAG over x[batch, seq, h] (h random); shapes are consistent most of the time."""
    h = rng.choice([1, 3, 8, 64])
    inits, nodes = [], []
    values = ["x"]
    for i in range(rng.randint(1, 12)):
        op = rng.choice(UNARY + BINARY + OTHER)
        a = rng.choice(values)
        out = f"t{i}"
        ins, attrs = [a], {}
        if op in BINARY:
            if op == "MatMul":
                rows = h if rng.random() < 0.9 else h + 1  # now and then a mismatch
                w = numpy_helper.from_array(np.ones((rows, h), np.float32), f"w{i}")
                inits.append(w)
                ins.append(w.name)
            else:
                ins.append(rng.choice(values))
        elif op == "Transpose":
            attrs["perm"] = rng.choice([[0, 2, 1], [1, 0, 2], [0, 1]])
        elif op in ("ReduceMean", "ReduceSum"):
            attrs["keepdims"] = 1
            axes = numpy_helper.from_array(np.array([rng.choice([-1, 1, 5])], np.int64), f"axes{i}")
            inits.append(axes)
            ins.append(axes.name)
        elif op == "LayerNormalization":
            g = numpy_helper.from_array(np.ones((h,), np.float32), f"g{i}")
            inits.append(g)
            ins.append(g.name)
        elif op == "Concat":
            ins.append(rng.choice(values))
            attrs["axis"] = rng.choice([-1, 0, 1, 3])
        elif op == "Reshape":
            shape = numpy_helper.from_array(np.array(rng.choice([[0, -1], [0, 0, -1], [-1], [2, -1, h]]),
                                                     np.int64), f"shape{i}")
            inits.append(shape)
            ins.append(shape.name)
        elif op == "Cast":
            attrs["to"] = rng.choice([TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.INT64])
        elif op == "Where":
            ins = [rng.choice(values), a, rng.choice(values)]
        nodes.append(helper.make_node(op, ins, [out], name=f"n{i}_{op}", **attrs))
        values.append(out)
    graph = helper.make_graph(nodes, "random", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              ["batch", "seq", h])],
                              [helper.make_tensor_value_info(values[-1], TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", rng.choice([13, 17, 20]))])


# ---- a campaign -----------------------------------------------------------------------------------

def argv_for(rng: random.Random) -> list[str]:
    """CLI options per case: bound dims (most users) or symbolic, and now and then another GPU."""
    argv = ["--json"] if rng.random() < 0.5 else []
    if rng.random() < 0.7:
        argv += ["--dim", "batch=1", "--dim", f"seq={rng.choice([1, 16, 128])}"]
    if rng.random() < 0.2:
        argv += ["--arch", rng.choice(["b200", "a100", "rtx-5090"])]
    return argv


def cases(mutants: int, randoms: int, seed: int, seeds: dict[str, bytes]):
    """Yield (name, model bytes, argv): `mutants` mutants of `seeds`, then `randoms` random graphs."""
    rng = random.Random(seed)
    for i in range(mutants + randoms):
        if i < mutants:
            name, data = mutant(rng, seeds)
        else:
            name, data = f"random-{i - mutants}", random_graph(rng).SerializeToString()
        # a --dim the mutant no longer has is refused; that is an outcome like any other
        yield f"{i}:{name}", data, argv_for(rng)


def campaign(mutants: int, randoms: int, seed: int, seeds: dict[str, bytes], folder: str,
             save: str | None = None, start: int = 0, log: str | None = None):
    """Yield one Outcome per case of cases() from the `start`-th, each run from a file in `folder`; with
    `log`, each case's name is written there before it runs (a crash of the process names its case)."""
    path = os.path.join(folder, "case.onnx")
    for i, (name, data, argv) in enumerate(cases(mutants, randoms, seed, seeds)):
        if i < start:
            continue
        with open(path, "wb") as f:
            f.write(data)
        if log:
            with open(log, "a") as f:
                f.write(f"{name} {' '.join(argv)}\n")
        outcome = run_case(name, path, argv)
        if save and outcome.finding:
            Path(save).mkdir(parents=True, exist_ok=True)
            stem = name.replace(":", "_").replace("+", "_")
            (Path(save) / f"{stem}.onnx").write_bytes(data)
            (Path(save) / f"{stem}.argv").write_text(" ".join(argv))
        yield outcome


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=2000)
    ap.add_argument("--random", type=int, default=200, help="random small graphs after the mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hf", metavar="DIR", help="folder of transformers exports (models/hf_tiny.py)")
    ap.add_argument("--save", metavar="DIR", help="write each finding's model there")
    ap.add_argument("--start", type=int, default=0, help="skip the cases before this one")
    ap.add_argument("--log", metavar="FILE", help="append each case's name before running it")
    args = ap.parse_args()

    seeds = builder_seeds()
    if args.hf:
        seeds.update(hf_seeds(args.hf))
    counts: Counter[str] = Counter()
    findings, slowest = [], None
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for outcome in campaign(args.mutants, args.random, args.seed, seeds, folder, args.save, args.start,
                                args.log):
            counts[outcome.kind] += 1
            if slowest is None or outcome.seconds > slowest.seconds:
                slowest = outcome
            if outcome.finding:
                findings.append(outcome)
                print(f"FINDING {outcome.kind}: {outcome.case}: {outcome.detail}", flush=True)
    total = sum(counts.values())
    print(f"{total} cases ({args.mutants} mutants of {', '.join(sorted(seeds))}; {args.random} random "
          f"graphs) in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if slowest is not None:
        print(f"slowest: {slowest.seconds:.2f} CPU s ({slowest.case}, {slowest.kind})")
    print(f"findings: {len(findings)} (tracebacks {counts['traceback']}, internal errors "
          f"{counts['internal']}, runs over {LIMIT_S} CPU s {counts['timeout']})")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
