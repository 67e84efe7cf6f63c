import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError
from estimator.ir import dim

ALU32, SFU = ("alu", "fp32"), ("sfu", "fp32")


def rnn(op_type, gates, seq, batch, inp, hidden, dirs=1, dtype="fp16", attrs=None, bias=False):
    """X [seq, batch, input], W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden]; outputs
    Y [seq, dirs, batch, hidden] and Y_h [dirs, batch, hidden]."""
    ins = [([seq, batch, inp], dtype), ([dirs, gates * hidden, inp], dtype),
           ([dirs, gates * hidden, hidden], dtype)]
    if bias:
        ins.append(([dirs, 2 * gates * hidden], dtype))
    outs = [([seq, dirs, batch, hidden], dtype), ([dirs, batch, hidden], dtype)]
    return cost(op(op_type, ins, outs, attrs=attrs or {}, weights=[1, 2, 3][:len(ins) - 1]))


def test_lstm_fp16_matmul_and_cell_ops():
    # seq=10, batch=4, input=32, hidden=64, 4 gates
    w = rnn("LSTM", 4, 10, 4, 32, 64)
    assert w.flops[("tensor", "fp16")] == 2 * 10 * 4 * (4 * 64) * (32 + 64)  # 2 FLOPs per multiply-add
    units = 10 * 4 * 64  # (step, batch, hidden unit)
    # 4 projection sums + 3 sigmoids (2 each) + tanh (0) + cell update (2) + tanh (0) + o * h (1)
    assert w.flops[ALU32] == units * (4 + 3 * 2 + 2 + 1)
    assert w.flops[SFU] == units * (3 * 2 + 1 + 1)  # 3 sigmoids (ex2, rcp), 2 tanh
    # X, W, R read once; Y and Y_h written once (2 bytes each)
    assert w.bytes_read == 2 * (10 * 4 * 32 + 4 * 64 * 32 + 4 * 64 * 64)
    assert w.bytes_written == 2 * (10 * 4 * 64 + 4 * 64)


def test_gru_bidirectional_with_bias_doubles_the_work():
    one = rnn("GRU", 3, 5, 2, 8, 16, bias=True)
    two = rnn("GRU", 3, 5, 2, 8, 16, dirs=2, bias=True, attrs={"direction": "bidirectional"})
    assert one.flops[("tensor", "fp16")] == 2 * 5 * 2 * (3 * 16) * (8 + 16)
    assert two.flops[("tensor", "fp16")] == 2 * 2 * 5 * 2 * (3 * 16) * (8 + 16)  # 2 directions
    units = 5 * 2 * 16
    # 3 * (sum + bias) + 2 sigmoids (2 each) + tanh (0) + r * (.) (1) + state update (2)
    assert one.flops[ALU32] == units * (3 * 2 + 2 * 2 + 1 + 2)
    assert two.flops[ALU32] == 2 * units * (3 * 2 + 2 * 2 + 1 + 2)
    assert two.flops[SFU] == 2 * units * (2 * 2 + 1)


def test_rnn_custom_activation_and_clip():
    # Relu instead of Tanh: 1 CUDA op, no SFU; clip adds a min and a max per pre-activation
    w = rnn("RNN", 1, 3, 2, 4, 8, dtype="fp32", attrs={"activations": ("Relu",), "clip": 5.0})
    assert w.flops == {("cuda", "fp32"): 2 * 3 * 2 * 8 * (4 + 8), ALU32: 3 * 2 * 8 * (1 + 2 + 1)}


def test_lstm_symbolic_sequence_and_batch():
    w = rnn("LSTM", 4, "seq", "batch", 128, 256)
    s, b = dim("seq"), dim("batch")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 2 * s * b * 1024 * (128 + 256)) == 0
    assert sympy.expand(w.flops[SFU] - s * b * 256 * 8) == 0


def test_batch_first_layout():
    # layout=1: X is [batch=3, seq=7, input=4]; the count is the same as seq-first
    ins = [([3, 7, 4], "fp16"), ([1, 8, 4], "fp16"), ([1, 8, 8], "fp16")]
    w = cost(op("RNN", ins, [([3, 7, 1, 8], "fp16")], attrs={"layout": 1}))
    assert w.flops[("tensor", "fp16")] == 2 * 7 * 3 * 8 * (4 + 8)


def test_unpriceable_recurrent_configurations_raise():
    with pytest.raises(CostError):  # two activations for a one-activation RNN
        rnn("RNN", 1, 3, 2, 4, 8, attrs={"activations": ("Tanh", "Tanh")})
    with pytest.raises(CostError):
        rnn("GRU", 3, 3, 2, 4, 8, attrs={"activations": ("Sigmoid", "Gelu")})
    with pytest.raises(CostError):
        rnn("LSTM", 4, 3, 2, 4, 8, attrs={"direction": "sideways"})
    with pytest.raises(CostError):  # 2-D X
        ins = [([3, 4], "fp16"), ([1, 8, 4], "fp16"), ([1, 8, 8], "fp16")]
        cost(op("RNN", ins, [([3, 1, 1, 8], "fp16")]))
