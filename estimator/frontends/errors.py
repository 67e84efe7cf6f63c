"""The frontends' error: a model file that cannot be read (raised by the importers and the graph checks
of validate_graph.py, which the ONNX importer runs)."""

from __future__ import annotations

from estimator.errors import UserError


class FrontendError(UserError):
    """Bad input: the CLI prints it as one `error:` line and exits 2."""
