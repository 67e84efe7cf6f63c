"""--kernel-sass: a compiled kernel's MMA path and occupancy priced into the tile model."""

from dataclasses import replace

import pytest
from cliutil import assert_one_error_line, cli
from sassutil import DATA, needs_cuda_tools

import hwdesc
from estimator.errors import UserError
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.sass.seam import SassPlan, check_priced, for_kernel
from onnxutil import matmul_model

pytest_plugins = ("sassfixtures",)  # the session fixture `analysed`

H100 = hwdesc.load("h100-sxm")


def _mm(kernel_sass=None, tiling=True):
    graph = import_model(matmul_model(4096, 4096, 4096))
    return estimate(graph, H100, roofline=not tiling, kernel_sass=kernel_sass)


def test_neutral_plan_changes_nothing_but_the_label():
    base = _mm().kernels[0]
    # the menu's own assumptions: the descriptor's dense bf16 peak, and no cap below any tile's CTAs/SM
    same = SassPlan("k.cubin", "k", ctas_per_sm=32, peak_flops_per_s=H100.tensor_flops_per_s["bf16"],
                    path="x")
    k = _mm({"mm": same}).kernels[0]
    assert k.timing.estimate_s == base.timing.estimate_s and k.kernel.tile.tile == base.kernel.tile.tile
    assert (k.kernel.tile.sass, base.kernel.tile.sass) == ("k.cubin#k", None)


def test_slower_path_raises_the_estimate_not_the_bound():
    base = _mm().kernels[0]
    half = SassPlan("k.cubin", "k", 32, 0.5 * H100.tensor_flops_per_s["bf16"], "x")
    k = _mm({"mm": half}).kernels[0]
    assert k.timing.bound_s == base.timing.bound_s  # the bound is the GPU's, not the kernel's
    assert float(k.timing.estimate_s) > 1.5 * float(base.timing.estimate_s)  # 4096^3 bf16 is compute-bound
    assert k.kernel.tile.tensor_util == pytest.approx(base.kernel.tile.tensor_util * float(
        base.timing.estimate_s) / float(k.timing.estimate_s), rel=1e-6)  # utilisation still of the GPU's peak


def test_patterns_and_errors():
    plan = SassPlan("k.cubin", "k", 1, 1e15, "x")
    graph_kernels = _mm().kernels
    assert for_kernel(graph_kernels[0].kernel, {"m*": plan}) is plan
    assert for_kernel(graph_kernels[0].kernel, {"other": plan}) is None
    with pytest.raises(UserError, match="no node 'nope'"):
        _mm({"nope": plan})
    with pytest.raises(UserError, match="drop --roofline"):
        _mm({"mm": plan}, tiling=False)
    with pytest.raises(UserError, match="only GEMM-like kernels"):
        k = replace(graph_kernels[0].kernel, kind="elementwise")
        check_priced([k], {"mm": plan}, True, [None])


@needs_cuda_tools
def test_cli_kernel_sass(capsys, tmp_path):
    model = tmp_path / "mm.onnx"
    import onnx

    onnx.save(matmul_model(4096, 4096, 4096), model)
    code, out, _ = cli(capsys, str(model), "--arch", "h100-sxm", "--kernel-sass",
                       f"mm={DATA / 'gemm_bf16.cu'}")
    assert code == 0
    assert "[sass gemm_bf16.cu#gemm_bf16_tn]" in out and "priced from SASS" in out
    code, _, err = cli(capsys, str(model), "--arch", "h100-sxm", "--kernel-sass", f"mm={DATA / 'fma.cu'}")
    assert_one_error_line(code, err, "holds 4 kernels")
    code, _, err = cli(capsys, str(model), "--kernel-sass", "mm")
    assert_one_error_line(code, err, "expected NODE=FILE[#KERNEL]")


@needs_cuda_tools
def test_gemm_kernel_plan_from_sass(analysed):
    from estimator.sass.limits import resolve
    from estimator.sass.seam import from_report

    k = next(k for k in analysed("gemm_bf16", "h100-sxm")["kernels"])
    plan = from_report(k, resolve("h100-sxm"), "gemm_bf16.cu")
    # mma.sync on sm_90a: 2048 FLOP/clk/SM x 132 SMs x 1.98 GHz; CTAs/SM from the SASS occupancy
    assert plan.peak_flops_per_s == pytest.approx(2048 * 132 * 1.98e9)
    assert plan.ctas_per_sm == k["occupancy"]["ctas_per_sm"] and plan.path.startswith("HMMA.16816.F32.BF16")

