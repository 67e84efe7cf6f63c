"""Serving-framework defaults (estimator/serve/frameworks.yaml) and usable device memory
(estimator/serve/device_memory.yaml), read once and checked: a figure without a `value` or a `source`
is an error, as in the hardware descriptors."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from estimator.errors import UserError
from hwdesc import HardwareDescriptor

HERE = Path(__file__).resolve().parent
FIELDS = ("kv_budget_rule", "kv_memory_fraction", "kv_policy", "tokens_per_block", "max_num_tokens",
          "max_batch_size", "chunked_prefill", "cuda_graph_max_batch", "cuda_graph_batch_sizes",
          "cuda_graph_padding", "prefill_graphed", "custom_allreduce", "runtime_reserve_bytes",
          "comm_buffer_bytes_by_tp", "eager_launch_s_per_kernel", "graph_launch_s", "step_overhead_s",
          "admission_wait", "host_output_tokens_per_s", "host_s_per_request",
          "prefill_dispatch_s_per_layer", "scheduler")
# in-flight batching (estimator/serve/serving.py); prefill-first waves (estimator/serve/waves.py)
SCHEDULERS = ("inflight", "prefill_first")
# admission_wait: the steps a request waits for the step that takes it (estimator/serve/serving.py JOIN_STEPS)
ADMISSION_WAITS = ("half_step", "overlap_step")


class FrameworkError(UserError):
    pass


@dataclass(frozen=True)
class Framework:
    """One framework's defaults; every attribute is the `value` of the YAML figure of that name."""

    name: str
    display_name: str
    values: dict[str, Any]
    sources: dict[str, str]

    def __getattr__(self, key: str) -> Any:
        values = self.__dict__.get("values", {})
        if key in values:
            return values[key]
        raise AttributeError(key)

    def comm_buffer_bytes(self, tp: int) -> float:
        """The NCCL / custom all-reduce buffers at `tp` (the largest listed TP <= tp)."""
        table = {int(k): float(v) for k, v in self.comm_buffer_bytes_by_tp.items()}
        return table[max(k for k in table if k <= tp)] if tp > 1 else 0.0

    def graph_batch(self, batch: int) -> int | None:
        """The captured batch a decode of `batch` runs at (padded up), None when it runs eager."""
        if batch > self.cuda_graph_max_batch:
            return None
        sizes = sorted(self.cuda_graph_batch_sizes)
        if not self.cuda_graph_padding:
            return batch if batch in sizes else None
        return next((s for s in sizes if s >= batch), None)


def _figures(raw: dict, where: str) -> tuple[dict, dict]:
    values, sources = {}, {}
    for key in FIELDS:
        fig = raw.get(key)
        if not isinstance(fig, dict) or "value" not in fig or not fig.get("source"):
            raise FrameworkError(f"{where}: {key} needs a value and a source")
        values[key], sources[key] = fig["value"], fig["source"]
    if values["scheduler"] not in SCHEDULERS:
        raise FrameworkError(f"{where}: scheduler {values['scheduler']!r}: "
                             f"choose from {', '.join(SCHEDULERS)}")
    if values["admission_wait"] not in ADMISSION_WAITS:
        raise FrameworkError(f"{where}: admission_wait {values['admission_wait']!r}: "
                             f"choose from {', '.join(ADMISSION_WAITS)}")
    return values, sources


@functools.lru_cache(maxsize=None)
def frameworks() -> dict[str, Framework]:
    raw = yaml.safe_load((HERE / "frameworks.yaml").read_text())["frameworks"]
    out = {}
    for name, body in raw.items():
        values, sources = _figures(body, f"frameworks.yaml {name}")
        out[name] = Framework(name, body.get("display_name", name), values, sources)
    return out


def framework(name: str) -> Framework:
    known = frameworks()
    if name not in known:
        raise FrameworkError(f"--framework {name!r}: choose from {', '.join(known)}")
    return known[name]


@functools.lru_cache(maxsize=None)
def _usable() -> dict[str, float]:
    raw = yaml.safe_load((HERE / "device_memory.yaml").read_text())["usable_bytes"]
    return {k: float(v["value"]) for k, v in raw.items()}


def device_memory_bytes(hw: HardwareDescriptor) -> float:
    """Memory the CUDA runtime reports for `hw` (device_memory.yaml), else its datasheet dram_bytes."""
    return _usable().get(hw.name, float(hw.dram_bytes))
