import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError
from estimator.ir import dim

ALU32, ALU64 = ("alu", "fp32"), ("alu", "fp64")


def einsum(equation, inputs, output):
    return cost(op("Einsum", inputs, [output], attrs={"equation": equation}))


def test_batched_matmul_bf16():
    w = einsum("bij,bjk->bik", [([8, 128, 64], "bf16"), ([8, 64, 32], "bf16")], ([8, 128, 32], "bf16"))
    assert w.flops == {("tensor", "bf16"): 2 * 8 * 128 * 64 * 32}  # bij,bjk->bik: b=8,i=128,j=64,k=32
    assert w.bytes_read == 2 * (8 * 128 * 64 + 8 * 64 * 32)  # both operands once
    assert w.bytes_written == 2 * 8 * 128 * 32


def test_fp32_contraction_runs_on_cuda_cores_and_implicit_output():
    # "ij,jk" (implicit output "ik"): i=16, j=32, k=8
    w = einsum("ij,jk", [([16, 32], "fp32"), ([32, 8], "fp32")], ([16, 8], "fp32"))
    assert w.flops == {("cuda", "fp32"): 2 * 16 * 32 * 8}


def test_inner_product_and_outer_product():
    w = einsum("i,i", [([5], "fp64"), ([5], "fp64")], ([], "fp64"))
    assert w.flops == {("cuda", "fp64"): 2 * 5}  # one multiply-add per i
    # no contracted letter: one multiply per output element, on the ALU
    w = einsum("i,j->ij", [([5], "fp16"), ([7], "fp16")], ([5, 7], "fp16"))
    assert w.flops == {ALU32: 5 * 7}


def test_single_operand_permute_reduce_diagonal():
    w = einsum("ij->ji", [([3, 4], "fp64")], ([4, 3], "fp64"))
    assert w.flops == {}  # a permutation moves data only
    assert (w.bytes_read, w.bytes_written) == (8 * 12, 8 * 12)
    assert einsum("ij->i", [([3, 4], "fp64")], ([3], "fp64")).flops == {ALU64: 3 * 4}  # one add per element
    assert einsum("ii", [([5, 5], "fp64")], ([], "fp64")).flops == {ALU64: 5 * 5}  # trace: implicit ""
    assert einsum("...ii->...i", [([3, 5, 5], "fp64")], ([3, 5], "fp64")).flops == {}  # a diagonal gather


def test_ellipsis_broadcasts_symbolic_batch():
    # "...ij,jk->...ik" with A [batch, heads, seq, 64] and B [64, 128]
    w = einsum("...ij,jk->...ik", [(["batch", 16, "seq", 64], "bf16"), ([64, 128], "bf16")],
               (["batch", 16, "seq", 128], "bf16"))
    b, s = dim("batch"), dim("seq")
    assert sympy.expand(w.flops[("tensor", "bf16")] - 2 * b * 16 * s * 64 * 128) == 0
    # a size-1 ellipsis dim broadcasts against a real one: [1, i, j] x [batch, j, k]
    w = einsum("...ij,...jk->...ik", [([1, 4, 8], "bf16"), (["batch", 8, 2], "bf16")],
               (["batch", 4, 2], "bf16"))
    assert sympy.expand(w.flops[("tensor", "bf16")] - 2 * b * 4 * 8 * 2) == 0


def test_three_operands_chain_left_to_right():
    # "ij,jk,kl->il", i=4, j=8, k=16, l=2: (ij,jk -> ik) then (ik,kl -> il)
    w = einsum("ij,jk,kl->il", [([4, 8], "bf16"), ([8, 16], "bf16"), ([16, 2], "bf16")], ([4, 2], "bf16"))
    assert w.flops == {("tensor", "bf16"): 2 * 4 * 8 * 16 + 2 * 4 * 16 * 2}
    inter = 2 * 4 * 16  # the [i, k] intermediate, 2 bytes per element, written then read back once
    assert w.bytes_read == 2 * (4 * 8 + 8 * 16 + 16 * 2) + inter
    assert w.bytes_written == 2 * 4 * 2 + inter


def test_bad_equations_raise_cost_error():
    a = ([4, 8], "bf16")
    with pytest.raises(CostError):
        einsum("ij,jk->ik", [a], ([4, 8], "bf16"))  # two terms, one operand
    with pytest.raises(CostError):
        einsum("ijk->i", [a], ([4], "bf16"))  # rank 2 operand, 3 letters
    with pytest.raises(CostError):
        einsum("ij->iz", [a], ([4, 8], "bf16"))  # output letter z is on no input
    with pytest.raises(CostError):
        cost(op("Einsum", [a], [a]))  # no equation
