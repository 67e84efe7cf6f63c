"""Every JSON object the tool prints carries `tool_version` and `schema_version`, and every top-level key
any mode prints is documented in docs/json.md (issue 26). One small model per mode, run in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from cliutil import cli
from test_profile_join import _iteration, _model
from test_sass_listing import CUOBJDUMP

from estimator.profile import synthetic
from estimator.version import SCHEMA_VERSION, tool_version

ROOT = Path(__file__).resolve().parent.parent
PROFILE = str(ROOT / "tests" / "data" / "profiles" / "nsys_export_h100_nvfuser_matmul.sqlite")
TINY = ("--model", "llama-tiny", "--dim", "seq=32", "--json")
MODES = {
    "plain": TINY,
    "compare-fusion": (*TINY, "--compare-fusion", "none,max"),
    "sweep": ("--model", "llama-tiny", "--json", "--sweep", "seq=32,64"),
    "recommend": (*TINY, "--recommend"),
    "tp": (*TINY, "--tp", "2"),
    "pp": ("--model", "llama-tiny-decode", "--json", "--pp", "2"),
    "memory": (*TINY, "--memory"),
    "serve": ("--model", "llama-tiny", "--json", "--serve", "isl=32,osl=8,concurrency=2"),
    "serve-sweep": ("--model", "llama-tiny", "--json", "--serve", "isl=32,osl=8,concurrency=2", "--sweep",
                    "concurrency=1,2", "--tp", "1,2"),
    "profile": ("profile", PROFILE, "--json", "--top", "2"),
}


def documented() -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", (ROOT / "docs" / "json.md").read_text()))


def _keys(capsys, *argv) -> list[str]:
    code, out, err = cli(capsys, *argv)
    assert code == 0, (argv, err)
    doc = json.loads(out)
    assert (doc["tool_version"], doc["schema_version"]) == (tool_version(), SCHEMA_VERSION), argv
    assert list(doc)[:2] == ["tool_version", "schema_version"]
    return list(doc)


@pytest.mark.parametrize("mode", MODES)
def test_every_top_level_key_is_documented(mode, capsys):
    missing = set(_keys(capsys, *MODES[mode])) - documented()
    assert not missing, f"{mode}: keys not in docs/json.md: {sorted(missing)}"


def test_free_dims_joined_profiles_validation_and_sass_keys_are_documented(tmp_path, capsys):
    f = onnx.TensorProto.FLOAT  # y = x @ w + b with x [n, 64]: `n` stays free, the JSON adds `closed_form`
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         onnx.helper.make_node("Add", ["h", "b"], ["y"], name="add")], "free",
        [onnx.helper.make_tensor_value_info("x", f, ["n", 64]),
         onnx.helper.make_tensor_value_info("w", f, [64, 64]),
         onnx.helper.make_tensor_value_info("b", f, [64])],
        [onnx.helper.make_tensor_value_info("y", f, ["n", 64])])
    free = tmp_path / "free.onnx"
    onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 18)]), free)
    path = str(tmp_path / "run.sqlite")
    synthetic.write(path, _iteration(1_000_000, 100, 20, 5))
    listing = tmp_path / "k.sass"
    listing.write_text(CUOBJDUMP)
    keys = {
        "free dims": _keys(capsys, str(free), "--json"),
        "profile --model": _keys(capsys, "profile", path, "--model", _model(tmp_path), "--json",
                                 "--recommend"),
        "validate": _keys(capsys, "--model", "llama-tiny", "--dim", "seq=8", "--json", "--validate",
                          "--runs", "1"),
        "sass": _keys(capsys, "sass", str(listing), "--json"),
    }
    assert "closed_form" in keys["free dims"] and {"join", "estimate"} <= set(keys["profile --model"])
    for mode, got in keys.items():
        missing = set(got) - documented()
        assert not missing, f"{mode}: keys not in docs/json.md: {sorted(missing)}"


def test_version_flag(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.strip() == f"estimate {tool_version()} (JSON schema {SCHEMA_VERSION})"


def test_help_names_the_other_modes(capsys):
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for mode in ("estimate profile FILE", "estimate sass FILE", "estimate calibrate", "estimate validate",
                 "--validate"):
        assert mode in out, mode


def test_the_trace_carries_the_versions(tmp_path, capsys):
    path = tmp_path / "t.json"
    code, _, err = cli(capsys, "--model", "llama-tiny", "--dim", "seq=32", "--trace", str(path))
    assert code == 0, err
    other = json.loads(path.read_text())["otherData"]
    assert (other["tool_version"], other["schema_version"]) == (tool_version(), SCHEMA_VERSION)
