"""Launch and scheduling terms of a serving step: CUDA graphs against eager launch.

The priced kernels (estimator/serve/steps.py) are GPU time only, as the kernel tables measure them
inside CUDA graphs. A step adds (limiter `launch`):
  graphed (decode with a batch the framework captured, padded up to the next captured size):
      step = gpu(padded batch) + graph_launch_s + step_overhead_s
  eager (prefill and mixed steps by default; a decode batch beyond the largest captured size):
      step = max(gpu, kernels x eager_launch_s_per_kernel) + step_overhead_s
      (the host enqueues kernels while the GPU runs them: whichever is slower sets the pace)
  a request's own prefill also waits layers x prefill_dispatch_s_per_layer (vLLM's per-layer dispatch,
  TTFT only, as aiconfigurator calibrates it)
`launch_s` is what the step costs beyond its GPU time and the scheduler's overhead, so the output shows
what CUDA graphs buy. Figures per framework: estimator/serve/frameworks.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from estimator.serve.frameworks import Framework


@dataclass(frozen=True)
class StepCost:
    gpu_s: np.ndarray | float  # priced kernels
    launch_s: np.ndarray | float  # graph launch, or eager host launch not hidden by the GPU
    sched_s: float  # per-step scheduler / host overhead
    graphed: bool
    batch: int  # the batch the step runs at (padded to a captured size when graphed)
    kernels: int

    @property
    def step_s(self):
        return self.gpu_s + self.launch_s + self.sched_s

    def first(self) -> StepCost:
        """This cost at its first point (a decode priced over an array of contexts)."""
        def one(x):
            return float(np.ravel(x)[0])

        return StepCost(one(self.gpu_s), one(self.launch_s), self.sched_s, self.graphed, self.batch,
                        self.kernels)

    def to_json(self) -> dict:
        step = self.first()
        return {"gpu_s": step.gpu_s, "launch_s": step.launch_s, "sched_s": step.sched_s,
                "step_s": step.step_s, "graphed": self.graphed, "batch": self.batch, "kernels": self.kernels}


def _eager(gpu, kernels: int, fw: Framework):
    host = kernels * float(fw.eager_launch_s_per_kernel)
    return np.maximum(gpu, host) - gpu


def decode_step(steps, fw: Framework, batch: int, pasts: np.ndarray) -> StepCost:
    """A decode step of `batch` sequences at each past length in `pasts`."""
    padded = fw.graph_batch(batch)
    if padded is not None:
        gpu = steps.decode(padded, pasts)
        return StepCost(gpu, np.full_like(gpu, float(fw.graph_launch_s)), float(fw.step_overhead_s), True,
                        padded, steps.decode_kernels)
    gpu = steps.decode(batch, pasts)
    return StepCost(gpu, _eager(gpu, steps.decode_kernels, fw), float(fw.step_overhead_s), False, batch,
                    steps.decode_kernels)


def prefill_step(steps, fw: Framework, prompts: int, isl: int, chunks: int) -> StepCost:
    """One prefill step of `prompts` prompts of `isl` tokens (a 1/chunks share of one when chunked)."""
    gpu = steps.prefill(prompts, isl) / chunks
    kernels = steps.prefill_kernels
    if fw.prefill_graphed:
        return StepCost(gpu, float(fw.graph_launch_s), float(fw.step_overhead_s), True, prompts, kernels)
    return StepCost(gpu, float(_eager(gpu, kernels, fw)), float(fw.step_overhead_s), False, prompts, kernels)


def prefill_dispatch_s(steps, fw: Framework) -> float:
    """The framework's per-layer host dispatch of a request's own prefill (vLLM: aiconfigurator's
    calibration adds it to TTFT only; decoding requests riding along do not wait for it)."""
    return float(fw.prefill_dispatch_s_per_layer) * getattr(steps, "layers", 0)
