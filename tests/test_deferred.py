"""Deferred pricing (estimator/pricing/deferred.py): a tile-planned kernel with free dims keeps its sympy
price, its limiter and the Result's totals until read. Read, they equal what the eager code builds; a
sweep never reads them, and its points still equal `--dim` estimates. Also the lowered-graph memo
(estimator/pricing/memo.py) that lets a family's GPUs share one lowering."""

import dataclasses
import pickle

import numpy as np
import pytest
import sympy

import hwdesc
import models
from estimator.errors import UserError
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.ir import dim
from estimator.pricing import deferred, memo
from estimator.pricing.plan import SYMBOLIC_DIM_VALUE
from estimator.study.sweep import Sweeper
from passes import DEFAULT_PIPELINE


@pytest.fixture(scope="module")
def tiny():
    return import_model(models.MODELS["llama-tiny"].build())


@dataclasses.dataclass(frozen=True)
class _Pair:
    a: int
    b: int = 0


def test_lazy_field_computed_once_when_read_and_a_plain_value_everywhere():
    calls = []

    def b() -> int:
        calls.append(1)
        return 40 + 2

    x = deferred.deferred(_Pair, a=1, b=deferred.Lazy(b))
    assert isinstance(x, _Pair) and calls == []  # built: nothing computed
    assert deferred.is_pending(x, "b") and not deferred.is_pending(x, "a")
    assert x.a == 1 and calls == []
    assert x.b == 42 and x.b == 42 and calls == [1]  # read twice, computed once
    assert not deferred.is_pending(x, "b")
    assert x == _Pair(1, 42) and _Pair(1, 42) == x and x != _Pair(1, 0)
    y = dataclasses.replace(x, a=7)
    assert type(y) is _Pair and y == _Pair(7, 42)  # replace: a plain instance
    assert type(pickle.loads(pickle.dumps(x))) is _Pair  # pickles as the plain value
    assert repr(x) == repr(_Pair(1, 42))
    assert type(deferred.deferred(_Pair, a=1, b=2)) is _Pair  # nothing lazy: the plain class


def test_lazy_mapping_lists_keys_without_computing_values():
    calls = []

    def values() -> dict:
        calls.append(1)
        return {"compute": 1.0, "memory": 2.0}

    m = deferred.LazyMapping(("compute", "memory"), values)
    assert list(m) == ["compute", "memory"] and len(m) == 2 and "memory" in m and "l2" not in m
    assert calls == []
    assert m["memory"] == 2.0 and dict(m) == {"compute": 1.0, "memory": 2.0} and calls == [1]
    per_key = deferred.LazyMapping(("x", "y"), lambda k: k * 2, per_key=True)
    assert per_key["y"] == "yy" and dict(per_key) == {"x": "xx", "y": "yy"}
    assert pickle.loads(pickle.dumps(m)) == {"compute": 1.0, "memory": 2.0}
    with pytest.raises(KeyError):
        per_key["z"]


def _tile_planned(result):
    return [p for p in result.kernels if p.kernel.tile is not None and p.kernel.tile.kind != "stream"]


def test_deferred_prices_equal_the_eager_ones(tiny):
    """Every field a reader can ask for, deferred then read, is the expression the eager code builds."""
    hw = hwdesc.load("h100-sxm")
    memo.clear()
    lazy = estimate(tiny, hw, dims={"batch": 1})
    planned = _tile_planned(lazy)
    assert planned and all(deferred.is_pending(p.timing, "estimate_s") for p in planned)
    memo.clear()  # else the eager call gets the remembered (deferred) plans and Timings back
    with deferred.off():
        eager = estimate(tiny, hw, dims={"batch": 1})
    assert not any(deferred.is_pending(p.timing, "estimate_s") for p in eager.kernels)
    assert len(lazy.kernels) == len(eager.kernels)
    for a, b in zip(lazy.kernels, eager.kernels, strict=True):
        assert a.kernel.signature == b.kernel.signature  # the tile chosen is the same
        for f in ("bound_s", "estimate_s", "limiter", "compute_s", "memory_s"):
            assert getattr(a.timing, f) == getattr(b.timing, f), (a.kernel.name, f)
        assert dict(a.timing.terms) == dict(b.timing.terms), a.kernel.name
        for f in dataclasses.fields(b.kernel.tile):
            assert getattr(a.kernel.tile, f.name) == getattr(b.kernel.tile, f.name), (a.kernel.name, f.name)
    assert dict(lazy.totals) == dict(eager.totals)


def test_deferred_formula_at_the_choice_size_equals_the_dim_estimate(tiny):
    """The tile of a free-dim GEMM is chosen as if seq were SYMBOLIC_DIM_VALUE (4096), so there the
    deferred formula (read now) is the bound-dims estimate exactly: the estimate of --dim seq=4096."""
    hw = hwdesc.load("h100-sxm")
    free = estimate(tiny, hw, dims={"batch": 1})
    bound = estimate(tiny, hw, dims={"batch": 1, "seq": SYMBOLIC_DIM_VALUE})
    at = {dim("seq"): SYMBOLIC_DIM_VALUE}
    for key in ("estimate_s", "bound_s"):
        assert float(sympy.sympify(free.totals[key]).xreplace(at)) == pytest.approx(
            float(bound.totals[key]), rel=1e-12)


def test_a_sweep_reads_no_deferred_price_and_equals_dim_estimates(tiny):
    """The sweep prices tile-planned kernels at its points, as --dim does, without reading their
    symbolic price (left deferred), and each point is the --dim estimate."""
    hw = hwdesc.load("b200")
    memo.clear()
    sweeper = Sweeper(lambda extra: estimate(tiny, hw, dims={"batch": 1, **extra}))
    seqs = [2, 100, 512, 4096]
    pts = sweeper.evaluate({"seq": np.array(seqs)})
    planned = _tile_planned(sweeper.result)
    assert planned and all(deferred.is_pending(p.timing, "estimate_s") for p in planned)
    assert deferred.is_pending(planned[0].kernel.tile, "estimate_s")
    for i, seq in enumerate(seqs):
        ref = estimate(tiny, hw, dims={"batch": 1, "seq": seq})
        assert pts.estimate_s[i] == pytest.approx(float(ref.totals["estimate_s"]), rel=1e-9), seq
        assert pts.bound_s[i] == pytest.approx(float(ref.totals["bound_s"]), rel=1e-9), seq
    # the formulas the sweep left unread, read through group_estimates: at 4096 the tile is the chosen one
    formula, priced = sweeper.compiled.group_estimates({"seq": np.array([float(SYMBOLIC_DIM_VALUE)])})
    want = [float(sympy.sympify(g.timing.estimate_s).xreplace({dim("seq"): SYMBOLIC_DIM_VALUE}))
            for g in sweeper.compiled.groups]
    assert formula[:, 0] == pytest.approx(want, rel=1e-12)
    assert priced[:, 0] == pytest.approx(want, rel=1e-9)


def test_a_family_shares_one_lowering_and_each_gpu_checks_the_precision(tiny):
    memo.clear()
    h100 = estimate(tiny, hwdesc.load("h100-sxm"), precision="bf16", dims={"batch": 1})
    h200 = estimate(tiny, hwdesc.load("h200"), precision="bf16", dims={"batch": 1})
    assert h200.graph is h100.graph  # one lowering for both (dims, precision and pipeline alike)
    # one pipeline for both: the B200's lowering is a hit for the H100, which has no fp4 tensor cores
    b200 = estimate(tiny, hwdesc.load("b200"), precision="nvfp4", dims={"batch": 1, "seq": 8},
                    pipeline=DEFAULT_PIPELINE)
    assert b200.kernels
    with pytest.raises(UserError, match="no nvfp4 tensor cores"):  # a hit checks the GPU at hand
        estimate(tiny, hwdesc.load("h100-sxm"), precision="nvfp4", dims={"batch": 1, "seq": 8},
                 pipeline=DEFAULT_PIPELINE)
