"""Memory per GPU of a deployment: what is resident, what is left for the KV cache, how much fits.

Counting rules (one GPU of a tp-way group; the graphs are one GPU's, after passes/shard_tp.py):
- weights      = the sharded graph's stored weights at the deployed precision (estimator.estimate
                 weight_bytes: replicated norms and RoPE tables included);
- kv_per_token = over the present-cache outputs of the sharded decode graph, bytes per (sequence,
                 position) at the KV precision: 2 x layers x ceil(kv_heads/tp) x head_dim x bytes for a
                 Llama (the 2 is key and value);
- activations  = the liveness peak (estimator/serve/liveness.py) of the sharded prefill graph at the
                 framework's max tokens per step, KV cache excluded;
- comm buffers = the framework's NCCL / custom all-reduce buffers at this TP (frameworks.yaml);
- reserve      = the framework's runtime reserve (CUDA context, cuBLAS workspace, graph pools).
KV budget: `of_free` (TensorRT-LLM) = (device - non_kv) x fraction; `of_total` (vLLM, SGLang) =
device x fraction - non_kv; device = the memory the runtime reports (frameworks.device_memory_bytes).
Capacity: floor(budget / kv_per_token) rounded down to whole blocks of tokens_per_block.
Admission: `reserve` policies hold ceil_block(isl + osl) tokens per sequence; `on_demand` ones
ceil_block(isl + osl/2) on average (NB: vLLM preempts when the estimate is exceeded; not modelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy

from estimator.dtypes import itemsize
from estimator.ir import Graph, dim
from estimator.serve.frameworks import Framework, device_memory_bytes
from estimator.serve.liveness import Liveness, cache_tensors
from hwdesc import HardwareDescriptor


@dataclass(frozen=True)
class Memory:
    device_bytes: float
    weights_bytes: float
    activations_bytes: float
    activations_peak_kernel: str | None
    comm_buffers_bytes: float
    reserve_bytes: float
    kv_bytes_per_token: float
    kv_budget_bytes: float
    kv_capacity_tokens: int
    tokens_per_block: int
    kv_policy: str

    @property
    def non_kv_bytes(self) -> float:
        return self.weights_bytes + self.activations_bytes + self.comm_buffers_bytes + self.reserve_bytes

    def tokens_per_sequence(self, isl: int, osl: int) -> int:
        """KV tokens a sequence holds: its whole length reserved, or about half its output on demand."""
        held = isl + osl if self.kv_policy == "reserve" else isl + math.ceil(osl / 2)
        return _ceil_block(held, self.tokens_per_block)

    def max_concurrency(self, isl: int, osl: int) -> int:
        return self.kv_capacity_tokens // self.tokens_per_sequence(isl, osl)

    def largest_batch(self, context: int) -> int:
        """The most sequences of `context` tokens the cache holds."""
        return self.kv_capacity_tokens // _ceil_block(context, self.tokens_per_block)

    def longest_context(self, batch: int) -> int:
        """The longest context (tokens, whole blocks) `batch` sequences can each hold."""
        per = self.kv_capacity_tokens // max(batch, 1)
        return per - per % self.tokens_per_block

    def fits(self, isl: int, osl: int) -> bool:
        return self.kv_budget_bytes > 0 and self.max_concurrency(isl, osl) >= 1

    def to_json(self) -> dict:
        return {"weights": self.weights_bytes, "activations": self.activations_bytes,
                "comm_buffers": self.comm_buffers_bytes, "reserve": self.reserve_bytes,
                "kv_cache": max(self.kv_budget_bytes, 0.0), "device": self.device_bytes,
                "kv_per_token": self.kv_bytes_per_token}


def _ceil_block(tokens: int, block: int) -> int:
    return -(-tokens // block) * block


def kv_bytes_per_token(decode: Graph, kv_dtype: str | None) -> float:
    """Bytes per cached token of one sequence: the growth of the present caches per past position.

    `decode` is the (sharded) decode graph with `past_seq` free; kv_dtype None keeps the graph's. The
    growth is taken far out (between past = P and P + 1, P = 2**30), so a sliding-window layer whose
    cache holds Min(window, past_seq) + 1 rows grows by 0: its window is a fixed cost per sequence, as in
    the hybrid KV allocators of vLLM and TensorRT-LLM (variable window attention). NB: that fixed
    window cost (window x the layer's row bytes per sequence) is not subtracted from the KV budget."""
    past, far = dim("past_seq"), sympy.Integer(2**30)
    presents = [o for o in decode.outputs if o in cache_tensors(decode)]
    total = sympy.Integer(0)
    for name in presents:
        t = decode.tensors[name]
        numel = t.numel.subs({s: 1 for s in t.numel.free_symbols if s != past})
        total += (numel.subs(past, far + 1) - numel.subs(past, far)) * itemsize(kv_dtype or t.dtype)
    if not presents or not total.is_number:
        raise ValueError(f"{decode.name}: no present KV cache growing in past_seq")
    return float(total)


def plan_memory(hw: HardwareDescriptor, fw: Framework, tp: int, weights_bytes: float,
                kv_per_token: float, activations: Liveness) -> Memory:
    device = device_memory_bytes(hw)
    peak = sympy.sympify(activations.peak_bytes)
    if not peak.is_number:  # a shape the graph's inference left unknown: a refusal, never a traceback
        from estimator.errors import UserError

        unknown = ", ".join(sorted(map(str, peak.free_symbols))[:3])
        raise UserError(f"this deployment's activation peak is not a number (shape inference left {unknown} "
                        f"unresolved): its memory cannot be planned")
    act = float(peak)
    comm = fw.comm_buffer_bytes(tp)
    reserve = float(fw.runtime_reserve_bytes)
    non_kv = weights_bytes + act + comm + reserve
    fraction = float(fw.kv_memory_fraction)
    budget = (device - non_kv) * fraction if fw.kv_budget_rule == "of_free" else device * fraction - non_kv
    block = int(fw.tokens_per_block)
    tokens = int(max(budget, 0.0) // kv_per_token)
    return Memory(device, weights_bytes, act, activations.peak_kernel, comm, reserve, kv_per_token, budget,
                  tokens - tokens % block, block, str(fw.kv_policy))


FIT_TPS = (1, 2, 4, 8, 16, 32, 64)  # the TP sizes a "smallest fit" is looked for among (deploy.py's)


@dataclass(frozen=True)
class WeightsFit:
    """Whether a model's weights fit one GPU with the framework's non-KV memory beside them (the plan of
    plan_memory with no activations and no KV cache yet: the least any deployment needs), and the
    smallest TP whose 1 / TP share of the weights would (None: none up to 64)."""

    fits: bool
    weights_bytes: float
    device_bytes: float
    non_kv_bytes: float
    smallest_tp: int | None

    def to_json(self) -> dict:
        return {"fits": self.fits, "weights_bytes": self.weights_bytes, "device_bytes": self.device_bytes,
                "non_kv_bytes": self.non_kv_bytes,
                "smallest_fit": None if self.fits else ({"tp": self.smallest_tp} if self.smallest_tp else {})}

    def text(self) -> str:
        """The line a mode prints when the weights do not fit ("" when they do)."""
        if self.fits:
            return ""
        best = f"--tp {self.smallest_tp}" if self.smallest_tp else f"none up to --tp {FIT_TPS[-1]}"
        return (f"does not fit: {self.weights_bytes / 1e9:.1f} GB of weights on "
                f"{self.device_bytes / 1e9:.1f} GB ({self.non_kv_bytes / 1e9:.1f} GB with the framework's "
                f"reserve, before any KV cache); smallest fit: {best} (weights split evenly)")


def weights_fit(hw: HardwareDescriptor, fw: Framework, weights_bytes: float) -> WeightsFit:
    """WeightsFit of `weights_bytes` (the whole model's, one GPU) on `hw` under `fw`'s memory rules: the
    KV budget plan_memory leaves must be positive. NB: at TP > 1 the weights are taken as split evenly
    (norms and other replicated tensors are small); `--memory` prices the sharded graph exactly."""
    device = device_memory_bytes(hw)

    def plan(tp: int) -> tuple[bool, float]:
        non_kv = weights_bytes / tp + fw.comm_buffer_bytes(tp) + float(fw.runtime_reserve_bytes)
        fraction = float(fw.kv_memory_fraction)
        of_free = fw.kv_budget_rule == "of_free"
        budget = (device - non_kv) * fraction if of_free else device * fraction - non_kv
        return budget > 0, non_kv

    fits, non_kv = plan(1)
    smallest = None if fits else next((tp for tp in FIT_TPS[1:] if plan(tp)[0]), None)
    return WeightsFit(fits, float(weights_bytes), device, non_kv, smallest)


def result_fit(result, framework_name: str | None = None) -> WeightsFit | None:
    """weights_fit of a priced graph (estimator.estimate Result) on its GPU under the framework's memory
    rules (TensorRT-LLM's by default); None when its weight bytes are not a number."""
    wb = result.totals.get("weight_bytes")
    if wb is None or not getattr(wb, "is_number", True):
        return None
    from estimator.serve.frameworks import framework

    return weights_fit(result.hw, framework(framework_name or "trtllm"), float(wb))
