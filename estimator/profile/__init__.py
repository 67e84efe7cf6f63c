"""Measured GPU profiles: readers (Nsight Compute, Nsight Systems, onnxruntime, PyTorch), one record,
peaks, timelines and the join to the estimator's kernels (`estimate profile FILE ...`)."""
