"""passes/split_pp.py on llama-tiny (2 layers): stages, sends, the per-stage report."""

import pytest

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from passes import STRATEGIES
from passes.shard_tp import ShardError
from passes.split_pp import layer_of, split_pp


def _tiny():
    return import_model(models.build("llama-tiny-decode"))


def test_layer_of_reads_the_module_path():
    assert layer_of("/model/layers.12/mlp/down_proj/MatMul") == 12
    assert layer_of("/model/embed_tokens/Gather") is None


def test_two_stages_send_the_residual_stream_once():
    st = split_pp(_tiny(), 2)
    sends = [n for n in st.graph.topo_nodes() if n.op_type == "Send"]
    assert all(n.domain == "estimator" and n.attrs["peer_stage"] == 1 for n in sends)
    residual = [n for n in sends if "layers.0" in n.name]
    assert len(residual) == 1  # layer 0's output Add feeds layer 1
    assert st.stage_of["/model/Gather"] == 0 and st.stage_of["/lm_head/MatMul"] == 1
    assert st.stage_of["/model/layers.1/mlp/down_proj/MatMul"] == 1


def test_stage_report_keeps_the_lm_head_imbalance():
    st = split_pp(_tiny(), 2)
    r = estimate(
        st.graph, hwdesc.load("h100-sxm"), dims={"batch": 1, "past_seq": 16},
                              pipeline=STRATEGIES["tensorrt"], roofline=True
    )
    rep = st.report(r, micro_batches=2)
    t0, t1 = rep["stage_estimate_s"]
    assert rep["traversal_s"] == pytest.approx(float(r.totals["estimate_s"]))  # every kernel in one stage
    assert rep["slowest_stage_s"] == max(t0, t1)
    assert rep["bubble_fraction"] == pytest.approx((2 - 1) / (2 + 2 - 1))  # (pp - 1) / (m + pp - 1)


def test_one_stage_is_unchanged_and_too_many_stages_is_an_error():
    g = _tiny()
    assert split_pp(g, 1).graph is g
    with pytest.raises(ShardError, match=r"--pp 3 is larger than the layer count \(2 layers\)"):
        split_pp(g, 3)
