"""Cost of an in-place KV-cache append (`estimator.KvAppend`, written by passes/kv_inplace.py).

Counting rule: the new rows (input 1) are read once and written once into the preallocated cache;
the past rows (input 0) are neither read nor written (they stay where they are); 0 FLOPs.
NB: a paged cache scatters the rows into blocks; the block-table lookup is a few bytes per token and
is ignored.
"""

from __future__ import annotations

from estimator.cost.registry import OpView, Work, register, traffic


@register("KvAppend", domain="estimator")
def kv_append(op: OpView) -> Work:
    """Reads the new rows, writes the same number of bytes into the cache."""
    op.output(0)  # required: the present cache must exist
    new = op.input(1)
    return Work({}, traffic(new), traffic(new))
