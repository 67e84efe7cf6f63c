"""Benchmarks and checks of the estimator itself, experiments, and the GPU check for a machine with a device.

A package, run from the repository root: `python -m tools.bench_estimate`, `python -m tools.gpu_check`,
... (no `sys.path` edits: `python -m` puts the root on the path). What users run to calibrate and
validate the estimator is a product command instead: `estimate calibrate`, `estimate validate`
(estimator/calibration/).
"""
