"""Einsum: an equation over labelled dims, priced from the sizes the input shapes give each letter.

Counting rule. Every letter (and every dim an ellipsis stands for) gets one size from the inputs.
- Two or more operands: a left-to-right chain of pairwise steps. A step that contracts (some letter of
  the pair is needed neither by the output nor by a later operand) is a matmul-like product: 2 FLOPs
  (a multiply-add) per point of the step's full index space, i.e. 2 * the product of the sizes of all
  its distinct letters, on `matmul_unit(dtype)`. A step that contracts nothing (outer or elementwise
  product) is 1 CUDA-core multiply per point, on `alu_unit(dtype)`.
- One operand: a permutation is 0 ops (a copy); a sum over a letter (reduction, trace) is 1 CUDA-core
  add per input element; a diagonal kept in the output (`ii->i`) is a gather, 0 ops.
DRAM bytes: every input read once and the output written once; a chain of 3+ operands also writes and
reads back each intermediate once.

NB: a letter that appears in only one operand of a step and nowhere later is counted inside the step's
product instead of being summed out first (what a contraction-path optimiser would do); real runtimes
(opt_einsum, onnxruntime) also choose a cheaper contraction order than left-to-right.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from estimator.cost.registry import CostError, OpView, Work, alu_unit, io_bytes, matmul_unit, register
from estimator.dtypes import itemsize
from estimator.ir import Expr

ONE = sympy.Integer(1)


@dataclass(frozen=True)
class Equation:
    """A parsed equation: one label tuple per operand and the output's labels. Ellipsis dims become
    labels "...0", "...1", ... counted from the right, so operands of different ranks broadcast."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: dict[str, Expr]


def _split_term(term: str, what: str) -> tuple[str, str, bool]:
    """(letters before '...', letters after, has ellipsis) of one term."""
    if term.count("...") > 1:
        raise CostError(f"Einsum: {what} {term!r} has more than one ellipsis")
    before, dots, after = term.partition("...")
    for ch in before + after:
        if not ch.isalpha():
            raise CostError(f"Einsum: {what} {term!r} has an invalid label {ch!r}")
    return before, after, bool(dots)


def _labels(term: str, ellipsis_rank: int, what: str) -> tuple[str, ...]:
    before, after, dots = _split_term(term, what)
    middle = tuple(f"...{i}" for i in reversed(range(ellipsis_rank))) if dots else ()
    return (*before, *middle, *after)


def _size(sizes: dict[str, Expr], label: str, d: Expr) -> None:
    """Record `d` as the size of `label`; a size-1 dim broadcasts against a bigger one.
    NB: two different symbolic sizes for one letter are assumed equal (the first is kept)."""
    old = sizes.get(label)
    if old is None or old == 1:
        sizes[label] = d


def parse(equation: str, shapes: list[tuple[Expr, ...]]) -> Equation:
    """Parse `equation` against the operand shapes (explicit `->` or implicit output)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise CostError(f"Einsum: equation {equation!r} has {len(terms)} operands, node has {len(shapes)}")
    inputs, sizes, ellipsis = [], {}, 0
    for i, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        before, after, dots = _split_term(term, f"operand {i}")
        rank = len(before) + len(after)
        if len(shape) < rank or (len(shape) != rank and not dots):
            raise CostError(f"Einsum: operand {i} has rank {len(shape)}, term {term!r} needs {rank}")
        labels = _labels(term, len(shape) - rank, f"operand {i}")
        ellipsis = max(ellipsis, len(shape) - rank if dots else 0)
        for label, d in zip(labels, shape, strict=True):
            _size(sizes, label, d)
        inputs.append(labels)
    if arrow:
        output = _labels(rhs, ellipsis, "output")
    else:  # implicit: letters seen exactly once, sorted by ASCII, after the ellipsis dims
        letters = [ch for term in terms for ch in term.replace("...", "")]
        once = sorted(ch for ch in set(letters) if letters.count(ch) == 1)
        output = (*(f"...{i}" for i in reversed(range(ellipsis))), *once)
    unknown = [label for label in output if label not in sizes]
    if unknown or len(set(output)) != len(output):
        raise CostError(f"Einsum: output of {equation!r} has unknown or repeated labels")
    return Equation(tuple(inputs), output, sizes)


def _prod(eq: Equation, labels: set[str] | tuple[str, ...]) -> Expr:
    return sympy.Mul(*(eq.sizes[label] for label in labels)) if labels else ONE


def _single(eq: Equation, dtype: str) -> dict[tuple[str, str], Expr]:
    """One operand: 1 add per input element when a letter is summed away, else nothing."""
    labels = eq.inputs[0]
    if set(labels) - set(eq.output):
        return {alu_unit(dtype): _prod(eq, labels)}  # numel(input): each element is added once
    return {}


def _chain(eq: Equation, dtype: str, size: sympy.Rational) -> tuple[dict[tuple[str, str], Expr], Expr]:
    """Left-to-right pairwise steps: (flops, bytes of the intermediates, each written once and read
    back once)."""
    flops: dict[tuple[str, str], Expr] = {}
    acc = set(eq.inputs[0])
    extra = sympy.Integer(0)
    n = len(eq.inputs)
    for i in range(1, n):
        step = acc | set(eq.inputs[i])
        later = set(eq.output).union(*(set(t) for t in eq.inputs[i + 1:]))
        kept = step & later
        points = _prod(eq, step)
        unit, ops = (matmul_unit(dtype), 2 * points) if step - kept else (alu_unit(dtype), points)
        flops[unit] = flops.get(unit, 0) + ops
        if i < n - 1:  # the intermediate is written, then read back by the next step
            extra += _prod(eq, kept) * size
        acc = kept
    return flops, extra


@register("Einsum")
def einsum(op: OpView) -> Work:
    """See the module docstring: pairwise steps at 2 FLOPs per point of the step's index space on
    `matmul_unit` when they contract, 1 CUDA op per point when they do not; one operand is a copy
    (0 ops) or a reduction (numel(input) adds). Bytes: inputs and output once, plus each intermediate
    of a 3+ operand chain written and read once."""
    equation = op.attr("equation")
    if not isinstance(equation, str) or not equation:
        raise CostError("Einsum: the equation attribute is missing")
    n = len(op.inputs)
    if n == 0:
        raise CostError("Einsum: no operands")
    ins = [op.input(i) for i in range(n)]
    op.output(0)
    eq = parse(equation, [t.shape for t in ins])
    dtype = ins[0].dtype
    read, written = io_bytes(op)
    if n == 1:
        return Work(_single(eq, dtype), read, written)
    flops, extra = _chain(eq, dtype, itemsize(dtype))
    return Work(flops, read + extra, written + extra)
