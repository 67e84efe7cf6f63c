"""Fixtures shared by several test files."""

import onnx
import pytest

from estimator.frontends.bundled import CACHE_ENV


@pytest.fixture(scope="session", autouse=True)
def _graph_cache(tmp_path_factory):
    """The bundled models' graph cache (estimator/frontends/bundled.py) in a folder of the session's, not
    the user's: each model is built once per session (CLI subprocesses inherit the variable)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("graph-cache")))
        yield


@pytest.fixture(scope="session")
def hf_exports():
    """The tiny random-init transformers exports of models/hf_tiny.py (Llama, GPT-2, BERT and the MoE /
    window families), loaded once per session from the export cache of models/hf.py, which
    test_moe_exports.py and test_fusion.py read too: each family is exported once per machine, not once
    per session and user (test_validate.py runs them in onnxruntime, test_fuzz.py mutates them)."""
    pytest.importorskip("transformers")
    pytest.importorskip("onnxscript")
    from models import hf_tiny
    from models.hf import export_tiny

    return {family: onnx.load(str(export_tiny(family))) for family in hf_tiny.FAMILIES}
