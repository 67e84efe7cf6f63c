"""transformers config.json -> DecoderConfig -> the decomposed ONNX graph the builders in models/ write
(no weight bytes, symbolic batch / seq / past_seq, prefill or decode).

One small reader per model_type maps the config's fields onto models.decoder_config.DecoderConfig;
an unknown model_type is a UserError listing the supported ones. Missing keys fall back to
transformers' defaults for that model_type where the reader gives one, else they are an error.

A config.json is at most CONFIG_BYTES, nested at most JSON_DEPTH (estimator/input_limits.py); every
count the DecoderConfig gets is a whole number in range (at most MAX_LAYERS layers, MAX_DIM otherwise),
so a hostile file is one error line, not a hang in the builders.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from estimator.errors import UserError
from estimator.input_limits import CONFIG_BYTES, loads, read_bytes
from models.decoder_config import DecoderConfig, MlaSpec, MoeSpec


class HfConfigError(UserError):
    pass


MAX_LAYERS = 4096  # the deepest published decoders have ~128
MAX_DIM = 1 << 31
POSITIVE = frozenset({"num_layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "vocab", "experts",
                      "top_k"})


Reader = Callable[[Mapping[str, Any]], DecoderConfig]
READERS: dict[str, Reader] = {}


def reader(*model_types: str):
    def deco(fn: Reader) -> Reader:
        for t in model_types:
            READERS[t] = fn
        return fn
    return deco


def _get(cfg: Mapping[str, Any], key: str, default: Any = KeyError) -> Any:
    value = cfg.get(key)
    if value is None:
        if default is KeyError:
            raise HfConfigError(f"config.json ({cfg.get('model_type')}): missing key {key!r}")
        return default
    return value


def _base(cfg: Mapping[str, Any], **over: Any) -> dict[str, Any]:
    heads = _get(cfg, "num_attention_heads")
    hidden = _get(cfg, "hidden_size")
    fields = dict(
        model_type=cfg["model_type"], num_layers=_get(cfg, "num_hidden_layers"), hidden=hidden,
        num_heads=heads, num_kv_heads=_get(cfg, "num_key_value_heads", heads),
        head_dim=_get(cfg, "head_dim", hidden // heads), ffn=_get(cfg, "intermediate_size"),
        vocab=_get(cfg, "vocab_size"), max_pos=_get(cfg, "max_position_embeddings", 4096),
        rope_theta=float(_rope_theta(cfg)), rms_eps=float(_get(cfg, "rms_norm_eps", 1e-6)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )
    fields.update(over)
    return fields


def _rope_theta(cfg: Mapping[str, Any]) -> float:
    params = cfg.get("rope_parameters") or {}
    return cfg.get("rope_theta") or params.get("rope_theta") or 10000.0


def _windows(cfg: Mapping[str, Any], default_types: list[str] | None = None) -> tuple[int, ...]:
    """Per-layer windows from `layer_types` (sliding_attention / full_attention) or one sliding_window."""
    n, w = cfg["num_hidden_layers"], cfg.get("sliding_window")
    types = cfg.get("layer_types") or default_types
    if not w:
        return ()
    if types:
        return tuple(w if t == "sliding_attention" else -1 for t in types[:n])
    return (w,) * n


@reader("llama", "qwen2", "phi3")
def _dense(cfg):
    return DecoderConfig(**_base(cfg, qkv_bias=cfg["model_type"] == "qwen2"))


@reader("mistral")
def _mistral(cfg):
    return DecoderConfig(**_base(cfg, layer_windows=_windows(cfg)))


@reader("qwen3")
def _qwen3(cfg):
    return DecoderConfig(**_base(cfg, qk_norm=True))


@reader("qwen3_moe")
def _qwen3_moe(cfg):
    dense = set(cfg.get("mlp_only_layers") or [])
    if dense or cfg.get("decoder_sparse_step", 1) != 1:
        raise HfConfigError("qwen3_moe: mlp_only_layers / decoder_sparse_step != 1 are not supported")
    experts = cfg.get("num_experts") or _get(cfg, "num_local_experts")
    moe = MoeSpec(experts, _get(cfg, "num_experts_per_tok"), _get(cfg, "moe_intermediate_size"))
    return DecoderConfig(**_base(cfg, qk_norm=True, moe=moe))


@reader("mixtral")
def _mixtral(cfg):
    moe = MoeSpec(_get(cfg, "num_local_experts"), _get(cfg, "num_experts_per_tok"),
                  _get(cfg, "intermediate_size"), router="topk_softmax")
    return DecoderConfig(**_base(cfg, moe=moe, layer_windows=_windows(cfg)))


@reader("deepseek_v3", "kimi_k2")
def _deepseek_v3(cfg):
    moe = MoeSpec(_get(cfg, "n_routed_experts"), _get(cfg, "num_experts_per_tok"),
                  _get(cfg, "moe_intermediate_size"), shared_experts=_get(cfg, "n_shared_experts", 0),
                  first_dense=_get(cfg, "first_k_dense_replace", 0), router="sigmoid")
    mla = MlaSpec(cfg.get("q_lora_rank"), _get(cfg, "kv_lora_rank"), _get(cfg, "qk_nope_head_dim"),
                  _get(cfg, "qk_rope_head_dim"), _get(cfg, "v_head_dim"))
    return DecoderConfig(**_base(cfg, moe=moe, mla=mla, head_dim=mla.qk_head_dim,
                                 rope_interleave=bool(cfg.get("rope_interleave", True))))


def _expert_format(cfg: Mapping[str, Any]) -> str:
    """The experts' stored format from `quantization_config` ("mxfp4" for gpt-oss's checkpoints; ""
    when unquantized). NB: other quant_methods (fp8 block, awq...) are left to --precision."""
    method = str((cfg.get("quantization_config") or {}).get("quant_method") or "").lower()
    return "mxfp4" if method == "mxfp4" else ""


@reader("gpt_oss")
def _gpt_oss(cfg):
    moe = MoeSpec(_get(cfg, "num_local_experts"), _get(cfg, "num_experts_per_tok"),
                  _get(cfg, "intermediate_size"), router="topk_softmax", expert_bias=True,
                  weight_format=_expert_format(cfg))
    n = _get(cfg, "num_hidden_layers")
    alternating = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    return DecoderConfig(**_base(cfg, moe=moe, qkv_bias=True, o_bias=True, sinks=True,
                                 layer_windows=_windows(cfg, alternating)))


@reader("gemma2")
def _gemma2(cfg):
    n = _get(cfg, "num_hidden_layers")
    alternating = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    return DecoderConfig(**_base(cfg, act="gelu_tanh", sandwich_norm=True, embed_scale=True,
                                 tie_embeddings=cfg.get("tie_word_embeddings", True),
                                 attn_softcap=float(cfg.get("attn_logit_softcapping") or 0.0),
                                 final_softcap=float(cfg.get("final_logit_softcapping") or 0.0),
                                 layer_windows=_windows(cfg, alternating)))


@reader("gemma3_text")
def _gemma3(cfg):
    n = _get(cfg, "num_hidden_layers")
    every = cfg.get("sliding_window_pattern", 6)  # five local layers, then a global one
    pattern = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n)]
    return DecoderConfig(**_base(cfg, act="gelu_tanh", sandwich_norm=True, embed_scale=True, qk_norm=True,
                                 tie_embeddings=cfg.get("tie_word_embeddings", True),
                                 layer_windows=_windows(cfg, pattern)))


def decoder_config(cfg: Mapping[str, Any]) -> DecoderConfig:
    """The DecoderConfig of a parsed config.json (a model's `text_config` is used when present)."""
    if not isinstance(cfg, Mapping):
        raise HfConfigError("config.json must hold a JSON object")
    text = cfg.get("text_config")
    if text and not isinstance(text, Mapping):
        raise HfConfigError("config.json: text_config must be a JSON object")
    cfg = dict(text or cfg)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or model_type not in READERS:
        raise HfConfigError(f"model_type {model_type!r} is not supported; "
                            f"supported: {', '.join(sorted(READERS))}")
    layers = cfg.get("num_hidden_layers")
    if layers is not None and not (_whole(layers) and 1 <= layers <= MAX_LAYERS):
        raise HfConfigError(f"config.json ({model_type}): num_hidden_layers {layers!r} is not a whole "
                            f"number in 1..{MAX_LAYERS}")
    try:
        return _checked(READERS[model_type](cfg), model_type)
    except HfConfigError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError,
            IndexError) as exc:
        raise HfConfigError(f"config.json ({model_type}): {type(exc).__name__}: {exc}") from None


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _checked(cfg: DecoderConfig, model_type: str) -> DecoderConfig:
    """`cfg` when each of its numbers (and its MoE and MLA parts') is of its field's type and in range."""
    for spec in (cfg, cfg.moe, cfg.mla):
        if spec is None:
            continue
        for f in dataclasses.fields(spec):
            v, kind = getattr(spec, f.name), str(f.type)
            values = v if kind.startswith("tuple[int") else (v,)
            if kind.startswith(("int", "tuple[int")):
                low = 1 if f.name in POSITIVE else -1 if kind.startswith("tuple") else 0
                ok = all((x is None and "None" in kind) or (_whole(x) and low <= x <= MAX_DIM)
                         for x in (values if isinstance(values, tuple) else (values,)))
            elif kind == "float":
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            else:
                continue
            if not ok:
                raise HfConfigError(f"config.json ({model_type}): {f.name} = {v!r:.60} is not a "
                                    f"{'whole number' if 'int' in kind else 'finite number'} in range")
    return cfg


def _read(path: str | Path) -> Any:
    try:
        return loads(read_bytes(str(path), CONFIG_BYTES), str(path))
    except OSError as exc:
        raise HfConfigError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise HfConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def load(path: str | Path) -> DecoderConfig:
    return decoder_config(_read(path))


def load_precision(path: str | Path) -> str | None:
    """The checkpoint's precision of the config.json at `path` (frontends/checkpoint_precision.py)."""
    from estimator.frontends.checkpoint_precision import checkpoint_precision

    return checkpoint_precision(_read(path))


def build_graph(cfg: DecoderConfig, decode: bool = False, name: str = "hf-config", kv_cache: bool = True):
    """The estimator IR graph of `cfg` (external weights: dims and dtypes only). `kv_cache` False: a
    prefill that writes no KV cache (transformers' use_cache=False; models.decoder.build)."""
    from estimator.frontends.onnx_import import import_model
    from models import decoder

    if decode and not kv_cache:
        raise HfConfigError("a decode step needs the KV cache (--no-kv-cache is for prefill)")
    return import_model(decoder.build(name, cfg, "decode" if decode else "prefill", weights="external",
                                      kv_cache=kv_cache))
