"""`estimate sass` through the CLI: inputs of every kind, --json, and one `error:` line for bad input."""

import json
import subprocess

import pytest
from cliutil import assert_one_error_line, cli
from sassutil import DATA, needs_cuda_tools

from estimator.sass import tools

pytest_plugins = ("sassfixtures",)  # the session fixtures `analysed` and `cubins`


def test_not_an_elf_or_ptx(capsys, tmp_path):
    junk = tmp_path / "kernel.bin"
    junk.write_bytes(b"\x00\x01 not a kernel")
    code, _, err = cli(capsys, "sass", str(junk), "--arch", "h100-sxm")
    assert_one_error_line(code, err, "not a cubin, fatbin, executable, PTX, .cu file or SASS listing")


def test_missing_file_and_bad_options(capsys, tmp_path):
    code, _, err = cli(capsys, "sass", str(tmp_path / "nope.cubin"))
    assert_one_error_line(code, err, "no such file")
    code, _, err = cli(capsys, "sass", str(DATA / "fma.cu"), "--frobnicate")
    assert_one_error_line(code, err, "unrecognized arguments: --frobnicate")
    code, _, err = cli(capsys, "sass", str(DATA / "fma.cu"), "--arch", "h900")
    assert_one_error_line(code, err, "unknown GPU 'h900'")
    code, _, err = cli(capsys, "sass", str(DATA / "fma.cu"), "--block", "4096")
    assert_one_error_line(code, err, "--block must be 1..1024")


def test_missing_nvcc_says_how_to_get_it(capsys, monkeypatch):
    monkeypatch.setattr(tools, "_toolkit_dirs", lambda: [])
    monkeypatch.setattr(tools.shutil, "which", lambda _name: None)
    tools.find.cache_clear()
    try:
        code, _, err = cli(capsys, "sass", str(DATA / "fma.cu"), "--arch", "h100-sxm")
    finally:
        tools.find.cache_clear()
    assert_one_error_line(code, err, "nvcc not found: install the CUDA toolkit")


@needs_cuda_tools
def test_cubin_for_another_arch(capsys, cubins):
    path, _ = cubins("fma", "sm_80")
    code, _, err = cli(capsys, "sass", str(path), "--arch", "h100-sxm")
    assert_one_error_line(code, err, "the cubin is for sm_80, which does not run on sm_90a")


@needs_cuda_tools
def test_kernel_not_in_module(capsys, cubins):
    path, _ = cubins("fma", "sm_90a")
    code, _, err = cli(capsys, "sass", str(path), "--kernel", "gemm")
    assert_one_error_line(code, err, "no kernel 'gemm' (kernels: ")


@needs_cuda_tools
def test_compile_error_is_one_line(capsys):
    code, _, err = cli(capsys, "sass", str(DATA / "wgmma.cu"), "--arch", "b200")  # wgmma is sm_90a-only
    assert_one_error_line(code, err, "not supported on .target 'sm_100a'")


@needs_cuda_tools
def test_corrupt_ptx(capsys, tmp_path):
    bad = tmp_path / "k.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k( { garbage }\n")
    code, _, err = cli(capsys, "sass", str(bad), "--arch", "h100-sxm")
    assert_one_error_line(code, err, "ptxas failed")


@pytest.fixture(scope="module")
def fatbin(tmp_path_factory):
    out = tmp_path_factory.mktemp("fatbin") / "fma.fatbin"
    subprocess.run([tools.find("nvcc"), "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                    "arch=compute_90a,code=sm_90a", "-o", str(out), str(DATA / "fma.cu")], check=True,
                   capture_output=True, timeout=300)
    return out


@needs_cuda_tools
def test_fatbin_picks_the_sm(capsys, fatbin):
    code, out, _ = cli(capsys, "sass", str(fatbin), "--arch", "h100-sxm", "--kernel", "fma_loop", "--json")
    result = json.loads(out)
    assert code == 0 and (result["sm"], result["source_kind"]) == ("sm_90a", "fatbin")
    assert [k["name"] for k in result["kernels"]] == ["fma_loop"]
    code, out, _ = cli(capsys, "sass", str(fatbin), "--arch", "a100", "--kernel", "fma_loop", "--json")
    assert code == 0 and json.loads(out)["sm"] == "sm_80"
    code, _, err = cli(capsys, "sass", str(fatbin), "--arch", "b200")
    assert_one_error_line(code, err, "no cubin or PTX for sm_100a (it holds: sm_80, sm_90a)")


@needs_cuda_tools
def test_ptx_input(capsys, tmp_path):
    ptx = tmp_path / "mma.ptx"
    subprocess.run([tools.find("nvcc"), "-ptx", "-arch=sm_90a", "-o", str(ptx), str(DATA / "mma_sync.cu")],
                   check=True, capture_output=True, timeout=300)
    code, out, _ = cli(capsys, "sass", str(ptx), "--arch", "h100-sxm", "--kernel", "mma_bf16", "--json")
    (k,) = json.loads(out)["kernels"]
    assert code == 0 and k["tensor"]["family"] == "mma.sync"


@needs_cuda_tools
def test_json_object(capsys):
    code, out, _ = cli(capsys, "sass", str(DATA / "tcgen05.cu"), "--arch", "b200", "--kernel", "tc05_mma",
                       "--json")
    result = json.loads(out)
    assert code == 0
    assert set(result) == {"tool_version", "schema_version", "file", "arch", "sm", "gpu", "source_kind",
                           "ptxas_warnings", "kernels"}
    (k,) = result["kernels"]
    assert set(k) == {"name", "resources", "tensor", "features", "mix", "sfu", "instructions", "loops",
                      "occupancy", "findings"}
    assert (result["gpu"], result["sm"], k["tensor"]["family"]) == ("b200", "sm_100a", "tcgen05")
    assert all(set(f) >= {"kind", "text"} for f in k["findings"])


@needs_cuda_tools
def test_text_report(capsys):
    code, out, _ = cli(capsys, "sass", str(DATA / "mma_sync.cu"), "--arch", "h100-sxm", "--kernel",
                       "mma_bf16")
    assert code == 0
    assert "kernel mma_bf16" in out and "tensor: mma.sync; 1 x HMMA.16816.F32.BF16" in out
    assert "expect at most ~54% of the h100-sxm bf16 peak" in out


@needs_cuda_tools
def test_host_executable(capsys, tmp_path):
    src = tmp_path / "app.cu"
    src.write_text('extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.f; }\n'
                   "int main() { scale<<<1, 32>>>(nullptr); return 0; }\n")
    exe = tmp_path / "app"
    subprocess.run([tools.find("nvcc"), "-arch=sm_90a", "-o", str(exe), str(src)], check=True,
                   capture_output=True, timeout=300)
    code, out, _ = cli(capsys, "sass", str(exe), "--arch", "h100-sxm", "--json")
    result = json.loads(out)
    assert code == 0 and result["source_kind"] == "fatbin"
    assert [k["name"] for k in result["kernels"]] == ["scale"]  # the empty companion cubin is skipped


@needs_cuda_tools
def test_fatbin_with_ptx_only_is_assembled(capsys, tmp_path):
    out = tmp_path / "ptxonly.fatbin"
    subprocess.run([tools.find("nvcc"), "-fatbin", "-gencode", "arch=compute_90a,code=compute_90a", "-o",
                    str(out), str(DATA / "mma_sync.cu")], check=True, capture_output=True, timeout=300)
    code, text, _ = cli(capsys, "sass", str(out), "--arch", "h100-sxm", "--kernel", "mma_bf16", "--json")
    (k,) = json.loads(text)["kernels"]
    assert code == 0 and k["tensor"]["ops"][0]["opcode"] == "HMMA.16816.F32.BF16"


@needs_cuda_tools
def test_arch_specific_cubin_runs_only_on_its_sm(capsys, cubins):
    path, _ = cubins("tcgen05", "sm_100a")  # the ELF says sm_100; nvdisasm's `.target` says sm_100a
    code, _, err = cli(capsys, "sass", str(path), "--arch", "b300")
    assert_one_error_line(code, err, "the cubin is for sm_100a, which does not run on sm_103a")
    code, out, _ = cli(capsys, "sass", str(path), "--arch", "b200", "--kernel", "tc05_mma", "--json")
    assert code == 0 and json.loads(out)["sm"] == "sm_100a"
