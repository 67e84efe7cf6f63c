"""The absorbed MLA BMMs as a graph shows them, and how a GPU family's engine runs them with fp8 weights.

Read by the precision pass (estimator/w8a8.py, estimator/precision.py: the BMM's activation quantized per
1 x 128 block on Hopper, kept bf16 on Blackwell) and by their pricing (estimator/pricing/mla.py, which
re-exports these names), so both layers recognise the same MatMuls. The engine facts live in
estimator/pricing/mla_moe.yaml (`mla_bmm_fp8`, read once here).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from estimator import symmath as sm

KERNELS_FILE = Path(__file__).resolve().parent.parent / "pricing" / "mla_moe.yaml"
# the activation scale block of fp8_block_scaling_bmm_out (a documented engine rule: 1 x 128, DeepGEMM)
BMM_ACTIVATION_BLOCK = 128


@functools.lru_cache(maxsize=1)
def kernels_file() -> dict:
    """mla_moe.yaml, read once."""
    return yaml.safe_load(KERNELS_FILE.read_text(encoding="utf-8")) or {}


def bmm_fp8_kind(family: str) -> str:
    """How the family's engine runs the absorbed BMMs with fp8 weights: "block_scaled" (quantize the
    activation per 1 x 128 block, then a block-scaled fp8 BMM) or "dequant_bf16" (bf16 BMM on weights
    dequantized at load); mla_moe.yaml."""
    return (kernels_file().get("mla_bmm_fp8") or {}).get(family, "block_scaled")


def absorbed_bmm(a_shape: tuple, b_shape: tuple, y_shape: tuple, b_is_weight: bool) -> Any | None:
    """The groups G of a batched GEMM with one weight matrix per group, as the engine runs the absorbed
    MLA BMMs: B a weight [G, K, N] and the output [..., G, r, N]; every leading row (tokens, batch) then
    folds into the M side of its group's GEMM (M = the GEMM's batch x M / G). None for any other MatMul."""
    if not b_is_weight or len(b_shape) != 3 or len(a_shape) < 3 or len(y_shape) < 3:
        return None
    try:
        same = sm.num(y_shape[-3] - b_shape[0]) == 0
    except TypeError:
        same = False
    if not same:
        return None
    return int(sm.num(b_shape[0])) if sm.numeric(b_shape[0]) else b_shape[0]
