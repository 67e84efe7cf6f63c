"""Free ops: views and host-side shape arithmetic launch no kernel and move no data.

Counting rule: zero FLOPs, zero DRAM bytes. Reshape/Squeeze/Unsqueeze/Flatten/Identity reinterpret a
buffer; Shape/Size/Constant/ConstantOfShape/Range compute shapes on the host (NB: a ConstantOfShape or
Range that builds a large activation-sized tensor is still priced as free here; canonicalization folds
the common cases and the fill is a memset at most).
"""

from __future__ import annotations

from estimator.cost.registry import FREE, OpView, Work, register
from estimator.ops import SHAPE, VIEW


@register(*sorted(VIEW | SHAPE))
def free_view(op: OpView) -> Work:
    """No kernel: 0 FLOPs, 0 bytes."""
    return FREE
