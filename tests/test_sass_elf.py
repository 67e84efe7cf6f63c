"""The cubin's ELF attributes read with struct, checked against cuobjdump's names and ptxas -v."""

import re
import subprocess

import pytest
from sassutil import needs_cuda_tools

from estimator.errors import UserError
from estimator.sass import elf, tools

pytest_plugins = ("sassfixtures",)  # the session fixtures `analysed` and `cubins`

PROBES = [("fma", "sm_80"), ("fma", "sm_90a"), ("wgmma", "sm_90a"), ("tcgen05", "sm_100a"),
          ("sm120", "sm_120a")]
_USED = re.compile(r"Compiling entry function '(\w+)'.*?Used (\d+) registers, used (\d+) barriers"
                   r"(?:, (\d+) bytes smem)?", re.S)


@needs_cuda_tools
@pytest.mark.parametrize("stem,sm", PROBES)
def test_registers_barriers_smem_match_ptxas(cubins, stem, sm):
    path, log = cubins(stem, sm)
    module = elf.read(path.read_bytes())
    assert module.sm_number == int(re.sub(r"\D", "", sm))
    seen = 0
    for name, regs, bars, smem in _USED.findall(log):
        k = module.kernels[name]
        ours = (k.registers, k.barriers, elf.static_smem_bytes(k, module))
        assert ours == (int(regs), int(bars), int(smem or 0))
        seen += 1
    assert seen == len(module.kernels) >= 1


@needs_cuda_tools
@pytest.mark.parametrize("stem,sm", [("wgmma", "sm_90a"), ("tcgen05", "sm_100a")])
def test_attribute_codes_match_cuobjdump(cubins, stem, sm):
    path, _ = cubins(stem, sm)
    data = path.read_bytes()
    dump = subprocess.run([tools.find("cuobjdump"), "-elf", str(path)], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    module = elf.read(data)
    checked = 0
    for name in module.kernels:
        section = dump.split(f"\n.nv.info.{name}\n", 1)[1].split("\n.", 1)[0]  # up to the next section
        names = re.findall(r"Attribute:\s+(\S+)", section)
        codes = [code for code, _ in elf._records(_section_bytes(data, f".nv.info.{name}"))]
        assert len(codes) == len(names)
        for code, shown in zip(codes, names, strict=True):
            if code in elf.EIATTR:
                assert shown == "EIATTR_" + elf.EIATTR[code], hex(code)
                checked += 1
    assert checked >= 8


def _section_bytes(data: bytes, wanted: str) -> bytes:
    import struct

    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]
    for h in heads:
        if elf._cstr(data, strtab + h[0]) == wanted:
            return data[h[4]:h[4] + h[5]]
    raise AssertionError(wanted)


@needs_cuda_tools
def test_cluster_launch_bounds_tcgen05_attributes(cubins):
    path, _ = cubins("wgmma", "sm_90a")
    ks = elf.read(path.read_bytes()).kernels
    assert ks["ws_knobs"].cluster_dims == (2, 1, 1) and ks["ws_knobs"].max_threads == (384, 1, 1)
    assert ks["ws_knobs"].reg_reconfig and not ks["ws_nolb"].reg_reconfig
    assert ks["wgmma_tma"].mbarriers == 1 and ks["wgmma_tma"].param_bytes == 3 * 128 + 4
    path, _ = cubins("tcgen05", "sm_100a")
    assert elf.read(path.read_bytes()).kernels["tc05_mma"].tcgen05_cta_group == 1


def test_reserved_smem_rule():
    k = elf.ElfKernel("k", shared_section_bytes=5120)
    # sm_90+ with .nv.shared.reserved.0: the section folds in the 1 KB reserve -> 5120 - 1024 = 4096
    assert elf.static_smem_bytes(k, elf.ElfModule(90, {"k": k}, True)) == 4096
    assert elf.static_smem_bytes(k, elf.ElfModule(80, {"k": k}, False)) == 5120
    assert elf.static_smem_bytes(k, elf.ElfModule(90, {"k": k}, False)) == 5120


def test_bad_elf_inputs():
    with pytest.raises(UserError, match="not an ELF"):
        elf.read(b"hello world")
    x86 = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00\x3e\x00" + bytes(48)
    with pytest.raises(UserError, match="not a CUDA ELF"):
        elf.read(x86)
    truncated = b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x02\x00\xbe\x00" + bytes(20)
    with pytest.raises(UserError, match="truncated or corrupt"):
        elf.read(truncated)


@needs_cuda_tools
def test_truncated_cubin(cubins):
    path, _ = cubins("fma", "sm_90a")
    with pytest.raises(UserError, match="truncated or corrupt"):
        elf.read(path.read_bytes()[:2000])
