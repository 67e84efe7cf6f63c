"""The estimator's speed caches change no number: the attention model's single-candidate repricing, the
cross-call memo of plans and Timings (estimator/pricing/memo.py), the kept topological order of a Graph,
the RoPE tables computed once (models/llama.py)."""

from dataclasses import replace

import networkx as nx
import numpy as np
import onnx
import pytest

import hwdesc
from estimator import ir
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.pricing import attention as attn_model
from estimator.pricing import memo
from estimator.pricing.menu import menu_for
from estimator.pricing.plan import hw_params
from models import llama

H100 = hwdesc.load("h100-sxm")
HOPPER = menu_for("hopper")
PAST = dim("past_seq")


def _attn(**kw):
    base = dict(batch=8, heads=32, kv_heads=8, seq_q=1, seq_kv=PAST + 1, dk=128, dv=128, causal=True,
                q_bytes=2.0, kv_bytes=2.0, peak=989.4e12, eff_unit=H100.efficiency["tensor"],
                sfu_ops_per_s=H100.sfu_ops_per_s, alu_ops_per_s=H100.cuda_flops_per_s["fp32"] / 2,
                decode=True, dram_bytes=2 * 8 * 8 * (PAST + 1) * 128 * 2.0)
    return attn_model.Attn(**{**base, **kw})


@pytest.mark.parametrize("kw", [{}, {"heads": 8}, {"seq_q": 512, "seq_kv": PAST + 512, "decode": False}])
def test_candidate_is_the_listed_one_of_that_name(kw):
    # decode (grouped MMA kernel), decode (one query head per KV head: the per-head kernel), prefill
    a, hw = _attn(**kw), hw_params(H100)
    listed = attn_model.candidates(a, HOPPER, hw)
    assert len(listed) >= 2  # a choice to make: every split (decode) or every tile (prefill)
    for like in listed:
        one = attn_model.candidate(a, HOPPER, hw, like)
        assert one == like  # the same sympy expressions in every field, not only the same name


def _decode_graph(layers: int):
    return import_model(llama.build("t-decode", replace(llama.LLAMA_TINY, num_layers=layers), "decode"))


@pytest.mark.parametrize("tiling", [False, True])
def test_memo_changes_no_total_and_shares_timings_across_graphs(tiling):
    one, two = _decode_graph(1), _decode_graph(2)
    memo.clear()
    fresh = estimate(two, H100, dims={"batch": 8}, roofline=not tiling)  # nothing remembered yet
    memo.clear()
    first = estimate(one, H100, dims={"batch": 8}, roofline=not tiling)
    again = estimate(two, H100, dims={"batch": 8}, roofline=not tiling)  # its layer kernels were priced above
    assert again.totals == fresh.totals  # equal sympy expressions: past_seq is free
    assert [p.timing for p in again.kernels] == [p.timing for p in fresh.kernels]
    # the layer's kernels of the 2-layer graph are the very Timings priced for the 1-layer one
    mine = {p.kernel.name: p.timing for p in first.kernels}
    shared = [p for p in again.kernels if p.kernel.name in mine]
    assert len(shared) >= 5
    assert all(p.timing is mine[p.kernel.name] for p in shared)


def test_memo_keys_hardware_by_identity_and_constants():
    g = _decode_graph(1)
    memo.clear()
    base = estimate(g, H100, dims={"batch": 8, "past_seq": 100}, roofline=True)
    floor = H100.efficiency["min_kernel_s"]
    slower = replace(H100, efficiency={**H100.efficiency, "min_kernel_s": 2 * floor})
    other = estimate(g, slower, dims={"batch": 8, "past_seq": 100}, roofline=True)
    # the tiny model's kernels all sit on the launch floor (roofline pricing): twice the floor, twice
    # the step, never the remembered price of the other descriptor
    kernels = len(base.kernels)
    assert float(base.totals["estimate_s"]) == pytest.approx(kernels * floor)
    assert float(other.totals["estimate_s"]) == pytest.approx(kernels * 2 * floor)
    again = estimate(g, H100, dims={"batch": 8, "past_seq": 100}, roofline=True)
    assert again.totals == base.totals


def test_warm_input_plans_are_not_remembered():
    g = _decode_graph(1)
    memo.clear()
    estimate(g, H100, dims={"batch": 1, "past_seq": 16}, warm_inputs=True)
    resident = sum(1 for p in memo._plans.values() if p.resident_bytes or p.resident_bytes_bound)  # noqa: SLF001
    assert resident == 0


def test_topological_order_is_networkx_lexicographic_and_sorted_once(monkeypatch):
    g = _decode_graph(2)
    first = [n.name for n in g.topo_nodes()]
    # the order networkx gives when ready nodes are taken by least insertion index (the old rule)
    assert first == list(nx.lexicographical_topological_sort(g.nx, key=g._order_key))  # noqa: SLF001
    calls = []
    real = ir._lexicographic_order  # noqa: SLF001
    monkeypatch.setattr(ir, "_lexicographic_order", lambda *a: calls.append(1) or real(*a))
    assert [n.name for n in g.topo_nodes()] == first
    assert calls == []  # kept from the first call
    fresh = _decode_graph(2)  # a new Graph sorts its own, to the same order
    assert [n.name for n in fresh.topo_nodes()] == first
    assert calls == [1]


def test_a_cycle_is_still_reported():
    a = ir.Node("a", "Relu", inputs=("y",), outputs=("x",))
    b = ir.Node("b", "Relu", inputs=("x",), outputs=("y",))
    g = ir.Graph("loop", [a, b], {}, (), ())
    with pytest.raises(ValueError, match="cycle"):
        list(g.topo_nodes())


def test_rope_tables_are_the_formula_and_read_only():
    cos, sin = llama._rope_values(10000.0, 4, 3)  # noqa: SLF001
    # inv_freq = 1 / 10000 ** ([0, 2] / 4) = [1, 0.01]; angles row p = [p, 0.01 p, p, 0.01 p]
    assert cos[0].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert sin[2, 1] == np.float32(np.sin(0.02))
    assert cos[1, 2] == np.float32(np.cos(1.0))
    assert cos.dtype == np.float32 and cos.shape == (3, 4)
    assert not cos.flags.writeable  # shared between builds: nobody may write into it
    assert llama._rope_values(10000.0, 4, 3)[0] is cos  # noqa: SLF001


def test_external_rope_tables_keep_shape_and_dtype_only():
    model = llama.build("t-decode", llama.LLAMA_TINY, "decode", weights="external")
    cos = next(t for t in model.graph.initializer if t.name == "model.rotary_emb.cos_cached")
    # [max_pos, head_dim] float32, stored as an external reference of that many bytes, no values
    assert list(cos.dims) == [llama.LLAMA_TINY.max_pos, llama.LLAMA_TINY.head_dim]
    assert cos.data_type == onnx.TensorProto.FLOAT and not cos.raw_data
    length = {e.key: e.value for e in cos.external_data}["length"]
    assert int(length) == llama.LLAMA_TINY.max_pos * llama.LLAMA_TINY.head_dim * 4


def test_estimate_pauses_the_cyclic_gc_and_restores_it(monkeypatch):
    import gc

    from estimator import estimate as estimate_mod

    seen = []
    real = estimate_mod._estimate

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(estimate_mod, "_estimate", spy)
    graph = _decode_graph(1)
    assert gc.isenabled()
    estimate(graph, H100, dims={"batch": 8}, roofline=True)
    assert seen == [False] and gc.isenabled()  # paused inside, enabled again after
    gc.disable()
    try:
        estimate(graph, H100, dims={"batch": 8}, roofline=True)
        assert not gc.isenabled()  # a caller's own pause is kept
    finally:
        gc.enable()
    with pytest.raises(Exception):  # noqa: B017 - any error: the collector is restored on the way out
        estimate(graph, H100, dims={"no_such_dim": 1}, roofline=True)
    assert gc.isenabled()


def test_fusion_equality_of_monomials_needs_no_expansion():
    import sympy

    from passes.fusion_common import same

    b, s = sympy.symbols("b s", integer=True, positive=True)
    assert same(4 * b * s, s * b * 4)  # one canonical form: compared as they are
    assert not same(b * s, 2 * b * s) and not same(b, s)
    assert same(b**2 * s, b * b * s)
    assert same((b + 1) * s, b * s + s)  # not monomials: expanded, (b + 1) s - (b s + s) = 0
    assert same(sympy.Float(0.5) * b, b / 2)  # a float coefficient: expanded too (0.5 b - b/2 = 0)
    assert not same(None, b) and not same(b, None)
