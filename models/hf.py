"""Tiny random-init Hugging Face models (Llama, GPT-2, BERT) exported with torch.onnx (dynamo) with
dynamic batch and seq: realistic exporter output without downloads.

Needs the `torch` extra (torch 2.13.0 CPU, transformers, onnxscript). Exports take a few seconds each, so
`export_tiny` caches the file under `cache_dir` keyed by family and library versions.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FAMILIES = ("llama", "gpt2", "bert")


def _model(family: str):
    import torch
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if family == "llama":  # grouped-query attention: 4 heads, 2 kv heads
        return LlamaForCausalLM(
            LlamaConfig(
                vocab_size=128,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=256,
            )
        )
    if family == "gpt2":
        return GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=256))
    if family == "bert":
        return BertModel(
            BertConfig(
                vocab_size=128,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                max_position_embeddings=256,
            )
        )
    raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")


def _wrapper(model):
    import torch

    class LogitsOnly(torch.nn.Module):
        """Drops the KV cache object from the outputs (torch.export cannot return it)."""

        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None):
            if attention_mask is None:
                return self.inner(input_ids, use_cache=False)[0]
            return self.inner(input_ids, attention_mask=attention_mask)[0]

    return LogitsOnly(model).eval()


def export_tiny(family: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of `family`'s tiny model exported to ONNX (opset 18, dims named batch and seq)."""
    import torch
    import transformers

    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "estimator-hf-exports")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{family}-t{torch.__version__}-hf{transformers.__version__}.onnx"
    if path.exists():
        return path
    model = _wrapper(_model(family))
    ids = torch.randint(0, 100, (2, 8))
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=256)
    dyn = {"input_ids": {0: batch, 1: seq}}
    args: tuple = (ids,)
    if family == "bert":
        args, dyn = (ids, torch.ones_like(ids)), {**dyn, "attention_mask": {0: batch, 1: seq}}
    tmp = path.with_suffix(f".{os.getpid()}.tmp.onnx")
    torch.onnx.export(
        model,
        args,
        str(tmp),
        dynamo=True,
        dynamic_shapes=dyn,
        opset_version=18,
        external_data=False,
        verbose=False,
    )
    os.replace(tmp, path)
    return path
