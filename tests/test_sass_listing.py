"""`estimate sass` on a saved SASS listing (`cuobjdump -sass`, `nvdisasm` with or without `-hex`): the
instructions are read as from a cubin (tensor path, mix, loops); the cubin's resource attributes are not
in a listing, so resources and occupancy say so instead of a number (issue 26)."""

from __future__ import annotations

import json

from cliutil import cli
from sassutil import needs_cuda_tools

from estimator.sass import tools

pytest_plugins = ("sassfixtures",)  # the session fixture `cubins`

# cuobjdump -sass layout: `code for`, `Function :`, each instruction with its two 64-bit words, branch
# targets as addresses. A loop 0x10..0x30 (the BRA at 0x30 jumps back to 0x10) holding one HMMA.
CUOBJDUMP = """
\tcode for sm_90a
\t\tFunction : mma_loop
\t.headerflags\t@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R0, RZ ;                                   /* 0x000000ff00007202 */
                                                                                  /* 0x000fe20000000f00 */
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;          /* 0x0000000c0804723c */
                                                                                  /* 0x000ff00000041804 */
        /*0020*/                   ISETP.NE.AND P0, PT, R0, 0x10, PT ;            /* 0x000000100000780c */
                                                                                  /* 0x000fda0003f05270 */
        /*0030*/               @P0 BRA 0x10 ;                                     /* 0xfffffffc00f40947 */
                                                                                  /* 0x000fea000383ffff */
        /*0040*/                   EXIT ;                                         /* 0x000000000000794d */
                                                                                  /* 0x000fea0003800000 */
"""


def test_a_cuobjdump_listing_is_read_like_a_cubin(tmp_path, capsys):
    path = tmp_path / "mma.sass"
    path.write_text(CUOBJDUMP)
    code, out, err = cli(capsys, "sass", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["source_kind"], doc["sm"], doc["arch"]) == ("listing", "sm_90a", "sm_90a")
    (k,) = doc["kernels"]
    assert k["name"] == "mma_loop" and k["instructions"] == 5
    assert [(op["opcode"], op["count"]) for op in k["tensor"]["ops"]] == [("HMMA.16816.F32.BF16", 1)]
    # the address target 0x10 became a label: one loop from 0x10 to the BRA at 0x30
    assert [(lp["header"], lp["end"]) for lp in k["loops"]] == [("0x0010", "0x0030")]
    assert k["resources"]["registers"] is None and k["occupancy"] is None
    code, out, err = cli(capsys, "sass", str(path))
    assert code == 0 and "occupancy: unknown (a listing has no resource attributes)" in out


@needs_cuda_tools
def test_the_three_listing_formats_match_the_cubin(cubins, tmp_path, capsys):
    cubin, _ = cubins("fma", "sm_90a")
    listings = {
        "cuobjdump": tools.run("cuobjdump", ["-sass", str(cubin)], what="cubin").stdout,
        "nvdisasm": tools.run("nvdisasm", [str(cubin)], what="cubin").stdout,
        "nvdisasm-hex": tools.run("nvdisasm", ["-c", "-hex", str(cubin)], what="cubin").stdout,
    }
    code, out, err = cli(capsys, "sass", str(cubin), "--json")
    want = {k["name"]: (k["instructions"], k["mix"], [(lp["header"], lp["end"]) for lp in k["loops"]])
            for k in json.loads(out)["kernels"]}
    for name, text in listings.items():
        path = tmp_path / f"fma.{name}.sass"
        path.write_text(text)
        code, out, err = cli(capsys, "sass", str(path), "--json")
        assert code == 0, (name, err)
        got = {k["name"]: (k["instructions"], k["mix"], [(lp["header"], lp["end"]) for lp in k["loops"]])
               for k in json.loads(out)["kernels"]}
        assert got == want, name
