import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError
from estimator.ir import dim


def test_quantize_linear_per_tensor_symbolic():
    # fp16 activations [batch, seq, 4096] -> int8 with a scalar scale and zero point (initializers)
    w = cost(op("QuantizeLinear", [(["batch", "seq", 4096], "fp16"), ([], "fp16"), ([], "int8")],
                [(["batch", "seq", 4096], "int8")], weights=[1, 2]))
    n = dim("batch") * dim("seq") * 4096
    assert sympy.expand(w.flops[("alu", "fp32")] - 3 * n) == 0  # scale, round, zero point + clamp
    assert sympy.expand(w.bytes_read - (2 * n + 2 + 1)) == 0  # x at 2 bytes, scale, zero point
    assert sympy.expand(w.bytes_written - n) == 0  # y at 1 byte


def test_dequantize_linear_per_axis_weight():
    # int8 weight [4096, 4096] with per-output-channel fp16 scale and int8 zero point
    w = cost(op("DequantizeLinear", [([4096, 4096], "int8"), ([4096], "fp16"), ([4096], "int8")],
                [([4096, 4096], "fp16")], attrs={"axis": 0}, weights=[0, 1, 2]))
    assert w.flops == {("alu", "fp32"): 2 * 4096 * 4096}  # subtract zero point, multiply by scale
    assert w.bytes_read == 4096 * 4096 + 2 * 4096 + 4096
    assert w.bytes_written == 2 * 4096 * 4096


def test_quantize_linear_int4_output():
    # int4 packs two per byte
    w = cost(op("QuantizeLinear", [([1024, 1024], "fp16"), ([], "fp16")], [([1024, 1024], "int4")],
                weights=[1]))
    assert w.bytes_written == 1024 * 1024 // 2


def test_dynamic_quantize_linear_reads_x_twice():
    # BERT activation [1, 128, 768] fp32 -> uint8, scalar scale and zero point
    w = cost(op("DynamicQuantizeLinear", [([1, 128, 768], "fp32")],
                [([1, 128, 768], "uint8"), ([], "fp32"), ([], "uint8")]))
    assert w.flops == {("alu", "fp32"): (2 + 3) * 128 * 768}  # min and max, then the quantize
    assert w.bytes_read == 2 * 4 * 128 * 768  # NB: one pass for min/max, one to quantize
    assert w.bytes_written == 128 * 768 + 4 + 1


def test_matmul_integer():
    # uint8 [1, 128, 768] x int8 weight [768, 3072] -> int32 [1, 128, 3072]
    ins = [([1, 128, 768], "uint8"), ([768, 3072], "int8"), ([], "uint8"), ([], "int8")]
    w = cost(op("MatMulInteger", ins, [([1, 128, 3072], "int32")], weights=[1, 3]))
    assert w.flops == {("tensor", "int8"): 2 * 128 * 3072 * 768}  # one multiply-add per (m, n, k)
    assert w.bytes_read == 128 * 768 + 768 * 3072 + 1 + 1  # A, B and both zero points
    assert w.bytes_written == 4 * 128 * 3072  # int32 accumulators


def test_qlinear_matmul_requantizes():
    # a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
    ins = [([128, 768], "uint8"), ([], "fp32"), ([], "uint8"), ([768, 768], "int8"), ([], "fp32"),
           ([], "int8"), ([], "fp32"), ([], "uint8")]
    w = cost(op("QLinearMatMul", ins, [([128, 768], "uint8")], weights=[1, 2, 3, 4, 5, 6, 7]))
    assert w.flops == {("tensor", "int8"): 2 * 128 * 768 * 768,
                       ("alu", "fp32"): 3 * 128 * 768}  # scale, zero point, round-and-clamp per output
    assert w.bytes_read == 128 * 768 + 4 + 1 + 768 * 768 + 4 + 1 + 4 + 1
    assert w.bytes_written == 128 * 768


def test_matmul_nbits_4bit_decode():
    # Llama-7B up-projection, 4-bit blocks of 32: B [N=11008, K/32=128 blocks, 32*4/8=16 bytes]
    ins = [([1, 1, 4096], "fp16"), ([11008, 128, 16], "uint8"), ([11008, 128], "fp16")]
    w = cost(op("MatMulNBits", ins, [([1, 1, 11008], "fp16")], domain="com.microsoft",
                attrs={"K": 4096, "N": 11008, "bits": 4, "block_size": 32}, weights=[1, 2]))
    assert w.flops == {("tensor", "fp16"): 2 * 11008 * 4096,  # the GEMV
                       ("alu", "fp32"): 2 * 11008 * 4096}  # dequantize every weight once (NB)
    assert 11008 * 128 * 16 == 11008 * 4096 // 2  # packed B is half a byte per weight
    assert w.bytes_read == 2 * 4096 + 11008 * 4096 // 2 + 2 * 11008 * 128  # A, packed B, fp16 scales
    assert w.bytes_written == 2 * 11008


def test_cost_errors():
    ins = [([1, 1, 4096], "fp16"), ([11008, 128, 16], "uint8"), ([11008, 128], "fp16")]
    with pytest.raises(CostError, match="K and N"):
        cost(op("MatMulNBits", ins, [([1, 1, 11008], "fp16")], domain="com.microsoft", attrs={"bits": 4}))
    with pytest.raises(CostError, match="scalar"):
        cost(op("MatMulInteger", [([], "uint8"), ([768, 3072], "int8")], [([3072], "int32")]))
