"""passes/kv_inplace.py and the KvAppend cost: a decode step writes only its new cache rows."""

from onnx import TensorProto, helper

import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import bind
from estimator.kernel import lower
from hwdesc import load
from passes import STRATEGIES
from passes.kv_inplace import kv_inplace


def _tiny_decode():
    return import_model(models.build("llama-tiny-decode"))


def test_decode_concats_become_in_place_appends():
    g = _tiny_decode()
    res = kv_inplace(g)
    assert res.modified
    appends = [n for n in res.graph.topo_nodes() if n.op_type == "KvAppend"]
    assert len(appends) == 4  # 2 layers x (key, value)
    assert all(n.domain == "estimator" and n.outputs[0] in g.outputs for n in appends)
    assert not [n for n in g.topo_nodes() if n.op_type == "KvAppend"]  # input graph untouched


def test_append_moves_only_the_new_rows():
    g = bind(kv_inplace(_tiny_decode()).graph, {"batch": 2, "past_seq": 127})
    k = next(k for k in lower(g).kernels if k.op == "estimator.KvAppend")
    new_rows = 2 * 2 * 1 * 16 * 4  # batch 2 x 2 kv heads x 1 new token x head_dim 16 x fp32 bytes
    assert k.work.bytes_read == new_rows and k.work.bytes_written == new_rows
    assert k.kind == "movement"


def test_an_fp8_cache_of_fp32_rows_is_appended_in_place_at_the_cache_dtype():
    from dataclasses import replace

    g = _tiny_decode()
    cache = [n for n in g.tensors if n.startswith(("past_key_values", "present"))]
    assert len(cache) == 8  # 2 layers x (key, value) x (past, present)
    g = g.with_tensors({n: replace(g.tensors[n], dtype="fp8e4m3") for n in cache})
    res = kv_inplace(g)
    assert res.modified and not res.refusals
    k = next(k for k in lower(bind(res.graph, {"batch": 2, "past_seq": 127})).kernels
             if k.op == "estimator.KvAppend")
    elements = 2 * 2 * 1 * 16  # batch 2 x 2 kv heads x 1 new token x head_dim 16
    assert k.work.bytes_read == elements * 4  # the fp32 rows, read once
    assert k.work.bytes_written == elements * 1  # quantized as they are written: 1 byte each


def test_prefill_graph_is_unmodified():
    g = import_model(models.build("llama-tiny"))  # no past cache: nothing to append
    res = kv_inplace(g)
    assert not res.modified and res.graph is g and res.refusals == ()


def test_concat_of_an_input_that_is_not_a_cache_is_refused_with_reason():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])
    nodes = [helper.make_node("Concat", ["x", "x"], ["c"], axis=0, name="cat"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18)])
    res = kv_inplace(import_model(model))
    assert not res.modified
    assert [r.reason for r in res.refusals] == ["its output is not a graph output (not a present cache)"]


def test_strategies_none_keeps_the_copy_others_append():
    assert "kv-inplace" not in STRATEGIES["none"]
    assert all("kv-inplace" in STRATEGIES[s] for s in ("ort", "tensorrt", "max"))
    g, hw, dims = _tiny_decode(), load("h100-sxm"), {"batch": 2, "past_seq": 127}
    none = estimate(g, hw, dims=dims, pipeline=STRATEGIES["none"], roofline=True)
    trt = estimate(g, hw, dims=dims, pipeline=STRATEGIES["tensorrt"], roofline=True)
    cache = 2 * 2 * 127 * 16 * 4  # past rows: batch x kv heads x past x head_dim x fp32

    def cache_copies(result):
        return [p for p in result.kernels
                if p.kernel.op == "Concat" and p.kernel.nodes[0].outputs[0] in g.outputs]

    concat = cache_copies(none)
    assert len(concat) == 4
    new = 2 * 2 * 1 * 16 * 4
    assert concat[0].kernel.work.dram_bytes == (cache + new) * 2  # reads past + new, writes past + new
    assert not cache_copies(trt)
    saved = 4 * 2 * cache  # four appends no longer read and write the past rows
    assert none.totals["dram_bytes"] - trt.totals["dram_bytes"] >= saved


def test_llama_3_1_names_are_bundled_beside_llama_3():
    for name in ("llama-3.1-8b", "llama-3.1-8b-decode", "llama-3.1-70b", "llama-3.1-70b-decode",
                 "llama-3-8b", "llama-3-70b"):
        assert name in models.MODELS
    assert "131072" not in models.MODELS["llama-3.1-70b"].description  # describe() names shapes only
    assert "80 layers, hidden 8192, 64 heads (8 kv)" in models.MODELS["llama-3.1-70b"].description
