"""Parity of the two routes from PyTorch to the estimator, and of the ONNX -> torch-mlir route.

(a) torch.export -> torch-mlir FX importer (torch dialect) -> estimator.frontends.mlir_import, and
(b) torch.onnx.export(dynamo=True, opset 23) -> estimator.frontends.onnx_import,
on the tiny blocks of tests/torch_blocks.py, under the default pipeline (fusion none): equal total
FLOPs, DRAM bytes within 2% (they come out equal: both routes produce the same ops), the same free
symbols. Both routes name the dims after the Dims of `dynamic_shapes` (batch, seq): the ONNX exporter
does so itself, `estimator.frontends.torch_api` renames torch's s<N> symbols to them.

(c) an ONNX builder model (models/llama-tiny) through torch-mlir's ONNX importer, against the same
model through the ONNX frontend. The importer drops dim names, so the MLIR route names input dims by
position: arg0_dim0 = batch, arg0_dim1 = seq (input_ids [batch, seq]).
"""

import pytest
import sympy

pytest.importorskip("torch_mlir")
pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) needs it

import torch_blocks  # noqa: E402

import hwdesc  # noqa: E402
import models  # noqa: E402
from estimator.estimate import estimate  # noqa: E402
from estimator.frontends.onnx_import import import_file, import_model  # noqa: E402
from estimator.ir import dim  # noqa: E402

BYTES_TOLERANCE = 0.02  # the bound; the routes agree exactly today
POINTS = ({"batch": 1, "seq": 128}, {"batch": 4, "seq": 2048}, {"batch": 16, "seq": 1})
HW = hwdesc.load("b200")


def totals(graph, rename=None):
    result = estimate(graph, HW, roofline=True)
    sub = {dim(old): dim(new) for old, new in (rename or {}).items()}
    t = result.totals
    return (sympy.expand(t["flops"].xreplace(sub)), sympy.expand(t["dram_bytes"].xreplace(sub)),
            {s.xreplace(sub) for s in graph.free_symbols()}, result)


def at(expr, point):
    return float(expr.subs({dim(k): v for k, v in point.items()}))


def assert_parity(mlir_graph, onnx_graph, rename=None):
    flops_m, bytes_m, syms_m, res_m = totals(mlir_graph, rename)
    flops_o, bytes_o, syms_o, res_o = totals(onnx_graph)
    assert res_m.uncosted == [] and res_o.uncosted == []
    assert syms_m == syms_o == {dim("batch"), dim("seq")}
    assert sympy.expand(flops_m - flops_o) == 0, (flops_m, flops_o)
    for point in POINTS:
        m, o = at(bytes_m, point), at(bytes_o, point)
        assert abs(m - o) <= BYTES_TOLERANCE * o, (point, bytes_m, bytes_o)
    assert len(res_m.kernels) == len(res_o.kernels)
    return flops_m, bytes_m


def onnx_route(module, args, shapes, tmp_path):
    import torch

    path = tmp_path / "block.onnx"
    torch.onnx.export(module, args, str(path), dynamic_shapes=shapes, dynamo=True, opset_version=23,
                      verbose=False)
    return import_file(str(path))


@pytest.mark.parametrize("make", [
    pytest.param(lambda: torch_blocks.LlamaBlock(), id="llama-gqa"),
    pytest.param(lambda: torch_blocks.LlamaBlock(kv_heads=torch_blocks.HEADS), id="llama-mha"),
    pytest.param(lambda: torch_blocks.GPT2Block(), id="gpt2"),
])
def test_fx_route_matches_onnx_route(make, tmp_path):
    import torch

    from estimator.frontends.torch_api import to_graph

    torch.manual_seed(0)
    module, args, shapes = make().eval(), (torch_blocks.example_input(),), torch_blocks.dynamic_shapes()
    mlir_graph = to_graph(module, args, shapes)
    onnx_graph = onnx_route(module, args, shapes, tmp_path)
    flops, _ = assert_parity(mlir_graph, onnx_graph)
    b, s = dim("batch"), dim("seq")
    # Causal attention, per (head, score): 2 * 16 for QK^T, 2 * 16 for PV, 4 softmax ops + 1 exp, over
    # 4 heads and s * (s + 1) / 2 scores: 138 * b * s**2 in every block.
    assert sympy.Poly(flops, b, s).coeff_monomial(b * s**2) == 4 * (4 * 16 + 5) // 2


def test_gpt2_block_totals_written_out():
    """The GPT-2 block through the FX route, its numbers derived by hand (hidden 64, 4 heads of 16,
    MLP 256, fp32): a guard against both routes drifting together."""
    from estimator.frontends.torch_api import to_graph

    module, args, shapes = torch_blocks.gpt2_factory()
    flops, dram, _, _ = totals(to_graph(module, args, shapes))
    b, s = dim("batch"), dim("seq")
    tokens = b * s
    matmuls = 2 * 64 * (3 * 64 + 64 + 256) + 2 * 256 * 64  # qkv, proj, fc, out
    bias_adds = 3 * 64 + 64 + 256 + 64
    residual_adds = 2 * 64
    layer_norms = 2 * 64 * 7  # 6 ops per element + 1 for the bias ...
    layer_norm_rsqrt = 2  # ... and one rsqrt per row each
    gelu = 256 * 8  # tanh form: 7 CUDA ops + 1 SFU per element
    attention = 4 * (4 * 16 + 5) * b * s * (s + 1) / 2
    per_token = matmuls + bias_adds + residual_adds + layer_norms + layer_norm_rsqrt + gelu
    expected = tokens * per_token + attention
    assert sympy.expand(flops - expected) == 0
    weights = 4 * (64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64 + 4 * 64)
    assert sympy.expand(dram).coeff(b, 0) == weights  # per-token traffic aside, every weight read once


def test_onnx_importer_route_matches_onnx_frontend(tmp_path):
    import onnx
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras import onnx_importer

    from estimator.frontends.mlir_import import import_mlir

    model = models.MODELS["llama-tiny"].build()
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)  # what torch-mlir-import-onnx does
    context = ir.Context()
    torch_d.register_dialect(context)
    info = onnx_importer.ModelInfo(inferred)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    mlir_graph = import_mlir(str(module), "llama-tiny.mlir")
    rename = {"arg0_dim0": "batch", "arg0_dim1": "seq"}
    assert set(mlir_graph.dims) == set(rename)
    flops_m, bytes_m, syms_m, _ = totals(mlir_graph, rename)
    flops_o, bytes_o, syms_o, _ = totals(import_model(model))
    assert syms_m == syms_o
    assert sympy.expand(flops_m - flops_o) == 0
    assert sympy.expand(bytes_m - bytes_o) == 0
