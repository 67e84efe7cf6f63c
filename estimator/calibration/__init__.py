"""Calibration and validation against measured tables: `estimate calibrate` and `estimate validate`.

The layer sits above estimator/report and below estimator/cli: it prices measured rows through the same
estimate / pricing / serve / truth code the estimator runs, and never the other way round (the estimator
itself never reads a measured table).

- tables.py: the measured kernel tables and a table's graph as numpy functions (Template, Table);
  kernel_graphs.py: the ONNX graph of a kernel table's row; search.py: Nelder-Mead, sampling, rounding.
- fit_kernels.py (`estimate calibrate`, --attention / --decode / --gemm-keys / --fp8) and fit_comm.py
  (`--comm`) fit the constants; descriptors.py and comm_constants.py write them (`--write`).
- validate_kernels.py / validate_comm.py (`estimate validate kernels`, `comm`), validate_serving.py
  (`serving`), validate_moe_serving.py (`moe-serving`), validate_host.py (`host`); markdown.py renders
  their accuracy tables for the docs (`--markdown`).
"""
