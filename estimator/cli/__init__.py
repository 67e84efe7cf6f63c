"""The `estimate` command line: the parser and the default mode (`main.py`), the one frozen options object
every mode receives (`options.py`, built once from argparse), the graph a command line names (`load.py`),
one module per other mode (`serve.py` with `serve_report.py`: deployments and serving, `report.py`:
recommendations and reports, `sweep.py`: scaling studies, `validate.py`: onnxruntime ground truth and
host calibration, `pytorch.py`: `--torch`, `hf.py`: `--hf-config`), and the subcommands with their own
parser and options (`sass.py`: `estimate sass FILE`, `profile.py`: `estimate profile FILE`)."""

from estimator.cli.main import main

__all__ = ["main"]
