"""Cost of an in-place KV-cache append (`estimator.KvAppend`, written by passes/kv_inplace.py).

Counting rule: the new rows (input 1) are read once and written once into the preallocated cache, at
the cache's dtype (output 0: an fp8 cache of bf16 rows is written at 1 byte per element, the
quantization fused into the append);
the past rows (input 0) are neither read nor written (they stay where they are); 0 FLOPs.
NB: a paged cache scatters the rows into blocks; the block-table lookup is a few bytes per token and
is ignored.
"""

from __future__ import annotations

from estimator.cost.registry import OpView, Work, register, traffic
from estimator.dtypes import itemsize


@register("KvAppend", domain="estimator")
def kv_append(op: OpView) -> Work:
    """Reads the new rows, writes as many elements into the cache, in the cache's dtype."""
    present = op.output(0)  # required: the present cache must exist
    new = op.input(1)
    written = traffic(new) if new.dtype == present.dtype else new.numel * itemsize(present.dtype)
    return Work({}, traffic(new), written)
