"""A config-driven decoder builder (models.decoder_config.DecoderConfig) for the families of
transformers' config.json: dense GQA (llama, mistral, qwen2/3, phi3), sliding-window and local/global
layers (mistral, gemma2/3, gpt-oss), attention sinks (gpt-oss), soft-capping (gemma2), MoE (qwen3_moe,
mixtral, deepseek_v3, gpt-oss) and MLA (deepseek_v3, Kimi-K2).

Modes: "prefill" (input_ids [batch, seq], causal masks) and "decode" (one token per sequence against
a cache: per layer past K/V [batch, kv_heads, past_seq, head_dim], or MLA's latent [batch, 1, past_seq,
kv_lora_rank + qk_rope_dim]). A sliding-window layer's decode cache holds at most its window:
Min(past_seq, W) rows (a ring buffer, as serving engines keep it).
"""

from __future__ import annotations

import numpy as np
import onnx

from models._builder import FLOAT, INT64, GraphBuilder, linear
from models.decoder_attention import gqa_attention, mla_attention
from models.decoder_blocks import gated_mlp, masks, rms_norm, rope_tables, softcap
from models.decoder_config import DecoderConfig
from models.decoder_moe import moe_mlp

MODES = ("prefill", "decode")


def describe(cfg: DecoderConfig, mode: str) -> str:
    total, active = cfg.param_counts()
    kind = f"MoE {cfg.moe.experts}x top-{cfg.moe.top_k}" if cfg.moe else "dense"
    kind += ", MLA" if cfg.mla else ""
    windows = sorted({w for w in cfg.layer_windows if w >= 0})
    win = f", window {'/'.join(map(str, windows))}" if windows else ""
    return (f"{cfg.model_type} decoder ({kind}{win}), {cfg.num_layers} layers, hidden {cfg.hidden}, "
            f"{total / 1e9:.1f}B params ({active / 1e9:.1f}B active), {mode}")


def _past_len(cfg: DecoderConfig, layer: int) -> str:
    w = cfg.window(layer)
    return "past_seq" if w < 0 else f"Min(past_seq, {w})"


def _inputs(b: GraphBuilder, cfg: DecoderConfig, decode: bool):
    input_ids = b.input("input_ids", INT64, ["batch", 1 if decode else "seq"])
    pasts = []
    for i in range(cfg.num_layers if decode else 0):
        if cfg.mla:
            width = cfg.mla.kv_lora_rank + cfg.mla.qk_rope_dim
            pasts.append((b.input(f"past_key_values.{i}.latent", FLOAT, ["batch", 1, "past_seq", width]),))
        else:
            dims = ["batch", cfg.num_kv_heads, _past_len(cfg, i), cfg.head_dim]
            pasts.append((b.input(f"past_key_values.{i}.key", FLOAT, dims),
                          b.input(f"past_key_values.{i}.value", FLOAT, dims)))
    return input_ids, pasts


def _present_dims(cfg: DecoderConfig, layer: int, decode: bool) -> list:
    seq = f"{_past_len(cfg, layer)} + 1" if decode else "seq"
    if cfg.mla:
        return ["batch", 1, seq, cfg.mla.kv_lora_rank + cfg.mla.qk_rope_dim]
    return ["batch", cfg.num_kv_heads, seq, cfg.head_dim]


def build(name: str, cfg: DecoderConfig, mode: str, weights: str | None = None,
          kv_cache: bool = True) -> onnx.ModelProto:
    """The decoder graph of `cfg` in `mode`. `kv_cache` False (prefill only): no present K/V outputs,
    the forward pass transformers runs with use_cache=False (what an export without a cache holds)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not kv_cache and mode == "decode":
        raise ValueError("a decode step reads and writes the KV cache (kv_cache=False is prefill only)")
    b = GraphBuilder(name, weights or cfg.weights)
    decode = mode == "decode"
    input_ids, pasts = _inputs(b, cfg, decode)
    with b.scope("model"):
        embed = b.weight("model.embed_tokens.weight", [cfg.vocab, cfg.hidden])
        x = b.op("Gather", embed, input_ids)
        if cfg.embed_scale:
            x = b.op("Mul", x, b.const(cfg.hidden ** 0.5, np.float32))
        with b.scope("rotary_emb"):
            # Range(0, seq) (+ past): the form shape inference can size, as the export writes it
            positions = b.op("Range", b.const(0), b.scalar_dim(input_ids, 1), b.const(1))
            if decode:
                positions = b.op("Add", positions, b.scalar_dim(pasts[0][0], 2))
            rope = rope_tables(b, cfg, positions, cfg.mla.qk_rope_dim if cfg.mla else cfg.head_dim)
        layer_masks = {} if decode else masks(b, cfg, positions)
        for i in range(cfg.num_layers):
            past = pasts[i] if decode else None
            x, present = _layer(b, cfg, i, x, rope, layer_masks.get(cfg.window(i)), past)
            names = ("latent",) if cfg.mla else ("key", "value")
            for tensor, kind in zip(present, names, strict=True) if kv_cache else ():
                b.output(tensor, f"present.{i}.{kind}", FLOAT, _present_dims(cfg, i, decode))
        x = rms_norm(b, x, "model.norm", cfg.hidden, cfg.rms_eps)
    if cfg.tie_embeddings:
        logits = b.op("MatMul", x, b.op("Transpose", embed, perm=[1, 0]))
    else:
        logits = linear(b, x, "lm_head", cfg.hidden, cfg.vocab, bias=False)
    if cfg.final_softcap:
        logits = softcap(b, logits, cfg.final_softcap)
    b.output(logits, "logits", FLOAT, ["batch", 1 if decode else "seq", cfg.vocab], first=True)
    return b.model(describe(cfg, mode))


def _layer(b: GraphBuilder, cfg: DecoderConfig, i: int, x: str, rope, mask, past):
    prefix = f"model.layers.{i}"
    attend = mla_attention if cfg.mla else gqa_attention
    with b.scope(f"layers.{i}"):
        h = rms_norm(b, x, f"{prefix}.input_layernorm", cfg.hidden, cfg.rms_eps)
        with b.scope("self_attn"):
            attn, present = attend(b, cfg, f"{prefix}.self_attn", h, rope, mask, past)
        if cfg.sandwich_norm:
            attn = rms_norm(b, attn, f"{prefix}.post_attention_layernorm", cfg.hidden, cfg.rms_eps)
        x = b.op("Add", x, attn)
        norm = "pre_feedforward_layernorm" if cfg.sandwich_norm else "post_attention_layernorm"
        h = rms_norm(b, x, f"{prefix}.{norm}", cfg.hidden, cfg.rms_eps)
        with b.scope("mlp"):
            if cfg.is_moe_layer(i):
                mlp = moe_mlp(b, cfg, f"{prefix}.mlp", h)
            else:
                mlp = gated_mlp(b, h, f"{prefix}.mlp", cfg.hidden, cfg.ffn, cfg.act)
        if cfg.sandwich_norm:
            mlp = rms_norm(b, mlp, f"{prefix}.post_feedforward_layernorm", cfg.hidden, cfg.rms_eps)
        x = b.op("Add", x, mlp)
    return x, present
