"""Registry of reference ONNX models the estimator can price without downloading anything.

Each entry builds a graph the way torch's exporter writes it (decomposed standard ops, symbolic dims
named batch / seq / past_seq). Small configs default to random float32 weights so onnxruntime can run
them; the Llama-3 configs default to external weights (dims and dtypes only, no bytes), which keeps a
70B graph to about a megabyte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType

import onnx

from models import bert, decoder, gpt2, llama, named_configs, resnet


@dataclass(frozen=True)
class ModelSpec:
    name: str  # e.g. "llama-3-8b-decode"
    description: str  # one line: family, layers, hidden, heads, mode, weights
    build: Callable[[], onnx.ModelProto]  # builds with the config's default weights mode
    default_dims: Mapping[str, int]  # sensible dims for a demo


# name -> builder taking a weights mode (None: the config's default); ModelSpec.build is its default.
_BUILDERS: dict[str, Callable[[str | None], onnx.ModelProto]] = {}


def _decoder_specs(family, name: str, cfg, prefill_dims: dict, decode_dims: dict) -> list[ModelSpec]:
    specs = []
    for suffix, mode, dims in (("", "prefill", prefill_dims), ("-decode", "decode", decode_dims)):
        full_name = name + suffix
        _BUILDERS[full_name] = partial(family.build, full_name, cfg, mode)
        spec = ModelSpec(full_name, family.describe(cfg, mode), _BUILDERS[full_name], MappingProxyType(dims))
        specs.append(spec)
    return specs


def _encoder_spec(family, name: str, cfg, dims: dict) -> ModelSpec:
    _BUILDERS[name] = partial(family.build, name, cfg)
    return ModelSpec(name, family.describe(cfg), _BUILDERS[name], MappingProxyType(dims))


def _registry() -> dict[str, ModelSpec]:
    specs = [
        # Decode dims put the cache just short of the context window, where decode is most memory bound.
        *_decoder_specs(gpt2, "gpt2-small", gpt2.GPT2_SMALL, {"batch": 1, "seq": 1024},
                        {"batch": 1, "past_seq": 1023}),
        *_decoder_specs(llama, "llama-tiny", llama.LLAMA_TINY, {"batch": 1, "seq": 128},
                        {"batch": 1, "past_seq": 127}),
        *_decoder_specs(llama, "llama-3-8b", llama.LLAMA_3_8B, {"batch": 1, "seq": 2048},
                        {"batch": 1, "past_seq": 4096}),
        *_decoder_specs(llama, "llama-3-70b", llama.LLAMA_3_70B, {"batch": 1, "seq": 2048},
                        {"batch": 1, "past_seq": 4096}),
        # The Llama 3.1 names users type; the llama-3-* entries stay.
        *_decoder_specs(llama, "llama-3.1-8b", llama.LLAMA_3_1_8B, {"batch": 1, "seq": 2048},
                        {"batch": 1, "past_seq": 4096}),
        *_decoder_specs(llama, "llama-3.1-70b", llama.LLAMA_3_1_70B, {"batch": 1, "seq": 2048},
                        {"batch": 1, "past_seq": 4096}),
        *(spec for name, cfg in named_configs.NAMED.items()
          for spec in _decoder_specs(decoder, name, cfg, {"batch": 1, "seq": 2048},
                                     {"batch": 1, "past_seq": 4096})),
        _encoder_spec(bert, "bert-base", bert.BERT_BASE, {"batch": 1, "seq": 128}),
        _encoder_spec(resnet, "resnet50", resnet.RESNET50, {"batch": 1}),
    ]
    return {spec.name: spec for spec in specs}


MODELS: dict[str, ModelSpec] = _registry()
# The models the per-model tests sweep: the bundled MoE/MLA giants (named_configs) are covered by
# tests/test_moe_models.py on layer-reduced copies instead (each costs seconds per strategy).
SUITE_MODELS: tuple[str, ...] = tuple(sorted(
    n for n in MODELS if n.removesuffix("-decode") not in named_configs.NAMED))


def list_models() -> list[ModelSpec]:
    return sorted(MODELS.values(), key=lambda spec: spec.name)


def build(name: str, weights: str | None = None) -> onnx.ModelProto:
    """Build a registered model; `weights` ("random" or "external") overrides the config's default."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return _BUILDERS[name](weights)
