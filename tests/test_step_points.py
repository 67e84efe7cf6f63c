"""estimator/serve/step_points.py: the orchestration of the serving steps at arrays of points (builds with a
dim bound to 1, the folded variants' weights, the context kinds, the launches) sums the kernels
`estimate()` prices with every dim bound (`--dim batch=B --dim past_seq=P`), under the tile model and
the roofline alike (the pricing itself is one code: tests/test_pricing_core.py); prefetch prices what
serve asks; the report's fusion table cells equal `estimate()` under each strategy."""

from dataclasses import replace

import numpy as np
import pytest

import hwdesc
from estimator.estimate import Result, estimate, group_totals
from estimator.frontends.onnx_import import import_model
from estimator.serve.frameworks import framework
from estimator.serve.memory import plan_memory
from estimator.serve.serving import Workload, prefetch, serve
from estimator.serve.steps import CONTEXT_KINDS, Options, Steps, _retyped, sharded_variant
from models import llama
from passes import STRATEGIES

CFG = replace(llama.LLAMA_TINY, num_layers=4)
HW = hwdesc.load("h100-sxm")
FW = replace(framework("trtllm"), values={**framework("trtllm").values, "max_num_tokens": 64})


def _variant(layers: int, weight: int, tp: int):
    cfg = replace(CFG, num_layers=layers)
    dec = import_model(llama.build("t-decode", cfg, "decode"))
    pre = import_model(llama.build("t", cfg, "prefill"))
    return sharded_variant(dec, pre, tp, weight)[0]


def _steps(tp: int, hw=HW, tiling: bool = True) -> Steps:
    opts = Options(hw, tp, "bf16", None, STRATEGIES["tensorrt"], FW, tiling)
    return Steps([_variant(1, 2 - 4, tp), _variant(2, 4 - 1, tp)], opts, (), 4)  # f(1) + 3 (f(2) - f(1))


def _price(graph, opts: Options, dims) -> Result:
    return estimate(_retyped(graph, opts), opts.hw, dims=dims, pipeline=opts.pipeline,
                    roofline=not opts.tiling,
                    framework=opts.framework.name if opts.framework.custom_allreduce else None)


def _context_part(result: Result):
    groups = group_totals(result, "kind")
    return sum(groups[k]["estimate_s"] for k in CONTEXT_KINDS if k in groups)


class PerPointSteps:
    """The reference: every step priced by estimate() with batch and past_seq (or seq) bound."""

    def __init__(self, steps: Steps) -> None:
        self.steps, self.decode_kernels, self.layers = steps, 0, steps.layers
        self.prefill_kernels = steps.prefill_kernels

    def _at(self, graph_of, dims):
        results = [_price(graph_of(v), self.steps.opts, dims) for v in self.steps.variants]
        return [(v.weight, r) for v, r in zip(self.steps.variants, results, strict=True)]

    def _decode(self, batch, past, part):
        out = []
        for p in np.ravel(past):
            pairs = self._at(lambda v: v.decode, {"batch": int(batch), "past_seq": int(p)})
            self.decode_kernels = sum(w * len(r.kernels) for w, r in pairs)
            out.append(sum(w * float(part(r)) for w, r in pairs))
        return np.array(out).reshape(np.shape(past))

    def decode(self, batch, past):
        return self._decode(batch, past, lambda r: r.totals["estimate_s"])

    def decode_context(self, batch, past):
        return self._decode(batch, past, _context_part)

    def prefill(self, batch, seq):
        pairs = self._at(lambda v: v.prefill, {"batch": int(batch), "seq": int(seq)})
        return sum(w * float(r.totals["estimate_s"]) for w, r in pairs)


@pytest.mark.parametrize(("arch", "tiling"), [("h100-sxm", True), ("b200", False)])  # tile model, roofline
def test_decode_points_equal_estimate_at_bound_dims(arch, tiling):
    steps = _steps(2, hwdesc.load(arch), tiling)
    ref = PerPointSteps(steps)
    batches, pasts = np.array([1, 1, 3, 8, 8]), np.array([5, 40, 17, 1, 63])  # batch 1 and past 1: own builds
    steps.prefetch(decode=[(b, [p]) for b, p in zip(batches, pasts, strict=True)])
    for b, p in zip(batches, pasts, strict=True):
        assert steps.decode(b, p) == pytest.approx(ref.decode(b, p), rel=1e-9)
        assert steps.decode_kernels == ref.decode_kernels  # the launches of that batch's build
        assert steps.decode_context(b, p) == pytest.approx(ref.decode_context(b, p), rel=1e-9)
    for b, s in ((1, 64), (2, 16), (4, 7)):
        assert steps.prefill(b, s) == pytest.approx(ref.prefill(b, s), rel=1e-9)


def test_prefetch_prices_what_serve_asks():
    steps = _steps(2)
    memory = plan_memory(HW, FW, 2, steps.weights_bytes, steps.kv_per_token, steps.activations)
    work = Workload(24, 5, 16)
    prefetch(steps, memory, FW, [work])
    priced = {b: set(row) for b, row in steps._dec.items()}  # noqa: SLF001
    k = 64 // 24  # prompts per prefill step: max_num_tokens // isl = 2
    assert priced[16] == {24, 25, 26, 27}  # the osl - 1 = 4 decode steps at batch 16 (a captured size)
    assert priced[16 - k] == {24 + 5 // 2}  # the decoding requests riding a prefill step, at isl + osl / 2
    before = dict(steps._dec)  # noqa: SLF001
    serve(steps, memory, FW, work, 2)
    assert steps._dec.keys() == before.keys()  # noqa: SLF001  (serve found every step priced)


def test_fusion_table_cells_equal_estimate_under_each_strategy():
    from estimator.report.recommend import Context

    graph = _variant(4, 1, 2).decode
    dims = {"batch": 8, "past_seq": 30}
    base = estimate(graph, HW, precision="bf16", dims=dims, pipeline=STRATEGIES["tensorrt"])
    ctx = Context(graph, HW, base, "bf16", dims, STRATEGIES["tensorrt"], tiling=True)
    for name, pipeline in STRATEGIES.items():
        got = ctx.rerun(pipeline=pipeline).totals
        want = estimate(graph, HW, precision="bf16", dims=dims, pipeline=pipeline).totals
        for cell in ("kernels", "dram_bytes", "bound_s", "estimate_s"):
            assert float(got[cell]) == pytest.approx(float(want[cell]), rel=1e-9), (name, cell)


def _moe_steps(weight_format: str) -> Steps:
    """A 2- and 4-layer gpt-oss-shaped MoE decoder (8 experts, top-4, sliding / full attention
    alternating) folded to 6 layers, its experts stored MXFP4 (weight-only, the small M tiles) or in the
    model's dtype (the 128-row tile)."""
    from models import decoder, named_configs

    base = named_configs.GPT_OSS_20B
    cfg = replace(base, hidden=256, num_heads=4, num_kv_heads=2, ffn=256, vocab=512,
                  moe=replace(base.moe, experts=8, ffn=256, weight_format=weight_format))

    def variant(layers: int, weight: int):
        windows = tuple(16 if i % 2 == 0 else -1 for i in range(layers))
        c = replace(cfg, num_layers=layers, layer_windows=windows)
        dec, pre = (import_model(decoder.build("m" + s, c, mode)) for s, mode in (("-decode", "decode"),
                                                                              ("", "prefill")))
        return sharded_variant(dec, pre, 1, weight)[0]

    opts = Options(HW, 1, "bf16", None, STRATEGIES["tensorrt"], FW, True)
    return Steps([variant(2, 1 - 2), variant(4, 2)], opts, (), 6)  # f(2) + 2 (f(4) - f(2))


@pytest.mark.parametrize("weight_format", ["mxfp4", ""])
def test_moe_serving_steps_price_moe_kernels_as_dim_does(weight_format):
    """One price per kernel (issue 25): the fused MoE kernels of a serving step are priced by the MoE
    plan (pricing/plan.py moe_plan: the grouped GEMM over the active experts), not the streaming model,
    so the step equals the same kernels priced by `--dim batch=B --dim past_seq=P`."""
    steps = _moe_steps(weight_format)
    ref = PerPointSteps(steps)
    # the reference prices its MoE kernels by their grouped GEMM plan (not the streaming model)
    graph = _retyped(steps.variants[0].decode, steps.opts)
    r = estimate(graph, HW, dims={"batch": 16, "past_seq": 40}, pipeline=steps.opts.pipeline)
    moe = [k for k in r.kernels if k.kernel.kind == "moe"]
    assert moe and all(k.kernel.tile.tile.startswith("grouped") for k in moe)
    # batches across the MXFP4 M tiles: 16 x 4 / 8 = 8 rows per expert (16-row tile), 64 x 4 / 8 = 32
    # (48-row tile), 128 x 4 / 8 = 64 (the last, 64)
    batches, pasts = np.array([1, 3, 16, 64, 128]), np.array([5, 17, 40, 1, 63])
    steps.prefetch(decode=[(b, [p]) for b, p in zip(batches, pasts, strict=True)])
    for b, p in zip(batches, pasts, strict=True):
        assert steps.decode(b, p) == pytest.approx(ref.decode(b, p), rel=1e-9), (b, p)
    for b, s in ((1, 64), (2, 16), (4, 7)):
        assert steps.prefill(b, s) == pytest.approx(ref.prefill(b, s), rel=1e-9), (b, s)
