"""Ground truth on this machine: onnxruntime as a runner (`ort_runner.py`), `--validate`'s per-node join
(`validate.py`), and the `--arch host` descriptor measured by microbenchmarks (`host.py`, `host_bench.py`,
`host_classes.py`)."""
