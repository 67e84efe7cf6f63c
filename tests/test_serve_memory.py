"""estimator/serve/memory.py and liveness.py: KV bytes per token, the framework budget rules, liveness."""

import pytest
import sympy
from onnx import TensorProto, helper

import hwdesc
import models
from estimator.frontends.onnx_import import import_model
from estimator.ir import bind
from estimator.kernel import lower
from estimator.serve.frameworks import device_memory_bytes, framework
from estimator.serve.liveness import Liveness, liveness
from estimator.serve.memory import kv_bytes_per_token, plan_memory
from passes.shard_tp import shard_tp

H100 = hwdesc.load("h100-sxm")


def test_kv_bytes_per_token_follow_heads_and_precision():
    g = import_model(models.build("llama-tiny-decode"))  # 2 layers, 2 kv heads, head_dim 16, fp32
    assert kv_bytes_per_token(g, None) == 2 * 2 * 2 * 16 * 4  # (k, v) x layers x kv heads x d x fp32
    assert kv_bytes_per_token(shard_tp(g, 2).graph, None) == 2 * 2 * 1 * 16 * 4  # ceil(2/2) kv heads
    assert kv_bytes_per_token(g, "fp8e4m3") == 2 * 2 * 2 * 16 * 1  # --kv-precision fp8: 1 byte


def test_trtllm_budget_is_a_fraction_of_the_free_memory():
    fw = framework("trtllm")
    mem = plan_memory(H100, fw, 1, 16.0e9, 131072.0, Liveness(sympy.Float(1.0e9), "k", ()))
    device = 85.52e9  # 81559 MiB, device_memory.yaml
    assert device_memory_bytes(H100) == device
    non_kv = 16.0e9 + 1.0e9 + 0 + 3.758e9  # weights + activations + comm (tp 1) + reserve
    assert mem.kv_budget_bytes == pytest.approx((device - non_kv) * 0.9)
    tokens = int((device - non_kv) * 0.9 // 131072)  # 444,685
    assert mem.kv_capacity_tokens == tokens - tokens % 32 == 444672  # whole blocks of 32
    assert mem.tokens_per_sequence(1024, 512) == 1536  # reserved whole: isl + osl
    assert mem.max_concurrency(1024, 512) == 444672 // 1536 == 289
    assert mem.longest_context(8) == 444672 // 8 - (444672 // 8) % 32 == 55584
    assert mem.fits(1024, 512)


def test_vllm_budget_is_a_fraction_of_the_total():
    mem = plan_memory(H100, framework("vllm"), 2, 40.0e9, 65536.0, Liveness(sympy.Float(0.5e9), None, ()))
    non_kv = 40.0e9 + 0.5e9 + 342.0e6 + 3.758e9  # comm buffers at tp 2: 342 MB
    assert mem.kv_budget_bytes == pytest.approx(85.52e9 * 0.9 - non_kv)
    assert mem.tokens_per_sequence(1000, 101) == 1056  # on demand: 1000 + ceil(101/2) = 1051 -> blocks of 16


def test_a_model_larger_than_the_gpu_does_not_fit():
    mem = plan_memory(H100, framework("trtllm"), 1, 141.0e9, 327680.0, Liveness(sympy.Float(1e9), None, ()))
    assert mem.kv_budget_bytes < 0 and mem.kv_capacity_tokens == 0 and not mem.fits(2048, 256)


def _chain_model():
    # x[4, 256] -> Relu -> a -> Relu -> b ; Add(a, b) -> c ; Relu(c) -> y   (fp32, 4 KiB per tensor)
    def vi(n):
        return helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 256])

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r1"),
        helper.make_node("Relu", ["a"], ["b"], name="r2"),
        helper.make_node("Add", ["a", "b"], ["c"], name="add"),
        helper.make_node("Relu", ["c"], ["y"], name="r3"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "chain", [vi("x")], [vi("y")]), opset_imports=[helper.make_opsetid("", 18)]
    )


def test_liveness_peak_and_its_kernel():
    g = import_model(_chain_model())
    lv = liveness(g, lower(g).kernels)
    t = 4 * 256 * 4  # one tensor: 4 KiB
    # at r2: x (read by r1 only, freed after r1), a, b live -> 2 tensors; at add: a, b, c -> 3 tensors
    assert lv.peak_bytes == 3 * t and lv.peak_kernel == "add" and lv.live_tensors == ("a", "b", "c")


def test_liveness_excludes_the_kv_cache_and_stays_symbolic():
    g = import_model(models.build("llama-tiny-decode"))
    k = lower(g).kernels
    lv = liveness(g, k)
    assert not any(n.startswith(("present", "past")) for n in lv.live_tensors)
    bound = liveness(bind(g, {"batch": 2, "past_seq": 7}), k)
    assert bound.peak_bytes.is_number and bound.peak_bytes == lv.peak_bytes.subs(
        {s: {"batch": 2, "past_seq": 7}[s.name] for s in lv.peak_bytes.free_symbols}
    )


def test_a_symbolic_activation_peak_is_a_refusal_not_a_traceback():
    """An activation peak that shape inference left in unknown dims (e.g. `unk__1`) cannot be planned: a
    UserError naming the dims (one `error:` line; a deployment search keeps it as the layout's reason)."""
    from estimator.errors import UserError

    hw, fw = H100, framework("trtllm")
    unknown = Liveness(4096 * sympy.Symbol("unk__1", integer=True, positive=True), None, ())
    with pytest.raises(UserError, match="unk__1 unresolved"):
        plan_memory(hw, fw, 1, 1e9, 1e5, unknown)
    planned = plan_memory(hw, fw, 1, 1e9, 1e5, Liveness(sympy.Integer(4096), None, ()))
    assert planned.activations_bytes == 4096.0
