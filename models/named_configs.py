"""Bundled decoders of issue 13, from their public config.json files (the values are facts; each cites
its model card). Weights external: dims and dtypes only."""

from __future__ import annotations

from models.decoder_config import DecoderConfig, MlaSpec, MoeSpec

HF = "https://huggingface.co"

QWEN3_32B = DecoderConfig(
    "qwen3", num_layers=64, hidden=5120, num_heads=64, num_kv_heads=8, head_dim=128, ffn=25600,
    vocab=151936, max_pos=40960, rope_theta=1e6, qk_norm=True, source=f"{HF}/Qwen/Qwen3-32B")
QWEN3_235B_A22B = DecoderConfig(
    "qwen3_moe", num_layers=94, hidden=4096, num_heads=64, num_kv_heads=4, head_dim=128, ffn=12288,
    vocab=151936, max_pos=40960, rope_theta=1e6, qk_norm=True, moe=MoeSpec(128, 8, 1536),
    source=f"{HF}/Qwen/Qwen3-235B-A22B")
MIXTRAL_8X7B = DecoderConfig(
    "mixtral", num_layers=32, hidden=4096, num_heads=32, num_kv_heads=8, head_dim=128, ffn=14336,
    vocab=32000, max_pos=32768, rope_theta=1e6, rms_eps=1e-5, moe=MoeSpec(8, 2, 14336, router="topk_softmax"),
    source=f"{HF}/mistralai/Mixtral-8x7B-v0.1")
_DEEPSEEK_MLA = MlaSpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_head_dim=128)
DEEPSEEK_V3 = DecoderConfig(
    "deepseek_v3", num_layers=61, hidden=7168, num_heads=128, num_kv_heads=128, head_dim=192, ffn=18432,
    vocab=129280, max_pos=163840, rope_theta=10000.0, rope_interleave=True, mla=_DEEPSEEK_MLA,
    moe=MoeSpec(256, 8, 2048, shared_experts=1, first_dense=3, router="sigmoid"),
    source=f"{HF}/deepseek-ai/DeepSeek-V3")
KIMI_K2 = DecoderConfig(
    "deepseek_v3", num_layers=61, hidden=7168, num_heads=64, num_kv_heads=64, head_dim=192, ffn=18432,
    vocab=163840, max_pos=131072, rope_theta=50000.0, rope_interleave=True, mla=_DEEPSEEK_MLA,
    moe=MoeSpec(384, 8, 2048, shared_experts=1, first_dense=1, router="sigmoid"),
    source=f"{HF}/moonshotai/Kimi-K2-Instruct")


def _gpt_oss(layers: int, experts: int, card: str) -> DecoderConfig:
    return DecoderConfig(
        "gpt_oss", num_layers=layers, hidden=2880, num_heads=64, num_kv_heads=8, head_dim=64, ffn=2880,
        vocab=201088, max_pos=131072, rope_theta=150000.0, rms_eps=1e-5, qkv_bias=True, o_bias=True,
        sinks=True, layer_windows=tuple(128 if i % 2 == 0 else -1 for i in range(layers)),
        # config.json quantization_config {"quant_method": "mxfp4"}: the experts ship in MXFP4
        moe=MoeSpec(experts, 4, 2880, router="topk_softmax", expert_bias=True, weight_format="mxfp4"),
        source=card)


GPT_OSS_120B = _gpt_oss(36, 128, f"{HF}/openai/gpt-oss-120b")
GPT_OSS_20B = _gpt_oss(24, 32, f"{HF}/openai/gpt-oss-20b")

# name -> (config, prefill dims, decode dims)
NAMED = {
    "qwen3-32b": QWEN3_32B,
    "qwen3-235b-a22b": QWEN3_235B_A22B,
    "mixtral-8x7b": MIXTRAL_8X7B,
    "deepseek-v3": DEEPSEEK_V3,
    "kimi-k2": KIMI_K2,
    "gpt-oss-120b": GPT_OSS_120B,
    "gpt-oss-20b": GPT_OSS_20B,
}
