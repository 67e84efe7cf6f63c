"""The 1 x block activation quantization kernel a framework runs before a block-scaled GEMM (a block-wise
QuantizeLinear): a grid-stride loop in which every warp quantizes one group of `block_size` values per
round, one load round trip after another (hwdesc/tiles/<family>.yaml `block_quant`).

    groups   = numel(x) / block_size                    (one scale each)
    rounds   = ceil(groups / (SMs * warps_per_sm))      (the grid holds warps_per_sm warps on every SM)
    estimate = launch_s + mem_latency_s + max(stream compute, stream memory, (rounds - 1) * round_s)
               (round_s: block_quant_round_s; the first round's load is the fixed part's mem_latency_s)

TensorRT-LLM's fp8_1x128_cs launches scale_1x128_kernel on 8 x SMs blocks of 256 threads (64 warps per
SM): each warp loads its 128 bf16 values, reduces their amax across the warp, writes the scale and the
fp8 values, then takes the next group, so a round costs a dependent load's latency plus the reduction
whatever the bandwidth. `block_quant_round_s` (seconds a round) is fitted on the H100 fp8_block rows.
NB: the streaming terms are the plain streaming model's (estimator/pricing/plan.py stream_time); the
round time is one constant whether x is read from L2 or DRAM (the H100 rows show ~1.8 us a round at N
128, K 8192 from M 1024, x in L2, to M 16384, x in DRAM).
"""

from __future__ import annotations

from typing import Any

import sympy

from estimator import symmath as sm


def block_quant_rounds(graph, kernel, sm_count: int, warps_per_sm: int) -> Any:
    """Rounds of the grid-stride loop for a kernel that is one block-wise QuantizeLinear, else None."""
    if len(kernel.nodes) != 1 or kernel.nodes[0].op_type != "QuantizeLinear" or warps_per_sm <= 0:
        return None
    node = kernel.nodes[0]
    block = int(node.attrs.get("block_size", 0) or 0)
    tensor = graph.tensors.get(node.inputs[0]) if block > 0 else None
    if tensor is None or tensor.shape is None:
        return None
    groups = sympy.sympify(tensor.numel) / block
    rounds = sympy.ceiling(groups / (sm_count * warps_per_sm))
    return sm.num(rounds) if not rounds.free_symbols else rounds
