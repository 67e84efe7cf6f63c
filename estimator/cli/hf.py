"""`estimate --hf-config config.json [--decode | --no-kv-cache]`: price the decoder a transformers config
describes, built in memory by models/ (estimator/frontends/hf_config.py), like a bundled --model.
`--no-kv-cache`: a prefill that writes no KV cache (transformers' use_cache=False, as a cache-less ONNX
export holds it), to compare with such an export like for like.

`--expert-parallel N` (the issue's `--ep N`; --ep is --validate's execution provider), with --hf-config
or a bundled MoE model (`--model qwen3-235b-a22b[-decode]`, models/named_configs.py), prices one GPU of
the deployment estimator/serve/parallel.py describes: alone it is attention data parallelism N (each GPU
its own tokens, E / N experts, all k routes of its tokens sent by the dispatch and combine all-to-all,
com.microsoft AllToAll nodes of group_size N, models/decoder_moe.py; their shapes through onnxruntime's
inference by estimator/frontends/collective_shapes.py), priced by the collective model
(estimator/pricing/collectives.py) like any collective kernel. With --tp the tokens are replicated (k / N
routes a GPU, models.decoder_config.shard_experts) and passes/shard_moe.py turns the pair into one
all-reduce; --attention-dp and --moe-tp split the MoE further (models.decoder_config.deploy_moe). A split
that does not divide is one `error:` line. `ep_decisions` lists what was done, for --explain and the JSON
"parallel" key.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from estimator.errors import UserError

if TYPE_CHECKING:
    from estimator.cli.options import Model, Options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hf-config", metavar="CONFIG.json",
                   help="a transformers config.json (llama, mistral, qwen2, qwen3, qwen3_moe, mixtral, "
                        "deepseek_v3, gpt_oss, gemma2, gemma3_text, phi3): build and price its decoder")
    p.add_argument("--decode", action="store_true",
                   help="with --hf-config: one decode step against a KV cache of past_seq (default: prefill)")
    p.add_argument("--no-kv-cache", dest="kv_cache", action="store_false",
                   help="with --hf-config prefill: write no KV cache (transformers' use_cache=False, what "
                        "an ONNX export without present outputs holds)")
    # NB: the issue's `--ep N`; --ep is taken by --validate (the onnxruntime execution provider)
    p.add_argument("--expert-parallel", dest="expert_parallel", type=int, default=None, metavar="N",
                   help="expert parallelism: one GPU's E/N experts, with the dispatch and combine "
                        "all-to-all of each MoE layer (--hf-config or a bundled MoE model)")


def run(opts: Options) -> int | None:
    """Not a mode of its own: --hf-config only replaces the model source (see load_hf_graph)."""
    m = opts.model
    if m.decode and not m.hf_config:
        raise UserError("--decode goes with --hf-config (bundled models have a -decode twin)")
    if not m.kv_cache and (m.decode or not m.hf_config):
        raise UserError("--no-kv-cache goes with --hf-config prefill (a decode step needs its cache)")
    if m.expert_parallel is not None and m.expert_parallel < 1:
        raise UserError("--expert-parallel must be a positive integer")
    if m.moe_split and not (m.hf_config or m.name):
        raise UserError("--expert-parallel needs --hf-config or a bundled MoE model (--model NAME)")
    return None


def expert_parallel(cfg, parallel):
    """`cfg` with one GPU's MoE share under `parallel` (estimator/serve/parallel.py Parallelism; None or
    no MoE split: `cfg` itself)."""
    if parallel is None or parallel.plain:
        return cfg
    return parallel.config(cfg)


def load_hf_graph(model: Model):
    """The graph of --hf-config (one GPU's expert share under --expert-parallel)."""
    from estimator.frontends import hf_config

    cfg = expert_parallel(hf_config.load(model.hf_config), model.parallel)
    return hf_config.build_graph(cfg, decode=model.decode, name=f"hf-{cfg.model_type}",
                                 kv_cache=model.kv_cache)


def load_named_graph(model: Model, name: str):
    """A bundled config-driven decoder (models/named_configs.py) under --expert-parallel."""
    from estimator.frontends.onnx_import import import_model
    from models import decoder, named_configs

    base = name.removesuffix("-decode")
    if base not in named_configs.NAMED:
        raise UserError(f"--expert-parallel: {name} is not a bundled MoE decoder "
                        f"(those are {', '.join(n for n, c in named_configs.NAMED.items() if c.moe)})")
    cfg = expert_parallel(named_configs.NAMED[base], model.parallel)
    mode = "decode" if name.endswith("-decode") else "prefill"
    return import_model(decoder.build(name, cfg, mode, weights="external"))


def ep_decisions(graph) -> list[str]:
    """One line per MoE layer's expert-parallel all-to-all pair (dispatch, combine), read off the graph."""
    lines = []
    for n in graph.topo_nodes():
        if n.op_type == "AllToAll" and n.domain == "com.microsoft":
            t = graph.tensors[n.inputs[0]]
            shape = " x ".join(str(d) for d in t.shape) if t.shape is not None else "?"
            lines.append(f"expert parallel: AllToAll x{n.attrs.get('group_size')} {n.name} of [{shape}] "
                         f"(one GPU's routed pairs x hidden)")
    return lines
