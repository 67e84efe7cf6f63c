"""Deployment layer: parallelism plans, the communication model, memory fit and serving metrics.

Modules: collectives (the NCCL-like and custom all-reduce collective model, on the descriptor's
`interconnect` group); the sharding, memory and serving modules build on the per-kernel pricing."""
