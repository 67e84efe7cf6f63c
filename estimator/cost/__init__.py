"""Cost functions, one module per op family. Importing this package registers them all."""

from estimator.cost import (  # noqa: F401  (imported for their @register side effects)
    attention,
    collective,
    conv,
    einsum,
    elementwise,
    kv_append,
    matmul,
    misc,
    moe,
    movement,
    quant,
    recurrent,
    reduction,
    signal,
    views,
)
from estimator.cost.registry import FREE, CostError, OpView, Work, lookup, register, registered

__all__ = ["FREE", "CostError", "OpView", "Work", "lookup", "register", "registered"]
