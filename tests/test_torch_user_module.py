"""`estimate --torch MODULE:FACTORY` imports the user's module as `python -m` would from the working
directory, without adding the working directory to sys.path (estimator/cli/pytorch.py)."""

import sys

import pytest

from estimator.cli.pytorch import _import_user_module


def test_a_module_and_a_package_next_to_the_caller_import_without_a_sys_path_edit(tmp_path, monkeypatch):
    (tmp_path / "user_blocks_a1.py").write_text("VALUE = 42\n")
    pkg = tmp_path / "user_pkg_a1"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "blocks.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    try:
        assert _import_user_module("user_blocks_a1").VALUE == 42
        assert _import_user_module("user_pkg_a1.blocks").VALUE == 7
        assert sys.path == before  # nothing added
    finally:
        for name in ("user_blocks_a1", "user_pkg_a1", "user_pkg_a1.blocks"):
            sys.modules.pop(name, None)


def test_a_module_that_fails_to_import_leaves_nothing_behind(tmp_path, monkeypatch):
    (tmp_path / "user_broken_a1.py").write_text("raise ImportError('no torch here')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ImportError, match="no torch here"):
        _import_user_module("user_broken_a1")
    assert "user_broken_a1" not in sys.modules
