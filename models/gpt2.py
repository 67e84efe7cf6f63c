"""GPT-2 decoder, decomposed the way torch.onnx.export writes HF's GPT2LMHeadModel.

Token + position embeddings (Gather), pre-LayerNorm blocks with one fused QKV projection split into
heads, a causal mask Sliced from the [n_ctx, n_ctx] bool buffer and applied with Where, the tanh GELU
written out as Pow/Mul/Add/Tanh, and an untied [hidden, vocab] LM head (exported GPT-2 files carry the
transposed copy of wte as a second initializer after constant folding). Two modes: "prefill" and
"decode" (one token against a KV cache of past_seq entries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

from models._builder import (
    FLOAT,
    MASK_FILL,
    GraphBuilder,
    decoder_inputs,
    layer_norm,
    linear,
    merge_heads,
    position_ids,
    split_heads,
)

MODES = ("prefill", "decode")


@dataclass(frozen=True)
class GPT2Config:
    num_layers: int
    hidden: int
    num_heads: int
    vocab: int
    n_ctx: int
    ln_eps: float
    weights: str  # default weights mode for this config

    @property
    def head_dim(self) -> int:
        return self.hidden // self.num_heads


# https://huggingface.co/openai-community/gpt2/blob/main/config.json (n_layer, n_embd, n_head,
# vocab_size, n_positions, layer_norm_epsilon); the MLP is 4 * n_embd wide.
GPT2_SMALL = GPT2Config(
    num_layers=12, hidden=768, num_heads=12, vocab=50257, n_ctx=1024, ln_eps=1e-5, weights="random",
)


def describe(cfg: GPT2Config, mode: str) -> str:
    return (
        f"GPT-2 decoder, {cfg.num_layers} layers, hidden {cfg.hidden}, {cfg.num_heads} heads, "
        f"vocab {cfg.vocab}, {mode}, {cfg.weights} weights"
    )


def build(name: str, cfg: GPT2Config, mode: str, weights: str | None = None) -> onnx.ModelProto:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    b = GraphBuilder(name, weights or cfg.weights)
    decode = mode == "decode"
    input_ids, pasts, present_dims = decoder_inputs(b, cfg.num_layers, cfg.num_heads, cfg.head_dim, decode)

    with b.scope("transformer"):
        past_len = b.scalar_dim(pasts[0][0], 2) if decode else b.const(0)
        positions = position_ids(b, input_ids, past_len)
        tokens = b.op("Gather", b.weight("transformer.wte.weight", [cfg.vocab, cfg.hidden]), input_ids)
        places = b.op("Gather", b.weight("transformer.wpe.weight", [cfg.n_ctx, cfg.hidden]), positions)
        x = b.op("Add", tokens, places)
        # One query against the whole cache needs no mask; a prompt needs the causal one.
        mask = None if decode else _causal_mask(b, cfg, input_ids)
        for i in range(cfg.num_layers):
            x, present = _block(b, cfg, i, x, mask, pasts[i] if decode else None)
            b.output(present[0], f"present.{i}.key", FLOAT, present_dims)
            b.output(present[1], f"present.{i}.value", FLOAT, present_dims)
        x = layer_norm(b, x, "transformer.ln_f", cfg.hidden, cfg.ln_eps)
    logits = linear(b, x, "lm_head", cfg.hidden, cfg.vocab, bias=False)
    b.output(logits, "logits", FLOAT, ["batch", 1 if decode else "seq", cfg.vocab], first=True)
    return b.model(describe(cfg, mode))


def _causal_mask(b: GraphBuilder, cfg: GPT2Config, input_ids: str) -> str:
    """bias[:seq, :seq] of GPT-2's lower-triangular bool buffer (key_length == query_length in prefill)."""
    with b.scope("causal_mask"):
        table = b.buffer("transformer.causal_bias", np.tril(np.ones((cfg.n_ctx, cfg.n_ctx), dtype=bool)))
        seq = b.dim(input_ids, 1)
        ends = b.op("Concat", seq, seq, axis=0)
        return b.op("Slice", table, b.const([0, 0]), ends, b.const([0, 1]))


def _block(b: GraphBuilder, cfg: GPT2Config, i: int, x: str, mask, past):
    prefix = f"transformer.h.{i}"
    with b.scope(f"h.{i}"):
        h = layer_norm(b, x, f"{prefix}.ln_1", cfg.hidden, cfg.ln_eps)
        with b.scope("attn"):
            attn, present = _attention(b, cfg, f"{prefix}.attn", h, mask, past)
        x = b.op("Add", attn, x)
        h = layer_norm(b, x, f"{prefix}.ln_2", cfg.hidden, cfg.ln_eps)
        with b.scope("mlp"):
            h = linear(b, h, f"{prefix}.mlp.c_fc", cfg.hidden, 4 * cfg.hidden)
            with b.scope("act"):
                h = _gelu_tanh(b, h)
            h = linear(b, h, f"{prefix}.mlp.c_proj", 4 * cfg.hidden, cfg.hidden)
        x = b.op("Add", x, h)
    return x, present


def _attention(b: GraphBuilder, cfg: GPT2Config, prefix: str, h: str, mask, past):
    """Returns (c_proj output, (present_key, present_value))."""
    heads, hd = cfg.num_heads, cfg.head_dim
    qkv = linear(b, h, f"{prefix}.c_attn", cfg.hidden, 3 * cfg.hidden)
    q, k, v = b.op("Split", qkv, b.const([cfg.hidden] * 3), axis=2, outputs=3)
    q, k, v = (split_heads(b, t, heads, hd) for t in (q, k, v))
    if past is not None:
        k = b.op("Concat", past[0], k, axis=2)
        v = b.op("Concat", past[1], v, axis=2)
    scores = b.op("MatMul", q, b.op("Transpose", k, perm=[0, 1, 3, 2]))
    # GPT2Attention divides by sqrt(head_dim) rather than multiplying by its inverse.
    scores = b.op("Div", scores, b.const(math.sqrt(hd), np.float32))
    if mask is not None:
        scores = b.op("Where", mask, scores, b.const(MASK_FILL, np.float32))
    context = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
    out = linear(b, merge_heads(b, context, cfg.hidden), f"{prefix}.c_proj", cfg.hidden, cfg.hidden)
    return out, (k, v)


def _gelu_tanh(b: GraphBuilder, x: str) -> str:
    """HF NewGELUActivation: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    cube = b.op("Pow", x, b.const(3.0, np.float32))
    inner = b.op("Add", x, b.op("Mul", b.const(0.044715, np.float32), cube))
    tanh = b.op("Tanh", b.op("Mul", b.const(math.sqrt(2.0 / math.pi), np.float32), inner))
    half_x = b.op("Mul", b.const(0.5, np.float32), x)
    return b.op("Mul", half_x, b.op("Add", b.const(1.0, np.float32), tanh))
