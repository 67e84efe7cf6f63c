"""`estimate sass kernels.py --triton-kernel NAME`: Triton compiles for a target GPU without one (the
optional `triton` extra; skipped, with the reason, where triton is not installed)."""

import json
import sys

import pytest
from cliutil import assert_one_error_line, cli
from sassutil import DATA, kernel

SRC = str(DATA / "triton_kernels.py")
MATMUL = ["--triton-kernel", "matmul", "--triton-arg", "a_ptr=*bf16", "--triton-arg", "b_ptr=*bf16",
          "--triton-arg", "c_ptr=*fp32", "--triton-arg", "M=i32", "--triton-arg", "N=i32",
          "--triton-arg", "K=i32", "--triton-arg", "BM=128", "--triton-arg", "BN=128",
          "--triton-arg", "BK=64", "--num-warps", "8"]


def test_triton_missing_is_one_error_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` raises ImportError
    code, _, err = cli(capsys, "sass", SRC, "--arch", "h100-sxm", *MATMUL)
    assert_one_error_line(code, err, "triton is not installed: pip install 'gpu-inference-estimator[triton]'")


def test_py_without_triton_kernel(capsys):
    code, _, err = cli(capsys, "sass", SRC, "--arch", "h100-sxm")
    assert_one_error_line(code, err, "a Triton source needs --triton-kernel NAME")


def _matmul(capsys, arch):
    pytest.importorskip("triton", reason="the optional `triton` extra is not installed")
    code, out, _ = cli(capsys, "sass", SRC, "--arch", arch, *MATMUL, "--json")
    assert code == 0
    return kernel(json.loads(out), "matmul")


@pytest.mark.parametrize("arch,opcode,per_iteration", [
    # 8 warps = 2 warpgroups over a 128 x 128 tile: 64 x 128 each; BK 64 / 16 = 4 wgmma per k-step
    ("h100-sxm", "HGMMA.64x128x16.F32.BF16", 4),
    # one 128 x 128 tcgen05 MMA per k16: 64 / 16 = 4 per k-step
    ("b200", "UTCHMMA", 4),
    # 8 warps over 128 x 128: 2048 outputs = 16 m16n8 tiles per warp, x 64 / 16 = 4 k16 steps = 64
    ("a100", "HMMA.16816.F32.BF16", 64),
])
def test_triton_matmul_tensor_path(capsys, arch, opcode, per_iteration):
    k = _matmul(capsys, arch)
    (loop,) = [lp for lp in k["loops"] if lp["hot"]]
    assert loop["tensor"] == {opcode: per_iteration}
    occ = k["occupancy"]
    assert occ["block_source"] == "reqntid" and occ["block_threads"] == 8 * 32
    assert k["resources"]["dynamic_smem_bytes"] > 0  # Triton's metadata.shared: not in the cubin


def test_triton_softmax_exp_per_element(capsys):
    pytest.importorskip("triton", reason="the optional `triton` extra is not installed")
    code, out, _ = cli(capsys, "sass", SRC, "--arch", "h100-sxm", "--triton-kernel", "softmax_row",
                       "--triton-arg", "x_ptr=*fp32", "--triton-arg", "y_ptr=*fp32",
                       "--triton-arg", "n_cols=i32", "--triton-arg", "BLOCK=1024", "--json")
    k = kernel(json.loads(out), "softmax_row")
    # BLOCK 1024 over 4 warps (128 threads): 8 elements per thread, one exp each; one reciprocal of the sum
    assert code == 0 and k["sfu"] == {"MUFU.EX2": 8, "MUFU.RCP": 1}


def test_triton_arg_errors(capsys):
    pytest.importorskip("triton", reason="the optional `triton` extra is not installed")
    code, _, err = cli(capsys, "sass", SRC, "--arch", "h100-sxm", *MATMUL[:4])
    assert_one_error_line(code, err, "matmul needs --triton-arg for b_ptr")
    code, _, err = cli(capsys, "sass", SRC, "--arch", "h100-sxm", "--triton-kernel", "gemm")
    assert_one_error_line(code, err, "no @triton.jit kernel 'gemm' (found: matmul, softmax_row)")
