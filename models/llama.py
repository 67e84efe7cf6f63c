"""Llama-style decoder, decomposed the way torch.onnx.export writes HF's LlamaForCausalLM.

Per layer: RMSNorm as Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul, separate q/k/v projections without
bias, RoPE with rotate_half as Slice/Neg/Concat, grouped-query attention with HF's repeat_kv
(Unsqueeze/Expand/Reshape), an additive causal mask in prefill, and a SwiGLU MLP (SiLU written as
Sigmoid then Mul). Two modes: "prefill" (the whole prompt, no cache in) and "decode" (one new token
against a KV cache of past_seq entries).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import onnx

from models._builder import (
    FLOAT,
    MASK_FILL,
    GraphBuilder,
    decoder_inputs,
    linear,
    merge_heads,
    position_ids,
    split_heads,
)

MODES = ("prefill", "decode")


@dataclass(frozen=True)
class LlamaConfig:
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    ffn: int
    vocab: int
    max_pos: int
    rope_theta: float
    rms_eps: float
    weights: str  # default weights mode for this config

    @property
    def head_dim(self) -> int:
        return self.hidden // self.num_heads


# Not a published model: a Llama-shaped toy (GQA with 2 query heads per kv head, an odd ffn width)
# small enough for onnxruntime in unit tests.
LLAMA_TINY = LlamaConfig(
    num_layers=2, hidden=64, num_heads=4, num_kv_heads=2, ffn=172, vocab=256, max_pos=256,
    rope_theta=10000.0, rms_eps=1e-5, weights="random",
)
# https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
LLAMA_3_8B = LlamaConfig(
    num_layers=32, hidden=4096, num_heads=32, num_kv_heads=8, ffn=14336, vocab=128256, max_pos=8192,
    rope_theta=500000.0, rms_eps=1e-5, weights="external",
)
# https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json
LLAMA_3_70B = LlamaConfig(
    num_layers=80, hidden=8192, num_heads=64, num_kv_heads=8, ffn=28672, vocab=128256, max_pos=8192,
    rope_theta=500000.0, rms_eps=1e-5, weights="external",
)
# https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json and .../Llama-3.1-70B: the
# Llama-3 shapes with a 128k context (max_position_embeddings 131072).
# NB: Llama 3.1's "llama3" rope scaling (factor 8) changes the cos/sin table values only, not a shape or
# a cost, so the tables here are the unscaled ones.
LLAMA_3_1_8B = LlamaConfig(
    num_layers=32, hidden=4096, num_heads=32, num_kv_heads=8, ffn=14336, vocab=128256, max_pos=131072,
    rope_theta=500000.0, rms_eps=1e-5, weights="external",
)
LLAMA_3_1_70B = LlamaConfig(
    num_layers=80, hidden=8192, num_heads=64, num_kv_heads=8, ffn=28672, vocab=128256, max_pos=131072,
    rope_theta=500000.0, rms_eps=1e-5, weights="external",
)


def describe(cfg: LlamaConfig, mode: str) -> str:
    return (
        f"Llama decoder, {cfg.num_layers} layers, hidden {cfg.hidden}, {cfg.num_heads} heads "
        f"({cfg.num_kv_heads} kv), ffn {cfg.ffn}, vocab {cfg.vocab}, {mode}, {cfg.weights} weights"
    )


def build(name: str, cfg: LlamaConfig, mode: str, weights: str | None = None) -> onnx.ModelProto:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    b = GraphBuilder(name, weights or cfg.weights)
    decode = mode == "decode"
    input_ids, pasts, present_dims = decoder_inputs(b, cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, decode)

    with b.scope("model"):
        x = b.op("Gather", b.weight("model.embed_tokens.weight", [cfg.vocab, cfg.hidden]), input_ids)
        with b.scope("rotary_emb"):
            past_len = b.scalar_dim(pasts[0][0], 2) if decode else b.const(0)
            positions = position_ids(b, input_ids, past_len)
            rope = _rope_tables(b, cfg, positions)
        # One query against the whole cache needs no mask; a prompt needs the causal one.
        mask = None if decode else _causal_mask(b, positions)
        for i in range(cfg.num_layers):
            past = pasts[i] if decode else None
            x, present = _decoder_layer(b, cfg, i, x, rope, mask, past)
            b.output(present[0], f"present.{i}.key", FLOAT, present_dims)
            b.output(present[1], f"present.{i}.value", FLOAT, present_dims)
        with b.scope("norm"):
            x = _rms_norm(b, x, "model.norm", cfg)
    logits = linear(b, x, "lm_head", cfg.hidden, cfg.vocab, bias=False)
    b.output(logits, "logits", FLOAT, ["batch", 1 if decode else "seq", cfg.vocab], first=True)
    return b.model(describe(cfg, mode))


def _rope_tables(b: GraphBuilder, cfg: LlamaConfig, positions: str) -> tuple[str, str]:
    """cos/sin rows for the positions, shaped [1, 1, seq, head_dim] to broadcast over batch and heads.

    HF computes cos/sin once per forward in LlamaRotaryEmbedding; here the [max_pos, head_dim] tables
    are precomputed buffers and Gathered, which is what constant folding leaves after export.
    """
    if b.weights == "external":  # only the tables' shape and dtype go into the model (see b.buffer)
        shape_only = np.broadcast_to(np.float32(0), (cfg.max_pos, cfg.head_dim))
        values = (shape_only, shape_only)
    else:
        values = _rope_values(cfg.rope_theta, cfg.head_dim, cfg.max_pos)
    tables = []
    for fn_name, table_values in zip(("cos", "sin"), values, strict=True):
        table = b.buffer(f"model.rotary_emb.{fn_name}_cached", table_values)
        rows = b.op("Gather", table, positions)
        tables.append(b.op("Unsqueeze", rows, b.const([0, 1])))
    return tables[0], tables[1]


@functools.lru_cache(maxsize=4)
def _rope_values(theta: float, head_dim: int, max_pos: int) -> tuple[np.ndarray, np.ndarray]:
    """The [max_pos, head_dim] float32 cos and sin tables, computed once per process for each rotary
    configuration (a serving sweep builds the same model's graphs several times; read-only arrays)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = np.outer(np.arange(max_pos, dtype=np.float64), inv_freq)
    angles = np.concatenate([freqs, freqs], axis=-1)
    out = tuple(fn(angles).astype(np.float32) for fn in (np.cos, np.sin))
    for a in out:
        a.flags.writeable = False
    return out


def _causal_mask(b: GraphBuilder, positions: str) -> str:
    """Additive [seq, seq] mask: 0 where key <= query, MASK_FILL above the diagonal (HF's causal_mask)."""
    with b.scope("causal_mask"):
        rows = b.op("Unsqueeze", positions, b.const([1]))
        cols = b.op("Unsqueeze", positions, b.const([0]))
        allowed = b.op("GreaterOrEqual", rows, cols)
        return b.op("Where", allowed, b.const(0.0, np.float32), b.const(MASK_FILL, np.float32))


def _rms_norm(b: GraphBuilder, x: str, prefix: str, cfg: LlamaConfig) -> str:
    """LlamaRMSNorm: weight * (x * rsqrt(mean(x^2) + eps)); torch exports rsqrt as Sqrt + Reciprocal."""
    weight = b.weight(f"{prefix}.weight", [cfg.hidden], init="ones")
    variance = b.op("ReduceMean", b.op("Pow", x, b.const(2.0, np.float32)), b.const([-1]), keepdims=1)
    std = b.op("Sqrt", b.op("Add", variance, b.const(cfg.rms_eps, np.float32)))
    normed = b.op("Mul", x, b.op("Reciprocal", std))
    return b.op("Mul", weight, normed)


def _decoder_layer(b, cfg: LlamaConfig, i: int, x: str, rope, mask, past):
    prefix = f"model.layers.{i}"
    with b.scope(f"layers.{i}"):
        with b.scope("input_layernorm"):
            h = _rms_norm(b, x, f"{prefix}.input_layernorm", cfg)
        with b.scope("self_attn"):
            attn, present = _attention(b, cfg, f"{prefix}.self_attn", h, rope, mask, past)
        x = b.op("Add", x, attn)
        with b.scope("post_attention_layernorm"):
            h = _rms_norm(b, x, f"{prefix}.post_attention_layernorm", cfg)
        with b.scope("mlp"):
            mlp = _swiglu(b, cfg, f"{prefix}.mlp", h)
        x = b.op("Add", x, mlp)
    return x, present


def _attention(b, cfg: LlamaConfig, prefix: str, h: str, rope, mask, past):
    """Returns (o_proj output, (present_key, present_value)); presents hold K after RoPE, like HF."""
    heads, kv_heads, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    q = split_heads(b, linear(b, h, f"{prefix}.q_proj", cfg.hidden, heads * hd, bias=False), heads, hd)
    k = split_heads(b, linear(b, h, f"{prefix}.k_proj", cfg.hidden, kv_heads * hd, bias=False), kv_heads, hd)
    v = split_heads(b, linear(b, h, f"{prefix}.v_proj", cfg.hidden, kv_heads * hd, bias=False), kv_heads, hd)
    q, k = _apply_rope(b, q, rope, hd), _apply_rope(b, k, rope, hd)
    if past is not None:
        k = b.op("Concat", past[0], k, axis=2)
        v = b.op("Concat", past[1], v, axis=2)
    present = (k, v)
    k, v = _repeat_kv(b, k, heads, kv_heads, hd), _repeat_kv(b, v, heads, kv_heads, hd)
    scores = b.op("MatMul", q, b.op("Transpose", k, perm=[0, 1, 3, 2]))
    scores = b.op("Mul", scores, b.const(1.0 / math.sqrt(hd), np.float32))
    if mask is not None:
        scores = b.op("Add", scores, mask)
    context = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
    merged = merge_heads(b, context, heads * hd)
    return linear(b, merged, f"{prefix}.o_proj", heads * hd, cfg.hidden, bias=False), present


def _apply_rope(b: GraphBuilder, x: str, rope: tuple[str, str], head_dim: int) -> str:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2])."""
    cos, sin = rope
    half = head_dim // 2
    axes = b.const([-1])
    first = b.op("Slice", x, b.const([0]), b.const([half]), axes)
    second = b.op("Slice", x, b.const([half]), b.const([np.iinfo(np.int64).max]), axes)
    rotated = b.op("Concat", b.op("Neg", second), first, axis=-1)
    return b.op("Add", b.op("Mul", x, cos), b.op("Mul", rotated, sin))


def _repeat_kv(b: GraphBuilder, x: str, heads: int, kv_heads: int, head_dim: int) -> str:
    """HF repeat_kv: [b, kv, s, d] -> [b, kv, n_rep, s, d] -> [b, heads, s, d]; a no-op without GQA."""
    n_rep = heads // kv_heads
    if n_rep == 1:
        return x
    x = b.op("Unsqueeze", x, b.const([2]))
    # Expand broadcasts both ways, so ones keep the symbolic batch and sequence dims.
    x = b.op("Expand", x, b.const([1, 1, n_rep, 1, 1]))
    return b.op("Reshape", x, b.const([0, heads, -1, head_dim]))


def _swiglu(b: GraphBuilder, cfg: LlamaConfig, prefix: str, h: str) -> str:
    """down(silu(gate(h)) * up(h)); torch exports SiLU as Sigmoid then Mul."""
    gate = linear(b, h, f"{prefix}.gate_proj", cfg.hidden, cfg.ffn, bias=False)
    silu = b.op("Mul", gate, b.op("Sigmoid", gate))
    up = linear(b, h, f"{prefix}.up_proj", cfg.hidden, cfg.ffn, bias=False)
    return linear(b, b.op("Mul", silu, up), f"{prefix}.down_proj", cfg.ffn, cfg.hidden, bias=False)
