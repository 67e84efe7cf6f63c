"""The `--ep` names and the onnxruntime providers each asks for, apart from the runner (ort_runner.py) so
the CLI's parser can list the choices without importing the runner and its dependencies at start-up."""

# --ep NAME -> onnxruntime providers, in priority order (TensorRT falls back to CUDA, then CPU).
EXECUTION_PROVIDERS: dict[str, tuple[str, ...]] = {
    "cpu": ("CPUExecutionProvider",),
    "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider"),
    "tensorrt": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
}
