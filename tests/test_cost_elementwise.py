from dataclasses import replace

import pytest
import sympy

from costutil import cost, op
from estimator import ops
from estimator.cost.registry import CostError, lookup
from estimator.ir import Tensor, dim

CUDA32, CUDA64, SFU = ("alu", "fp32"), ("alu", "fp64"), ("sfu", "fp32")
N = 4096 * 1024  # elements of a [4096, 1024] activation


def unary(op_type, dtype="bf16", shape=(4096, 1024), **kw):
    return cost(op(op_type, [(shape, dtype)], [(shape, dtype)], **kw))


def test_every_elementwise_op_is_registered():
    for name in sorted(ops.ELEMENTWISE):
        assert lookup(name) or lookup(name, "com.microsoft"), name


def test_simple_unary_on_cuda_cores():
    w = unary("Relu")
    assert w.flops == {CUDA32: N}  # one max per element, bf16 math upcast to the fp32 rate
    assert w.bytes_read == 2 * N  # bf16 x read once
    assert w.bytes_written == 2 * N
    assert unary("HardSwish").flops == {CUDA32: 4 * N}  # fma, max, min, mul
    assert unary("Abs", dtype="fp64").flops == {CUDA64: N}  # fp64 runs on the fp64 pipe
    assert unary("Clip").flops == {CUDA32: 2 * N}  # max, min


def test_transcendental_split_between_sfu_and_cuda():
    assert unary("Exp").flops == {CUDA32: N, SFU: N}  # x * log2e, ex2
    assert unary("Tanh").flops == {SFU: N}  # tanh.approx
    assert unary("Sigmoid").flops == {CUDA32: 2 * N, SFU: 2 * N}  # fma-scale + add; ex2 + rcp
    assert unary("Erf").flops == {CUDA32: 8 * N, SFU: N}  # NB: polynomial, one MUFU
    assert unary("Sin").flops == {CUDA32: 2 * N, SFU: N}  # range reduction, MUFU sin


def test_gelu_forms_and_contrib_activations():
    assert unary("Gelu").flops == {CUDA32: 12 * N, SFU: N}  # erf form: scale, erf (8+1), add, 2 muls
    assert unary("Gelu", attrs={"approximate": "tanh"}).flops == {CUDA32: 7 * N, SFU: N}
    assert unary("Gelu", domain="com.microsoft").flops == {CUDA32: 12 * N, SFU: N}
    assert unary("QuickGelu", domain="com.microsoft").flops == {CUDA32: 4 * N, SFU: 2 * N}
    # FastGelu with a bias [1024]: tanh form (7) + bias add (1)
    w = cost(op("FastGelu", [([4096, 1024], "fp16"), ([1024], "fp16")], [([4096, 1024], "fp16")],
                domain="com.microsoft", weights=[1]))
    assert w.flops == {CUDA32: 8 * N, SFU: N}
    assert w.bytes_read == 2 * N + 2 * 1024  # x and the bias weight
    with pytest.raises(CostError):
        unary("Gelu", attrs={"approximate": "cubic"})


def test_binary_broadcast_reads_each_input_at_its_own_size():
    # [batch, seq, 4096] + bias [4096] (an initializer)
    w = cost(op("Add", [(["batch", "seq", 4096], "bf16"), ([4096], "bf16")],
                [(["batch", "seq", 4096], "bf16")], weights=[1]))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.flops[CUDA32] - b * s * 4096) == 0  # one add per output element
    assert sympy.expand(w.bytes_read - (2 * b * s * 4096 + 2 * 4096)) == 0  # NB: bias read once
    assert sympy.expand(w.bytes_written - 2 * b * s * 4096) == 0


def test_div_and_comparison_outputs():
    w = cost(op("Div", [([1024], "fp32"), ([1024], "fp32")], [([1024], "fp32")]))
    assert w.flops == {CUDA32: 1024, SFU: 1024}  # rcp + mul
    w = cost(op("Less", [([1024], "fp16"), ([1024], "fp16")], [([1024], "bool")]))
    assert w.flops == {CUDA32: 1024}  # one compare
    assert w.bytes_read == 2 * 1024 * 2  # two fp16 operands
    assert w.bytes_written == 1024  # bool output, 1 byte each


def test_pow_constant_scalar_exponent_is_a_multiply():
    x = ([4096, 1024], "fp32")
    w = cost(op("Pow", [x, ([], "fp32")], [x], consts=[1]))
    assert w.flops == {CUDA32: N}  # NB: assumed x * x
    assert w.bytes_read == 4 * N  # the host-constant exponent travels as an argument
    w = cost(op("Pow", [x, x], [x]))
    assert w.flops == {CUDA32: N, SFU: 2 * N}  # exp2(y * log2(x)): mul; lg2, ex2


def test_variadic_ops_count_n_minus_one():
    x = ([64, 64], "fp32")
    assert cost(op("Sum", [x, x, x], [x])).flops == {CUDA32: 2 * 64 * 64}  # 2 adds
    assert cost(op("Mean", [x, x, x], [x])).flops == {CUDA32: 3 * 64 * 64}  # 2 adds + 1/n scale
    assert cost(op("Max", [x, x], [x])).flops == {CUDA32: 64 * 64}
    w = cost(op("Min", [x], [x]))
    assert w.flops == {} and w.bytes_read == 4 * 64 * 64  # a copy


def test_where_and_casts():
    scores = (["batch", 32, "seq", "seq"], "fp16")
    w = cost(op("Where", [([1, 1, "seq", "seq"], "bool"), ([], "fp16"), scores], [scores], consts=[1]))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.flops[CUDA32] - b * 32 * s * s) == 0  # one select per element
    assert sympy.expand(w.bytes_read - (s * s + 2 * b * 32 * s * s)) == 0  # mask (bool) + Y (fp16)
    w = cost(op("Cast", [([4096, 1024], "fp32")], [([4096, 1024], "bf16")]))
    assert w.flops == {} and w.bytes_read == 4 * N and w.bytes_written == 2 * N
    w = cost(op("CastLike", [([4096, 1024], "fp32"), ([1], "fp16")], [([4096, 1024], "fp16")]))
    assert w.bytes_read == 4 * N  # the dtype donor is not read
    assert w.bytes_written == 2 * N


def test_unshaped_input_is_a_cost_error():
    view = op("Add", [([8], "fp32"), ([8], "fp32")], [([8], "fp32")])
    view = replace(view, inputs=(view.inputs[0], Tensor("x1", None, "fp32")))  # rank unknown
    with pytest.raises(CostError):
        cost(view)
