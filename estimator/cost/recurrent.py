"""Recurrent layers: RNN, GRU and LSTM (ONNX, one layer, forward / reverse / bidirectional).

Counting rule. Per direction, per time step, per batch row, the gates*hidden pre-activations take
(input_size + hidden_size) multiply-adds each (X W^T and H R^T), 2 FLOPs per multiply-add, on
`matmul_unit(dtype)`: 2 * dirs * seq * batch * gates * hidden * (input + hidden). The elementwise cell
math is counted per (direction, step, batch row, hidden unit) on `alu_unit(dtype)` and the SFU: adding
the two projections (+1 with the bias B), the gate activations (from the `activations` attribute; the
ONNX defaults Sigmoid/Tanh), the state update and `clip` (a min and a max per pre-activation).
DRAM bytes: X, W, R, B, sequence_lens, initial states and the LSTM peepholes P read once; Y, Y_h and Y_c
written once.

NB: the bytes are those of a persistent kernel that keeps R on chip for the whole sequence; cuDNN's
step-by-step kernels re-read R every step, mostly from shared memory or L2. NB: sequence_lens shorter
than seq_length skip no work here (padded steps are priced as full steps). NB: the bias is counted as
one add per pre-activation (Wb + Rb folded once per channel), except GRU's linear_before_reset, which
keeps Rbh inside the reset product. NB: LSTM input_forget (f = 1 - i) is priced as a separate forget gate.
"""

from __future__ import annotations

from estimator.cost.registry import SFU, CostError, OpView, Work, alu_unit, io_bytes, matmul_unit, register
from estimator.ir import Expr

# (CUDA-core ops, SFU ops) per element of each allowed activation, as in elementwise.py.
_ACTIVATION: dict[str, tuple[int, int]] = {
    "Relu": (1, 0),
    "Tanh": (0, 1),
    "Sigmoid": (2, 2),  # fma-scale, add; ex2, rcp
    "Affine": (1, 0),  # alpha * x + beta: one fma
    "LeakyRelu": (2, 0), "ThresholdedRelu": (2, 0),  # mul or compare, select
    "ScaledTanh": (2, 1),  # alpha * tanh(beta * x): 2 muls, tanh
    "HardSigmoid": (3, 0),  # fma, max, min
    "Elu": (4, 1),
    "Softsign": (3, 1),
    "Softplus": (3, 2),
}

# op -> (gates, default activations per direction)
_CELL: dict[str, tuple[int, tuple[str, ...]]] = {
    "RNN": (1, ("Tanh",)),
    "GRU": (3, ("Sigmoid", "Tanh")),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh")),
}


def _activations(op: OpView, dirs: int) -> list[tuple[str, ...]]:
    """The activation names of each direction (the attribute lists them direction after direction)."""
    _, default = _CELL[op.op_type]
    names = op.attr("activations")
    if not names:
        return [default] * dirs
    names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names)
    per = len(default)
    if len(names) != per * dirs:
        raise CostError(f"{op.op_type}: {len(names)} activations for {dirs} direction(s), expected "
                        f"{per * dirs}")
    return [names[d * per:(d + 1) * per] for d in range(dirs)]


def _act(name: str, op_type: str) -> tuple[int, int]:
    # ONNX spells them in CamelCase; accept any case.
    for key, cost in _ACTIVATION.items():
        if key.lower() == name.lower():
            return cost
    raise CostError(f"{op_type}: unsupported activation {name!r}")


def _cell_ops(op: OpView, acts: tuple[str, ...]) -> tuple[int, int]:
    """(CUDA ops, SFU ops) per hidden unit per step for one direction."""
    gates, _ = _CELL[op.op_type]
    bias = int(op.has_input(3))
    f, *rest = [_act(a, op.op_type) for a in acts]
    cuda = gates * (1 + bias)  # X W^T + H R^T (+ folded bias) per pre-activation
    if op.attr("clip") is not None:
        cuda += 2 * gates  # min, max per pre-activation
    if op.op_type == "RNN":  # H = f(.)
        return cuda + f[0], f[1]
    if op.op_type == "GRU":
        # z, r = f(.); h~ = g(. + r * (H Rh^T [+ Rbh])): 1 mul (+1 add of Rbh with linear_before_reset);
        # H = h~ + z * (H_prev - h~): sub, fma
        g = rest[0]
        cuda += 2 * f[0] + g[0] + 1 + bias * int(bool(op.attr("linear_before_reset", 0))) + 2
        return cuda, 2 * f[1] + g[1]
    # LSTM: i, f, o = f(.) (+ P * C peepholes: 3 fmas); c~ = g(.); C = f * C + i * c~: mul, fma;
    # H = o * h(C): mul
    g, h = rest
    cuda += 3 * f[0] + 3 * int(op.has_input(7)) + g[0] + 2 + h[0] + 1
    return cuda, 3 * f[1] + g[1] + h[1]


@register(*sorted(_CELL))
def recurrent(op: OpView) -> Work:
    """See the module docstring: 2 * dirs * seq * batch * gates * hidden * (input + hidden) FLOPs on
    matmul_unit, plus per (direction, step, batch, hidden unit) the cell's elementwise ops; bytes once."""
    x, w, r = op.input(0), op.input(1), op.input(2)
    if len(x.shape) != 3 or len(w.shape) != 3 or len(r.shape) != 3:
        raise CostError(f"{op.op_type}: X, W and R must be 3-D")
    direction = op.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    if direction not in ("forward", "reverse", "bidirectional"):
        raise CostError(f"{op.op_type}: unknown direction {direction!r}")
    dirs = 2 if direction == "bidirectional" else 1
    seq, batch = (x.shape[1], x.shape[0]) if op.attr("layout", 0) else (x.shape[0], x.shape[1])
    hidden: Expr = r.shape[2]
    gates, _ = _CELL[op.op_type]
    rows = dirs * seq * batch  # (direction, step, batch row) triples
    macs = rows * gates * hidden * (x.shape[2] + hidden)
    cuda = sfu = 0
    for acts in _activations(op, dirs):
        c, s = _cell_ops(op, acts)
        cuda, sfu = cuda + c, sfu + s
    units = seq * batch * hidden  # per direction; the loop above summed the directions
    flops = {matmul_unit(x.dtype): 2 * macs, alu_unit(x.dtype): units * cuda, (SFU, "fp32"): units * sfu}
    read, written = io_bytes(op)
    return Work(flops, read, written)
