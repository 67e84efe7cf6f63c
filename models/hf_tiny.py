"""Tiny random-init Hugging Face transformers, exported by torch.onnx.export(dynamo=True).

Ground truth for --validate beside the hand-written builders: the graphs torch's exporter really writes
(node names like `node_MatMul_12`, RoPE computed at run time, masks built from attention_mask). Each model
is built from a config object (no download) with random weights and exported with dynamic `batch` and
`seq`. Not in the models.MODELS registry: it needs the `torch` extra (torch, transformers, onnxscript)
and an export takes 5-15 s.

    >>> export("llama", "llama.onnx")                 # the tiny config
    >>> export("llama", "llama.onnx", hidden_size=256)  # any config field overridden
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

# Per family: the transformers config and model class, and tiny sizes (2 layers, hidden 64, 4 heads).
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             {"vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 1024,
              "bos_token_id": 0, "eos_token_id": 0}),
    "bert": ("BertConfig", "BertModel",
             {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 128, "max_position_embeddings": 1024}),
    # The families of issue 13 (MoE, MLA, sliding windows); MoE experts run as `batched_mm` (see build).
    "mistral": ("MistralConfig", "MistralForCausalLM",
                {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
                 "sliding_window": 8}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                   "max_position_embeddings": 1024, "num_experts": 8, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 32, "norm_topk_prob": True}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
                 "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None}),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 1024,
                     "q_lora_rank": 48, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                     "v_head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1,
                     "n_group": 2, "topk_group": 1, "rope_interleave": True}),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                     "max_position_embeddings": 1024, "sliding_window": 8,
                     "layer_types": ["sliding_attention", "full_attention"]}),
}


def build(family: str, seed: int = 0, **overrides: Any):
    """The random-init torch module (eval mode) of `family` with the tiny config, fields overridden."""
    import torch
    import transformers

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    config_cls, model_cls, sizes = FAMILIES[family]
    config = getattr(transformers, config_cls)(**{**sizes, **overrides})
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    if hasattr(model, "set_experts_implementation") and family in MOE_FAMILIES:
        # what transformers' own ONNX exporter picks for MoE: per-token gathered expert weights
        model.set_experts_implementation("batched_mm")
    return model


MOE_FAMILIES = ("qwen3_moe", "mixtral", "deepseek_v3")


def export(family: str, path: str | os.PathLike[str], seed: int = 0, **overrides: Any) -> Path:
    """Export `family` to `path` with inputs input_ids and attention_mask [batch, seq] (int64) and one
    output (logits, or last_hidden_state for BERT)."""
    import torch

    model = build(family, seed, **overrides)

    class Wrapper(torch.nn.Module):  # positional inputs, one tensor out, no cache
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return out.logits if hasattr(out, "logits") else out.last_hidden_state

    ids = torch.randint(0, model.config.vocab_size, (2, 16))
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}
    out = Path(path)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(Wrapper(), (ids, torch.ones_like(ids)), dynamo=True,
                                    input_names=["input_ids", "attention_mask"],
                                    output_names=["logits" if family != "bert" else "last_hidden_state"],
                                    dynamic_shapes={"input_ids": dims, "attention_mask": dims})
        program.save(str(out))
    return out
