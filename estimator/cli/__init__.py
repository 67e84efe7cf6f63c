"""The `estimate` command line: the parser and the default mode (`main.py`), one module per other mode
(`sweep.py`: scaling studies, `validate.py`: onnxruntime ground truth and host calibration, `pytorch.py`:
`--torch`), and the subcommands with their own parser (`estimate sass|profile ...`)."""

from estimator.cli.main import main

__all__ = ["main"]
