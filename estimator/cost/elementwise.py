"""Elementwise ops: the unary and binary groups of `estimator.ops`, plus Where, Cast and CastLike.

Counting rule for every function here: numel(output) x a per-element instruction count, split between
the CUDA cores (`alu_unit(dtype)`: adds, muls, FMAs, compares, selects, each counted as 1 op) and the
special-function unit (`(SFU, "fp32")`: MUFU ex2, lg2, rcp, rsqrt, sqrt, sin, cos, tanh, each 1 op).
DRAM bytes: every input read once at its own size and every output written once (`io_bytes`).

NB: counts follow the fast-math (approximate) sequences: exp(x) = ex2(x * log2e) is 1 FMA + 1 MUFU,
log(x) = lg2(x) * ln2 is 1 MUFU + 1 FMA; IEEE-accurate libm versions add a few FMAs of range reduction
and Newton refinement. NB: fp64 transcendentals are software sequences on the fp64 pipe, still priced
as SFU ops here. NB: a broadcast input is read once at its own size; its re-reads hit L2/L1.
"""

from __future__ import annotations

from estimator.cost.registry import SFU, CostError, OpView, Work, alu_unit, io_bytes, register, traffic
from estimator.ir import Expr

MS = "com.microsoft"

# (CUDA-core ops, SFU ops) per output element, for ops whose count depends on nothing but the op type.
_PER_ELEMENT: dict[str, tuple[int, int]] = {
    # -- simple unary --
    "Abs": (1, 0), "Neg": (1, 0), "Relu": (1, 0), "Ceil": (1, 0), "Floor": (1, 0), "Round": (1, 0),
    "Not": (1, 0), "BitwiseNot": (1, 0),
    "IsNaN": (1, 0),  # x != x
    "IsInf": (2, 0),  # abs, compare
    "Sign": (2, 0),  # two compare-selects
    "Clip": (2, 0),  # max, min (NB: counted even when a bound is absent)
    "LeakyRelu": (2, 0), "PRelu": (2, 0), "ThresholdedRelu": (2, 0),  # mul or compare, select
    "Shrink": (3, 0),  # compare, add/sub, select
    "HardSigmoid": (3, 0),  # fma, max, min
    "HardSwish": (4, 0),  # fma, max, min, mul
    # -- transcendental unary --
    "Exp": (1, 1), "Log": (1, 1),  # scale by log2e / ln2, ex2 / lg2
    "Sqrt": (0, 1), "Reciprocal": (0, 1), "Tanh": (0, 1),  # one MUFU each (sqrt.approx, rcp, tanh.approx)
    "Sigmoid": (2, 2),  # 1 / (1 + exp(-x)): fma-scale, add; ex2, rcp
    "Sin": (2, 1), "Cos": (2, 1),  # range reduction (2), MUFU sin/cos
    "Tan": (3, 3),  # sin, cos (shared range reduction), rcp, mul
    # NB: erf, asin, acos, atan are polynomial approximations: ~8-10 FMAs plus one MUFU (exp, sqrt or rcp).
    "Erf": (8, 1),
    "Asin": (10, 1), "Acos": (10, 1), "Atan": (10, 1),
    "Sinh": (3, 2), "Cosh": (3, 2),  # exp(x), rcp for exp(-x), add/sub, scale by 0.5
    "Asinh": (3, 2), "Acosh": (3, 2),  # log(x + sqrt(x*x +- 1)): fma, add, lg2-scale; sqrt, lg2
    "Atanh": (4, 2),  # 0.5 * log((1 + x) / (1 - x)): add, sub, mul, scale; rcp, lg2
    "Softplus": (3, 2),  # log(1 + exp(x)): exp-scale, add, log-scale; ex2, lg2
    "Softsign": (3, 1),  # x / (1 + |x|): abs, add, mul; rcp
    "Elu": (4, 1),  # exp (1 + 1), sub 1, mul alpha, select
    "Selu": (5, 1),  # Elu + mul gamma
    "Celu": (6, 1),  # x / alpha, exp (1 + 1), sub 1, mul alpha, max/min, add
    "Mish": (4, 3),  # x * tanh(softplus(x)): softplus (3 + 2), tanh, mul
    # -- binary --
    "Add": (1, 0), "Sub": (1, 0), "Mul": (1, 0),
    "Div": (1, 1),  # NB: rcp + mul; IEEE fp32 division is a longer FMA sequence, integer division emulated
    "Mod": (3, 1),  # NB: fmod as rcp, mul, trunc, fma; integer Mod is a longer emulated sequence
    "Equal": (1, 0), "Less": (1, 0), "LessOrEqual": (1, 0), "Greater": (1, 0), "GreaterOrEqual": (1, 0),
    "And": (1, 0), "Or": (1, 0), "Xor": (1, 0),
    "BitShift": (1, 0), "BitwiseAnd": (1, 0), "BitwiseOr": (1, 0), "BitwiseXor": (1, 0),
}

# onnxruntime contrib ops (com.microsoft), same table shape.
_MS_PER_ELEMENT: dict[str, tuple[int, int]] = {
    "QuickGelu": (4, 2),  # x * sigmoid(alpha * x): mul, sigmoid (2 + 2), mul
    "BiasGelu": (13, 1),  # add bias, then erf-form Gelu (12 + 1)
}

# Gelu by its `approximate` attribute (ONNX opset 20; com.microsoft Gelu is always the erf form).
_GELU: dict[str, tuple[int, int]] = {
    "none": (12, 1),  # 0.5 * x * (1 + erf(x / sqrt2)): scale, erf (8 + 1), add, mul, mul
    "tanh": (7, 1),  # 0.5 * x * (1 + tanh(c * (x + 0.044715 x^3))): x^3 (2), fma, scale, tanh, add, 2 muls
}

_VARIADIC = ("Max", "Min", "Sum", "Mean")


# ---- helpers shared with reduction.py and movement.py --------------------------------------------

def alu_sfu(dtype: str, cuda: Expr | int, sfu: Expr | int = 0) -> dict[tuple[str, str], Expr | int]:
    """A flops mapping: `cuda` ops on the CUDA-core unit for `dtype`, `sfu` ops on the SFU."""
    return {alu_unit(dtype): cuda, (SFU, "fp32"): sfu}


def checked_io_bytes(op: OpView) -> tuple[Expr, Expr]:
    """`io_bytes`, but every present input and output must have a shape (CostError otherwise), so an
    unshaped tensor never counts as a silent zero."""
    for i, t in enumerate(op.inputs):
        if t is not None:
            op.input(i)
    for i, t in enumerate(op.outputs):
        if t is not None:
            op.output(i)
    return io_bytes(op)


def per_element_work(op: OpView, cuda: int, sfu: int, dtype: str) -> Work:
    """numel(Y) x (cuda, sfu) ops; bytes: every input read once, every output written once."""
    n = op.output(0).numel
    read, written = checked_io_bytes(op)
    return Work(alu_sfu(dtype, n * cuda, n * sfu), read, written)


# ---- registered cost functions -------------------------------------------------------------------

@register(*sorted(_PER_ELEMENT))
def elementwise(op: OpView) -> Work:
    """numel(Y) x the (CUDA, SFU) counts of `_PER_ELEMENT`, math in input 0's dtype (for a comparison
    that is the operands' dtype, not the bool output's)."""
    cuda, sfu = _PER_ELEMENT[op.op_type]
    return per_element_work(op, cuda, sfu, op.input(0).dtype)


@register(*sorted(_MS_PER_ELEMENT), domain=MS)
def elementwise_ms(op: OpView) -> Work:
    """numel(Y) x the (CUDA, SFU) counts of `_MS_PER_ELEMENT` (onnxruntime contrib activations)."""
    cuda, sfu = _MS_PER_ELEMENT[op.op_type]
    return per_element_work(op, cuda, sfu, op.input(0).dtype)


@register("Gelu")
@register("Gelu", domain=MS)
def gelu(op: OpView) -> Work:
    """numel(Y) x (12 CUDA, 1 SFU) for the erf form, (7 CUDA, 1 SFU) for approximate="tanh"."""
    mode = op.attr("approximate", "none")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in _GELU:
        raise CostError(f"Gelu: unknown approximate={mode!r}")
    cuda, sfu = _GELU[mode]
    return per_element_work(op, cuda, sfu, op.input(0).dtype)


@register("FastGelu", domain=MS)
def fast_gelu(op: OpView) -> Work:
    """The tanh-form Gelu, (7 CUDA, 1 SFU) per element, plus 1 CUDA add when the optional bias is
    present."""
    cuda, sfu = _GELU["tanh"]
    return per_element_work(op, cuda + int(op.has_input(1)), sfu, op.input(0).dtype)


@register("Pow")
def pow_(op: OpView) -> Work:
    """exp2(y * log2(x)): 1 CUDA mul + 2 SFU (lg2, ex2) per element. A constant scalar exponent is
    priced as x * x, 1 CUDA op per element.

    NB: the exponent's value is not visible to cost functions; a constant scalar exponent is assumed to
    be a small integer such as 2 (the RMSNorm and Gelu decompositions' x^2 and x^3). Pow(x, 0.5) is
    then under-priced by one sqrt."""
    y = op.input(1)
    const_scalar = y.is_const and y.numel == 1
    cuda, sfu = (1, 0) if const_scalar else (1, 2)
    return per_element_work(op, cuda, sfu, op.input(0).dtype)


@register(*_VARIADIC)
def variadic(op: OpView) -> Work:
    """Variadic Max/Min/Sum/Mean over n broadcast inputs: (n - 1) CUDA ops per output element (Mean
    adds one mul by 1/n). One input is a copy: 0 FLOPs, bytes only."""
    n = sum(1 for t in op.inputs if t is not None)
    if n == 0:
        raise CostError(f"{op.op_type}: no inputs")
    cuda = n - 1 + (1 if op.op_type == "Mean" and n > 1 else 0)
    return per_element_work(op, cuda, 0, op.input(0).dtype)


@register("Where")
def where(op: OpView) -> Work:
    """1 select per output element on the CUDA cores, in X's dtype; bytes: condition, X, Y read at their
    own (possibly broadcast) sizes, output written."""
    return per_element_work(op, 1, 0, op.input(1).dtype)


@register("Cast")
def cast(op: OpView) -> Work:
    """0 FLOPs (NB: the conversion instruction is not counted); bytes: input read in its dtype, output
    written in the target dtype."""
    return Work({}, traffic(op.input(0)), traffic(op.output(0)))


@register("CastLike")
def cast_like(op: OpView) -> Work:
    """Like Cast; the second input supplies only a dtype, so its data is not read."""
    return Work({}, traffic(op.input(0)), traffic(op.output(0)))
