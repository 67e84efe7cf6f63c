"""`estimate calibrate` (estimator/calibration/): its search, its YAML writer, and that it prices rows
exactly as the estimator does.

The consistency test reads a few rows of the H100 calibration tables (skipped where they are absent);
the estimator itself never reads them."""

import numpy as np
import pytest

import hwdesc
from estimator.calibration import descriptors, fit_kernels, search, tables, validate_kernels
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


def test_write_descriptors_replaces_whole_entries(tmp_path):
    src = hwdesc.bundled_dir() / "h100-sxm.yaml"
    (tmp_path / "h100-sxm.yaml").write_text(src.read_text())
    descriptors.write_descriptors({"tensor": 0.5, "launch_s": 1.23e-6}, tmp_path)
    hw = hwdesc.load_file(tmp_path / "h100-sxm.yaml")  # still a valid descriptor
    assert hw.efficiency["tensor"] == 0.5 and hw.efficiency["launch_s"] == 1.23e-6
    assert hw.sources["efficiency.tensor"] == descriptors.SOURCE
    block = (tmp_path / "h100-sxm.yaml").read_text().split("\nefficiency:\n")[1]
    assert block.count("source:") == block.count("value:")  # one source per entry, none left over


def test_write_descriptors_of_one_family(tmp_path):
    # the fp8 fit (--fp8 --write) goes to the fitted GPU's family only: h200 (hopper) gets it, b200 not
    for name in ("h200", "b200"):
        (tmp_path / f"{name}.yaml").write_text((hwdesc.bundled_dir() / f"{name}.yaml").read_text())
    before = hwdesc.load_file(tmp_path / "b200.yaml").efficiency["tensor_fp8"]
    assert descriptors.write_descriptors({"tensor_fp8": 0.123}, tmp_path, family="hopper") == ["h200.yaml"]
    assert hwdesc.load_file(tmp_path / "h200.yaml").efficiency["tensor_fp8"] == 0.123
    assert hwdesc.load_file(tmp_path / "b200.yaml").efficiency["tensor_fp8"] == before
    # and its source says where it is carried: the family, not every GPU
    text = (tmp_path / "h200.yaml").read_text()
    assert "the same on every hopper GPU (written to that family only)" in text


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
