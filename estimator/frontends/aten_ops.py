"""The aten op table of the torch-mlir frontend: each torch-dialect op -> ONNX-equivalent Node(s).

Mapping rule: an aten op becomes what ``torch.onnx.export(dynamo=True, opset 23)`` writes for it, so
both routes price the same (e.g. ``linear`` -> MatMul with W^T + Add of the bias, ``silu`` -> Sigmoid +
Mul, ``rsqrt`` -> Sqrt + Reciprocal, ``scaled_dot_product_attention`` -> the opset-23 ``Attention``);
attributes are the ones the cost functions read (axis, perm, is_causal, approximate, strides, pads,
dilations, group, kernel_shape...). Ops that only rearrange metadata (clone, contiguous, detach,
eval-mode dropout, a same-dtype ``_to_copy``) alias their input and make no Node. Factories
(``arange``, ``zeros``, ``full_like``...) become Range / ConstantOfShape with no tensor input, which
the reader marks host-constant. An op with no entry here stays a generic ``aten.*`` Node (uncosted).
Handlers are keyed by ``aten.name`` (overload stripped; ``*_copy`` variants share their base op), or
by the full ``aten.name.overload`` where overloads differ. The registry is `aten_registry`; this module
holds the math families (elementwise, normalization, contraction, attention, reduction); aten_ops_spatial
and aten_ops_movement hold the rest. Handlers see operands through `aten_call.Call`.
"""

from __future__ import annotations

from estimator.frontends.aten_call import Call, UnmappableError
from estimator.frontends.aten_registry import Handler, aten

# ---- elementwise --------------------------------------------------------------------------------

_UNARY = {
    "abs": "Abs", "neg": "Neg", "relu": "Relu", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "reciprocal": "Reciprocal", "tanh": "Tanh", "sigmoid": "Sigmoid", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "erf": "Erf", "ceil": "Ceil", "floor": "Floor", "round": "Round", "sign": "Sign",
    "logical_not": "Not", "bitwise_not": "BitwiseNot", "isnan": "IsNaN", "isinf": "IsInf", "asin": "Asin",
    "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
    "atanh": "Atanh", "softplus": "Softplus", "mish": "Mish", "hardsigmoid": "HardSigmoid",
    "hardswish": "HardSwish", "elu": "Elu", "selu": "Selu", "celu": "Celu",
}
_BINARY = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
    "minimum": "Min", "remainder": "Mod", "fmod": "Mod", "eq": "Equal", "lt": "Less",
    "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual", "logical_and": "And",
    "logical_or": "Or", "logical_xor": "Xor", "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr",
    "bitwise_xor": "BitwiseXor",
}


def _unary(op_type: str) -> Handler:
    def handler(c: Call) -> None:
        c.emit(op_type, [c.t(0)], [c.out()])

    return handler


def _binary(op_type: str) -> Handler:
    """Tensor or scalar operands (a scalar becomes a host constant). NB: add/sub's alpha is ignored
    (the exporter's extra Mul by alpha is one op per element); div's rounding mode likewise."""

    def handler(c: Call) -> None:
        c.emit(op_type, [c.operand(0), c.operand(1)], [c.out()])

    return handler


for _name, _op in _UNARY.items():
    aten(_name)(_unary(_op))
for _name, _op in _BINARY.items():
    aten(_name)(_binary(_op))


@aten("rsub")
def rsub(c: Call) -> None:
    """other - self (alpha ignored)."""
    c.emit("Sub", [c.operand(1), c.operand(0)], [c.out()])


@aten("ne")
def not_equal(c: Call) -> None:
    """Equal then Not, as the exporter writes it."""
    eq = c.temp(c.out(), "eq")
    c.emit("Equal", [c.operand(0), c.operand(1)], [eq], tag="eq")
    c.emit("Not", [eq], [c.out()], tag="not")


@aten("rsqrt")
def rsqrt(c: Call) -> None:
    """Sqrt then Reciprocal (ONNX has no Rsqrt)."""
    root = c.temp(c.out(), "sqrt")
    c.emit("Sqrt", [c.t(0)], [root], tag="sqrt")
    c.emit("Reciprocal", [root], [c.out()], tag="reciprocal")


@aten("silu")
def silu(c: Call) -> None:
    """x * sigmoid(x): Sigmoid then Mul, as the exporter writes it."""
    x = c.t(0)
    sig = c.temp(c.out(), "sigmoid")
    c.emit("Sigmoid", [x], [sig], tag="sigmoid")
    c.emit("Mul", [x, sig], [c.out()], tag="mul")


@aten("square")
def square(c: Call) -> None:
    c.emit("Mul", [c.t(0), c.t(0)], [c.out()])


@aten("gelu")
def gelu(c: Call) -> None:
    """Gelu with approximate = "none" (erf form) or "tanh"."""
    c.emit("Gelu", [c.t(0)], [c.out()], approximate=str(c.arg(1, "none")))


@aten("leaky_relu")
def leaky_relu(c: Call) -> None:
    c.emit("LeakyRelu", [c.t(0)], [c.out()], alpha=float(c.arg(1, 0.01)))


@aten("clamp", "clamp_min", "clamp_max", "hardtanh", "relu6")
def clamp(c: Call) -> None:
    """Clip(x, min, max); clamp_min / clamp_max give one bound, relu6 is Clip(0, 6)."""
    base = c.key.split(".")[1].removesuffix("_copy")
    bounds = {"clamp_min": (1, None), "clamp_max": (None, 1), "relu6": (None, None)}.get(base, (1, 2))
    lo = c.operand(bounds[0]) if bounds[0] is not None else ""
    hi = c.operand(bounds[1]) if bounds[1] is not None else ""
    if base == "relu6":
        lo, hi = c.scalar(0.0, c.first_dtype()), c.scalar(6.0, c.first_dtype())
    c.emit("Clip", [c.t(0), lo, hi], [c.out()])


@aten("where")
def where(c: Call) -> None:
    c.emit("Where", [c.t(0), c.operand(1, c.tensor(c.out()).dtype), c.operand(2, c.tensor(c.out()).dtype)],
           [c.out()])


@aten("masked_fill")
def masked_fill(c: Call) -> None:
    """Where(mask, value, x)."""
    c.emit("Where", [c.t(1), c.operand(2), c.t(0)], [c.out()])


@aten("softmax", "_softmax")
def softmax(c: Call) -> None:
    c.emit("Softmax", [c.t(0)], [c.out()], axis=c.int(1, -1))


@aten("log_softmax", "_log_softmax")
def log_softmax(c: Call) -> None:
    c.emit("LogSoftmax", [c.t(0)], [c.out()], axis=c.int(1, -1))


# ---- normalizations ---------------------------------------------------------------------------

@aten("layer_norm", "native_layer_norm")
def layer_norm(c: Call) -> None:
    """LayerNormalization(x, weight, bias) over the last len(normalized_shape) dims; native_layer_norm's
    mean and rstd outputs become Mean and InvStdDev."""
    axis = -len(c.ints(1))
    outs = [c.out(i) if c.out(i) in c.r.tensors else "" for i in range(len(c.results))]
    c.emit("LayerNormalization", [c.t(0), c.opt(2), c.opt(3)], outs, axis=axis,
           epsilon=float(c.arg(4, 1e-5)))


@aten("rms_norm")
def rms_norm(c: Call) -> None:
    c.emit("RMSNormalization", [c.t(0), c.opt(2)], [c.out()], axis=-len(c.ints(1)),
           epsilon=float(c.arg(3)) if c.arg(3) is not None else None)


@aten("group_norm")
def group_norm(c: Call) -> None:
    c.emit("GroupNormalization", [c.t(0), c.opt(2), c.opt(3)], [c.out()], num_groups=c.int(1),
           epsilon=float(c.arg(4, 1e-5)))


@aten("native_group_norm")
def native_group_norm(c: Call) -> None:
    """(x, weight, bias, N, C, HxW, group, eps) -> (y, mean, rstd): only y is priced."""
    c.emit("GroupNormalization", [c.t(0), c.opt(1), c.opt(2)], [c.out()], num_groups=c.int(6),
           epsilon=float(c.arg(7, 1e-5)))


@aten("batch_norm", "_native_batch_norm_legit_no_training")
def batch_norm(c: Call) -> None:
    """Inference batch norm: BatchNormalization(x, weight, bias, running_mean, running_var)."""
    if c.key.split(".")[1] == "batch_norm" and c.arg(5):
        raise UnmappableError("batch_norm in training mode")
    c.emit("BatchNormalization", [c.t(0), c.opt(1), c.opt(2), c.opt(3), c.opt(4)], [c.out()])


@aten("instance_norm")
def instance_norm(c: Call) -> None:
    c.emit("InstanceNormalization", [c.t(0), c.opt(1), c.opt(2)], [c.out()])


# ---- contractions -------------------------------------------------------------------------------

@aten("mm", "bmm", "matmul", "mv", "dot")
def matmul(c: Call) -> None:
    c.emit("MatMul", [c.t(0), c.t(1)], [c.out()])


@aten("linear")
def linear(c: Call) -> None:
    """x @ W^T (+ b): MatMul with the transposed weight (folded into a weight when W is one), then Add
    of the bias, as the exporter writes it."""
    x, w, bias = c.t(0), c.t(1), c.opt(2)
    wt = w
    if c.rank(w) == 2:
        rows, cols = c.shape(w)
        wt = c.temp(w, "weight_t", shape=(cols, rows))
        c.emit("Transpose", [w], [wt], tag="weight_t", perm=(1, 0))
    if not bias:
        c.emit("MatMul", [x, wt], [c.out()])
        return
    y = c.temp(c.out(), "matmul")
    c.emit("MatMul", [x, wt], [y], tag="matmul")
    c.emit("Add", [y, bias], [c.out()], tag="bias")


@aten("addmm")
def addmm(c: Call) -> None:
    """beta * bias + alpha * (a @ b) on 2-D operands: one Gemm."""
    c.emit("Gemm", [c.t(1), c.t(2), c.t(0)], [c.out()], alpha=float(c.arg(4, 1.0)),
           beta=float(c.arg(3, 1.0)))


@aten("baddbmm", "addbmm")
def baddbmm(c: Call) -> None:
    """bias + a @ b: MatMul then Add (alpha, beta ignored)."""
    y = c.temp(c.out(), "matmul")
    c.emit("MatMul", [c.t(1), c.t(2)], [y], tag="matmul")
    c.emit("Add", [y, c.t(0)], [c.out()], tag="add")


@aten("einsum")
def einsum(c: Call) -> None:
    c.emit("Einsum", c.tensor_list(1), [c.out()], equation=str(c.arg(0)).replace(" ", ""))


@aten("outer")
def outer(c: Call) -> None:
    """a[:, None] * b[None, :]: one broadcast Mul (the exporter's Reshape is free)."""
    c.emit("Mul", [c.t(0), c.t(1)], [c.out()])


@aten("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu")
def sdpa(c: Call) -> None:
    """The opset-23 Attention(Q, K, V, attn_mask) on [B, H, S, d] operands, is_causal and scale carried
    over; grouped-query K/V keep their kv heads. The CPU flash variant's logsumexp output is dropped.
    NB: dropout_p is ignored (inference)."""
    if c.key.split(".")[1] == "scaled_dot_product_attention":  # (q, k, v, mask, dropout, causal, scale)
        mask, causal, scale = c.opt(3), c.arg(5, False), c.arg(6)
    else:  # (q, k, v, dropout_p, is_causal, attn_mask, scale)
        mask, causal, scale = c.opt(5), c.arg(4, False), c.arg(6)
    outs = [c.out()] + [""] * (len(c.results) - 1)
    c.emit("Attention", [c.t(0), c.t(1), c.t(2), mask], outs, is_causal=int(bool(causal)),
           scale=float(scale) if scale is not None else None)


# ---- reductions ---------------------------------------------------------------------------------

_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
           "prod": "ReduceProd", "all": "ReduceMin", "any": "ReduceMax", "logsumexp": "ReduceLogSumExp"}


def _axes(c: Call, i: int, x: str) -> tuple[int, ...] | None:
    v = c.arg(i)
    if v is None or v == []:
        return None
    return tuple(c.axis(d, x) for d in (v if isinstance(v, list) else [v]))


def _reduce(op_type: str) -> Handler:
    """(x, dims, keepdim, ...), or (x[, dtype]) for the overload-less full reductions sum, mean, prod,
    all, any. NB: all/any price as ReduceMin/ReduceMax."""

    def handler(c: Call) -> None:
        x = c.t(0)
        full = c.key.count(".") == 1 and c.key.split(".")[1] in ("sum", "mean", "prod", "all", "any")
        axes = None if full else _axes(c, 1, x)
        keep = 0 if full else int(bool(c.arg(2)))
        c.emit(op_type, [x], [c.out()], axes=axes, keepdims=keep)

    return handler


for _name, _op in _REDUCE.items():
    aten(_name)(_reduce(_op))


@aten("max", "min")
def max_min(c: Call) -> None:
    """Full max/min: ReduceMax/Min; max.dim/min.dim: ReduceMax/Min for values + ArgMax/Min for indices;
    max.other (elementwise): Max/Min."""
    kind = "Max" if c.key.split(".")[1] == "max" else "Min"
    if len(c.args) == 2 and c.is_tensor(1):
        c.emit(kind, [c.t(0), c.t(1)], [c.out()])
        return
    if len(c.results) == 1:
        c.emit(f"Reduce{kind}", [c.t(0)], [c.out()], keepdims=0)
        return
    axis, keep = c.axis(c.arg(1), c.t(0)), int(bool(c.arg(2)))
    c.emit(f"Reduce{kind}", [c.t(0)], [c.out(0)], tag="values", axes=(axis,), keepdims=keep)
    c.emit(f"Arg{kind}", [c.t(0)], [c.out(1)], tag="indices", axis=axis, keepdims=keep)


@aten("argmax", "argmin")
def argmax(c: Call) -> None:
    axis = c.axis(c.arg(1, 0), c.t(0))
    c.emit("ArgMax" if "argmax" in c.key else "ArgMin", [c.t(0)], [c.out()], axis=axis,
           keepdims=int(bool(c.arg(2))))


@aten("linalg_vector_norm", "norm")
def vector_norm(c: Call) -> None:
    """ord 2 -> ReduceL2, ord 1 -> ReduceL1; other orders are not mapped."""
    order = float(c.arg(1, 2.0))
    if order not in (1.0, 2.0):
        raise UnmappableError(f"vector norm of order {order}")
    x = c.t(0)
    c.emit("ReduceL2" if order == 2.0 else "ReduceL1", [x], [c.out()], axes=_axes(c, 2, x),
           keepdims=int(bool(c.arg(3))))


@aten("var", "var_mean", "std", "std_mean")
def variance(c: Call) -> None:
    """mean = ReduceMean(x); d = x - mean; var = ReduceMean(d * d) (+ Sqrt for std); var_mean also
    returns the mean. NB: the Bessel correction (an n / (n - 1) scale per row) is ignored."""
    x = c.t(0)
    axes = _axes(c, 1, x)
    keep = int(bool(c.arg(3)))
    base = c.key.split(".")[1]
    std = base.startswith("std")
    mean = c.out(1) if base.endswith("_mean") else c.temp(c.out(), "mean")
    diff, sq = c.temp(x, "diff"), c.temp(x, "square")
    c.emit("ReduceMean", [x], [mean], tag="mean", axes=axes, keepdims=keep)
    c.emit("Sub", [x, mean], [diff], tag="diff")
    c.emit("Mul", [diff, diff], [sq], tag="square")
    var = c.temp(c.out(), "var") if std else c.out()
    c.emit("ReduceMean", [sq], [var], tag="var", axes=axes, keepdims=keep)
    if std:
        c.emit("Sqrt", [var], [c.out()], tag="sqrt")
