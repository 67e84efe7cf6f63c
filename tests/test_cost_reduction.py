import pytest
import sympy

from costutil import cost, op
from estimator import ops
from estimator.cost.registry import CostError, lookup
from estimator.ir import dim

CUDA32, SFU = ("alu", "fp32"), ("sfu", "fp32")
MS = "com.microsoft"
X = ([8, 4096, 1024], "bf16")
N = 8 * 4096 * 1024
ROWS = 8 * 4096  # rows of a last-axis normalization


def test_every_reduction_and_norm_is_registered():
    for name in sorted(ops.REDUCTION | ops.NORMALIZATION):
        assert lookup(name) or lookup(name, MS), name


def test_reduce_sum_opset18_axes_input_counts_by_numel():
    # axes is a run-time input (opset 18); the output shape tells the reduction
    w = cost(op("ReduceSum", [X, ([1], "int64")], [([8, 4096, 1], "bf16")], opset=18, consts=[1]))
    assert w.flops == {CUDA32: N}  # one add per input element
    assert w.bytes_read == 2 * N  # X once; the axes list is host-side
    assert w.bytes_written == 2 * ROWS


def test_reduce_family_counts():
    y = ([8, 4096], "fp32")
    x = ([8, 4096, 1024], "fp32")
    assert cost(op("ReduceMean", [x], [y], opset=13, attrs={"axes": (-1,)})).flops == {CUDA32: N + ROWS}
    assert cost(op("ReduceL2", [x], [y])).flops == {CUDA32: N, SFU: ROWS}  # fma per elem; sqrt per row
    assert cost(op("ReduceLogSumExp", [x], [y])).flops == {CUDA32: 4 * N + 2 * ROWS, SFU: N + ROWS}
    w = cost(op("ArgMax", [x], [([8, 4096], "int64")]))
    assert w.flops == {CUDA32: N}  # NB: compare-select of (value, index) as one op
    assert w.bytes_written == 8 * ROWS  # int64 indices


def test_softmax_symbolic_rows():
    # attention scores [batch, 32, seq, seq], softmax over the last axis
    x = (["batch", 32, "seq", "seq"], "fp16")
    w = cost(op("Softmax", [x], [x]))
    b, s = dim("batch"), dim("seq")
    n, rows = b * 32 * s * s, b * 32 * s
    assert sympy.expand(w.flops[CUDA32] - 5 * n) == 0  # max, sub, exp scale, sum, normalise
    assert sympy.expand(w.flops[SFU] - (n + rows)) == 0  # ex2 per element, 1/sum per row
    assert sympy.expand(w.bytes_read - 2 * n) == 0  # NB: one-pass online softmax
    assert sympy.expand(w.bytes_written - 2 * n) == 0
    w = cost(op("LogSoftmax", [x], [x]))
    assert sympy.expand(w.flops[CUDA32] - (5 * n + rows)) == 0  # + the log's scale per row


def test_softmax_opset11_coerces_to_2d():
    # opset < 13, axis=1: [4, 8, 16] is a [4, 128] matrix, 4 rows
    w = cost(op("Softmax", [([4, 8, 16], "fp32")], [([4, 8, 16], "fp32")], opset=11))
    assert w.flops == {CUDA32: 5 * 512, SFU: 512 + 4}


def test_layer_norm_with_bias_and_stats_outputs():
    w = cost(op("LayerNormalization", [X, ([1024], "bf16"), ([1024], "bf16")],
                [X, ([8, 4096, 1], "fp32"), ([8, 4096, 1], "fp32")], weights=[1, 2]))
    assert w.flops == {CUDA32: 7 * N, SFU: ROWS}  # 6 norm ops + shift; rsqrt per row
    assert w.bytes_read == 2 * N + 2 * 1024 * 2  # X, scale, bias
    assert w.bytes_written == 2 * N + 2 * 4 * ROWS  # Y + fp32 Mean and InvStdDev


def test_rms_norms_in_both_domains():
    for domain in ("", MS):
        w = cost(op("SimplifiedLayerNormalization", [X, ([1024], "bf16")], [X], domain=domain, weights=[1]))
        assert w.flops == {CUDA32: 3 * N, SFU: ROWS}  # square-sum, normalise, scale; rsqrt per row
        assert w.bytes_read == 2 * N + 2 * 1024
    w = cost(op("RMSNormalization", [X, ([1024], "bf16")], [X], weights=[1]))
    assert w.flops == {CUDA32: 3 * N, SFU: ROWS}


def test_skip_norms():
    g = ([1024], "bf16")
    # input, skip, gamma, beta, bias; outputs: output, mean, inv_std_var (absent), input_skip_bias_sum
    w = cost(op("SkipLayerNormalization", [X, X, g, g, g], [X, None, None, X], domain=MS, weights=[2, 3, 4]))
    assert w.flops == {CUDA32: (1 + 1 + 6 + 1) * N, SFU: ROWS}  # skip, bias, LayerNorm, beta
    assert w.bytes_read == 2 * (2 * N + 3 * 1024)
    assert w.bytes_written == 2 * (2 * N)  # output and the sum
    w = cost(op("SkipSimplifiedLayerNormalization", [X, X, g], [X], domain=MS, weights=[2]))
    assert w.flops == {CUDA32: (1 + 3) * N, SFU: ROWS}  # skip add + RMS norm


def test_batch_instance_group_lp_norms():
    x = ([2, 64, 32, 32], "fp32")
    c = ([64], "fp32")
    n = 2 * 64 * 32 * 32
    w = cost(op("BatchNormalization", [x, c, c, c, c], [x], weights=[1, 2, 3, 4]))
    assert w.flops == {CUDA32: 2 * n}  # one multiply-add with folded per-channel a, b
    assert w.bytes_read == 4 * (n + 4 * 64)
    assert cost(op("InstanceNormalization", [x, c, c], [x])).flops == {CUDA32: 7 * n, SFU: 2 * 64}
    w = cost(op("GroupNormalization", [x, c, c], [x], attrs={"num_groups": 8}))
    assert w.flops == {CUDA32: 7 * n, SFU: 2 * 8}  # rsqrt per (n, group)
    assert cost(op("LpNormalization", [x], [x])).flops == {CUDA32: 2 * n, SFU: 2 * (2 * 64 * 32)}
    assert cost(op("LpNormalization", [x], [x], attrs={"p": 1})).flops == {CUDA32: 3 * n, SFU: 2 * 64 * 32}


def test_unpriceable_configurations_raise():
    x = ([2, 64, 32, 32], "fp32")
    c = ([64], "fp32")
    with pytest.raises(CostError):  # training mode writes running statistics
        cost(op("BatchNormalization", [x, c, c, c, c], [x, c, c], attrs={"training_mode": 1}))
    with pytest.raises(CostError):
        cost(op("GroupNormalization", [x, c, c], [x]))  # num_groups missing
    with pytest.raises(CostError):
        cost(op("Softmax", [x], [x], attrs={"axis": 4}))
    with pytest.raises(CostError):
        cost(op("ReduceSum", [x], [None]))  # output missing
