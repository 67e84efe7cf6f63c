"""Data movement: gathers, scatters, concatenation, slicing, padding, transposes and friends.

Counting rule: 0 FLOPs unless a function says otherwise. DRAM bytes: the data a kernel must touch,
i.e. inputs read once and outputs written once, except where a kernel provably reads only part of an
input (Gather and Slice read only what they output). Host-side int inputs (shapes, starts/ends, pads,
repeats, K) travel as kernel arguments and are not counted.

NB: scattered accesses are counted as useful bytes; real kernels move whole 32-byte sectors, so a
gather of narrow rows costs more than counted here.
"""

from __future__ import annotations

import sympy

from estimator.cost.elementwise import alu_sfu, checked_io_bytes
from estimator.cost.registry import FREE, CostError, OpView, Work, register, traffic
from estimator.dtypes import itemsize
from estimator.ir import Expr


def _copy(op: OpView, read: Expr) -> Work:
    """0 FLOPs; `read` bytes read and output 0 written once."""
    return Work({}, read, traffic(op.output(0)))


def _gathered(op: OpView) -> Expr:
    """Bytes of the data rows a gather pulls in: numel(Y) elements of the data's dtype."""
    return op.output(0).numel * itemsize(op.input(0).dtype)


@register("Gather", "GatherElements", "GatherND")
def gather(op: OpView) -> Work:
    """Reads the indices and only the gathered data (numel(Y) elements, NOT the whole table: an
    embedding lookup touches one row per token); writes Y.

    NB: a row gathered twice is counted twice (the second read likely hits L2)."""
    return _copy(op, traffic(op.input(1)) + _gathered(op))


@register("ScatterND", "ScatterElements")
def scatter(op: OpView) -> Work:
    """Out of place: reads data, indices and updates, writes the full output. With reduction="add",
    "mul", "max" or "min" 1 CUDA op per update element.

    NB: an in-place scatter (what runtimes do when data is dead afterwards) writes only the updates;
    the out-of-place copy is counted here."""
    read, written = checked_io_bytes(op)
    reduction = op.attr("reduction", "none")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    updates = op.input(2)
    ops = updates.numel if reduction != "none" else 0
    return Work(alu_sfu(op.input(0).dtype, ops), read, written)


@register("Concat", "DepthToSpace", "SpaceToDepth", "ReverseSequence", "Compress", "NonZero")
def copy_all(op: OpView) -> Work:
    """A pure copy: every input read once, every output written once (Compress and NonZero outputs
    have the data-dependent size shape inference gave them; NonZero writes int64 coordinates)."""
    op.output(0)  # required: a missing output is not a zero-byte write
    read, written = checked_io_bytes(op)
    return Work({}, read, written)


@register("Split")
def split(op: OpView) -> Work:
    """Reads the input once, writes every output; the `split` sizes input is host-side."""
    outs = [op.output(i) for i, t in enumerate(op.outputs) if t is not None]
    return Work({}, traffic(op.input(0)), sympy.Add(*(traffic(t) for t in outs)))


@register("Slice")
def slice_(op: OpView) -> Work:
    """Reads only the sliced elements (numel(Y) of the data's dtype), writes Y.

    NB: a strided slice (step > 1) still pulls whole sectors; counted as the useful bytes."""
    return _copy(op, op.output(0).nbytes)


@register("Pad", "Expand", "Tile", "Trilu")
def read_input_write_output(op: OpView) -> Work:
    """Reads input 0 once, writes Y (pads, shape, repeats or k are host-side).

    NB: Expand and Tile re-read the input for every copy; the re-reads hit L2. Trilu reads the whole
    input although the zeroed triangle need not be read."""
    return _copy(op, traffic(op.input(0)))


@register("Transpose")
def transpose(op: OpView) -> Work:
    """A real copy: X read, Y written. A permutation that only moves dims statically known to be 1
    keeps the memory order, so it is a view: 0 bytes (NB: onnxruntime's transpose optimizer rewrites
    those to Reshape; a runtime that launches them anyway does a plain memcpy)."""
    x = op.input(0)
    perm = op.attr("perm") or tuple(reversed(range(len(x.shape))))
    if len(perm) != len(x.shape):
        raise CostError(f"Transpose: perm {tuple(perm)} does not match rank {len(x.shape)}")
    moved = [p for p in perm if x.shape[p] != 1]
    if moved == sorted(moved):
        return FREE
    return _copy(op, traffic(x))


@register("TopK")
def topk(op: OpView) -> Work:
    """Reads X, writes Values and Indices. ~numel(X) x log2(k) compares on the CUDA cores (at least 1
    per element), with k read from the Values output along `axis`.

    NB: the compare count is that of a per-row heap/bitonic selection; radix-select kernels differ."""
    x, values = op.input(0), op.output(0)
    if not x.shape:
        raise CostError("TopK: input of rank 0")
    axis = op.attr("axis", -1) % len(x.shape)
    k = values.shape[axis]
    compares = x.numel * sympy.Max(1, sympy.log(k, 2))
    written = sympy.Add(*(traffic(op.output(i)) for i, t in enumerate(op.outputs) if t is not None))
    return Work(alu_sfu(x.dtype, compares), traffic(x), written)


@register("OneHot")
def one_hot(op: OpView) -> Work:
    """Reads the indices and the 2-element values, writes the one-hot output (depth is host-side).
    NB: the per-output-element compare is not counted."""
    read = traffic(op.input(0)) + traffic(op.input(2))
    return _copy(op, read)
