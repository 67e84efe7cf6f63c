"""Tiny ONNX graphs built in code for frontend, pricing and CLI tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def matmul_model(m, k, n, dtype=TensorProto.BFLOAT16, weight: bool = False) -> onnx.ModelProto:
    """y = a @ b with a [m, k], b [k, n]; dims may be ints or dim_param strings. `weight`: b is an
    initializer (float32 zeros re-typed to `dtype` is not possible, so it is an external reference)."""
    a = helper.make_tensor_value_info("a", dtype, [m, k])
    y = helper.make_tensor_value_info("y", dtype, [m, n])
    inputs, inits = [a], []
    if weight:
        w = TensorProto(name="b", data_type=dtype, dims=[k, n], data_location=TensorProto.EXTERNAL)
        for key, val in (("location", "w.bin"), ("offset", "0"), ("length", str(2 * k * n))):
            entry = w.external_data.add()
            entry.key, entry.value = key, val
        inits.append(w)
    else:
        inputs.append(helper.make_tensor_value_info("b", dtype, [k, n]))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "mm", inputs, [y], inits
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def gpt_block_model(hidden: int = 64, heads: int = 4) -> onnx.ModelProto:
    """One pre-LN GPT block with symbolic batch and seq: LayerNorm, QKV projections, attention
    (MatMul, scale, Softmax, MatMul), output projection, residual, GELU MLP (Erf form), residual."""
    d = hidden // heads
    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.02, name)

    def c(name, values, dtype=np.int64):
        return numpy_helper.from_array(np.array(values, dtype=dtype), name)

    inits = [
        w("ln_g", hidden),
        w("ln_b", hidden),
        w("wq", hidden, hidden),
        w("wk", hidden, hidden),
        w("wv", hidden, hidden),
        w("wo", hidden, hidden),
        w("w1", hidden, 4 * hidden),
        w("w2", 4 * hidden, hidden),
        c("heads_shape", [0, 0, heads, d]),
        c("merge_shape", [0, 0, hidden]),
        c("scale", 1.0 / np.sqrt(d), np.float32),
        c("sqrt2", np.sqrt(2.0), np.float32),
        c("one", 1.0, np.float32),
        c("half", 0.5, np.float32),
    ]
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "ln_g", "ln_b"], ["h"], name="ln", axis=-1)]
    for p in "qkv":
        nodes += [
            n("MatMul", ["h", f"w{p}"], [f"{p}2"], name=f"proj_{p}"),
            n("Reshape", [f"{p}2", "heads_shape"], [f"{p}4"], name=f"split_{p}"),
        ]
    nodes += [
        n("Transpose", ["q4"], ["qt"], name="tq", perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kt"], name="tk", perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vt"], name="tv", perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["s"], name="qk"),
        n("Mul", ["s", "scale"], ["ss"], name="scale_scores"),
        n("Softmax", ["ss"], ["p"], name="softmax", axis=-1),
        n("MatMul", ["p", "vt"], ["o"], name="pv"),
        n("Transpose", ["o"], ["ot"], name="to", perm=[0, 2, 1, 3]),
        n("Reshape", ["ot", "merge_shape"], ["om"], name="merge"),
        n("MatMul", ["om", "wo"], ["attn"], name="proj_o"),
        n("Add", ["x", "attn"], ["r1"], name="residual1"),
        n("MatMul", ["r1", "w1"], ["f1"], name="fc1"),
        n("Div", ["f1", "sqrt2"], ["g1"], name="gelu_div"),
        n("Erf", ["g1"], ["g2"], name="gelu_erf"),
        n("Add", ["g2", "one"], ["g3"], name="gelu_add"),
        n("Mul", ["f1", "g3"], ["g4"], name="gelu_mul"),
        n("Mul", ["g4", "half"], ["g5"], name="gelu_half"),
        n("MatMul", ["g5", "w2"], ["f2"], name="fc2"),
        n("Add", ["r1", "f2"], ["y"], name="residual2"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])
    g = helper.make_graph(nodes, "gpt_block", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
