"""The Nsight Systems leg of tools/gpu_check.py: run a model in onnxruntime-gpu under `nsys profile`,
export the capture as SQLite and feed it through `estimate profile`'s path (estimator/profile/), so a
GPU session yields joined, per-kernel ground truth. Used only when `shutil.which("nsys")` finds nsys.

The runner executes the model with the optimizer off (ORT_DISABLE_ALL, what `--fusion none` joins
against) and brackets the timed runs in an NVTX range; kernels join to the estimate by order and kind
(onnxruntime release wheels emit no per-node NVTX ranges).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

RUNNER = """\
import sys
import numpy as np
import onnxruntime as ort
model, feeds, runs = sys.argv[1], np.load(sys.argv[2]), int(sys.argv[3])
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sess = ort.InferenceSession(model, so, providers=["CUDAExecutionProvider"])
inputs = {k: feeds[k] for k in feeds.files}
sess.run(None, inputs)  # warm-up: allocations and autotuning stay out of the timed runs
try:
    import torch.cuda.nvtx as nvtx
except ImportError:
    nvtx = None
if nvtx:
    nvtx.range_push("timed_runs")
for _ in range(runs):
    sess.run(None, inputs)
if nvtx:
    nvtx.range_pop()
"""


def available() -> bool:
    return shutil.which("nsys") is not None


def command(out_stem: Path, runner: Path, model: Path, feeds: Path, runs: int) -> list[str]:
    """`nsys profile` of the runner, exporting `out_stem`.sqlite beside the .nsys-rep."""
    return ["nsys", "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
            "--force-overwrite=true", "--export=sqlite", "-o", str(out_stem),
            sys.executable, str(runner), str(model), str(feeds), str(runs)]


def capture(model, dims: dict[str, int], out_dir: Path, runs: int, timeout_s: int = 600) -> Path:
    """Run `model` (an onnx proto with weights) under nsys; returns the SQLite export's path."""
    import numpy as np
    import onnx

    from estimator.truth.validate import make_inputs

    out_dir.mkdir(parents=True, exist_ok=True)
    model_path, feeds_path, runner = out_dir / "model.onnx", out_dir / "feeds.npz", out_dir / "runner.py"
    onnx.save(model, model_path)
    np.savez(feeds_path, **make_inputs(model, dims))
    runner.write_text(RUNNER)
    stem = out_dir / "capture"
    subprocess.run(command(stem, runner, model_path, feeds_path, runs), check=True, timeout=timeout_s,
                   stdout=subprocess.DEVNULL)
    return stem.with_suffix(".sqlite")


def timed_only(profile):
    """The kernels launched inside the runner's "timed_runs" NVTX range (the warm-up run left out), with
    the range name cleared so the join goes by order; the profile unchanged when the range is absent
    (NB: then the warm-up run is one of the iterations averaged)."""
    from dataclasses import replace

    timed = [replace(k, node=None) for k in profile.kernels if k.node == "timed_runs"]
    return replace(profile, kernels=timed) if timed else profile


def joined(sqlite_path: Path, model, hw_name: str, dims: dict[str, int]):
    """The profile path on a capture: the Analysis (with its Validation) of `model` at `dims` on
    `hw_name`, timed runs only."""
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.profile.analysis import analyse
    from estimator.profile.load import load
    from estimator.truth.validate import name_nodes
    from passes import pipeline_for

    name_nodes(model)
    result = estimate(import_model(model), hwdesc.load(hw_name), dims=dims, pipeline=pipeline_for("none"))
    return analyse(timed_only(load(str(sqlite_path))), hw_name, result, model)


def summary_line(a) -> str:
    v, t = a.validation, a.timeline
    idle = f"; GPU idle {100 * t.idle_s / t.span_s:.0f}% of the span" if t and t.span_s else ""
    return (f"nsys: {len(a.profile.kernels)} kernels over {a.joined.iterations} iteration(s), joined "
            f"{100 * v.joined_share:.0f}% of kernel time ({a.joined.strategy}); per iteration measured "
            f"{v.measured_s * 1e3:.3f} ms vs estimate {float(v.result.totals['estimate_s']) * 1e3:.3f} ms"
            f"{idle}")
