"""The error of the parallelism passes (shard_tp, shard_moe, split_pp): the graph cannot be split as
asked. Its own module, as each of those passes raises it and shard_tp calls shard_moe."""

from __future__ import annotations

from estimator.errors import UserError


class ShardError(UserError):
    """The graph cannot be sharded as asked (names the node and the reason)."""
