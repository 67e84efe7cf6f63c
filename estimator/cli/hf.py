"""`estimate --hf-config config.json [--decode]`: price the decoder a transformers config describes,
built in memory by models/ (estimator/frontends/hf_config.py), like a bundled --model.

`--expert-parallel N` (the issue's `--ep N`; --ep is --validate's execution provider) is accepted
and validated, but its all-to-all dispatch and combine are
not priced yet: the communication model belongs to estimator/serve/collectives.py (issue 17). NB: the
seam is the graph: insert com.microsoft AllToAll nodes (attribute group_size) around each MoE block.
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
    from estimator.frontends import hf_config

    cfg = hf_config.load(args.hf_config)
    if args.expert_parallel is not None and cfg.moe is not None and cfg.moe.experts % args.expert_parallel:
        raise UserError(f"--expert-parallel {args.expert_parallel} does not divide the "
                        f"{cfg.moe.experts} experts")
    return hf_config.build_graph(cfg, decode=args.decode, name=f"hf-{cfg.model_type}")
