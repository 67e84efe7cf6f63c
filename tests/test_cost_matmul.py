import sympy

from costutil import cost, op
from estimator.ir import dim


def test_matmul_square_bf16():
    w = cost(op("MatMul", [([4096, 4096], "bf16"), ([4096, 4096], "bf16")], [([4096, 4096], "bf16")],
                weights=[1]))
    assert w.flops == {("tensor", "bf16"): 2 * 4096 * 4096 * 4096}  # one multiply-add per (m, n, k)
    assert w.bytes_read == 2 * (4096 * 4096 + 4096 * 4096)  # A and B, 2 bytes each
    assert w.bytes_written == 2 * 4096 * 4096


def test_matmul_batched_broadcast_symbolic():
    # [batch, 32, seq, 128] x [batch, 32, 128, seq] -> [batch, 32, seq, seq]
    w = cost(op("MatMul", [(["batch", 32, "seq", 128], "fp16"), (["batch", 32, 128, "seq"], "fp16")],
                [(["batch", 32, "seq", "seq"], "fp16")]))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 2 * b * 32 * s * s * 128) == 0
    # weight broadcast: [batch, seq, 4096] x [4096, 1024]
    w = cost(op("MatMul", [(["batch", "seq", 4096], "bf16"), ([4096, 1024], "bf16")],
                [(["batch", "seq", 1024], "bf16")], weights=[1]))
    assert sympy.expand(w.flops[("tensor", "bf16")] - 2 * b * s * 1024 * 4096) == 0
    assert sympy.expand(w.bytes_read - 2 * (b * s * 4096 + 4096 * 1024)) == 0


def test_matmul_fp32_runs_on_cuda_cores_and_tf32_on_tensor_cores():
    w = cost(op("MatMul", [([64, 32], "fp32"), ([32, 16], "fp32")], [([64, 16], "fp32")]))
    assert w.flops == {("cuda", "fp32"): 2 * 64 * 16 * 32}
    w = cost(op("MatMul", [([64, 32], "tf32"), ([32, 16], "tf32")], [([64, 16], "tf32")]))
    assert w.flops == {("tensor", "tf32"): 2 * 64 * 16 * 32}


def test_gemm_trans_a_and_bias():
    # A^T: A is [K=256, M=64]; B [256, 128]; C bias [128]
    w = cost(op("Gemm", [([256, 64], "fp16"), ([256, 128], "fp16"), ([128], "fp16")], [([64, 128], "fp16")],
                attrs={"transA": 1}, weights=[1, 2]))
    assert w.flops == {("tensor", "fp16"): 2 * 64 * 128 * 256}
    assert w.bytes_read == 2 * (256 * 64 + 256 * 128 + 128)
