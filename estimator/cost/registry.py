"""The cost registry: one small function per op kind, registered by decorator (the only registry).

A cost function sees an `OpView` (shapes, dtypes, attributes; never weight bytes) and returns a `Work`:
operations per execution unit and DRAM bytes read and written, as sympy expressions. Each function's
docstring states its counting rule; approximations are marked ``NB:``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import sympy

from estimator.ir import Expr, Node, Tensor
from estimator.symmath import sym_sum

ZERO = sympy.Integer(0)

# Execution units. Work keys are (unit, dtype):
#   ("tensor", "bf16")  tensor-core FLOPs (a multiply-add is 2)
#   ("cuda", "fp32")    CUDA-core FLOPs of contractions that run there (fp32/fp64 matmul; FMA = 2)
#   ("alu", "fp32")     CUDA-core instructions of elementwise/reduction math (add, mul, FMA, compare,
#                       select: 1 each), issued at one per lane per clock = half the FMA-counted peak
#   ("sfu", "fp32")     special-function-unit instructions (ex2, lg2, rsqrt, rcp, sin, cos, tanh)
TENSOR, CUDA, ALU, SFU = "tensor", "cuda", "alu", "sfu"


class CostError(ValueError):
    """A cost function cannot price this node (missing shape, unsupported attribute...); the node is
    then listed as uncosted with this message as the reason."""


@dataclass(frozen=True)
class Comm:
    """A collective's message (estimator/cost/collective.py): the op type (AllReduce, AllGather,
    ReduceScatter, AllToAll, Send), its bytes as nccl-tests count them (the total buffer), the GPUs in
    the group and the element dtype. A Work with a Comm is priced by the collective model."""

    op: str
    nbytes: Expr
    group: int
    dtype: str


@dataclass(frozen=True)
class Work:
    """What a kernel must do: flops per (unit, dtype) and DRAM bytes. All sympy expressions; a
    collective also carries its message (`comm`)."""

    flops: Mapping[tuple[str, str], Expr] = field(default_factory=lambda: MappingProxyType({}))
    bytes_read: Expr = ZERO
    bytes_written: Expr = ZERO
    comm: Comm | None = None

    def __post_init__(self) -> None:
        clean = {k: sympy.sympify(v) for k, v in dict(self.flops).items() if sympy.sympify(v) != 0}
        object.__setattr__(self, "flops", MappingProxyType(clean))
        object.__setattr__(self, "bytes_read", sympy.sympify(self.bytes_read))
        object.__setattr__(self, "bytes_written", sympy.sympify(self.bytes_written))

    @cached_property  # a frozen value: each sum built once (flat over many unknown dims: symmath)
    def dram_bytes(self) -> Expr:
        return sym_sum((self.bytes_read, self.bytes_written))

    @cached_property
    def total_flops(self) -> Expr:
        return sym_sum(self.flops.values())

    def __add__(self, other: Work) -> Work:
        flops = dict(self.flops)
        for k, v in other.flops.items():
            flops[k] = flops.get(k, ZERO) + v
        return Work(flops, self.bytes_read + other.bytes_read, self.bytes_written + other.bytes_written,
                    self.comm or other.comm)


FREE = Work()  # a view or host-side op: no kernel, no traffic


@dataclass(frozen=True)
class OpView:
    """What a cost function may look at: the node, its input/output Tensors (None where an optional
    input is omitted) and the opset version of its domain."""

    node: Node
    inputs: tuple[Tensor | None, ...]
    outputs: tuple[Tensor | None, ...]
    opset: int

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        return self.node.attrs.get(name, default)

    def _shaped(self, tensors: tuple[Tensor | None, ...], i: int, what: str) -> Tensor:
        t = tensors[i] if i < len(tensors) else None
        if t is None:
            raise CostError(f"{self.op_type}: {what} {i} is missing")
        if t.shape is None:
            raise CostError(f"{self.op_type}: {what} {t.name!r} has no shape")
        return t

    def input(self, i: int) -> Tensor:
        """Input i with a known shape; CostError if it is absent or unshaped."""
        return self._shaped(self.inputs, i, "input")

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def output(self, i: int = 0) -> Tensor:
        """Output i with a known shape; CostError if it is absent or unshaped."""
        return self._shaped(self.outputs, i, "output")


CostFn = Callable[[OpView], Work]
_REGISTRY: dict[tuple[str, str], CostFn] = {}


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def register(*op_types: str, domain: str = "") -> Callable[[CostFn], CostFn]:
    """Register `fn` as the cost of each op type in `domain`; registering an op twice is an error."""

    def deco(fn: CostFn) -> CostFn:
        for op in op_types:
            key = (_norm_domain(domain), op)
            if key in _REGISTRY:
                raise RuntimeError(f"cost of {op!r} (domain {domain!r}) registered twice: "
                                   f"{_REGISTRY[key].__module__} and {fn.__module__}")
            _REGISTRY[key] = fn
        return fn

    return deco


def lookup(op_type: str, domain: str = "") -> CostFn | None:
    return _REGISTRY.get((_norm_domain(domain), op_type))


def registered() -> dict[tuple[str, str], CostFn]:
    return dict(_REGISTRY)


# ---- helpers shared by cost families -------------------------------------------------------------

def traffic(t: Tensor | None) -> Expr:
    """DRAM bytes of reading or writing `t` once. Host-known values (shape vectors, axes, scalars
    folded at build time) travel as kernel arguments, not DRAM traffic; weights do count."""
    if t is None or (t.is_const and not t.is_weight):
        return ZERO
    if t.shape is None:  # never a silent zero: the node goes to `uncosted` with this reason
        raise CostError(f"tensor {t.name!r} has no shape")
    return t.nbytes


def read_bytes(op: OpView) -> Expr:
    """Every present input read once."""
    return sympy.Add(*(traffic(t) for t in op.inputs))


def io_bytes(op: OpView) -> tuple[Expr, Expr]:
    """(read, written): every present input read once and every output written once."""
    return read_bytes(op), sympy.Add(*(traffic(t) for t in op.outputs))


def alu_unit(dtype: str) -> tuple[str, str]:
    """The CUDA-core instruction unit elementwise math in `dtype` runs on (counts are instructions).

    NB: half and 8-bit floats are upcast to fp32 for the math in practice, so everything but fp64 is
    priced at the fp32 CUDA-core rate."""
    return (ALU, "fp64") if dtype == "fp64" else (ALU, "fp32")


def matmul_unit(dtype: str) -> tuple[str, str]:
    """The unit a contraction in `dtype` runs on: tensor cores, except fp32/fp64 on CUDA cores
    (fp32 goes to tensor cores only when the precision is tf32)."""
    if dtype in ("fp32", "fp64"):
        return (CUDA, dtype)
    return (TENSOR, dtype)


def as_int(expr: Expr, what: str) -> int:
    """A static integer (attribute-like) or CostError."""
    try:
        return int(expr)
    except TypeError:
        raise CostError(f"{what} must be static, got {expr}") from None
