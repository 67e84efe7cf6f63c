"""Fixtures shared by several test files."""

import onnx
import pytest


@pytest.fixture(scope="session")
def hf_exports(tmp_path_factory):
    """Tiny random-init Llama, GPT-2 and BERT from transformers, exported once per test session
    (test_validate.py runs them in onnxruntime, test_fuzz.py mutates them)."""
    pytest.importorskip("transformers")
    pytest.importorskip("onnxscript")
    from models import hf_tiny

    folder = tmp_path_factory.mktemp("hf")
    return {family: onnx.load(str(hf_tiny.export(family, folder / f"{family}.onnx")))
            for family in hf_tiny.FAMILIES}
