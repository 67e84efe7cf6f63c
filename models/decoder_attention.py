"""Attention blocks of the decoder builders: grouped-query attention (windows, sinks, soft-capping,
q/k norms, biases) and DeepSeek's multi-head latent attention (MLA).

MLA caches one latent row per token and layer, [kv_lora_rank + qk_rope_dim] (576 for DeepSeek-V3),
instead of K and V per head. Prefill is written the way transformers writes it (the latent expanded by
kv_b_proj into per-head K and V); decode in the absorbed form serving engines (FlashMLA) run: W_UK is
folded into the query (q_nope @ W_UK -> a kv_lora_rank query), scores and the weighted sum run against
the latent cache itself (one "KV head" 576 wide, V its first kv_lora_rank columns), and W_UV maps the
result back to v_head_dim per head.
"""

from __future__ import annotations

import math

import numpy as np

from models._builder import GraphBuilder, linear, merge_heads, split_heads
from models.decoder_blocks import apply_rope, rms_norm, softcap
from models.decoder_config import DecoderConfig


def _repeat_kv(b: GraphBuilder, x: str, heads: int, kv_heads: int, head_dim: int) -> str:
    n_rep = heads // kv_heads
    if n_rep == 1:
        return x
    x = b.op("Expand", b.op("Unsqueeze", x, b.const([2])), b.const([1, 1, n_rep, 1, 1]))
    return b.op("Reshape", x, b.const([0, heads, -1, head_dim]))


def _scores_to_context(b: GraphBuilder, cfg: DecoderConfig, prefix: str, q: str, kt: str, v: str,
                       scale: float, mask: str | None) -> str:
    """softmax(q k^T * scale [softcap] [+ mask] [with sink]) v."""
    scores = b.op("Mul", b.op("MatMul", q, kt), b.const(scale, np.float32))
    if cfg.attn_softcap:
        scores = softcap(b, scores, cfg.attn_softcap)
    if mask is not None:
        scores = b.op("Add", scores, mask)
    if cfg.sinks:  # gpt-oss: a learned logit per head joins the softmax, then its column is dropped
        sink = b.weight(f"{prefix}.sinks", [1, cfg.num_heads, 1, 1])
        column = b.op("Expand", sink, b.op("Concat", b.dim(scores, 0), b.const([cfg.num_heads]),
                                           b.dim(scores, 2), b.const([1]), axis=0))
        probs = b.op("Softmax", b.op("Concat", scores, column, axis=-1), axis=-1)
        probs = b.op("Slice", probs, b.const([0]), b.const([-1]), b.const([-1]))
    else:
        probs = b.op("Softmax", scores, axis=-1)
    return b.op("MatMul", probs, v)


def gqa_attention(b: GraphBuilder, cfg: DecoderConfig, prefix: str, h: str, rope, mask, past):
    """(o_proj output, present (K, V)). Presents hold K after RoPE, like HF."""
    heads, kv_heads, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    bias = cfg.qkv_bias
    q = linear(b, h, f"{prefix}.q_proj", cfg.hidden, heads * hd, bias=bias)
    k = linear(b, h, f"{prefix}.k_proj", cfg.hidden, kv_heads * hd, bias=bias)
    v = linear(b, h, f"{prefix}.v_proj", cfg.hidden, kv_heads * hd, bias=bias)
    if cfg.qk_norm:  # per-head RMSNorm on [b, s, heads, hd] before the transpose
        q = b.op("Transpose", rms_norm(b, b.op("Reshape", q, b.const([0, 0, heads, hd])), f"{prefix}.q_norm",
                                       hd, cfg.rms_eps), perm=[0, 2, 1, 3])
        k = b.op("Transpose", rms_norm(b, b.op("Reshape", k, b.const([0, 0, kv_heads, hd])),
                                       f"{prefix}.k_norm", hd, cfg.rms_eps), perm=[0, 2, 1, 3])
    else:
        q, k = split_heads(b, q, heads, hd), split_heads(b, k, kv_heads, hd)
    v = split_heads(b, v, kv_heads, hd)
    q, k = apply_rope(b, q, rope, hd, False), apply_rope(b, k, rope, hd, False)
    if past is not None:
        k, v = b.op("Concat", past[0], k, axis=2), b.op("Concat", past[1], v, axis=2)
    present = (k, v)
    k, v = _repeat_kv(b, k, heads, kv_heads, hd), _repeat_kv(b, v, heads, kv_heads, hd)
    kt = b.op("Transpose", k, perm=[0, 1, 3, 2])
    context = _scores_to_context(b, cfg, prefix, q, kt, v, 1.0 / math.sqrt(hd), mask)
    out = linear(b, merge_heads(b, context, heads * hd), f"{prefix}.o_proj", heads * hd, cfg.hidden,
                 bias=cfg.o_bias)
    return out, present


def _mla_query(b: GraphBuilder, cfg: DecoderConfig, prefix: str, h: str, rope) -> tuple[str, str]:
    """(q_nope [b, H, s, nope], q_pe [b, H, s, rope] after RoPE)."""
    m, heads = cfg.mla, cfg.num_heads
    if m.q_lora_rank:
        q = linear(b, h, f"{prefix}.q_a_proj", cfg.hidden, m.q_lora_rank, bias=False)
        q = rms_norm(b, q, f"{prefix}.q_a_layernorm", m.q_lora_rank, cfg.rms_eps)
        q = linear(b, q, f"{prefix}.q_b_proj", m.q_lora_rank, heads * m.qk_head_dim, bias=False)
    else:
        q = linear(b, h, f"{prefix}.q_proj", cfg.hidden, heads * m.qk_head_dim, bias=False)
    q = split_heads(b, q, heads, m.qk_head_dim)
    q_nope, q_pe = b.op("Split", q, b.const([m.qk_nope_dim, m.qk_rope_dim]), axis=-1, outputs=2)
    return q_nope, apply_rope(b, q_pe, rope, m.qk_rope_dim, cfg.rope_interleave)


def _mla_latent(b: GraphBuilder, cfg: DecoderConfig, prefix: str, h: str, rope) -> tuple[str, str]:
    """(normed latent c_kv [b, s, kv_lora], k_pe [b, 1, s, rope] after RoPE)."""
    m = cfg.mla
    ckv = linear(b, h, f"{prefix}.kv_a_proj_with_mqa", cfg.hidden, m.kv_lora_rank + m.qk_rope_dim, bias=False)
    c, k_pe = b.op("Split", ckv, b.const([m.kv_lora_rank, m.qk_rope_dim]), axis=-1, outputs=2)
    c = rms_norm(b, c, f"{prefix}.kv_a_layernorm", m.kv_lora_rank, cfg.rms_eps)
    k_pe = split_heads(b, k_pe, 1, m.qk_rope_dim)
    return c, apply_rope(b, k_pe, rope, m.qk_rope_dim, cfg.rope_interleave)


def mla_attention(b: GraphBuilder, cfg: DecoderConfig, prefix: str, h: str, rope, mask, past):
    """(o_proj output, (present latent [b, 1, seq_kv, kv_lora + rope],)). `past` is (latent,) in decode."""
    m, heads = cfg.mla, cfg.num_heads
    scale = 1.0 / math.sqrt(m.qk_head_dim)
    q_nope, q_pe = _mla_query(b, cfg, prefix, h, rope)
    c, k_pe = _mla_latent(b, cfg, prefix, h, rope)
    latent = b.op("Concat", b.op("Unsqueeze", c, b.const([1])), k_pe, axis=-1)  # [b, 1, s, 576]
    if past is not None:
        latent = b.op("Concat", past[0], latent, axis=2)
        out = _mla_absorbed(b, cfg, prefix, q_nope, q_pe, latent, scale)
    else:
        kv = linear(b, c, f"{prefix}.kv_b_proj", m.kv_lora_rank, heads * (m.qk_nope_dim + m.v_head_dim),
                    bias=False)
        kv = split_heads(b, kv, heads, m.qk_nope_dim + m.v_head_dim)
        k_nope, v = b.op("Split", kv, b.const([m.qk_nope_dim, m.v_head_dim]), axis=-1, outputs=2)
        k_pe_heads = b.op("Expand", k_pe, b.op("Concat", b.const([1, heads]), b.dim(k_pe, 2),
                                                b.const([m.qk_rope_dim]), axis=0))
        k = b.op("Concat", k_nope, k_pe_heads, axis=-1)
        q = b.op("Concat", q_nope, q_pe, axis=-1)
        kt = b.op("Transpose", k, perm=[0, 1, 3, 2])
        out = _scores_to_context(b, cfg, prefix, q, kt, v, scale, mask)
    merged = merge_heads(b, out, heads * m.v_head_dim)
    return linear(b, merged, f"{prefix}.o_proj", heads * m.v_head_dim, cfg.hidden, bias=False), (latent,)


def _mla_absorbed(b: GraphBuilder, cfg: DecoderConfig, prefix: str, q_nope: str, q_pe: str, latent: str,
                  scale: float) -> str:
    """Decode against the latent cache: [b, H, 1, v_head_dim] per head."""
    m, heads = cfg.mla, cfg.num_heads
    # kv_b_proj's two halves, per head: W_UK [H, nope, kv_lora] and W_UV [H, kv_lora, v]
    w_uk = b.weight(f"{prefix}.kv_b_proj.w_uk", [heads, m.qk_nope_dim, m.kv_lora_rank])
    w_uv = b.weight(f"{prefix}.kv_b_proj.w_uv", [heads, m.kv_lora_rank, m.v_head_dim])
    q_latent = b.op("MatMul", q_nope, w_uk)  # [b, H, 1, kv_lora]
    q = b.op("Concat", q_latent, q_pe, axis=-1)
    kt = b.op("Transpose", latent, perm=[0, 1, 3, 2])
    values = b.op("Slice", latent, b.const([0]), b.const([m.kv_lora_rank]), b.const([-1]))
    context = _scores_to_context(b, cfg, prefix, q, kt, values, scale, None)  # [b, H, 1, kv_lora]
    return b.op("MatMul", context, w_uv)
