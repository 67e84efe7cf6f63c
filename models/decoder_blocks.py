"""Blocks every decoder family shares, written as transformers' torch.onnx.export(dynamo=True) writes
them: RMSNorm, rotary embedding computed at run time (rotate_half, or DeepSeek's interleaved pairs), the
causal and sliding-window masks, and the gated MLP (SiLU or tanh-GELU)."""

from __future__ import annotations

import math

import numpy as np

from models._builder import FLOAT, MASK_FILL, GraphBuilder
from models.decoder_config import DecoderConfig

BIG = np.iinfo(np.int64).max


def rms_norm(b: GraphBuilder, x: str, prefix: str, width: int, eps: float) -> str:
    """weight * (x * rsqrt(mean(x^2) + eps)); torch exports rsqrt as Sqrt + Reciprocal."""
    with b.scope(prefix.rsplit(".", 1)[-1]):
        weight = b.weight(f"{prefix}.weight", [width], init="ones")
        variance = b.op("ReduceMean", b.op("Pow", x, b.const(2.0, np.float32)), b.const([-1]), keepdims=1)
        std = b.op("Sqrt", b.op("Add", variance, b.const(eps, np.float32)))
        return b.op("Mul", weight, b.op("Mul", x, b.op("Reciprocal", std)))


def rope_tables(b: GraphBuilder, cfg: DecoderConfig, positions: str, dim: int) -> tuple[str, str]:
    """cos/sin [1, 1, seq, dim] computed at run time from the positions and inv_freq, as the export does
    (no [max_pos, dim] table among the weights)."""
    inv = 1.0 / cfg.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    inv_freq = b.const(inv, np.float32)  # inline: a few hundred bytes, and shape inference may read it
    pos = b.op("Cast", b.op("Unsqueeze", positions, b.const([1])), to=FLOAT)
    freqs = b.op("Mul", pos, inv_freq)
    angles = b.op("Concat", freqs, freqs, axis=-1)
    return tuple(b.op("Unsqueeze", b.op(fn, angles), b.const([0, 1])) for fn in ("Cos", "Sin"))


def apply_rope(b: GraphBuilder, x: str, rope: tuple[str, str], dim: int, interleave: bool) -> str:
    """x * cos + rotate_half(x) * sin. Interleaved (DeepSeek): the (even, odd) pairs are first gathered
    into halves (Reshape [.., d/2, 2] -> Transpose -> Reshape), then rotated the same way."""
    cos, sin = rope
    half = dim // 2
    if interleave:
        pairs = b.op("Reshape", x, b.const([0, 0, 0, half, 2]))
        x = b.op("Reshape", b.op("Transpose", pairs, perm=[0, 1, 2, 4, 3]), b.const([0, 0, 0, dim]))
    axes = b.const([-1])
    first = b.op("Slice", x, b.const([0]), b.const([half]), axes)
    second = b.op("Slice", x, b.const([half]), b.const([BIG]), axes)
    rotated = b.op("Concat", b.op("Neg", second), first, axis=-1)
    return b.op("Add", b.op("Mul", x, cos), b.op("Mul", rotated, sin))


def masks(b: GraphBuilder, cfg: DecoderConfig, positions: str) -> dict[int, str]:
    """Additive [seq, seq] masks per distinct window (-1: causal; W: causal and key > query - W, the
    band transformers writes as Greater(k, Sub(q, W)))."""
    out = {}
    with b.scope("causal_mask"):
        rows = b.op("Unsqueeze", positions, b.const([1]))
        cols = b.op("Unsqueeze", positions, b.const([0]))
        allowed = b.op("GreaterOrEqual", rows, cols)
        zero, fill = b.const(0.0, np.float32), b.const(MASK_FILL, np.float32)
        for w in sorted({cfg.window(i) for i in range(cfg.num_layers)}):
            band = None if w < 0 else b.op("Greater", cols, b.op("Sub", rows, b.const(w)))
            keep = allowed if band is None else b.op("And", allowed, band)
            out[w] = b.op("Where", keep, zero, fill)
    return out


def gated_mlp(b: GraphBuilder, x: str, prefix: str, hidden: int, ffn: int, act: str) -> str:
    """down(act(gate(x)) * up(x)): SiLU as Sigmoid then Mul, tanh-GELU written out (opset 18)."""
    from models._builder import linear

    gate = linear(b, x, f"{prefix}.gate_proj", hidden, ffn, bias=False)
    up = linear(b, x, f"{prefix}.up_proj", hidden, ffn, bias=False)
    gated = b.op("Mul", activation(b, gate, act), up)
    return linear(b, gated, f"{prefix}.down_proj", ffn, hidden, bias=False)


def activation(b: GraphBuilder, x: str, act: str) -> str:
    if act == "silu":
        return b.op("Mul", x, b.op("Sigmoid", x))
    if act == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.op("Mul", b.op("Pow", x, b.const(3.0, np.float32)), b.const(0.044715, np.float32))
        inner = b.op("Mul", b.op("Add", x, cube), b.const(math.sqrt(2 / math.pi), np.float32))
        one_plus = b.op("Add", b.op("Tanh", inner), b.const(1.0, np.float32))
        return b.op("Mul", b.op("Mul", x, b.const(0.5, np.float32)), one_plus)
    raise ValueError(f"unknown activation {act!r}")


def softcap(b: GraphBuilder, x: str, cap: float) -> str:
    """cap * tanh(x / cap) (Gemma 2's soft-capping)."""
    return b.op("Mul", b.op("Tanh", b.op("Div", x, b.const(cap, np.float32))), b.const(cap, np.float32))
