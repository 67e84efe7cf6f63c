import pytest
import sympy

from costutil import cost, op
from estimator.cost.registry import CostError
from estimator.ir import dim

MS = "com.microsoft"
B, S, H, D = 2, 2048, 32, 128  # Llama-7B-like prefill
QKV_BYTES = 2 * B * H * S * D  # one fp16 [B, H, S, D] tensor


def bhsd(seq=S, heads=H):
    return ([B, heads, seq, D], "fp16")


def test_onnx_attention_prefill_non_causal():
    w = cost(op("Attention", [bhsd(), bhsd(), bhsd()], [bhsd()]))
    assert w.flops == {
        ("tensor", "fp16"): 4 * B * H * S * S * D,  # QK^T and PV, 2 * D each per score
        ("sfu", "fp32"): B * H * S * S,  # one exp per score
        ("alu", "fp32"): 4 * B * H * S * S,  # scale, max, subtract, sum per score
    }
    assert w.bytes_read == 3 * QKV_BYTES  # Q, K, V once: no S x S intermediate
    assert w.bytes_written == QKV_BYTES


def test_onnx_attention_prefill_causal_counts_the_triangle():
    w = cost(op("Attention", [bhsd(), bhsd(), bhsd()], [bhsd()], attrs={"is_causal": 1}))
    triangle = S * (S + 1) // 2  # query i sees i + 1 keys: 2048 * 2049 / 2 = 2,098,176 scores per head
    assert triangle == 2_098_176
    assert w.flops == {("tensor", "fp16"): 4 * B * H * triangle * D, ("sfu", "fp32"): B * H * triangle,
                       ("alu", "fp32"): 4 * B * H * triangle}
    assert w.bytes_read == 3 * QKV_BYTES  # masking saves work, not traffic


def test_onnx_attention_causal_cross_lengths_keeps_full_count():
    # q_len and kv_len are different symbols: not provably square, so the full rectangle (NB)
    w = cost(op("Attention", [([1, 8, "q_len", 64], "fp16"), ([1, 8, "kv_len", 64], "fp16"),
                              ([1, 8, "kv_len", 64], "fp16")], [([1, 8, "q_len", 64], "fp16")],
                attrs={"is_causal": 1}))
    q, kv = dim("q_len"), dim("kv_len")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 4 * 8 * q * kv * 64) == 0


def test_onnx_attention_3d_grouped_query_reads_kv_heads():
    # Llama-3-8B layer: 32 query heads, 8 kv heads, head_dim 128, 3-D [B, S, heads * 128] inputs
    q, kv = ([1, 512, 32 * 128], "bf16"), ([1, 512, 8 * 128], "bf16")
    w = cost(op("Attention", [q, kv, kv], [q], attrs={"q_num_heads": 32, "kv_num_heads": 8}))
    assert w.flops[("tensor", "bf16")] == 4 * 1 * 32 * 512 * 512 * 128  # scores at query heads
    assert w.bytes_read == 2 * (512 * 4096 + 2 * 512 * 1024)  # K and V at 8 heads, not 32
    assert w.bytes_written == 2 * 512 * 4096


def test_onnx_attention_decode_with_kv_cache_symbolic():
    # one new token: S_q = 1, S_kv = past_seq + 1; GQA 32/8 heads, head_dim 128
    q, new_kv = (["batch", 32, 1, 128], "fp16"), (["batch", 8, 1, 128], "fp16")
    past, present = (["batch", 8, "past_seq", 128], "fp16"), (["batch", 8, "past_seq + 1", 128], "fp16")
    w = cost(op("Attention", [q, new_kv, new_kv, None, past, past], [q, present, present],
                attrs={"is_causal": 1}))
    b, p = dim("batch"), dim("past_seq")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 4 * b * 32 * 1 * (p + 1) * 128) == 0
    assert sympy.expand(w.flops[("sfu", "fp32")] - b * 32 * (p + 1)) == 0
    # Q, new K/V, cached K/V read once; Y and the whole present K/V written once
    read = 2 * (b * 32 * 128 + 2 * b * 8 * 128 + 2 * b * 8 * p * 128)
    written = 2 * (b * 32 * 128 + 2 * b * 8 * (p + 1) * 128)
    assert sympy.expand(w.bytes_read - read) == 0
    assert sympy.expand(w.bytes_written - written) == 0


def test_onnx_attention_chunked_prefill_causal_with_past():
    # a chunk of `seq` queries after `past_seq` cached keys: row i sees past_seq + i + 1 keys
    q = (["batch", 32, "seq", 128], "fp16")
    past, present = (["batch", 32, "past_seq", 128], "fp16"), (["batch", 32, "past_seq + seq", 128], "fp16")
    w = cost(op("Attention", [q, q, q, None, past, past], [q, present, present], attrs={"is_causal": 1}))
    b, s, p = dim("batch"), dim("seq"), dim("past_seq")
    scores = s * p + s * (s + 1) / 2
    assert sympy.expand(w.flops[("tensor", "fp16")] - 4 * b * 32 * scores * 128) == 0


def test_onnx_attention_3d_needs_head_counts():
    x = ([1, 16, 512], "fp16")
    with pytest.raises(CostError, match="q_num_heads"):
        cost(op("Attention", [x, x, x], [x]))


def test_ms_attention_bert_base_includes_qkv_projection():
    # BERT-base layer: input [1, 128, 768], packed weights [768, 3 * 768], bias, 12 heads of 64
    w = cost(op("Attention", [([1, 128, 768], "fp16"), ([768, 2304], "fp16"), ([2304], "fp16")],
                [([1, 128, 768], "fp16")], attrs={"num_heads": 12}, domain=MS, weights=[1, 2]))
    projection = 2 * 128 * 768 * 2304  # [128, 768] x [768, 2304]
    core = 4 * 12 * 128 * 128 * 64  # bidirectional: every score
    assert w.flops == {("tensor", "fp16"): projection + core, ("sfu", "fp32"): 12 * 128 * 128,
                       ("alu", "fp32"): 4 * 12 * 128 * 128}
    qkv = 2 * 128 * 2304  # projected Q/K/V: written by the GEMM, read back by the attention kernel
    assert w.bytes_read == 2 * (128 * 768 + 768 * 2304 + 2304) + qkv
    assert w.bytes_written == 2 * 128 * 768 + qkv


def test_ms_attention_gpt2_decode_with_past():
    # GPT-2 small decode: unidirectional, past [2, batch, 12, past_seq, 64] -> present [.., past_seq + 1, ..]
    w = cost(op("Attention", [(["batch", 1, 768], "fp16"), ([768, 2304], "fp16"), ([2304], "fp16"), None,
                              ([2, "batch", 12, "past_seq", 64], "fp16")],
                [(["batch", 1, 768], "fp16"), ([2, "batch", 12, "past_seq + 1", 64], "fp16")],
                attrs={"num_heads": 12, "unidirectional": 1}, domain=MS, weights=[1, 2]))
    b, p = dim("batch"), dim("past_seq")
    expected = 2 * b * 768 * 2304 + 4 * b * 12 * (p + 1) * 64
    assert sympy.expand(w.flops[("tensor", "fp16")] - expected) == 0
    written = 2 * (b * 768 + 2 * b * 12 * (p + 1) * 64) + 2 * b * 2304
    assert sympy.expand(w.bytes_written - written) == 0


def test_ms_multi_head_attention_cross_attention_bnsh_key():
    # Whisper decoder cross-attention: one query token, encoder K/V already projected as [B, H, 1500, 64]
    kv = ([1, 8, 1500, 64], "fp16")
    w = cost(op("MultiHeadAttention", [([1, 1, 512], "fp16"), kv, kv], [([1, 1, 512], "fp16")],
                attrs={"num_heads": 8}, domain=MS))
    assert w.flops[("tensor", "fp16")] == 4 * 8 * 1 * 1500 * 64
    assert w.bytes_read == 2 * (512 + 2 * 8 * 1500 * 64)


def test_ms_multi_head_attention_packed_qkv_unidirectional():
    # packed QKV [B, S, H, 3, d]: S = 256, 16 heads of 64, causal
    w = cost(op("MultiHeadAttention", [([1, 256, 16, 3, 64], "fp16")], [([1, 256, 1024], "fp16")],
                attrs={"num_heads": 16, "unidirectional": 1}, domain=MS))
    assert w.flops[("tensor", "fp16")] == 4 * 16 * (256 * 257 // 2) * 64


def gqa_decode_inputs(past_len):
    return [(["batch", 1, 4096], "fp16"), (["batch", 1, 1024], "fp16"), (["batch", 1, 1024], "fp16"),
            (["batch", 8, past_len, 128], "fp16"), (["batch", 8, past_len, 128], "fp16"),
            (["batch"], "int32"), ([], "int32")]


def test_ms_group_query_attention_decode():
    present = (["batch", 8, "past_seq + 1", 128], "fp16")
    outs = [(["batch", 1, 4096], "fp16"), present, present]
    w = cost(op("GroupQueryAttention", gqa_decode_inputs("past_seq"), outs,
                attrs={"num_heads": 32, "kv_num_heads": 8}, domain=MS, consts=[6]))
    b, p = dim("batch"), dim("past_seq")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 4 * b * 32 * (p + 1) * 128) == 0
    # Q at 32 heads; new K/V and the cache at 8 heads; seqlens_k int32 per batch
    read = 2 * b * 4096 + 2 * 2 * b * 1024 + 2 * 2 * b * 8 * p * 128 + 4 * b
    assert sympy.expand(w.bytes_read - read) == 0
    written = 2 * b * 4096 + 2 * 2 * b * 8 * (p + 1) * 128
    assert sympy.expand(w.bytes_written - written) == 0


def test_ms_group_query_attention_shared_buffer_appends_in_place():
    # past and present share a [batch, 8, 4096, 128] buffer: priced at capacity (NB), only the new row written
    cache = (["batch", 8, 4096, 128], "fp16")
    w = cost(op("GroupQueryAttention", gqa_decode_inputs(4096), [(["batch", 1, 4096], "fp16"), cache, cache],
                attrs={"num_heads": 32, "kv_num_heads": 8}, domain=MS, consts=[6]))
    b = dim("batch")
    assert sympy.expand(w.flops[("tensor", "fp16")] - 4 * b * 32 * 4096 * 128) == 0
    assert sympy.expand(w.bytes_written - (2 * b * 4096 + 2 * 2 * b * 8 * 1 * 128)) == 0


def test_ms_group_query_attention_prefill_with_rotary():
    # prompt of 2048 tokens, no cache, in-kernel rotary from [4096, 64] cos/sin caches
    ins = [([1, 2048, 4096], "fp16"), ([1, 2048, 1024], "fp16"), ([1, 2048, 1024], "fp16"), None, None,
           ([1], "int32"), ([], "int32"), ([4096, 64], "fp16"), ([4096, 64], "fp16")]
    attrs = {"num_heads": 32, "kv_num_heads": 8, "do_rotary": 1}
    w = cost(op("GroupQueryAttention", ins, [([1, 2048, 4096], "fp16")], attrs=attrs, domain=MS,
                consts=[6], weights=[7, 8]))
    assert w.flops[("tensor", "fp16")] == 4 * 32 * (2048 * 2049 // 2) * 128  # causal by default
    rotary = 3 * 2048 * (32 + 8) * 128  # Q and K rotated, 3 ops per element
    assert w.flops[("alu", "fp32")] == 4 * 32 * (2048 * 2049 // 2) + rotary
    cos_sin = 2 * (2048 * 64 * 2)  # only the 2048 rows used, not the 4096-row caches
    assert w.bytes_read == 2 * (2048 * 4096 + 2 * 2048 * 1024) + 4 + cos_sin


def test_onnx_rotary_embedding_with_position_ids():
    x = ([1, 32, 2048, 128], "fp16")
    w = cost(op("RotaryEmbedding", [x, ([4096, 64], "fp16"), ([4096, 64], "fp16"), ([1, 2048], "int64")], [x],
                weights=[1, 2]))
    assert w.flops == {("alu", "fp32"): 3 * 32 * 2048 * 128}  # two muls and an add per element
    # X; cos and sin gathered at [B, S, 64]; int64 position_ids
    assert w.bytes_read == 2 * 32 * 2048 * 128 + 2 * (2048 * 64 * 2) + 8 * 2048
    assert w.bytes_written == 2 * 32 * 2048 * 128


def test_onnx_rotary_embedding_partial_3d():
    # Phi-2-style partial rotary: 3-D [1, 2048, 32 * 80], rotary_embedding_dim 32 of head_dim 80
    x = ([1, 2048, 2560], "fp16")
    w = cost(op("RotaryEmbedding", [x, ([4096, 16], "fp16"), ([4096, 16], "fp16"), ([1, 2048], "int64")], [x],
                attrs={"num_heads": 32, "rotary_embedding_dim": 32}, weights=[1, 2]))
    assert w.flops == {("alu", "fp32"): 3 * 2048 * 32 * 32}  # only 32 of 80 dims per head rotate
    with pytest.raises(CostError, match="num_heads"):
        cost(op("RotaryEmbedding", [x, ([4096, 16], "fp16"), ([4096, 16], "fp16")], [x],
                attrs={"rotary_embedding_dim": 32}))


def test_ms_rotary_embedding_position_offset():
    # com.microsoft order: input, position_ids, cos, sin; a 1-D position offset uses S rows
    x = ([4, 2048, 4096], "fp16")
    w = cost(op("RotaryEmbedding", [x, ([1], "int64"), ([4096, 64], "fp16"), ([4096, 64], "fp16")], [x],
                domain=MS, weights=[2, 3]))
    assert w.flops == {("alu", "fp32"): 3 * 4 * 2048 * 4096}
    assert w.bytes_read == 2 * 4 * 2048 * 4096 + 8 + 2 * (2048 * 64 * 2)
