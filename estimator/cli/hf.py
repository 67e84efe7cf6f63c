"""`estimate --hf-config config.json [--decode]`: price the decoder a transformers config describes,
built in memory by models/ (estimator/frontends/hf_config.py), like a bundled --model.

`--expert-parallel N` (the issue's `--ep N`; --ep is --validate's execution provider) prices one GPU's
share: E / N experts and k / N of each token's routes (MoeSpec.expert_parallel = N). NB: the
all-to-all dispatch and combine are not priced: that is the seam for the communication model of
estimator/serve/collectives.py (issue 17). Inserting them as com.microsoft AllToAll nodes was tried:
onnxruntime's symbolic shape inference stops at the unknown op, so they need a shape rule first.
"""

from __future__ import annotations

import argparse

from estimator.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hf-config", metavar="CONFIG.json",
                   help="a transformers config.json (llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, "
                        "deepseek_v3, gpt_oss, gemma2, gemma3_text, phi3): build and price its decoder")
    p.add_argument("--decode", action="store_true",
                   help="with --hf-config: one decode step against a KV cache of past_seq (default: prefill)")
    # NB: the issue's `--ep N`; --ep is taken by --validate (the onnxruntime execution provider)
    p.add_argument("--expert-parallel", dest="expert_parallel", type=int, default=None, metavar="N",
                   help="expert parallelism degree (validated; the all-to-all is not priced yet)")


def run(args: argparse.Namespace) -> int | None:
    """Not a mode of its own: --hf-config only replaces the model source (see load_hf_graph)."""
    if args.decode and not args.hf_config:
        raise UserError("--decode goes with --hf-config (bundled models have a -decode twin)")
    if args.expert_parallel is not None and args.expert_parallel < 1:
        raise UserError("--expert-parallel must be a positive integer")
    return None


def load_hf_graph(args: argparse.Namespace):
    """The graph of --hf-config (one GPU's expert share under --expert-parallel)."""
    from dataclasses import replace

    from estimator.frontends import hf_config
    from models.decoder_config import shard_experts

    cfg = hf_config.load(args.hf_config)
    if args.expert_parallel is not None and args.expert_parallel > 1:
        if cfg.moe is None:
            raise UserError("--expert-parallel needs a mixture-of-experts model")
        try:
            cfg = replace(cfg, moe=shard_experts(cfg.moe, args.expert_parallel))
        except ValueError as exc:
            raise UserError(f"--expert-parallel: {exc}") from None
    return hf_config.build_graph(cfg, decode=args.decode, name=f"hf-{cfg.model_type}")
