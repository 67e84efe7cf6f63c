"""Op kinds grouped in plain sets; code asks about the group, not about scattered strings.

Names are bare op_types; a group may hold contrib ops of onnxruntime's com.microsoft domain (FastGelu,
SkipLayerNormalization...) beside the standard ones, since only the kind is looked up here."""

from __future__ import annotations

# Elementwise ops whose math is one or a few FMA-class instructions per element.
UNARY_SIMPLE = frozenset({
    "Abs", "Neg", "Relu", "LeakyRelu", "PRelu", "Ceil", "Floor", "Round", "Sign", "Not", "Clip",
    "IsNaN", "IsInf", "Shrink", "ThresholdedRelu", "HardSigmoid", "HardSwish", "BitwiseNot",
})
# Elementwise ops that use the special-function unit (MUFU: ex2, lg2, rsqrt, rcp, sin, cos, tanh).
UNARY_TRANSCENDENTAL = frozenset({
    "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Tanh", "Sigmoid", "Sin", "Cos", "Tan", "Asin", "Acos",
    "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Selu", "Celu",
    "Gelu", "Mish", "FastGelu", "QuickGelu", "BiasGelu",
})
BINARY = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Mod", "Equal", "Less", "LessOrEqual",
    "Greater", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})
ELEMENTWISE = UNARY_SIMPLE | UNARY_TRANSCENDENTAL | BINARY | frozenset({"Where", "Cast", "CastLike"})

REDUCTION = frozenset({
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
})
NORMALIZATION = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization", "SkipLayerNormalization",
    "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "BatchNormalization",
    "InstanceNormalization", "GroupNormalization", "LpNormalization",
})
CONTRACTION = frozenset({
    "MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "FusedMatMul", "Einsum",
})
CONVOLUTION = frozenset({"Conv", "ConvTranspose", "QLinearConv", "ConvInteger"})
POOLING = frozenset({
    "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool",
})
ATTENTION = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
ROTARY = frozenset({"RotaryEmbedding"})
MOE = frozenset({"MoE", "QMoE"})  # onnxruntime's fused mixture-of-experts (grouped GEMMs)
MOVEMENT = frozenset({
    "Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Concat", "Split", "Slice",
    "Pad", "Transpose", "Expand", "Tile", "Resize", "TopK", "DepthToSpace", "SpaceToDepth", "Trilu",
    "OneHot", "NonZero", "Compress", "ReverseSequence",
    "KvAppend",  # estimator domain: passes/kv_inplace.py
})
QUANTIZATION = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# Pure views: no data moves; the runtime reinterprets the buffer.
VIEW = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
# Host-side shape arithmetic (values are shapes, not activations).
SHAPE = frozenset({"Shape", "Size", "Constant", "ConstantOfShape", "Range"})
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
# Collectives between GPUs (com.microsoft contrib ops; Send in the estimator domain): cost/collective.py
COMMUNICATION = frozenset({"AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"})
RECURRENT = frozenset({"RNN", "GRU", "LSTM"})
SIGNAL = frozenset({"DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix",
                    "CumSum", "CumProd"})

# Kernel kind reported per kernel (JSON "kind"), in lookup order.
_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("matmul", CONTRACTION),
    ("conv", CONVOLUTION),
    ("attention", ATTENTION),
    ("rotary", ROTARY),
    ("moe", MOE),
    ("norm", NORMALIZATION),
    ("reduction", REDUCTION),
    ("pool", POOLING),
    ("quant", QUANTIZATION),
    ("elementwise", ELEMENTWISE),
    ("movement", MOVEMENT),
    ("view", VIEW),
    ("shape", SHAPE),
    ("control", CONTROL_FLOW),
    ("recurrent", RECURRENT),
    ("signal", SIGNAL),
    ("communication", COMMUNICATION),
)


def kind_of(op_type: str) -> str:
    """The kernel kind of an op type ("other" when it belongs to no group)."""
    for kind, ops in _KINDS:
        if op_type in ops:
            return kind
    return "other"
