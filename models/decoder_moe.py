"""A mixture-of-experts MLP written as transformers' `batched_mm` experts export it.

Router GEMM -> (softmax | sigmoid + bias) -> TopK -> normalized routing weights; each token is repeated
top_k times, each (token, expert) pair gathers its expert's fused gate/up matrix ([pairs, 2 * ffn,
hidden], GatherND) and multiplies it by the token (a batched MatMul), the gate is applied, the down
matrix gathered and multiplied the same way, the pairs weighted and summed back per token; shared
experts (DeepSeek) are a dense gated MLP added on top. passes/fuse_moe.py turns each gathered
projection into a grouped GEMM that reads each active expert once.

Expert parallelism (MoeSpec.expert_parallel = N > 1, see models.decoder_config.shard_experts): the graph is
one GPU's share (E / N experts, k / N routes per token, the router still scores all E experts), and the
token pairs travel as the serving engines move them: a `com.microsoft` `AllToAll` (group_size N) of the
repeated tokens before the first grouped GEMM (dispatch) and one of the down projection's output before
the weighted combine (combine). Each moves this GPU's pairs, [T * k / N, hidden]: T x k x hidden x bytes
/ N per GPU, as the collective model counts an all-to-all's message (the total buffer; (N-1)/N of it
leaves the GPU). NB: routing is taken as balanced (every GPU receives as many pairs as it sends).
Under --tp (tokens replicated on the group) passes/shard_moe.py drops the pair for one all-reduce.
Under attention data parallelism (models.decoder_config.deploy_moe): with EP equal to the DP group the
share is E / N experts and every route of the rank's tokens (the all-to-all moves [T * k, hidden]); with
MoE-TP (MoeSpec.token_gather A > 1) the routed experts read the A ranks' tokens through an `AllGather`
(axis 0) and hand each rank its own back through a `ReduceScatter` (axis 0), the experts' width divided
by MoeSpec.routed_tp; the shared experts run on the rank's own tokens.

MoeSpec.weight_format "mxfp4" (gpt-oss): the two expert weights are marked as stored in MXFP4 (the
graph's metadata, estimator/frontends/stored_formats.py): 4.25 bits a weight, dequantized by the grouped
GEMM (estimator/fused.py); the rest of the graph keeps its float dtype. NB: the expert biases, the router
and attention stay float, as in gpt-oss's checkpoints.
"""

from __future__ import annotations

from models._builder import FLOAT, GraphBuilder
from models.decoder_blocks import activation, gated_mlp
from models.decoder_config import DecoderConfig

COMM_DOMAIN = "com.microsoft"


def _router(b: GraphBuilder, cfg: DecoderConfig, prefix: str, tokens: str) -> tuple[str, str]:
    """(routing weights [T, k], expert ids [T, k]) from tokens [T, hidden]."""
    m = cfg.moe
    routed = m.experts * m.expert_parallel  # the router scores every expert, held here or not
    w = b.weight(f"{prefix}.gate.weight", [routed, cfg.hidden])
    logits = b.op("Gemm", tokens, w, transB=1)
    if m.expert_bias:
        logits = b.op("Add", logits, b.weight(f"{prefix}.gate.bias", [routed], init="zeros"))
    k = b.const([m.top_k])
    if m.router == "topk_softmax":  # gpt-oss, Mixtral: top-k of the logits, softmax over the k
        top, ids = b.op("TopK", logits, k, axis=-1, outputs=2)
        return b.op("Softmax", top, axis=-1), ids
    if m.router == "sigmoid":  # DeepSeek-V3: sigmoid scores, a bias picks, the raw scores weigh
        # NB: the group-limited selection (n_group / topk_group) is a few tiny ops more, not written.
        scores = b.op("Sigmoid", logits)
        biased = b.op("Add", scores, b.weight(f"{prefix}.gate.e_score_correction_bias", [routed]))
        _, ids = b.op("TopK", biased, k, axis=-1, outputs=2)
        top = b.op("GatherElements", scores, ids, axis=1)
    else:  # softmax over all experts, then top-k (Qwen3-MoE)
        top, ids = b.op("TopK", b.op("Softmax", logits, axis=-1), k, axis=-1, outputs=2)
    top = b.op("Div", top, b.op("ReduceSum", top, b.const([1]), keepdims=1))
    return top, ids


def _expert_projection(b: GraphBuilder, x: str, weight: str, bias: str | None, rows: str) -> str:
    """Per pair: gathered W[e] [out, in] @ x [in] -> [pairs, out] (+ gathered bias[e])."""
    picked = b.op("GatherND", weight, rows)
    y = b.op("Squeeze", b.op("MatMul", picked, b.op("Unsqueeze", x, b.const([2]))), b.const([2]))
    return y if bias is None else b.op("Add", y, b.op("GatherND", bias, rows))


def all_to_all(b: GraphBuilder, x: str, group: int) -> str:
    """x through a com.microsoft AllToAll over `group` GPUs (the identity for one GPU)."""
    return x if group == 1 else b.op("AllToAll", x, domain=COMM_DOMAIN, group_size=group)


def moe_mlp(b: GraphBuilder, cfg: DecoderConfig, prefix: str, h: str) -> str:
    m = cfg.moe
    local = b.op("Reshape", h, b.const([-1, cfg.hidden]))  # [T, hidden]
    tokens = local
    if m.token_gather > 1:  # attention DP: the ranks' tokens meet here (models.decoder_config.deploy_moe)
        tokens = b.op("AllGather", local, domain=COMM_DOMAIN, group_size=m.token_gather, axis=0)
    ffn = m.ffn // m.routed_tp
    weights, ids = _router(b, cfg, prefix, tokens)
    with b.scope("experts"):
        repeated = b.op("Reshape", b.op("Expand", b.op("Unsqueeze", tokens, b.const([1])),
                                        b.const([1, m.top_k, 1])), b.const([-1, cfg.hidden]))  # [T*k, hidden]
        repeated = all_to_all(b, repeated, m.dispatch_group)  # dispatch: pairs to their experts' GPUs
        rows = b.op("Unsqueeze", b.op("Reshape", ids, b.const([-1])), b.const([1]))  # [T*k, 1]
        gate_up = b.weight(f"{prefix}.experts.gate_up_proj", [m.experts, 2 * ffn, cfg.hidden])
        down = b.weight(f"{prefix}.experts.down_proj", [m.experts, cfg.hidden, ffn])
        if m.weight_format:  # e.g. MXFP4 (gpt-oss): stored block-scaled, named in the metadata
            gate_up, down = (b.stored_format(w, m.weight_format) for w in (gate_up, down))
        biases = ((b.weight(f"{prefix}.experts.gate_up_proj_bias", [m.experts, 2 * ffn], init="zeros"),
                   b.weight(f"{prefix}.experts.down_proj_bias", [m.experts, cfg.hidden], init="zeros"))
                  if m.expert_bias else (None, None))
        y = _expert_projection(b, repeated, gate_up, biases[0], rows)
        gate, up = b.op("Split", y, b.const([ffn, ffn]), axis=1, outputs=2)
        y = _expert_projection(b, b.op("Mul", activation(b, gate, cfg.act), up), down, biases[1], rows)
        y = all_to_all(b, y, m.dispatch_group)  # combine: each pair's output back to its token's GPU
        pair_w = b.op("Unsqueeze", b.op("Reshape", weights, b.const([-1])), b.const([1]))
        y = b.op("Mul", y, b.op("Cast", pair_w, to=FLOAT))
        per_token = b.op("Reshape", y, b.const([-1, m.top_k, cfg.hidden]))
        y = b.op("ReduceSum", per_token, b.const([1]), keepdims=0)
        if m.token_gather > 1:  # each rank's tokens back, summed over the MoE-TP width shards
            y = b.op("ReduceScatter", y, domain=COMM_DOMAIN, group_size=m.token_gather, axis=0)
    if m.shared_experts:  # on the rank's own tokens (replicated weights under attention DP)
        with b.scope("shared_experts"):
            shared = gated_mlp(b, local, f"{prefix}.shared_experts", cfg.hidden, m.shared_experts * m.ffn,
                               cfg.act)
        y = b.op("Add", y, shared)
    return b.op("Reshape", y, b.op("Shape", h))

