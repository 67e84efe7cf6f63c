"""One GPU's priced serving steps: the decode step and the prefill step of a (sharded) decoder, as the
estimator prices them, lowered once with their dims free so the serving model can price every step it
asks.

- decode: the decode graph, sharded (passes/shard_tp.py): the step's GPU time E_dec(batch, past_seq),
  its attention part E_ctx (kinds attention and movement: the score path and the cache append, which
  grow with the context) and its kernel count;
- prefill: the prefill graph with logits for the last position only (passes/last_token_logits.py),
  sharded: E_pre(batch, seq) and its kernel count;
- pricing: every (batch, past_seq) or (batch, seq) asked is priced as `--dim` prices it, many at once at
  arrays of points, by the one pricing core (estimator/serve/step_points.py; `prefetch` takes the points
  a set of workloads will ask, estimator/serve/serving.py `prefetch`): with tile plans on a GPU that has
  a tile model, else (`tiling=False`, or no tile model) by the roofline of the same core;
- memory inputs: the sharded weights, the KV bytes per token, the activation peak at the framework's
  max tokens per step (estimator/serve/liveness.py).
One price per kernel: these are the totals of the priced kernels, never a second model.

Layer folding (`fold=True`, bundled decoder models): the decoder is built with 1 and with 2
layers; every per-model figure f of the L-layer model is f(1) + (L - 1) x (f(2) - f(1)), i.e. the
1-layer figure weighted 2 - L and the 2-layer one L - 1 (layers that alternate or a dense prefix:
`fold_depths` builds k + p and k + 2p layers for a prefix k and period p). This is exact
for the totals, because identical layers lower to kernels of identical signatures priced identically
(estimate() sums by signature), and for the KV and weight bytes; the activation peak is the 2-layer
graph's (NB: the peak is per layer, except where the lm_head's output dominates). It makes a sweep over
TP sizes cheap: the 80-layer 70B graph takes seconds to build, shard and price, its 2-layer form a
tenth of a second.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

import models
from estimator.errors import UserError
from estimator.estimate import lowered_graph, weight_bytes
from estimator.frontends.onnx_import import import_model
from estimator.ir import Graph
from estimator.precision import apply_precision, check_precision
from estimator.serve.frameworks import Framework
from estimator.serve.liveness import Liveness, cache_tensors, liveness
from estimator.serve.memory import kv_bytes_per_token
from estimator.serve.parallel import Parallelism
from estimator.serve.step_points import StepPoints
from hwdesc import HardwareDescriptor
from passes.last_token_logits import last_token_logits
from passes.shard_tp import shard_tp

CONTEXT_KINDS = ("attention", "movement")  # decode kernels whose time grows with the context


@dataclass(frozen=True)
class Options:
    """How the deployment is priced (everything but the request stream). `tp` is the attention TP;
    `parallel` the whole split (estimator/serve/parallel.py; None: attention TP `tp` alone), its tp
    equal to `tp`."""

    hw: HardwareDescriptor
    tp: int
    precision: str | None
    kv_precision: str | None
    pipeline: str
    framework: Framework
    tiling: bool = True
    parallel: Parallelism | None = None

    def __post_init__(self) -> None:
        if self.parallel is None:
            object.__setattr__(self, "parallel", Parallelism(tp=self.tp))
        elif self.parallel.tp != self.tp:
            raise ValueError(f"Options: tp {self.tp} differs from the parallelism's {self.parallel.label()}")

    def with_tp(self, tp: int) -> Options:
        """These options at attention TP `tp`, the MoE split kept where it still divides (else MoE-TP)."""
        p = self.parallel
        try:
            parallel = replace(p, tp=tp, moe_tp=None)
        except UserError:
            parallel = replace(p, tp=tp, moe_tp=None, ep=None)
        return replace(self, tp=tp, parallel=parallel)


@dataclass
class _Variant:
    """One pair of sharded graphs and the weight its figures carry in the model's total."""

    decode: Graph  # sharded, past_seq and batch free
    prefill: Graph  # sharded, last-token logits
    weight: int


class Steps:
    """Priced steps of one GPU, evaluated lazily and cached per point: a decode step per (batch, past),
    a prefill step per (batch, seq), all priced at arrays of points (see the module doc)."""

    def __init__(self, variants: list[_Variant], opts: Options, decisions: tuple[str, ...],
                 layers: int = 0) -> None:
        self.variants, self.opts, self.decisions, self.layers = variants, opts, decisions, layers
        self._prefill: dict[tuple[int, int], float] = {}
        act = {"batch": 1, "seq": int(opts.framework.max_num_tokens)}
        # each variant's graphs at the deployed precision, re-typed once for all that follows
        typed = [(_retyped(v.decode, opts), _retyped(v.prefill, opts)) for v in variants]
        self._points = _step_points(variants, typed, opts)
        # batch -> past -> (E_dec, E_ctx, kernels) of the decode steps priced at points
        self._dec: dict[int, dict[int, tuple[float, float, int]]] = {}
        # lowered at the activation point, priced when asked
        low = [lowered_graph(pre, opts.hw, None, act, opts.pipeline) for _, pre in typed]
        act_graph, kernels = low[-1][0], low[-1][2].kernels
        self.prefill_kernels = int(self._combine(len(x[2].kernels) for x in low))
        self.weights_bytes = float(self._combine(float(weight_bytes(x[0])) for x in low))
        self.activations: Liveness = liveness(act_graph, kernels)
        kv = [kv_bytes_per_token(dec, None) for dec, _ in typed]
        self.kv_per_token = float(self._combine(kv))
        self.decode_kernels = 0

    def _combine(self, values) -> float:
        return sum(v.weight * x for v, x in zip(self.variants, values, strict=True))

    def prefetch(self, decode=(), prefill=()) -> None:
        """Price, in one pass at arrays of points (estimator/serve/step_points.py), every decode step
        (batch, array of past lengths) and prefill step (batch, seq) asked that is not priced yet."""
        need: list[tuple[int, int]] = []
        for b, ps in decode:  # python numbers (tolist): a search asks the priced points again and again
            row = self._dec.get(int(b), {})
            need.extend((int(b), p) for p in map(int, np.ravel(ps).tolist()) if p not in row)
        need = list(dict.fromkeys(need))
        if need:
            b, p = (np.array(x, dtype=float) for x in zip(*need, strict=True))
            total, ctx, kernels = self._points["decode"].evaluate({"batch": b, "past_seq": p})
            for (bi, pi), t, c, k in zip(need, total.tolist(), ctx.tolist(), kernels.tolist(), strict=True):
                self._dec.setdefault(bi, {})[pi] = (t, c, int(round(k)))
        asked = ((int(b), int(s)) for b, s in prefill)
        need = list(dict.fromkeys(k for k in asked if k not in self._prefill))
        if need:
            b, s = (np.array(x, dtype=float) for x in zip(*need, strict=True))
            total, _, _ = self._points["prefill"].evaluate({"batch": b, "seq": s})
            self._prefill.update({key: float(t) for key, t in zip(need, total, strict=True)})

    def _decode_points(self, batch: int, past, part: int) -> np.ndarray:
        if np.size(past) == 0:
            return np.zeros(np.shape(past))
        self.prefetch(decode=[(batch, past)])
        row = self._dec[int(batch)]
        # the launches at the longest context asked (a past of 1 is a build of its own, see step_points)
        pasts = list(map(int, np.ravel(past).tolist()))
        self.decode_kernels = row[pasts[-1]][2]
        values = np.array([row[p][part] for p in pasts], dtype=float)
        return values.reshape(np.shape(past))

    def decode(self, batch: int, past) -> np.ndarray:
        """E_dec at `batch` over an array (or a number) of past lengths."""
        return self._decode_points(batch, past, 0)

    def decode_context(self, batch: int, past) -> np.ndarray:
        return self._decode_points(batch, past, 1)

    def prefill(self, batch: int, seq: int) -> float:
        key = (batch, seq)
        self.prefetch(prefill=[key])
        return self._prefill[key]


def _retyped(graph: Graph, opts: Options) -> Graph:
    """`graph` at the deployed precision, its KV cache (past inputs, presents) at --kv-precision."""
    g = apply_precision(graph, opts.precision, opts.hw) if opts.precision else graph
    if opts.kv_precision:
        kv = check_precision(opts.kv_precision, opts.hw)
        g = g.with_tensors({n: replace(g.tensors[n], dtype=kv) for n in cache_tensors(g) if n in g.tensors})
    return g


def _step_points(variants: list[_Variant], typed: list[tuple[Graph, Graph]],
                 opts: Options) -> dict[str, StepPoints]:
    """The decode and prefill steps at arrays of points (`typed`: each variant's (decode, prefill)
    graphs at the deployed precision, `_retyped`)."""
    fw = opts.framework.name if opts.framework.custom_allreduce else None

    def step(which: int, dims: tuple[str, ...], kinds: tuple[str, ...]) -> StepPoints:
        graphs = [(t[which], v.weight) for v, t in zip(variants, typed, strict=True)]
        present = {s.name for s in graphs[0][0].free_symbols()}
        return StepPoints(graphs, opts.hw, opts.pipeline, fw, [d for d in dims if d in present], kinds,
                          opts.tiling)

    return {"decode": step(0, ("batch", "past_seq"), CONTEXT_KINDS),
            "prefill": step(1, ("batch", "seq"), ())}


def sharded_variant(decode: Graph, prefill: Graph, tp: int, weight: int = 1) -> tuple[_Variant, tuple]:
    dec = shard_tp(decode, tp)
    pre = shard_tp(last_token_logits(prefill).graph, tp).graph
    return _Variant(dec.graph, pre, weight), dec.decisions


def bundled_config(name: str):
    """(family build function, config, layer count) of a bundled decoder model, or None."""
    base = name.removesuffix("-decode")
    builder = models._BUILDERS.get(base)  # noqa: SLF001  (the registry's builders are partials)
    if not isinstance(builder, partial) or len(builder.args) != 3 \
            or not hasattr(builder.args[1], "num_layers"):
        return None
    _, cfg, _ = builder.args
    return builder.func, cfg, cfg.num_layers


def _layer_kinds(cfg, layers: int) -> list[tuple]:
    """What makes layer i price differently: its attention window and whether its MLP is MoE."""
    window = getattr(cfg, "window", None)
    moe = getattr(cfg, "is_moe_layer", None)
    return [(window(i) if window else -1, moe(i) if moe else False) for i in range(layers)]


def fold_depths(cfg, layers: int, max_period: int = 4) -> list[tuple[int, int]]:
    """(layer count, weight) pairs whose weighted figures are the L-layer model's.

    The layer kinds (window, MoE or dense MLP) repeat with period p after a prefix of k layers (Llama: k 0,
    p 1; gpt-oss's sliding/full alternation: p 2; DeepSeek-V3's 3 dense layers first: k 3). With
    n1 = k + p and n2 = k + 2p layers, f(L) = f(n1) + m (f(n2) - f(n1)), m = (L - n1) / p: weights 1 - m
    and m. No such pattern (or too few layers to gain anything): the model is built whole."""
    kinds = _layer_kinds(cfg, layers)
    for period in range(1, max_period + 1):
        prefix = next((k for k in range(layers) if all(
            kinds[i] == kinds[i + period] for i in range(k, layers - period))), layers)
        n1, n2 = prefix + period, prefix + 2 * period
        if n2 < layers and (layers - n1) % period == 0:
            m = (layers - n1) // period
            return [(n1, 1 - m), (n2, m)]
    return [(layers, 1)]


def model_steps(name: str, opts: Options, fold_layers: bool = True) -> Steps:
    """Steps of a bundled decoder model (prefill and decode graphs built here)."""
    base = name.removesuffix("-decode")
    found = bundled_config(base)
    if found is None or f"{base}-decode" not in models.MODELS:
        raise UserError(f"--serve needs a bundled decoder model with a -decode variant, not {name!r}")
    layers = found[2]
    depths = fold_depths(found[1], layers) if fold_layers else [(layers, 1)]
    variants, decisions = [], ()
    p = opts.parallel
    for n, weight in depths:
        decode, prefill = imported(base, n, p.ep, p.attention_dp, p.tp)
        v, decisions = sharded_variant(decode, prefill, opts.tp, weight)
        variants.append(v)
    return Steps(variants, opts, decisions, layers)


def imported(base: str, layers: int, ep: int = 1, attention_dp: int = 1, tp: int = 1) -> tuple[Graph, Graph]:
    """The (decode, prefill) graphs of bundled model `base` built with `layers` layers and one GPU's MoE
    share under expert parallelism `ep` / attention DP `attention_dp` (Parallelism.config; `tp` only
    checks the split: attention TP is shard_tp's), imported once per process (they do not depend on the
    GPU or the framework; passes never mutate). Remembered by the configuration the graphs are built
    from: the layouts of one MoE share (a dense model at every TP; tp 2, 4, 8 with ep 1) import once."""
    build, cfg, _ = bundled_config(base)
    c = Parallelism(tp=tp, attention_dp=attention_dp, ep=ep).config(replace(cfg, num_layers=layers))
    return _built(base, build, c)


@functools.lru_cache(maxsize=32)
def _built(base: str, build, cfg) -> tuple[Graph, Graph]:
    """`imported`'s graphs of the configuration `cfg` (a frozen DecoderConfig: equal configs, equal
    graphs)."""
    return import_model(build(base + "-decode", cfg, "decode")), import_model(build(base, cfg, "prefill"))
