"""passes/shard_tp.py: Megatron tensor parallelism on the bundled Llama graph (llama-tiny: hidden 64,
4 query heads and 2 kv heads of head_dim 16, ffn 172, vocab 256, 2 layers)."""

import pytest
from onnx import TensorProto, helper

import models
from estimator.frontends.onnx_import import import_model
from passes.shard_tp import ShardError, shard_tp
from tests.onnxutil import matmul_model


def _tiny(mode=""):
    return import_model(models.build("llama-tiny" + mode))


def _shape(g, name):
    return tuple(int(d) if d.is_Integer else str(d) for d in g.tensors[name].shape)


def _weight(g, node_suffix):
    node = next(n for n in g.topo_nodes() if n.name.endswith(node_suffix))
    return _shape(g, node.inputs[1] if node.op_type == "MatMul" else node.inputs[0])


def test_tp2_divides_heads_ffn_and_vocab():
    g = shard_tp(_tiny("-decode"), 2).graph
    assert _weight(g, "layers.0/self_attn/q_proj/MatMul") == (64, 32)  # 4 heads x 16 / 2
    assert _weight(g, "layers.0/self_attn/k_proj/MatMul") == (64, 16)  # 2 kv heads x 16 / 2
    assert _weight(g, "layers.0/self_attn/o_proj/MatMul") == (32, 64)  # row-parallel: K divided
    assert _weight(g, "layers.0/mlp/gate_proj/MatMul") == (64, 86)  # 172 / 2
    assert _weight(g, "layers.0/mlp/down_proj/MatMul") == (86, 64)
    assert _weight(g, "lm_head/MatMul") == (64, 128)  # vocab 256 / 2
    assert _weight(g, "model/Gather") == (128, 64)  # embedding rows 256 / 2
    assert _shape(g, "present.0.key") == ("batch", 1, "past_seq + 1", 16)  # 1 kv head per GPU
    assert _shape(g, "past_key_values.0.key") == ("batch", 1, "past_seq", 16)
    assert _shape(g, "logits") == ("batch", 1, 256)  # gathered back to the full vocabulary


def test_tp2_inserts_the_collectives():
    g = shard_tp(_tiny("-decode"), 2).graph
    ar = [n for n in g.topo_nodes() if n.op_type == "AllReduce"]
    ag = [n for n in g.topo_nodes() if n.op_type == "AllGather"]
    assert len(ar) == 2 * 2 + 1  # O-proj and down per layer, and the embedding
    assert len(ag) == 1 and ag[0].attrs["axis"] == -1 and ag[0].outputs == ("logits",)
    assert all(n.domain == "com.microsoft" and n.attrs["group_size"] == 2 for n in ar + ag)
    o_ar = next(n for n in ar if "o_proj" in n.name)
    assert _shape(g, o_ar.inputs[0]) == ("batch", 1, 64)  # tokens x hidden, whole
    residual = next(n for n in g.topo_nodes() if n.name == "/model/layers.0/Add")
    assert o_ar.outputs[0] in residual.inputs  # the residual add reads the reduced sum


def test_tp4_replicates_kv_heads_beyond_their_count():
    res = shard_tp(_tiny("-decode"), 4)
    assert _weight(res.graph, "layers.0/self_attn/q_proj/MatMul") == (64, 16)  # 1 query head
    assert _weight(res.graph, "layers.0/self_attn/k_proj/MatMul") == (64, 16)  # ceil(2/4) = 1 kv head
    assert "2 kv heads -> 1 (replicated)" in res.decisions[0]


def test_decisions_name_every_sharded_node():
    res = shard_tp(_tiny(), 2)
    assert len(res.decisions) == 2 * 2 + 2  # attention + mlp per layer, embedding, lm_head
    assert res.decisions[0].startswith("attention: column-parallel /model/layers.0/self_attn/q_proj/MatMul")
    down = "row-parallel /model/layers.0/mlp/down_proj/MatMul + AllReduce; width 172 -> 86"
    assert down in res.decisions[1]


def test_tp1_is_unmodified():
    g = _tiny()
    res = shard_tp(g, 1)
    assert not res.modified and res.graph is g


def test_heads_not_divisible_is_an_error_naming_the_node():
    with pytest.raises(ShardError, match=r"q_proj/MatMul: 4 query heads are not divisible by --tp 3"):
        shard_tp(_tiny(), 3)


def test_graph_without_a_pair_is_an_error():
    with pytest.raises(ShardError, match="no column-/row-parallel MatMul pair found"):
        shard_tp(import_model(matmul_model(8, 16, 32, TensorProto.FLOAT, weight=True)), 2)


def test_fused_qkv_with_split_is_sharded_by_heads():
    # x[b,8] @ Wqkv[8, 24] -> Split 3 x 8 -> 2 heads of 4 each -> scores -> context -> @ Wo[8, 8]
    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    def w(name, shape):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape,
                        data_location=TensorProto.EXTERNAL)
        for key, val in (("location", "w.bin"), ("offset", "0"), ("length", str(4 * shape[0] * shape[1]))):
            e = t.external_data.add()
            e.key, e.value = key, val
        return t

    c = [helper.make_tensor("split", TensorProto.INT64, [3], [8, 8, 8]),
         helper.make_tensor("hs", TensorProto.INT64, [4], [0, 0, 2, 4]),
         helper.make_tensor("ms", TensorProto.INT64, [3], [0, 0, 8])]
    nodes = [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"], name="qkv"),
             helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2, name="split"),
             *[helper.make_node("Reshape", [t, "hs"], [t + "h"], name="r" + t) for t in "qkv"],
             *[helper.make_node("Transpose", [t + "h"], [t + "t"], perm=[0, 2, 1, 3], name="t" + t)
               for t in "qv"],
             helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 2, 3, 1], name="tk"),
             helper.make_node("MatMul", ["qt", "kt"], ["s"], name="scores"),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1, name="softmax"),
             helper.make_node("MatMul", ["p", "vt"], ["ctx"], name="ctx"),
             helper.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3], name="tc"),
             helper.make_node("Reshape", ["ctxt", "ms"], ["m"], name="merge"),
             helper.make_node("MatMul", ["m", "wo"], ["y"], name="o_proj")]
    graph = helper.make_graph(nodes, "qkv", [vi("x", ["b", "s", 8])], [vi("y", ["b", "s", 8])],
                              [w("wqkv", [8, 24]), w("wo", [8, 8]), *c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    res = shard_tp(import_model(model), 2)
    assert _shape(res.graph, "wqkv") == (8, 12)  # (2 + 2 x 2) heads x 4 / 2
    assert _shape(res.graph, "q") == ("b", "s", 4) and _shape(res.graph, "qh") == ("b", "s", 1, 4)
    assert _shape(res.graph, "wo") == (4, 8)
    assert "2 query heads -> 1, 2 kv heads -> 1, head_dim 4" in res.decisions[0]


def test_transformers_export_is_sharded_the_same_way():
    pytest.importorskip("transformers")
    from estimator.frontends.onnx_import import import_file
    from models.hf import export_tiny

    g = import_file(str(export_tiny("llama")))  # torch.onnx dynamo names (models/hf.py's export cache)
    res = shard_tp(g, 2)
    kinds = [d.split(":")[0] for d in res.decisions]
    assert kinds == ["attention", "mlp", "attention", "mlp", "embedding", "lm_head"]
    assert "4 query heads -> 2, 2 kv heads -> 1, head_dim 16" in res.decisions[0]
    ops = [n.op_type for n in res.graph.topo_nodes()]
    assert ops.count("AllReduce") == 5 and ops.count("AllGather") == 1
