"""One config for every decoder family the builders write (llama, mistral, qwen2/3, qwen3_moe, mixtral,
deepseek_v3 / Kimi-K2, gpt_oss, gemma2, gemma3_text, phi3), with the parameter count it implies.

Field names follow transformers' config.json where one exists; `estimator.frontends.hf_config` maps a
config.json onto it. Sizes are plain ints; `layer_windows[i]` is the sliding window of layer i (-1 for
full attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class MoeSpec:
    experts: int  # routed experts (E)
    top_k: int  # experts per token (k)
    ffn: int  # each expert's intermediate width
    shared_experts: int = 0  # always-on experts (DeepSeek), each `ffn` wide
    first_dense: int = 0  # leading layers with a dense MLP instead (DeepSeek's first_k_dense_replace)
    router: str = "softmax"  # softmax then top-k ("softmax"), top-k then softmax ("topk_softmax"),
    #                          sigmoid with a bias (DeepSeek's "sigmoid")
    expert_bias: bool = False  # gpt-oss: biases on the expert projections and the router
    # EP: this GPU's share (see `shard_experts`); the builder puts the dispatch and combine all-to-all
    # (com.microsoft AllToAll, group_size expert_parallel) around the expert projections.
    expert_parallel: int = 1
    # How the routed experts' weights are stored: "" the model's float dtype (re-typed by --precision),
    # or a block-scaled format of estimator.dtypes.STORED_FORMATS ("mxfp4": gpt-oss's checkpoints)
    # that weight-only grouped GEMMs read as stored and dequantize in their mainloop.
    weight_format: str = ""
    # Attention data parallelism (see `deploy_moe`): the attention-DP ranks whose tokens meet in this
    # GPU's MoE through an all-gather before the routed experts and a reduce-scatter after them (1: none),
    # and the routed experts' width split (MoE-TP) that the builder writes in that case.
    token_gather: int = 1
    routed_tp: int = 1

    @property
    def dispatch_group(self) -> int:
        """GPUs of the dispatch / combine all-to-all (1: none; the all-gather path moves no pairs)."""
        return self.expert_parallel if self.token_gather == 1 else 1


def shard_experts(moe: MoeSpec, ep: int) -> MoeSpec:
    """One GPU's share under expert parallelism EP: E / EP experts and, on average, k / EP of each
    token's routes (the same expected active experts per GPU: (E/EP)(1 - (1 - k/E)^T)).
    NB: k / EP routes per token needs EP to divide top-k too (a GPU's expected share of a token's k
    routes, written as a whole number of routes)."""
    if moe.expert_parallel != 1:
        raise ValueError(f"the experts are already sharded (expert parallelism {moe.expert_parallel})")
    if moe.experts % ep:
        raise ValueError(f"expert parallelism {ep} does not divide the {moe.experts} experts")
    if moe.top_k % ep:
        raise ValueError(f"expert parallelism {ep} does not divide top-k {moe.top_k} (each GPU takes "
                         f"k / {ep} of a token's routes)")
    return replace(moe, experts=moe.experts // ep, top_k=moe.top_k // ep, expert_parallel=ep)


def replicated_ep_share(moe: MoeSpec, ep: int) -> MoeSpec:
    """One GPU's routed experts under attention TP with expert parallelism `ep` (the tokens replicated on
    the TP group, each GPU runs its own E / ep experts on the pairs routed to them, one all-reduce sums the
    partial outputs: TensorRT-LLM's TP attention + EP MoE without attention DP, e.g. DeepSeek-V3 at
    tp 16 / ep 16), written as a graph of whole routes when ep does not divide top-k.
    The GPU's expected work is k / ep routes per token over E / ep experts of full width: pairs T k / ep,
    each local expert active with probability 1 - (1 - k/E)^T. With g = gcd(k, ep) the same expectation is
    E / g experts of width ffn / (ep / g) taking k / g whole routes per token (passes/shard_moe.py splits
    the width by tp / g = (tp / ep)(ep / g)): the same pairs x width (T k ffn / ep), the same weight bytes
    per GPU (E ffn / ep) and the same active weight bytes ((E/g)(1 - (1 - (k/g)/(E/g))^T) x ffn g / ep,
    and (k/g)/(E/g) = k/E). Where ep divides k (g = ep) it is `shard_experts`.
    NB: the grouped GEMM then runs ep / g times as many local experts of 1 / (ep / g) the width: the same
    rows per expert, CTAs and bytes; only the per-expert bookkeeping of pricing/moe.py counts E / g."""
    if moe.experts % ep:
        raise ValueError(f"expert parallelism {ep} does not divide the {moe.experts} experts")
    g = math.gcd(moe.top_k, ep)
    if g == ep:
        return shard_experts(moe, ep)
    if moe.expert_parallel != 1:
        raise ValueError(f"the experts are already sharded (expert parallelism {moe.expert_parallel})")
    return replace(moe, experts=moe.experts // g, top_k=moe.top_k // g, expert_parallel=g)


def deploy_moe(moe: MoeSpec, ep: int, attention_dp: int = 1, tp: int = 1) -> MoeSpec:
    """One GPU's MoE under a deployment of attention TP `tp` x attention DP `attention_dp`, whose MoE group
    (tp x attention_dp GPUs) is split into expert parallelism `ep` x MoE-TP (group / ep), as TensorRT-LLM's
    Mapping and aiconfigurator state it (moe_tp x moe_ep = tp x dp).
    - attention_dp 1: the tokens are replicated on the tp group: `shard_experts` (k / ep routes a GPU),
      passes/shard_moe.py splits the width by tp / ep and all-reduces; where ep does not divide top-k
      (DeepSeek's top-8 at ep 16: half a route a token per GPU) `replicated_ep_share` writes the same
      expected work in whole routes.
    - attention_dp A > 1 (tp 1), ep == A: each rank holds its own tokens and sends each token's k pairs to
      their experts' GPUs (the dispatch / combine all-to-all): E / ep experts, all k routes of the rank's
      tokens, the same pairs a GPU receives on average under balanced routing (A ranks x T x k / ep).
    - attention_dp A > 1, ep < A: the ranks' tokens are all-gathered before the routed experts and the
      outputs reduce-scattered after (TensorRT-LLM's attention-DP MoE without all-to-all): A x T tokens,
      E / ep experts, k / ep routes, each expert's width / (A / ep).
    ValueError when a size does not divide (experts, top-k, width) or tp > 1 with attention_dp > 1.
    NB: under attention DP + EP the graph's T tokens each take k distinct local experts, where the real
    A x T tokens' pairs spread over the GPU's experts: the active experts are over-counted at small
    batches ((E/ep)(1 - (1 - k/(E/ep))^T) against (E/ep)(1 - (1 - k/E)^(A T))), the same at large ones."""
    group = tp * attention_dp
    if ep < 1 or group % ep:
        raise ValueError(f"expert parallelism {ep} does not divide the MoE group of {group} GPUs")
    if attention_dp == 1:
        return moe if ep == 1 else replicated_ep_share(moe, ep)
    if tp != 1:
        raise ValueError("attention data parallelism with attention tensor parallelism (tp > 1) inside "
                         "each replica is not supported yet: use --tp 1 --attention-dp N")
    if moe.experts % ep:
        raise ValueError(f"expert parallelism {ep} does not divide the {moe.experts} experts")
    moe_tp = group // ep
    if moe_tp == 1:
        return replace(moe, experts=moe.experts // ep, expert_parallel=ep)
    if moe.top_k % ep:
        raise ValueError(f"expert parallelism {ep} does not divide top-k {moe.top_k}")
    if moe.ffn % moe_tp:
        raise ValueError(f"MoE-TP {moe_tp} does not divide the experts' width {moe.ffn}")
    return replace(moe, experts=moe.experts // ep, top_k=moe.top_k // ep, expert_parallel=ep,
                   token_gather=attention_dp, routed_tp=moe_tp)


@dataclass(frozen=True)
class MlaSpec:
    """DeepSeek's multi-head latent attention."""

    q_lora_rank: int | None  # None: a plain q_proj
    kv_lora_rank: int  # the latent (compressed) KV width: what the cache stores
    qk_nope_dim: int
    qk_rope_dim: int  # the decoupled rotary part, shared across heads and cached too
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_dim + self.qk_rope_dim


@dataclass(frozen=True)
class DecoderConfig:
    model_type: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn: int  # dense MLP width
    vocab: int
    max_pos: int = 4096
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    qkv_bias: bool = False  # qwen2, gpt-oss
    o_bias: bool = False  # gpt-oss
    qk_norm: bool = False  # qwen3, gemma3: RMSNorm over each head of q and k
    layer_windows: tuple[int, ...] = ()  # per layer: sliding window, -1 full (empty: all full)
    attn_softcap: float = 0.0  # gemma2: tanh soft-capping of the scores
    final_softcap: float = 0.0  # gemma2: of the logits
    sinks: bool = False  # gpt-oss: a learned per-head sink logit in the softmax
    act: str = "silu"  # gated MLP activation: silu or gelu_tanh (gemma)
    sandwich_norm: bool = False  # gemma2/3: norms after attention and MLP too
    embed_scale: bool = False  # gemma: embeddings times sqrt(hidden)
    tie_embeddings: bool = False
    rope_interleave: bool = False  # DeepSeek: rotary on (even, odd) pairs
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
    weights: str = "external"
    source: str = ""  # the model card / config.json the values come from
    extra: dict = field(default_factory=dict, compare=False)

    def window(self, layer: int) -> int:
        return self.layer_windows[layer] if self.layer_windows else -1

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and layer >= self.moe.first_dense

    # ---- parameter counts ------------------------------------------------------------------------

    def attention_params(self) -> int:
        h, hd = self.hidden, self.head_dim
        if self.mla is not None:
            m = self.mla
            q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.num_heads * m.qk_head_dim
                 if m.q_lora_rank else h * self.num_heads * m.qk_head_dim)
            kv = (h * (m.kv_lora_rank + m.qk_rope_dim) + m.kv_lora_rank
                  + m.kv_lora_rank * self.num_heads * (m.qk_nope_dim + m.v_head_dim))
            return q + kv + self.num_heads * m.v_head_dim * h
        q, kv = self.num_heads * hd, self.num_kv_heads * hd
        bias = (q + 2 * kv) if self.qkv_bias else 0
        return h * (q + 2 * kv) + bias + q * h + (h if self.o_bias else 0) + (2 * hd if self.qk_norm else 0) \
            + (self.num_heads if self.sinks else 0)

    def expert_params(self) -> int:
        """One routed expert: gate, up and down projections (+ biases for gpt-oss)."""
        m = self.moe
        return 3 * self.hidden * m.ffn + ((2 * m.ffn + self.hidden) if m.expert_bias else 0)

    def param_counts(self) -> tuple[int, int]:
        """(total, active per token). Active counts the routed experts a token uses (top_k), the shared
        experts, attention, norms, router and the LM head; NB: not the input embedding table, of which
        a token reads one row (the convention of the gpt-oss and DeepSeek model cards)."""
        h = self.hidden
        norms = h * (4 if self.sandwich_norm else 2)
        dense_mlp = 3 * h * self.ffn
        total = active = 0
        for i in range(self.num_layers):
            layer = self.attention_params() + norms
            if self.is_moe_layer(i):
                m = self.moe
                router = h * m.experts + (m.experts if m.expert_bias or m.router == "sigmoid" else 0)
                shared = m.shared_experts * 3 * h * m.ffn
                total += layer + router + shared + m.experts * self.expert_params()
                active += layer + router + shared + m.top_k * self.expert_params()
            else:
                total += layer + dense_mlp
                active += layer + dense_mlp
        embed = self.vocab * h
        head = 0 if self.tie_embeddings else self.vocab * h
        return total + embed + head + h, active + self.vocab * h + h

    def kv_bytes_per_token(self, itemsize: int = 2) -> int:
        """KV-cache bytes one token adds over all layers. MLA caches the latent (kv_lora_rank) and the
        shared rotary key (qk_rope_dim) per layer, not K and V per head."""
        if self.mla is not None:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_dim
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim
        return self.num_layers * per_layer * itemsize
