"""Measured vs estimate on the NVIDIA GPU of this machine: one self-contained check that installs nothing.

    python -m tools.gpu_check [--models gpt2-small,bert-base,llama-3-8b] [--seqs 128,512,2048]
                              [--precision fp32|tf32|bf16|fp16] [--runs 20] [--arch SKU] [--device cuda]

It maps torch.cuda.get_device_name() to a bundled descriptor (or takes --arch), estimates each bundled
model (`estimate --list-models`) at batch 1 and each sequence length with --fusion none, and measures:

- through onnxruntime-gpu (CUDAExecutionProvider) when it is installed, the precision is fp32 and the
  model carries weights: the whole graph end to end (estimator/truth/validate.py, --ep cuda);
- otherwise through PyTorch on the same shapes: every MatMul/Gemm and Softmax kernel of the estimate is
  run as torch.matmul / torch.softmax on random tensors of its shapes, timed with CUDA events (median of
  --runs after a warm-up), and summed over the kernels with their multiplicity. That covers the bulk of
  a transformer's time; the row says which share of the estimate it covers. NB: a repeated call keeps
  its operands in L2 when they fit, so small ops can come out faster than a DRAM-only bound (H100 L2:
  50 MB).

When `nsys` is on the PATH (and onnxruntime-gpu is used), each onnxruntime row is also captured with
Nsight Systems (tools/nsys_capture.py) and fed through `estimate profile`'s path: per-kernel measured
times joined to the estimate, written as `<model>_seq<N>.json` (and the .sqlite) under --nsys-dir.

`--device cpu` runs the PyTorch path on the CPU with wall-clock timing (a smoke test, not a measurement
of any GPU). Without a GPU and without --device cpu it says so and exits 2.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# torch.cuda.get_device_name() -> bundled SKU; the first pattern that matches wins (order matters:
# GB200 before B200, H100 PCIe before H100).
SKU_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"GB200", "gb200"), (r"B300", "b300"), (r"B200", "b200"), (r"H200", "h200"),
    (r"H100.*(PCIe|NVL)", "h100-pcie"), (r"H100", "h100-sxm"), (r"RTX PRO 6000", "rtx-pro-6000"),
    (r"RTX 5090", "rtx-5090"), (r"A100", "a100"),
)
TORCH_OPS = ("MatMul", "Gemm", "Softmax")


def sku_for(device_name: str) -> str | None:
    """The bundled descriptor of a CUDA device name, or None when none fits."""
    for pattern, sku in SKU_PATTERNS:
        if re.search(pattern, device_name, re.IGNORECASE):
            return sku
    return None


@dataclass(frozen=True)
class TorchOp:
    """One distinct kernel of the estimate to replay in PyTorch, with how often the model runs it."""

    op: str
    shapes: tuple[tuple[int, ...], ...]  # operand shapes (MatMul: a, b; Gemm: a, b as [k, n]; Softmax: x)
    axis: int
    count: int
    estimate_s: float  # per call
    bound_s: float


def torch_workload(result) -> list[TorchOp]:
    """The MatMul, Gemm and Softmax kernels of an unfused estimate, grouped by signature."""
    groups: dict[object, list] = {}
    for p in result.kernels:
        node = p.kernel.nodes[0]
        if len(p.kernel.nodes) == 1 and node.op_type in TORCH_OPS:
            groups.setdefault(p.kernel.signature, []).append(p)
    ops = []
    for ps in groups.values():
        node, timing = ps[0].kernel.nodes[0], ps[0].timing
        shapes = [tuple(int(d) for d in result.graph.tensors[t].shape) for t in node.inputs[:2] if t]
        if node.op_type == "Softmax":
            shapes = shapes[:1]
        if node.op_type == "Gemm":  # as a @ b with b [k, n]
            a, b = shapes
            a = a[::-1] if node.attrs.get("transA", 0) else a
            b = b[::-1] if node.attrs.get("transB", 0) else b
            shapes = [a, b]
        ops.append(TorchOp(node.op_type, tuple(shapes), int(node.attrs.get("axis", -1)), len(ps),
                           float(timing.estimate_s), float(timing.bound_s)))
    return ops


def _timer(torch, device: str) -> Callable[[Callable[[], object], int], float]:
    """Median seconds of one call of fn over `runs` calls (CUDA events on a GPU, wall clock on a CPU)."""
    def on_gpu(fn, runs):
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(times)

    def on_cpu(fn, runs):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return on_gpu if device == "cuda" else on_cpu


def time_torch(ops: list[TorchOp], device: str, precision: str, runs: int) -> list[float]:
    """Measured seconds per call of each op, on random operands of its shapes."""
    import torch

    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    dtype = dtypes[precision]
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # fp32 on CUDA cores unless tf32
    timer = _timer(torch, device)
    out = []
    for op in ops:
        xs = [torch.randn(s, device=device, dtype=dtype) for s in op.shapes]

        def fn(xs=xs, op=op):
            return torch.softmax(xs[0], dim=op.axis) if op.op == "Softmax" else torch.matmul(xs[0], xs[1])

        for _ in range(3):  # warm-up: cuBLAS heuristics, allocator
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        out.append(timer(fn, runs))
    return out


@dataclass(frozen=True)
class Row:
    model: str
    seq: int
    path: str  # "ort" or "torch"
    measured_s: float
    estimate_s: float
    bound_s: float
    covered: float  # share of the model's estimate the measurement covers

    @property
    def error(self) -> float:
        return (self.estimate_s - self.measured_s) / self.measured_s


def torch_row(name: str, seq: int, result, device: str, precision: str, runs: int) -> Row:
    ops = torch_workload(result)
    measured = time_torch(ops, device, precision, runs)
    est = sum(o.count * o.estimate_s for o in ops)
    return Row(name, seq, "torch", sum(o.count * m for o, m in zip(ops, measured, strict=True)), est,
               sum(o.count * o.bound_s for o in ops), est / float(result.totals["estimate_s"]))


def ort_row(name: str, seq: int, model, hw, runs: int, nsys_dir: str | None = None) -> Row:
    from estimator.truth.validate import validate_model

    v = validate_model(model, hw, {"batch": 1, "seq": seq}, ep="cuda", runs=runs)
    if nsys_dir is not None:
        nsys_row(name, seq, model, hw.name, runs, Path(nsys_dir))
    return Row(name, seq, "ort", v.measured_s, float(v.result.totals["estimate_s"]),
               float(v.result.totals["bound_s"]), 1.0)


def nsys_row(name: str, seq: int, model, hw_name: str, runs: int, out: Path) -> None:
    """Capture the same run with Nsight Systems and join its kernels to the estimate (a failure is
    reported, not fatal: the onnxruntime row stands on its own)."""
    import json

    from estimator.profile import report
    from tools import nsys_capture

    dims = {"batch": 1, "seq": seq}
    try:
        sqlite = nsys_capture.capture(model, dims, out / f"{name}_seq{seq}", runs)
        a = nsys_capture.joined(sqlite, model, hw_name, dims)
    except Exception as exc:  # nsys missing a permission, a driver mismatch...: say so and go on
        print(f"  nsys capture failed: {type(exc).__name__}: {exc}", flush=True)
        return
    (out / f"{name}_seq{seq}.json").write_text(json.dumps(report.to_json(a), indent=1))
    print("  " + nsys_capture.summary_line(a), flush=True)


def _has_weights(model) -> bool:
    import onnx

    return not any(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer)


def run(args: argparse.Namespace) -> list[Row]:
    import torch

    import hwdesc
    import models
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_model
    from estimator.truth.ort_runner import ort

    device = args.device
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke test)"
    arch = args.arch or sku_for(name)
    if arch is None:
        print(f"error: no bundled descriptor for {name!r}; give --arch SKU or a YAML path", file=sys.stderr)
        raise SystemExit(2)
    hw = hwdesc.load(arch)
    use_ort = (device == "cuda" and args.precision == "fp32"
               and "CUDAExecutionProvider" in ort().get_available_providers())
    how = "onnxruntime-gpu where the model has weights, else " if use_ort else ""
    from tools import nsys_capture

    nsys_dir = args.nsys_dir if use_ort and nsys_capture.available() and not args.no_nsys else None
    if nsys_dir:
        how += f"(Nsight Systems captures in {nsys_dir}) "
    print(f"device: {name} -> {hw.name}; precision {args.precision}; {how}PyTorch on the same shapes")
    rows = []
    for model_name in args.models.split(","):
        model = models.MODELS[model_name].build()
        graph = import_model(model)
        for seq in (int(s) for s in args.seqs.split(",")):
            dims = {"batch": 1, "seq": seq}
            if use_ort and _has_weights(model):
                rows.append(ort_row(model_name, seq, model, hw, args.runs, nsys_dir))
            else:
                precision = None if args.precision == "fp32" else args.precision
                result = estimate(graph, hw, precision=precision, dims=dims, roofline=True)
                rows.append(torch_row(model_name, seq, result, device, args.precision, args.runs))
            print(_format(rows[-1]), flush=True)
    return rows


def _format(r: Row) -> str:
    return (f"{r.model:<14}{r.seq:>6} {r.path:<6}{r.measured_s * 1e3:>11.3f} ms{r.estimate_s * 1e3:>11.3f} ms"
            f"{r.bound_s * 1e3:>11.3f} ms{r.error:>+9.0%}{r.covered:>9.0%}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt2-small,bert-base,llama-3-8b")
    p.add_argument("--seqs", default="128,512,2048")
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--arch", help="descriptor (default: from the device name)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--nsys-dir", default="gpu_check_nsys",
                   help="where the Nsight Systems captures and their joined JSON go (when nsys is present)")
    p.add_argument("--no-nsys", action="store_true", help="skip the Nsight Systems captures")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed (needed for the device query)", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    print(f"{'model':<14}{'seq':>6} {'path':<6}{'measured':>14}{'estimate':>14}{'bound':>14}{'error':>9}"
          f"{'covers':>9}")
    rows = run(args)
    errors = sorted(abs(r.error) for r in rows)
    print(f"median |estimate - measured| / measured: {statistics.median(errors):.0%} over {len(rows)} rows; "
          f"rows below the bound: {sum(r.measured_s < r.bound_s for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
