"""Tests for the reference model builders in models/.

Each registered model must be a valid ONNX graph with the symbolic dims the estimator binds (batch,
seq, past_seq); the random-weight ones must run in onnxruntime and produce the shapes their names
promise. Builds and serializations are cached: gpt2-small and bert-base carry ~650 MB and ~440 MB of
random float32, and building each twice would dominate the run time.
"""

from __future__ import annotations

import collections
import re
import time
from functools import lru_cache

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

import models

REQUIRED = {
    "gpt2-small", "gpt2-small-decode", "llama-tiny", "llama-tiny-decode", "llama-3-8b",
    "llama-3-8b-decode", "llama-3-70b", "llama-3-70b-decode", "bert-base", "resnet50",
}


# Models that later tests run or infer again; the others are built once and dropped (gpt2-small-decode
# alone holds 650 MB).
_REUSED = {"llama-tiny", "llama-tiny-decode", "gpt2-small", "bert-base", "resnet50", "llama-3-8b-decode"}


@lru_cache(maxsize=None)
def _model(name: str) -> onnx.ModelProto:
    return models.build(name)


@lru_cache(maxsize=None)
def _session(name: str) -> ort.InferenceSession:
    return ort.InferenceSession(_model(name).SerializeToString(), providers=["CPUExecutionProvider"])


def _dims(value_info: onnx.ValueInfoProto) -> list[str | int]:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def _infer(model: onnx.ModelProto) -> dict[str, list[str | int]]:
    """Output shapes from SymbolicShapeInference.

    It recomputes every graph output from the inputs and initializers (the declared output shapes are
    overwritten, not trusted), so a match below is an inferred shape.

    External weights become shape-only graph inputs first: SymbolicShapeInference reads the value of any
    initializer that feeds Add/Mul/..., which would open the (absent) weights file. NB: the estimator
    needs the same step for any real export loaded with load_external_data=False.
    """
    external = [t for t in model.graph.initializer if _is_external(t)]
    if not external:
        inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
        return {output.name: _dims(output) for output in inferred.graph.output}
    model = onnx.ModelProto.FromString(model.SerializeToString())  # cheap: no weight bytes
    inline = [t for t in model.graph.initializer if not _is_external(t)]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inline)
    model.graph.input.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in external
    )
    inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    return {output.name: _dims(output) for output in inferred.graph.output}


# ---- registry -----------------------------------------------------------------------------------


def test_registry_has_required_models_sorted():
    assert REQUIRED <= set(models.MODELS)
    names = [spec.name for spec in models.list_models()]
    assert names == sorted(names)
    for spec in models.list_models():
        assert spec.description and "\n" not in spec.description
        assert "batch" in spec.default_dims


def test_unknown_model_is_a_value_error():
    with pytest.raises(ValueError, match="unknown model 'nope'; known: .*llama-tiny"):
        models.build("nope")


def test_bad_weights_mode_is_a_value_error():
    with pytest.raises(ValueError, match="weights must be one of"):
        models.build("llama-tiny", weights="zeros")


# ---- every model: valid ONNX with the symbolic dims -----------------------------------------------


@pytest.mark.parametrize("name", models.SUITE_MODELS)
def test_model_is_valid_onnx_with_symbolic_dims(name, tmp_path, monkeypatch):
    model = _model(name) if name in _REUSED else models.build(name)
    external = [t for t in model.graph.initializer if _is_external(t)]
    if external:
        # The checker insists the external location is a regular file next to the model (the cwd for an
        # in-memory proto); it never reads it, so an empty stand-in is enough.
        monkeypatch.chdir(tmp_path)
        (tmp_path / f"{name}.weights.bin").touch()
        # What the estimator does: parse without touching the weights, then check with shape inference.
        onnx.checker.check_model(onnx.load_model_from_string(model.SerializeToString()), full_check=True)
    else:
        # Random weights: checking the bytes once is enough (a reparse of 650 MB costs seconds).
        onnx.checker.check_model(model.SerializeToString())

    assert not [n for n in model.graph.node if n.domain not in ("", "ai.onnx")]
    input_dims = {d for value_info in model.graph.input for d in _dims(value_info)}
    assert "batch" in input_dims
    if name.endswith("-decode"):
        assert "past_seq" in input_dims and "seq" not in input_dims
    elif name != "resnet50":
        assert "seq" in input_dims


def test_external_weights_carry_dims_but_no_bytes():
    model = models.build("llama-tiny", weights="external")
    weight = next(t for t in model.graph.initializer if t.name == "model.layers.0.self_attn.q_proj.weight")
    assert list(weight.dims) == [64, 64]  # [hidden, heads * head_dim]
    assert not weight.raw_data
    entries = {e.key: e.value for e in weight.external_data}
    assert entries["location"] == "llama-tiny.weights.bin"
    assert int(entries["length"]) == 64 * 64 * 4  # float32
    # Shape vectors stay inline so shape inference can read them.
    assert all(t.raw_data for t in model.graph.initializer if t.name.startswith("const_"))


# ---- symbolic shape inference -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        ("llama-tiny", {"logits": ["batch", "seq", 256], "present.1.value": ["batch", 2, "seq", 16]}),
        (
            "llama-tiny-decode",
            {"logits": ["batch", 1, 256], "present.0.key": ["batch", 2, "past_seq + 1", 16]},
        ),
        ("gpt2-small", {"logits": ["batch", "seq", 50257], "present.11.key": ["batch", 12, "seq", 64]}),
        ("bert-base", {"last_hidden_state": ["batch", "seq", 768], "pooler_output": ["batch", 768]}),
        # External weights: 8 kv heads of 128 dims, the cache grows by the one new token.
        ("llama-3-8b-decode", {"present.31.value": ["batch", 8, "past_seq + 1", 128]}),
    ],
)
def test_symbolic_shape_inference_keeps_dims_symbolic(name, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # SymbolicShapeInference dumps a model into the cwd when it fails
    shapes = _infer(_model(name))
    for output, dims in expected.items():
        assert shapes[output] == dims


# ---- onnxruntime runs ---------------------------------------------------------------------------


def _run(name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = _session(name)
    outputs = session.run(None, feeds)
    for value in outputs:
        assert np.isfinite(value).all()
    return {o.name: v for o, v in zip(session.get_outputs(), outputs, strict=True)}


def _tokens(shape, vocab: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, size=shape, dtype=np.int64)


def test_llama_tiny_prefill_runs():
    out = _run("llama-tiny", {"input_ids": _tokens((2, 5), 256)})
    assert out["logits"].shape == (2, 5, 256)
    assert out["present.1.key"].shape == (2, 2, 5, 16)  # [batch, kv_heads, seq, head_dim]


def test_llama_tiny_decode_runs():
    past = np.random.default_rng(2).standard_normal((2, 2, 3, 16), dtype=np.float32)
    feeds = {"input_ids": _tokens((2, 1), 256)}
    for i in range(2):
        feeds[f"past_key_values.{i}.key"] = past
        feeds[f"past_key_values.{i}.value"] = past
    out = _run("llama-tiny-decode", feeds)
    assert out["logits"].shape == (2, 1, 256)
    assert out["present.1.value"].shape == (2, 2, 4, 16)  # past_seq 3 + the new token


def test_llama_tiny_prefill_is_causal():
    ids = _tokens((1, 6), 256)
    changed = ids.copy()
    changed[0, 3] = (ids[0, 3] + 1) % 256
    before = _run("llama-tiny", {"input_ids": ids})["logits"]
    after = _run("llama-tiny", {"input_ids": changed})["logits"]
    np.testing.assert_array_equal(before[:, :3], after[:, :3])
    assert not np.allclose(before[:, 3:], after[:, 3:])


def test_llama_tiny_decode_continues_prefill():
    """Decoding token 5 against the cache of tokens 0..4 gives prefill's logits at position 5.

    This pins the decode graph's RoPE positions (past_seq from the cache) and its cache layout.
    """
    ids = _tokens((1, 6), 256)
    full = _run("llama-tiny", {"input_ids": ids})["logits"]
    prefix = _run("llama-tiny", {"input_ids": ids[:, :5]})
    feeds = {"input_ids": ids[:, 5:]}
    for i in range(2):
        feeds[f"past_key_values.{i}.key"] = prefix[f"present.{i}.key"]
        feeds[f"past_key_values.{i}.value"] = prefix[f"present.{i}.value"]
    step = _run("llama-tiny-decode", feeds)["logits"]
    np.testing.assert_allclose(step[:, 0], full[:, 5], rtol=1e-4, atol=1e-5)


def test_gpt2_small_prefill_runs():
    out = _run("gpt2-small", {"input_ids": _tokens((1, 8), 50257)})
    assert out["logits"].shape == (1, 8, 50257)
    assert out["present.11.value"].shape == (1, 12, 8, 64)


def test_bert_base_runs():
    ids = _tokens((2, 8), 30522)
    mask = np.ones((2, 8), dtype=np.int64)
    mask[1, 5:] = 0  # padding on the second sequence
    out = _run("bert-base", {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    assert out["last_hidden_state"].shape == (2, 8, 768)
    assert out["pooler_output"].shape == (2, 768)


def test_resnet50_runs():
    image = np.random.default_rng(3).standard_normal((1, 3, 224, 224), dtype=np.float32)
    out = _run("resnet50", {"input": image})
    assert out["logits"].shape == (1, 1000)


def test_resnet50_has_the_resnet50_layer_count():
    ops = collections.Counter(n.op_type for n in _model("resnet50").graph.node)
    assert ops["Conv"] == 1 + 3 * (3 + 4 + 6 + 3) + 4  # stem, three per bottleneck, one shortcut per stage
    assert ops["Gemm"] == 1


# ---- big configs stay small and regular ---------------------------------------------------------


@pytest.mark.parametrize("name", ["llama-3-70b", "llama-3-70b-decode"])
def test_llama_3_70b_is_small_fast_and_regular(name):
    start = time.process_time()  # CPU time of this process: load on the machine does not count
    model = models.build(name)
    assert time.process_time() - start < 3.0
    assert len(model.SerializeToString()) < 5_000_000

    per_layer = collections.defaultdict(collections.Counter)
    for node in model.graph.node:
        match = re.match(r"/model/layers\.(\d+)/", node.name)
        if match:
            per_layer[int(match.group(1))][node.op_type] += 1
    assert sorted(per_layer) == list(range(80))
    assert all(counts == per_layer[0] for counts in per_layer.values())
