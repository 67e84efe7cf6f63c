"""`estimate calibrate` (estimator/calibration/): its search, its YAML writer, and that it prices rows
exactly as the estimator does.

The consistency test reads a few rows of the H100 calibration tables (skipped where they are absent);
the estimator itself never reads them."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

import hwdesc
from estimator.calibration import descriptors, fit_kernels, search, tables, validate_kernels
from estimator.errors import UserError
from estimator.pricing.menu import menu_for

DATA = tables.DEFAULT_DATA
needs_data = pytest.mark.skipif(not (DATA / "gemm.csv.gz").exists(), reason="calibration tables absent")


def test_nelder_mead_finds_a_quadratic_minimum():
    x, v = search.nelder_mead(lambda p: (p[0] - 3) ** 2 + (p[1] + 1) ** 2 + 0.5, np.array([0.0, 0.0]),
                                 step=1.0)
    assert x == pytest.approx([3, -1], abs=1e-2)
    assert v == pytest.approx(0.5, abs=1e-4)


def test_decode_keys_are_read_by_decode_kernels_only():
    # --decode leaves every constant a prefill kernel reads as it is: the context table cannot move
    assert set(fit_kernels.DECODE_KEYS) < set(fit_kernels.ATTENTION_KEYS)
    assert not set(fit_kernels.DECODE_KEYS) & {"softmax_overlap", "attention_cta_s", "attention_step_s",
                                             "attention_prefill_s", "attention_l2"}


def test_rounded_keeps_three_significant_digits():
    assert search.rounded({"a": 0.81934, "b": 1.7649e-6}) == {"a": 0.819, "b": 1.76e-6}


def _families(tmp_path: Path) -> Path:
    shutil.copytree(hwdesc.loader.families_dir(), tmp_path / "families")
    return tmp_path / "families"


def _load(arch: str, families: Path) -> hwdesc.HardwareDescriptor:
    return hwdesc.load_file(hwdesc.bundled_dir() / f"{arch}.yaml", families=families)


def test_write_descriptors_replaces_whole_entries(tmp_path):
    # --write puts the fit into the fitted GPU's family file (hwdesc/families/hopper.yaml), with the
    # tables and the command that fitted it; every Hopper SKU reads it
    families = _families(tmp_path)
    tables = descriptors.tables_of(descriptors.ROOT.parent / "t", "gemm.csv.gz", rows="bf16 GEMM rows")
    fit = {"fitted_on": tables, "command": "estimate calibrate --write"}
    assert fit["fitted_on"] == "../t/gemm.csv.gz (bf16 GEMM rows)"  # from the repository root, no dev path
    written = descriptors.write_descriptors({"tensor": 0.5, "launch_s": 1.23e-6, "cuda": 2e-1}, tmp_path,
                                          family="hopper", **fit)
    assert written == ["families/hopper.yaml"]
    for arch in ("h100-sxm", "h200"):
        hw = _load(arch, families)  # still valid
        assert hw.efficiency["tensor"] == 0.5 and hw.efficiency["launch_s"] == 1.23e-6
        assert hw.sources["efficiency.tensor"] == descriptors.source_line("hopper")
    text = (families / "hopper.yaml").read_text()
    block = text.split("\nefficiency:\n")[1]
    # one source, table and command per entry, none left over (cuda's `confidence: low` is gone with it)
    assert block.count("source:") == block.count("value:") == 51  # 29 + the 22 MLA / MoE constants
    assert block.count('    command: "estimate calibrate --write"') == 3
    assert block.count("fitted_on:") == block.count("command:")
    cuda = block.split("  cuda:")[1].split("  sfu:")[0]
    assert cuda.startswith("\n    value: 0.2\n") and "not a fit" not in cuda and "confidence" not in cuda
    assert text.count("\ncollectives:") == 1  # the collectives are left as they are
    # written again: the same file (idempotent)
    descriptors.write_descriptors({"tensor": 0.5, "launch_s": 1.23e-6, "cuda": 2e-1}, tmp_path,
                                  family="hopper", **fit)
    assert (families / "hopper.yaml").read_text() == text
    # YAML 1.1 readers (yaml.safe_load) see numbers: `2.0e-06`, not `2e-06`
    descriptors.write_descriptors({"launch_s": 2e-6}, tmp_path, family="hopper", **fit)
    raw = yaml.safe_load((families / "hopper.yaml").read_text())
    assert raw["efficiency"]["launch_s"]["value"] == 2e-6


def test_a_hopper_fit_reaches_the_families_inheriting_it(tmp_path):
    families = _families(tmp_path)
    fit = {"fitted_on": "t.csv", "command": "estimate calibrate --write"}
    before = _load("b200", families).efficiency["tensor"]
    descriptors.write_descriptors({"tensor": 0.5, "tensor_fp8": 0.123, "block_scale_oob_s": 1e-11}, tmp_path,
                                family="hopper", **fit)
    assert _load("h200", families).efficiency["tensor_fp8"] == 0.123
    assert _load("rtx-5090", families).efficiency["tensor"] == 0.5  # inherited by sm_120
    assert _load("b200", families).efficiency["tensor"] == before  # Blackwell's own fit, not Hopper's
    assert "block_scale_oob_s" not in _load("a100", families).efficiency  # inherits.except


def test_a_blackwell_fit_goes_to_its_family_file(tmp_path):
    # the next issue: fitted on B200 tables, `--arch b200 --write` gives every Blackwell SKU its values
    families = _families(tmp_path)
    before = yaml.safe_load((families / "blackwell.yaml").read_text())
    fit = {"fitted_on": "../shared/calibration/b200_sxm/gemm.csv.gz", "command": "estimate calibrate "
           "--arch b200 --data ../shared/calibration/b200_sxm --write"}
    assert descriptors.write_descriptors({"tensor": 0.77}, tmp_path, family="blackwell",
                                       **fit) == ["families/blackwell.yaml"]
    assert {_load(a, families).efficiency["tensor"] for a in ("b200", "gb200", "b300")} == {0.77}
    assert _load("h100-sxm", families).efficiency["tensor"] == 0.829  # Hopper's own, untouched
    assert _load("rtx-5090", families).efficiency["tensor"] == 0.829  # sm_120 still inherits Hopper
    raw = yaml.safe_load((families / "blackwell.yaml").read_text())
    assert raw["efficiency"]["tensor"]["fitted_on"] == fit["fitted_on"]
    assert raw["collectives"] == before["collectives"]  # the rest of the file as it was


def test_write_descriptors_refuses_a_family_without_a_file(tmp_path):
    _families(tmp_path)
    with pytest.raises(UserError, match="no family file"):
        descriptors.write_descriptors({"tensor": 0.5}, tmp_path, family="volta", fitted_on="t", command="c")


@needs_data
@pytest.mark.parametrize("table", ["gemm", "context", "generation"])
def test_vectorized_pricing_equals_the_estimator(table):
    """The calibration fits what estimate() computes: same kernels, tile choice, residency, time."""
    hw = hwdesc.load("h100-sxm")
    menu = menu_for(hw.family)
    t = tables.gemm_table(DATA) if table == "gemm" else tables.attention_table(DATA, table)
    rows = np.random.default_rng(3).choice(len(t.rows["t"]), 12, replace=False)
    idx = np.zeros(len(t.rows["t"]), bool)
    idx[rows] = True
    vectorized = t.times(hw, menu, idx)[idx]
    one_by_one = []
    for i in np.flatnonzero(idx):
        row = {k: v[i] for k, v in validate_kernels.rows_of(DATA, table).items()} if table != "gemm" else \
            {k: v[i] for k, v in t.rows.items()}
        model, retype, warm = validate_kernels.model_of(table, row)
        one_by_one.append(validate_kernels.price(model, hw, retype, warm)[1])
    assert vectorized == pytest.approx(np.array(one_by_one), rel=1e-6)
