"""BERT encoder, decomposed the way torch.onnx.export writes HF's BertModel.

Word + position + token-type embeddings and a LayerNorm; an additive attention mask computed from the
int64 attention_mask input (Unsqueeze, Cast, 1 - m, * -10000); post-LN layers with separate q/k/v
projections and the erf GELU written out (Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5); an optional
pooler (first token, Gemm, Tanh). Encoders have no KV cache, so there is a single mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

from models._builder import FLOAT, INT64, GraphBuilder, layer_norm, linear, merge_heads, split_heads


@dataclass(frozen=True)
class BertConfig:
    num_layers: int
    hidden: int
    num_heads: int
    ffn: int
    vocab: int
    max_pos: int
    type_vocab: int
    ln_eps: float
    pooler: bool
    weights: str  # default weights mode for this config

    @property
    def head_dim(self) -> int:
        return self.hidden // self.num_heads


# https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json
BERT_BASE = BertConfig(
    num_layers=12, hidden=768, num_heads=12, ffn=3072, vocab=30522, max_pos=512, type_vocab=2,
    ln_eps=1e-12, pooler=True, weights="random",
)

# The pre-4.3x HF value: newer versions use finfo(dtype).min; either way masked keys get ~zero weight.
_MASK_SCALE = -10000.0


def describe(cfg: BertConfig) -> str:
    return (
        f"BERT encoder, {cfg.num_layers} layers, hidden {cfg.hidden}, {cfg.num_heads} heads, "
        f"ffn {cfg.ffn}, vocab {cfg.vocab}, {cfg.weights} weights"
    )


def build(name: str, cfg: BertConfig, weights: str | None = None) -> onnx.ModelProto:
    b = GraphBuilder(name, weights or cfg.weights)
    dims = ["batch", "seq"]
    input_ids = b.input("input_ids", INT64, dims)
    attention_mask = b.input("attention_mask", INT64, dims)
    token_type_ids = b.input("token_type_ids", INT64, dims)

    with b.scope("bert"):
        with b.scope("embeddings"):
            x = _embeddings(b, cfg, input_ids, token_type_ids)
        mask = _additive_mask(b, attention_mask)
        with b.scope("encoder"):
            for i in range(cfg.num_layers):
                x = _layer(b, cfg, i, x, mask)
        b.output(x, "last_hidden_state", FLOAT, ["batch", "seq", cfg.hidden])
        if cfg.pooler:
            with b.scope("pooler"):
                b.output(_pooler(b, cfg, x), "pooler_output", FLOAT, ["batch", cfg.hidden])
    return b.model(describe(cfg))


def _embeddings(b: GraphBuilder, cfg: BertConfig, input_ids: str, token_type_ids: str) -> str:
    prefix = "bert.embeddings"
    words = b.op("Gather", b.weight(f"{prefix}.word_embeddings.weight", [cfg.vocab, cfg.hidden]), input_ids)
    types = b.op(
        "Gather", b.weight(f"{prefix}.token_type_embeddings.weight", [cfg.type_vocab, cfg.hidden]),
        token_type_ids,
    )
    # BertEmbeddings slices its registered position_ids buffer: position_ids[:, :seq].
    position_ids = b.op(
        "Slice", b.const(np.arange(cfg.max_pos)[None, :]), b.const([0]), b.dim(input_ids, 1), b.const([1])
    )
    table = b.weight(f"{prefix}.position_embeddings.weight", [cfg.max_pos, cfg.hidden])
    places = b.op("Gather", table, position_ids)
    x = b.op("Add", b.op("Add", words, types), places)
    return layer_norm(b, x, f"{prefix}.LayerNorm", cfg.hidden, cfg.ln_eps)


def _additive_mask(b: GraphBuilder, attention_mask: str) -> str:
    """[batch, seq] of 1/0 -> [batch, 1, 1, seq] of 0 / -10000, added to every layer's scores."""
    mask = b.op("Unsqueeze", attention_mask, b.const([1, 2]))
    mask = b.op("Cast", mask, to=FLOAT)
    inverted = b.op("Sub", b.const(1.0, np.float32), mask)
    return b.op("Mul", inverted, b.const(_MASK_SCALE, np.float32))


def _layer(b: GraphBuilder, cfg: BertConfig, i: int, x: str, mask: str) -> str:
    prefix = f"bert.encoder.layer.{i}"
    with b.scope(f"layer.{i}"):
        with b.scope("attention"):
            attn = _self_attention(b, cfg, f"{prefix}.attention.self", x, mask)
            with b.scope("output"):
                attn = linear(b, attn, f"{prefix}.attention.output.dense", cfg.hidden, cfg.hidden)
                x = layer_norm(b, b.op("Add", attn, x), f"{prefix}.attention.output.LayerNorm",
                               cfg.hidden, cfg.ln_eps)
        with b.scope("intermediate"):
            h = linear(b, x, f"{prefix}.intermediate.dense", cfg.hidden, cfg.ffn)
            h = _gelu_erf(b, h)
        with b.scope("output"):
            h = linear(b, h, f"{prefix}.output.dense", cfg.ffn, cfg.hidden)
            x = layer_norm(b, b.op("Add", h, x), f"{prefix}.output.LayerNorm", cfg.hidden, cfg.ln_eps)
    return x


def _self_attention(b: GraphBuilder, cfg: BertConfig, prefix: str, x: str, mask: str) -> str:
    heads, hd = cfg.num_heads, cfg.head_dim
    with b.scope("self"):
        q = split_heads(b, linear(b, x, f"{prefix}.query", cfg.hidden, cfg.hidden), heads, hd)
        # key.transpose(-1, -2) folds into the head split: one Transpose straight to [b, h, d, s].
        k = linear(b, x, f"{prefix}.key", cfg.hidden, cfg.hidden)
        k_t = split_heads(b, k, heads, hd, perm=(0, 2, 3, 1))
        v = split_heads(b, linear(b, x, f"{prefix}.value", cfg.hidden, cfg.hidden), heads, hd)
        scores = b.op("Div", b.op("MatMul", q, k_t), b.const(math.sqrt(hd), np.float32))
        scores = b.op("Add", scores, mask)
        context = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
        return merge_heads(b, context, cfg.hidden)


def _gelu_erf(b: GraphBuilder, x: str) -> str:
    """Exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports F.gelu before opset 20."""
    erf = b.op("Erf", b.op("Div", x, b.const(math.sqrt(2.0), np.float32)))
    return b.op("Mul", b.op("Mul", x, b.op("Add", erf, b.const(1.0, np.float32))), b.const(0.5, np.float32))


def _pooler(b: GraphBuilder, cfg: BertConfig, x: str) -> str:
    """tanh(dense(hidden[:, 0])); a Linear on a 2-D input exports as Gemm with the [out, in] weight."""
    first = b.op("Gather", x, b.const(0), axis=1)
    weight = b.weight("bert.pooler.dense.weight", [cfg.hidden, cfg.hidden])
    bias = b.weight("bert.pooler.dense.bias", [cfg.hidden], init="zeros")
    return b.op("Tanh", b.op("Gemm", first, weight, bias, transB=1))
