"""The torch-mlir frontend: torch-dialect MLIR -> IR Graph, the --torch CLI mode, bad input.

The MLIR below is written by hand in the form torch-mlir's FX importer prints
(``fx.export_and_import(..., import_symbolic_shape_expressions=True)``), so a reader sees the whole
input; the tests that export a module themselves use tests/torch_blocks.py. Tests that need torch-mlir
skip without it (pytest.importorskip); the missing-dependency error is tested with it hidden.
"""

import json
import re
import subprocess
import sys

import pytest
import sympy
from cliutil import assert_one_error_line, cli

from estimator.errors import UserError
from estimator.ir import dim

# x [s0, s1, 16] -> linear(16 -> 32, bias) -> * 0.5 -> view [s0*s1, 32] -> flip (unmapped) -> view back.
LINEAR_MLIR = """
module {
  func.func @main(%arg0: !torch.vtensor<[?,?,16],f32>) -> !torch.vtensor<[?,?,32],f32> {
    %0 = torch.symbolic_int "s0" {min_val = 1, max_val = 64} : !torch.int
    %1 = torch.symbolic_int "s1" {min_val = 2, max_val = 4096} : !torch.int
    torch.bind_symbolic_shape %arg0, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 16)> : !torch.vtensor<[?,?,16],f32>
    %w = torch.vtensor.literal(dense_resource<w> : tensor<32x16xf32>) : !torch.vtensor<[32,16],f32>
    %b = torch.vtensor.literal(dense<0.0> : tensor<32xf32>) : !torch.vtensor<[32],f32>
    %2 = torch.aten.linear %arg0, %w, %b : !torch.vtensor<[?,?,16],f32>, !torch.vtensor<[32,16],f32>, !torch.vtensor<[32],f32> -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %2, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 32)> : !torch.vtensor<[?,?,32],f32>
    %half = torch.constant.float 5.000000e-01
    %3 = torch.aten.mul.Scalar %2, %half : !torch.vtensor<[?,?,32],f32>, !torch.float -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %3, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 32)> : !torch.vtensor<[?,?,32],f32>
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %4 = torch.aten.size.int %3, %int0 : !torch.vtensor<[?,?,32],f32>, !torch.int -> !torch.int
    %5 = torch.aten.size.int %3, %int1 : !torch.vtensor<[?,?,32],f32>, !torch.int -> !torch.int
    %6 = torch.aten.mul.int %4, %5 : !torch.int, !torch.int -> !torch.int
    %int32 = torch.constant.int 32
    %7 = torch.prim.ListConstruct %6, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
    %8 = torch.aten.view %3, %7 : !torch.vtensor<[?,?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,32],f32>
    torch.bind_symbolic_shape %8, [%0, %1], affine_map<()[s0, s1] -> (s0 * s1, 32)> : !torch.vtensor<[?,32],f32>
    %9 = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
    %10 = torch.aten.flip %8, %9 : !torch.vtensor<[?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,32],f32>
    torch.bind_symbolic_shape %10, [%0, %1], affine_map<()[s0, s1] -> (s0 * s1, 32)> : !torch.vtensor<[?,32],f32>
    %11 = torch.prim.ListConstruct %4, %5, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %12 = torch.aten.view %10, %11 : !torch.vtensor<[?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %12, [%0, %1], affine_map<()[s0, s1] -> (s0, s1 floordiv 2 + s1 ceildiv 2, 32)> : !torch.vtensor<[?,?,32],f32>
    return %12 : !torch.vtensor<[?,?,32],f32>
  }
}
"""  # noqa: E501


@pytest.fixture
def torch_mlir():
    return pytest.importorskip("torch_mlir")


def write(tmp_path, text, name="m.mlir"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def nodes_by_op(graph):
    return {n.op_type: n for n in graph.topo_nodes()}


# ---- the reader -----------------------------------------------------------------------------------

def test_symbols_keep_names_and_ranges(torch_mlir):
    from estimator.frontends.mlir_import import import_mlir

    g = import_mlir(LINEAR_MLIR)
    s0, s1 = dim("s0"), dim("s1")
    assert g.dims == {"s0": s0, "s1": s1}
    assert g.dim_ranges == {"s0": (1, 64), "s1": (2, 4096)}
    ops = nodes_by_op(g)
    assert g.tensors[ops["aten.flip"].inputs[0]].shape == (s0 * s1, 32)  # the affine map s0 * s1
    out = g.tensors[g.outputs[0]]
    assert out.shape == (s0, sympy.floor(s1 / 2) + sympy.ceiling(s1 / 2), 32)  # floordiv, ceildiv
    assert g.unknown_dims == []


def test_linear_folds_the_weight_transpose_and_adds_the_bias(torch_mlir):
    from estimator.frontends.mlir_import import import_mlir

    g = import_mlir(LINEAR_MLIR)
    ops = nodes_by_op(g)
    assert "Transpose" not in ops  # W^T folded into a weight, as the ONNX exporter stores it
    matmul = ops["MatMul"]
    w_t = g.tensors[matmul.inputs[1]]
    assert w_t.shape == (16, 32) and w_t.is_weight and w_t.name not in g.producer
    bias = g.tensors[ops["Add"].inputs[1]]
    assert bias.is_weight and bias.shape == (32,)  # 32 elements > 16: a weight, not a host constant
    scale = g.tensors[ops["Mul"].inputs[1]]
    assert scale.shape == () and scale.is_const and not scale.is_weight  # the Python 0.5
    assert [n.op_type for n in g.topo_nodes()] == ["MatMul", "Add", "Mul", "Reshape", "aten.flip", "Reshape"]


def test_unmapped_op_is_listed_uncosted_and_totals_are_hand_counted(torch_mlir):
    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.mlir_import import import_mlir

    r = estimate(import_mlir(LINEAR_MLIR), hwdesc.load("h100-sxm"), roofline=True)
    s0, s1 = dim("s0"), dim("s1")
    assert [(u.op, u.reason) for u in r.uncosted] == [
        ("torch.aten.flip", "no cost function for torch.aten.flip")]
    # MatMul 2*16*32 per token, bias Add 32, Mul 32
    assert sympy.expand(r.totals["flops"] - (2 * 16 * 32 + 32 + 32) * s0 * s1) == 0
    # MatMul: x 16*4 + y 32*4 per token, W^T 32*16*4; Add: y and out 2*32*4, bias 32*4; Mul: 2*32*4
    expected = (16 * 4 + 32 * 4 + 2 * 32 * 4 + 2 * 32 * 4) * s0 * s1 + 32 * 16 * 4 + 32 * 4
    assert sympy.expand(r.totals["dram_bytes"] - expected) == 0
    assert r.totals["weight_bytes"] == 32 * 16 * 4 + 32 * 4  # W^T once, the unused W not at all


def test_missing_bindings_become_unknown_dims(torch_mlir):
    from estimator.frontends.mlir_import import import_mlir

    text = "\n".join(ln for ln in LINEAR_MLIR.splitlines() if "bind_symbolic_shape" not in ln)
    g = import_mlir(text)
    assert g.dims == {}
    assert "unk__arg0_0" in g.unknown_dims and "unk__arg0_1" in g.unknown_dims


def test_bytecode_reads_like_text(torch_mlir, tmp_path):
    from estimator.frontends.mlir_import import import_mlir_file, parse_module

    module = parse_module(LINEAR_MLIR)
    path = tmp_path / "m.mlirbc"
    with open(path, "wb") as f:
        module.operation.write_bytecode(f)
    g_text, g_bc = import_mlir_file(write(tmp_path, LINEAR_MLIR)), import_mlir_file(str(path))
    assert [n.op_type for n in g_bc.topo_nodes()] == [n.op_type for n in g_text.topo_nodes()]
    assert g_bc.dims == g_text.dims


# ---- the CLI ----------------------------------------------------------------------------------------

def test_cli_symbolic_and_dim_range(torch_mlir, capsys, tmp_path):
    path = write(tmp_path, LINEAR_MLIR)
    code, out, _ = cli(capsys, path, "--arch", "blackwell", "--symbolic", "--fusion", "none")
    assert code == 0 and "flops = 1088*s0*s1" in out
    code, out, _ = cli(capsys, path, "--json", "--dim", "s0=2", "--dim", "s1=64", "--fusion", "none")
    doc = json.loads(out)
    assert code == 0 and doc["total"]["flops"] == 1088 * 2 * 64
    [flip] = doc["uncosted"]  # nodes are named op_<SSA name as torch-mlir prints the module>
    assert flip["op"] == "torch.aten.flip" and flip["node"].startswith("flip_")
    assert flip["reason"] == "no cost function for torch.aten.flip"
    code, _, err = cli(capsys, path, "--dim", "s1=8192")
    assert_one_error_line(code, err, "--dim s1=8192: outside the module's range 2..4096")


@pytest.mark.parametrize("text, fragment", [
    ("module { func.func @main( }", "not valid MLIR"),
    ('module { "foo.bar"() : () -> () }', "not valid MLIR"),
    ("", "is empty"),
    ("module {\n  func.func @main(%arg0: tensor<?x16xf32>) -> tensor<?x16xf32> {\n"
     "    return %arg0 : tensor<?x16xf32>\n  }\n}", "linalg-on-tensors is not read"),
    ("module {}", "no function with a body"),
])
def test_bad_mlir_is_one_error_line(torch_mlir, capsys, tmp_path, text, fragment):
    code, _, err = cli(capsys, write(tmp_path, text))
    assert_one_error_line(code, err, fragment)


def test_truncated_bytecode_is_one_error_line(torch_mlir, capsys, tmp_path):
    from estimator.frontends.mlir_import import parse_module

    path = tmp_path / "m.mlirbc"
    with open(path, "wb") as f:
        parse_module(LINEAR_MLIR).operation.write_bytecode(f)
    data = path.read_bytes()
    code, _, err = cli(capsys, write(tmp_path, data[: len(data) // 2], "cut.mlirbc"))
    assert_one_error_line(code, err, "cut.mlirbc is not valid MLIR")


def test_missing_file(capsys, tmp_path):
    code, _, err = cli(capsys, str(tmp_path / "nope.mlir"))
    assert code == 2 and err.startswith("error: ")


def test_without_torch_mlir_mlir_input_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_mlir", None)  # `import torch_mlir` now raises ImportError
    code, _, err = cli(capsys, write(tmp_path, LINEAR_MLIR))
    assert_one_error_line(code, err, "reading MLIR needs torch-mlir: pip install -e '.[mlir]'")


def test_importing_estimator_does_not_import_torch():
    code = ("import sys, estimator, estimator.cli.main, estimator.frontends.mlir_import\n"
            "import estimator.cli.pytorch\n"
            "assert callable(estimator.from_torch)\n"
            "assert 'torch' not in sys.modules and 'torch_mlir' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- from PyTorch -----------------------------------------------------------------------------------

def test_raw_export_and_import_keeps_torch_symbol_names(torch_mlir):
    """What the importer writes when called directly: torch's own symbol names (s<N>), its ranges,
    and torch-mlir's default decompositions (mm, var_mean, the math form of attention), all mapped."""
    import torch_blocks
    from torch_mlir import fx

    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.mlir_import import import_mlir

    module, args, shapes = torch_blocks.gpt2_factory()
    text = str(fx.export_and_import(module, *args, dynamic_shapes=shapes,
                                    import_symbolic_shape_expressions=True))
    g = import_mlir(text)
    assert len(g.dims) == 2 and all(re.fullmatch(r"s\d+", name) for name in g.dims)
    assert sorted(g.dim_ranges.values(), key=str) == [(0, None), (2, torch_blocks.MAX_SEQ)]
    assert g.unknown_dims == []
    assert estimate(g, hwdesc.load("b200"), roofline=True).uncosted == []


def test_cli_torch_mode_names_dims_after_the_dims(torch_mlir, capsys, tmp_path):
    saved = tmp_path / "block.mlir"
    code, out, _ = cli(capsys, "--torch", "torch_blocks:llama_factory", "--arch", "blackwell", "--symbolic",
                       "--save-mlir", str(saved))
    assert code == 0
    flops = next(ln for ln in out.splitlines() if ln.startswith("flops = "))
    assert "batch" in flops and "seq" in flops and not re.search(r"\bs\d+\b", flops)
    assert 'torch.symbolic_int "seq"' in saved.read_text()
    code, out2, _ = cli(capsys, str(saved), "--arch", "blackwell", "--symbolic")  # the saved file reads back
    assert code == 0 and flops in out2


@pytest.mark.parametrize("argv, fragment", [
    (["--torch", "no_colon"], "expected MODULE:FACTORY"),
    (["--torch", "no_such_module_xyz:f"], "cannot import no_such_module_xyz"),
    (["--torch", "torch_blocks:missing"], "has no callable missing"),
    (["m.onnx", "--torch", "torch_blocks:llama_factory"], "give one model"),
    (["m.onnx", "--save-mlir", "x.mlir"], "--save-mlir needs --torch"),
])
def test_torch_mode_bad_usage(torch_mlir, capsys, argv, fragment):
    code, _, err = cli(capsys, *argv)
    assert_one_error_line(code, err, fragment)


def test_from_torch_api(torch_mlir):
    import torch_blocks

    import estimator

    module, args, shapes = torch_blocks.gpt2_factory()
    result = estimator.from_torch(module, args, shapes, arch="b200", dims={"batch": 1})
    assert result.dims == {"batch": 1, "seq": None}
    with pytest.raises(UserError, match="outside the module's range"):
        estimator.from_torch(module, args, shapes, dims={"seq": 10**6})


def test_conv_net_maps_with_hand_counted_first_conv(torch_mlir):
    import torch
    import torch_blocks

    from estimator.frontends.torch_api import to_graph
    from estimator.kernel import lower

    batch = torch.export.Dim("batch")
    g = to_graph(torch_blocks.ConvNet().eval(), (torch.randn(2, 3, 16, 16),), {"x": {0: batch}})
    convs = [n for n in g.topo_nodes() if n.op_type in ("Conv", "ConvTranspose")]
    first = convs[0]
    assert dict(first.attrs) == {"kernel_shape": (3, 3), "strides": (2, 2), "dilations": (1, 1), "group": 1,
                                 "pads": (1, 1, 1, 1)}
    assert convs[1].attrs["auto_pad"] == "SAME_UPPER" and convs[1].attrs["group"] == 2
    assert convs[2].op_type == "ConvTranspose"
    lowered = lower(g)
    assert lowered.uncosted == []
    work = next(k.work for k in lowered.kernels if k.name == first.name)
    # 2 FLOPs per multiply-add: N * C_out * H_out * W_out (8 x 8 after stride 2) * C_in * 3 * 3
    assert sympy.expand(work.total_flops - 2 * dim("batch") * 8 * 8 * 8 * 3 * 3 * 3) == 0


def test_op_zoo_maps_every_op_with_named_dims(torch_mlir):
    import torch
    import torch_blocks

    import hwdesc
    from estimator.estimate import estimate
    from estimator.frontends.torch_api import to_graph

    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", min=2, max=512)
    args = (torch.randint(0, 100, (2, 8)), torch.randn(2, 5))
    for decompose in (False, True):  # high-level ops, and torch-mlir's default decompositions
        g = to_graph(torch_blocks.OpZoo().eval(), args, {"ids": {0: batch, 1: seq}, "x": {0: batch}},
                     decompose=decompose)
        result = estimate(g, hwdesc.load("b200"), roofline=True)
        assert result.uncosted == [], result.uncosted
        assert g.unknown_dims == [] and set(g.dims) == {"batch", "seq"}
