"""Attention and rotary embeddings: ONNX Attention / RotaryEmbedding (opset 23+) and onnxruntime's
com.microsoft Attention, MultiHeadAttention, GroupQueryAttention and RotaryEmbedding.

Every attention op is priced as one fused flash-attention kernel (`attention_core`): per (batch, query
head, score) QK^T and PV are 2 * head_dim FLOPs each on tensor cores, the softmax one SFU exp and ~4
CUDA ops (scale, running max, subtract, sum/rescale). DRAM bytes are the flash-attention minimum: Q,
K, V, the KV cache, masks and biases read once, the output and present K/V written once, and no
S x S intermediate (unless the op is asked to output it). Grouped-query K/V are read at kv heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from estimator.cost.registry import (
    SFU,
    ZERO,
    CostError,
    OpView,
    Work,
    alu_unit,
    io_bytes,
    matmul_unit,
    register,
    traffic,
)
from estimator.dtypes import itemsize
from estimator.ir import Expr, Tensor

SOFTMAX_ALU_OPS = 4  # per score: scale, running max, subtract, sum with rescale
ROTARY_OPS = 3  # per rotated element: x*cos, x_pair*sin, add
MS = "com.microsoft"


@dataclass(frozen=True)
class Core:
    """The shape of one attention core. `seq_new` K/V rows arrive this call, `past` come from a
    cache, so a query sees up to seq_kv = past + seq_new keys."""

    batch: Expr
    heads: Expr  # query heads
    seq_q: Expr
    seq_new: Expr
    past: Expr
    dk: Expr
    dv: Expr
    causal: bool
    dtype: str
    window: int = -1  # sliding window (keys left of the query), -1 for none
    kv_heads: Expr | None = None  # heads of K and V (grouped-query attention); None: as `heads`

    @property
    def seq_kv(self) -> Expr:
        return self.past + self.seq_new


# op (domain, op_type) -> its Core from an OpView: the tile model (estimator/pricing) prices the same core.
CORES: dict[tuple[str, str], object] = {}


def core_of_op(op: OpView) -> Core | None:
    """The attention core of an attention op (None for other ops)."""
    fn = CORES.get(("" if op.node.domain in ("", "ai.onnx") else op.node.domain, op.op_type))
    return None if fn is None else fn(op)


def _provably_equal(a: Expr, b: Expr) -> bool:
    return sympy.expand(sympy.sympify(a) - b) == 0


def scores_per_head(core: Core) -> Expr:
    """Scores one (batch, head) computes. Full: seq_q * seq_kv. Causal (bottom-right aligned, query i
    sees past + i + 1 keys) when provably seq_new == seq_q: seq_q * past + seq_q * (seq_q + 1) / 2,
    the exact triangle (prefill: seq_q * (seq_q + 1) / 2; decode: seq_kv). NB: a causal op whose
    lengths are not provably equal keeps the full count. A sliding window caps it at
    seq_q * (window + 1) (NB: an upper bound in prefill, exact in decode)."""
    count = core.seq_q * core.seq_kv
    if core.causal and _provably_equal(core.seq_new, core.seq_q):
        count = core.seq_q * core.past + core.seq_q * (core.seq_q + 1) / 2
    if core.window >= 0:
        count = sympy.Min(count, core.seq_q * (core.window + 1))
    return count


def attention_core(core: Core, softcap: bool = False) -> Work:
    """FLOPs of the fused kernel (no bytes): 2 * (dk + dv) per score on matmul_unit (4 * head_dim when
    dk == dv), 1 SFU exp and 4 CUDA ops per score; a softcap adds a tanh (SFU) and 2 CUDA ops."""
    scores = core.batch * core.heads * scores_per_head(core)
    alu_ops, sfu_ops = SOFTMAX_ALU_OPS * scores, scores
    if softcap:
        alu_ops, sfu_ops = alu_ops + 2 * scores, sfu_ops + scores
    return Work({matmul_unit(core.dtype): 2 * (core.dk + core.dv) * scores,
                 alu_unit(core.dtype): alu_ops, (SFU, "fp32"): sfu_ops})


def _cache(op: OpView, past_i: int, present_is: tuple[int, ...], axis: int, seq_new: Expr,
           shared: bool = False) -> tuple[Expr, Expr]:
    """(past length, present bytes not written) of a KV cache. When past and present share one buffer
    (`shared`, or present provably as long as past) the kernel appends only the new rows in place.
    NB: a shared buffer's valid length is a run-time value (seqlens_k, past_sequence_length); it is
    priced at the buffer's capacity, an upper bound."""
    if not op.has_input(past_i):
        return ZERO, ZERO
    capacity = op.input(past_i).shape[axis]
    presents = [op.outputs[i] for i in present_is if i < len(op.outputs) and op.outputs[i] is not None]
    shapes = [t.shape for t in presents if t.shape is not None]
    shared = shared or any(_provably_equal(s[axis], capacity) for s in shapes)
    if not shared:
        return capacity, ZERO
    unwritten = sympy.Add(*(traffic(t) for t in presents)) * (capacity - seq_new) / capacity
    return capacity - seq_new, sympy.expand(unwritten)


def _rotary_rows_bytes(op: OpView, cos_i: int, sin_i: int, rows: Expr) -> Expr:
    """Extra bytes of reading only `rows` rows of the cos/sin caches instead of the whole caches
    (which io_bytes counted): negative or zero."""
    delta = ZERO
    for i in (cos_i, sin_i):
        if op.has_input(i):
            cache = op.input(i)
            delta += rows * cache.shape[-1] * itemsize(cache.dtype) - traffic(cache)
    return delta


def _heads(op: OpView, name: str) -> int:
    value = op.attr(name)
    if not value:
        raise CostError(f"{op.op_type}: attribute {name} is required here")
    return int(value)


# ---- ONNX (opset 23+) -----------------------------------------------------------------------------

def _bhsd(op: OpView, t: Tensor, heads_attr: str) -> tuple[Expr, Expr, Expr, Expr]:
    """(batch, heads, seq, head_dim) of a 4-D [B, H, S, d] or 3-D [B, S, H*d] tensor."""
    if len(t.shape) == 4:
        return t.shape
    if len(t.shape) == 3:
        heads = _heads(op, heads_attr)
        return t.shape[0], sympy.Integer(heads), t.shape[1], t.shape[2] / heads
    raise CostError(f"{op.op_type}: {t.name} has rank {len(t.shape)}, expected 3 or 4")


def onnx_attention_core(op: OpView) -> Core:
    q = op.input(0)
    batch, heads, seq_q, dk = _bhsd(op, q, "q_num_heads")
    _, kv_heads, seq_new, _ = _bhsd(op, op.input(1), "kv_num_heads")
    dv = _bhsd(op, op.input(2), "kv_num_heads")[3]
    past, _ = _cache(op, 4, (), 2, seq_new)
    return Core(batch, heads, seq_q, seq_new, past, dk, dv, bool(op.attr("is_causal", 0)), q.dtype,
                kv_heads=kv_heads)


CORES[("", "Attention")] = onnx_attention_core


@register("Attention")
def onnx_attention(op: OpView) -> Work:
    """ONNX Attention (Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen): `attention_core`
    over q_num_heads, kv length = past + K's length, causal per is_causal; bytes = every input read
    once (K/V and the cache at kv_num_heads), Y, present K/V and qk_matmul_output written once.
    NB: attn_mask and nonpad_kv_seqlen skip no work (only is_causal does)."""
    core = onnx_attention_core(op)
    return attention_core(core, softcap=bool(op.attr("softcap", 0.0))) + Work({}, *io_bytes(op))


def _rotary(op: OpView, x_i: int, cos_i: int, sin_i: int, pos_i: int) -> Work:
    """Shared by both RotaryEmbeddings. X is [B, H, S, d] or [B, S, hidden] (num_heads needed only
    for partial rotation). 3 CUDA ops per rotated element (numel(X) * rotary_dim / head_dim); bytes:
    X read and Y written once, cos and sin read at the rows used: [B, S, rotary_dim/2] each when
    position_ids gathers them (S rows for a 1-D position offset), else the caches as given."""
    x = op.input(x_i)
    if len(x.shape) not in (3, 4):
        raise CostError(f"{op.op_type}: input rank {len(x.shape)}, expected 3 or 4")
    batch, seq = (x.shape[0], x.shape[2]) if len(x.shape) == 4 else x.shape[:2]
    rotary_dim = int(op.attr("rotary_embedding_dim", 0) or 0)
    rotated = x.numel
    if rotary_dim:
        head_dim = x.shape[3] if len(x.shape) == 4 else x.shape[2] / _heads(op, "num_heads")
        rotated = x.numel * rotary_dim / head_dim
    read, written = io_bytes(op)
    if op.has_input(pos_i):
        rows = batch * seq if len(op.input(pos_i).shape) == 2 else seq
        read += _rotary_rows_bytes(op, cos_i, sin_i, rows)
    return Work({alu_unit(x.dtype): ROTARY_OPS * rotated}, read, written)


@register("RotaryEmbedding")
def onnx_rotary(op: OpView) -> Work:
    """ONNX RotaryEmbedding (X, cos_cache, sin_cache, position_ids): see `_rotary`."""
    return _rotary(op, 0, 1, 2, 3)


# ---- com.microsoft --------------------------------------------------------------------------------

@register("RotaryEmbedding", domain=MS)
def ms_rotary(op: OpView) -> Work:
    """com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache): see `_rotary`."""
    return _rotary(op, 0, 2, 3, 1)


@register("Attention", domain=MS)
def ms_attention(op: OpView) -> Work:
    """com.microsoft Attention (input [B, S, D_in], weights [D_in, Dq+Dk+Dv], bias, mask_index,
    past [2, B, H, P, dk], attention_bias, past_sequence_length): a QKV projection GEMM,
    2 * B * S * D_in * (Dq+Dk+Dv) on matmul_unit, then `attention_core` (self-attention, causal per
    unidirectional). Bytes: every input (weights included) read once, output and present written once,
    plus the projected Q/K/V written by the GEMM and read back by the attention kernel (NB: onnxruntime
    runs them as two kernels). NB: bias add and do_rotary (in-kernel) ignored."""
    x, w = op.input(0), op.input(1)
    heads = _heads(op, "num_heads")
    sizes = op.attr("qkv_hidden_sizes")
    dq, dk_total, dv_total = (tuple(sympy.Integer(s) for s in sizes) if sizes
                              else (w.shape[1] / 3,) * 3)
    batch, seq = x.shape[0], x.shape[1]
    past, unwritten = _cache(op, 4, (1,), 3, seq, bool(op.attr("past_present_share_buffer", 0)))
    core = Core(batch, sympy.Integer(heads), seq, seq, past, dq / heads, dv_total / heads,
                bool(op.attr("unidirectional", 0)), x.dtype)
    qkv_bytes = batch * seq * (dq + dk_total + dv_total) * itemsize(x.dtype)
    projection = Work({matmul_unit(x.dtype): 2 * x.numel * w.shape[1]}, qkv_bytes, qkv_bytes)
    read, written = io_bytes(op)
    return projection + attention_core(core) + Work({}, read, written - unwritten)


def _mha_kv(op: OpView, heads: int) -> tuple[Expr, Expr]:
    """(new kv length, v head dim) of MultiHeadAttention's key/value, packed or not."""
    q = op.input(0)
    if len(q.shape) == 5:  # packed QKV [B, S, H, 3, d]
        return q.shape[1], q.shape[4]
    k = op.input(1)
    if len(k.shape) == 5:  # packed KV [B, S_kv, H, 2, d]
        return k.shape[1], k.shape[4]
    v = op.input(2)
    seq_new = k.shape[2] if len(k.shape) == 4 else k.shape[1]  # 4-D: already-projected BNSH
    dv = v.shape[3] if len(v.shape) == 4 else v.shape[2] / heads
    return seq_new, dv


def _mha_core(op: OpView) -> Core:
    q = op.input(0)
    heads = _heads(op, "num_heads")
    if len(q.shape) == 5:
        batch, seq_q, dk = q.shape[0], q.shape[1], q.shape[4]
    elif len(q.shape) == 3:
        batch, seq_q, dk = q.shape[0], q.shape[1], q.shape[2] / heads
    else:
        raise CostError(f"MultiHeadAttention: query rank {len(q.shape)}, expected 3 or 5")
    seq_new, dv = _mha_kv(op, heads)
    past, _ = _cache(op, 6, (1, 2), 2, seq_new)
    return Core(batch, sympy.Integer(heads), seq_q, seq_new, past, dk, dv,
                bool(op.attr("unidirectional", 0)), q.dtype)


CORES[(MS, "MultiHeadAttention")] = _mha_core


@register("MultiHeadAttention", domain=MS)
def ms_multi_head_attention(op: OpView) -> Work:
    """com.microsoft MultiHeadAttention (query, key, value, bias, key_padding_mask, attention_bias,
    past_key, past_value, past_sequence_length, cache_indirection): `attention_core` over num_heads,
    kv length = past + key's length, causal per unidirectional; every input read once, output,
    present K/V and qk written once. NB: the projection bias add is ignored."""
    core = _mha_core(op)
    _, unwritten = _cache(op, 6, (1, 2), 2, core.seq_new)
    read, written = io_bytes(op)
    return attention_core(core) + Work({}, read, written - unwritten)


def _gqa_core(op: OpView) -> Core:
    q = op.input(0)
    heads, kv_heads = _heads(op, "num_heads"), _heads(op, "kv_num_heads")
    batch, seq_q = q.shape[0], q.shape[1]
    if op.has_input(1):
        head_dim = op.input(1).shape[2] / kv_heads
    else:  # packed QKV: [B, S, (H + 2 * H_kv) * d]
        head_dim = q.shape[2] / (heads + 2 * kv_heads)
    past, _ = _cache(op, 3, (1, 2), 2, seq_q)
    return Core(batch, sympy.Integer(heads), seq_q, seq_q, past, head_dim, head_dim,
                bool(op.attr("causal", 1)), q.dtype, window=int(op.attr("local_window_size", -1)),
                kv_heads=sympy.Integer(kv_heads))


CORES[(MS, "GroupQueryAttention")] = _gqa_core


@register("GroupQueryAttention", domain=MS)
def ms_group_query_attention(op: OpView) -> Work:
    """com.microsoft GroupQueryAttention (query, key, value, past_key, past_value, seqlens_k,
    total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias, ...): `attention_core`
    over num_heads, causal per `causal` (default 1), K/V and the cache at kv_num_heads; a shared
    past/present buffer appends only the new rows. do_rotary adds 3 CUDA ops per rotated element of Q
    and K and reads the cos/sin rows used ([B, S, rotary_dim/2] each). local_window_size caps the
    scores per query."""
    q = op.input(0)
    heads, kv_heads = _heads(op, "num_heads"), _heads(op, "kv_num_heads")
    core = _gqa_core(op)
    past, unwritten = _cache(op, 3, (1, 2), 2, core.seq_q)
    batch, seq_q = core.batch, core.seq_q
    read, written = io_bytes(op)
    work = attention_core(core, softcap=bool(op.attr("softcap", 0.0)))
    if op.attr("do_rotary", 0) and op.has_input(7):
        rotary_dim = 2 * op.input(7).shape[-1]  # cos_cache is [max_seq, rotary_dim / 2]
        work += Work({alu_unit(q.dtype): ROTARY_OPS * batch * seq_q * (heads + kv_heads) * rotary_dim})
        read += _rotary_rows_bytes(op, 7, 8, batch * seq_q)
    return work + Work({}, read, written - unwritten)
