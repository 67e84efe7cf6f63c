"""`estimate validate kernels`' table registry (estimator/calibration/validate_kernels.py TABLES) and its
pricing at points: a kernel table's rows priced at once through the symbolic graph (the sweep's
Compiled, each row its own tile) equal estimate() row by row, rows with dims of 1 included. Synthetic
rows only (no calibration data needed)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from cliutil import cli

import hwdesc
from estimator.calibration import validate_kernels as vk


def _rows(**cols) -> dict:
    n = len(next(iter(cols.values())))
    out = {k: np.array(v) if isinstance(v[0], str) else np.array(v, dtype=float) for k, v in cols.items()}
    out["t"] = np.ones(n)
    return out


def _both(table: str, rows: dict, arch: str = "b200"):
    hw = hwdesc.load(arch)
    swept = vk.TABLES[table].price_rows(rows, hw, False)
    one_by_one = vk.row_by_row(vk._kernel_key, vk._one_kernel_row(table))(rows, hw, False)
    return swept, one_by_one


@pytest.mark.parametrize("table", ["gemm", "fp8", "nvfp4"])
def test_gemm_rows_at_points_equal_row_by_row(table):
    # nvfp4: the swept template is the fp4 quantize + block-scaled fp4 GEMM, as a row alone (kernel_graphs)
    dtype = {"gemm": "bfloat16", "fp8": "fp8", "nvfp4": "nvfp4"}[table]
    rows = _rows(dtype=[dtype] * 4, m=[1, 48, 3000, 1], n=[4096, 2048, 512, 1], k=[4096, 1024, 7168, 4096])
    (b1, e1), (b2, e2) = _both(table, rows)
    np.testing.assert_allclose(e1, e2, rtol=1e-9)
    np.testing.assert_allclose(b1, b2, rtol=1e-9)


def test_attention_rows_at_points_equal_row_by_row():
    """Context rows of one head size and dtype (one graph), a batch and head counts of 1 among them."""
    rows = _rows(batch_size=[1, 4, 2], isl=[2048, 128, 512], num_heads=[1, 32, 8],
                 num_key_value_heads=[1, 8, 8], head_dim=[128, 128, 128], attn_dtype=["bfloat16"] * 3,
                 kv_cache_dtype=["bfloat16"] * 3, step=[0, 0, 0])
    (b1, e1), (b2, e2) = _both("context", rows)
    np.testing.assert_allclose(e1, e2, rtol=1e-9)
    np.testing.assert_allclose(b1, b2, rtol=1e-9)


def test_decode_rows_with_and_without_a_query_group_at_points():
    """Generation rows of one head size: a multi-head row (group 1: the per-head decode kernel) beside
    grouped ones (the MMA kernel), each row its own kernel at the points."""
    rows = _rows(batch_size=[8, 64, 1], isl=[1, 1, 1], num_heads=[32, 32, 8], num_key_value_heads=[32, 4, 1],
                 head_dim=[128, 128, 128], attn_dtype=["bfloat16"] * 3, kv_cache_dtype=["bfloat16"] * 3,
                 step=[1024, 4096, 256])
    (b1, e1), (b2, e2) = _both("generation", rows)
    np.testing.assert_allclose(e1, e2, rtol=1e-9)
    np.testing.assert_allclose(b1, b2, rtol=1e-9)


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
@pytest.mark.parametrize("table", ["mla_context", "mla_generation"])
def test_mla_rows_at_points_equal_row_by_row(table, arch):
    """Both cache dtypes, and one sequence and one head among the rows (each set of dims at 1 its own
    build: a one-head one-sequence decode prices apart from the generic formulas, its kernels' ops alike)."""
    rows = _rows(op_name=[table] * 5, kernel_source=["default"] * 5, mla_dtype=["bfloat16"] * 5,
                 kv_cache_dtype=["bfloat16", "fp8", "fp8", "bfloat16", "fp8"], num_heads=[1, 1, 16, 128, 64],
                 batch_size=[1, 64, 1, 8, 2], isl=[1, 1, 1, 1, 1] if table == "mla_generation" else
                 [128, 1024, 4096, 16, 512], tp_size=[1] * 5, step=[127, 32767, 1023, 4095, 1]
                 if table == "mla_generation" else [0] * 5)
    hw = hwdesc.load(arch)
    b1, e1 = vk.TABLES[table].price_rows(rows, hw, False)
    b2, e2 = vk.row_by_row(vk._kernel_key, lambda row, hw, warm: vk._mla_row(table, row, hw, warm))(
        rows, hw, False)
    np.testing.assert_allclose(e1, e2, rtol=1e-9)
    np.testing.assert_allclose(b1, b2, rtol=1e-9)


def test_moe_rows_at_once_equal_each_row_alone():
    """The MoE table's rows (a duplicate among them) priced at once equal moe.layer_time of each row's
    own layer Work."""
    from estimator.pricing import moe

    hw = hwdesc.load("h100-sxm")
    rows = _rows(op_name=["moe"] * 3, kernel_source=["moe_torch_flow", "moe_torch_flow", "moe_torch_flow"],
                 moe_dtype=["bfloat16", "fp8_block", "bfloat16"], num_tokens=[8, 4096, 8],
                 hidden_size=[7168, 7168, 7168], inter_size=[2048, 2048, 2048], topk=[8, 8, 8],
                 num_experts=[256, 256, 256], moe_tp_size=[1, 1, 1], moe_ep_size=[8, 8, 8],
                 distribution=["uniform", "power_law_1.01", "uniform"])
    bound, est = vk.TABLES["moe"].price_rows(rows, hw, False)
    for j in range(3):
        w = moe.layer_work(int(rows["num_tokens"][j]), 7168, 2048, 8, 256, 1, 8, str(rows["moe_dtype"][j]),
                           str(rows["distribution"][j]), True, hw.sm_count, False, hw.family)
        peak = hw.tensor_flops_per_s.get(w["mma"], hw.tensor_flops_per_s["bf16"])
        b, e = moe.layer_time(w, peak, hw.sm_count, hw.dram_bytes_per_s, dict(hw.efficiency))
        assert bound[j] == pytest.approx(float(b), rel=1e-12) and est[j] == pytest.approx(float(e), rel=1e-12)
    assert est[0] == est[2]  # the duplicate row


def test_registry_runs_every_table_of_the_folder(tmp_path, capsys):
    """Without --tables every registered table whose file the folder holds; a view with no rows
    (fp8 of a bf16-only gemm.csv.gz) says so and is skipped; --tables selects."""
    with gzip.open(tmp_path / "gemm.csv.gz", "wt") as f:
        f.write("dtype,m,n,k,latency_ms\nbfloat16,16,4096,4096,0.01\nbfloat16,2048,4096,4096,0.1\n")
    code, out, err = cli(capsys, "validate", "kernels", "--data", str(tmp_path), "--arch", "b200")
    assert code == 0, err
    assert out.startswith("gemm: 2 rows, ")
    assert "fp8: no rows in gemm.csv.gz" in out and "fp8_block: no rows in gemm.csv.gz" in out
    assert "context" not in out and "nccl" not in out  # their files are not there
    code, out, _ = cli(capsys, "validate", "kernels", "--data", str(tmp_path), "--arch", "b200",
                       "--tables", "fp8")
    assert code == 0 and out.strip() == "fp8: no rows in gemm.csv.gz"


def test_a_registered_table_is_run_like_the_bundled_ones(tmp_path, capsys, monkeypatch):
    """The registry's extension point: a new table is one TableSpec (file, rows, regimes, pricing)."""
    with gzip.open(tmp_path / "toy.csv.gz", "wt") as f:
        f.write("x,latency_ms\n1,0.002\n2,0.004\n")

    def rows(data):
        from estimator.calibration.tables import read_table
        return read_table(data / "toy.csv.gz")

    # the toy's price: estimate x us, bound x / 2 us; measured 2x us: error |x - 2x| / 2x = 50 % per row
    spec = vk.TableSpec("toy", "toy.csv.gz", rows, lambda r: [("x > 1", r["x"] > 1)],
                        vk.row_by_row(lambda row: (row["x"],), lambda row, hw, warm: (row["x"] * 0.5e-6,
                                                                                       row["x"] * 1e-6)))
    monkeypatch.setitem(vk.TABLES, "toy", spec)
    code, out, err = cli(capsys, "validate", "kernels", "--data", str(tmp_path), "--tables", "toy")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("toy: 2 rows, ")
    x_gt_1 = next(line for line in lines if line.strip().startswith("x > 1")).split()
    assert x_gt_1[3:7] == ["1", "50.0%", "50.0%", "-50.0%"]  # the row x = 2: |2 - 4| / 4 us
