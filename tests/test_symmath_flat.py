"""tiling/symmath.py's flat mode: Max/Min/ceiling/floor over many unknown dims built without sympy's
pairwise simplification, with the same value at every point (issue 11: pricing that cannot blow up)."""

import sys
from pathlib import Path

import pytest
import sympy

import hwdesc
from estimator.estimate import estimate
from estimator.price import provably_greater
from estimator.tiling import symmath as sm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import bench_unknown_dims  # noqa: E402

x, y = sympy.symbols("x y", integer=True, positive=True)


def test_flat_only_above_the_dim_budget():
    with sm.flat_symbolic(sm.SIMPLIFY_MAX_DIMS) as on:
        assert not on and not sm.flat()
    with sm.flat_symbolic(sm.SIMPLIFY_MAX_DIMS + 1) as on:
        assert on and sm.flat()
    assert not sm.flat()  # reset on leaving the block


def test_flat_max_flattens_folds_and_dedupes():
    with sm.flat_symbolic(100):
        m = sm.maximum(x, 2, sm.maximum(3, x), y)
        # Max(x, 2, Max(3, x), y) -> the numbers 2 and 3 fold into 3, x appears once: Max(x, y, 3)
        assert isinstance(m, sympy.Max) and set(m.args) == {x, y, sympy.Integer(3)}
        assert sm.maximum(x, x) == x
        assert set(sm.minimum(x, 5, 7).args) == {x, sympy.Integer(5)}  # min(5, 7) = 5
        c = sm.ceil(x / 128)
        assert isinstance(c, sympy.ceiling)
        assert sm.floor_div(x, 4) == sympy.floor(x / 4, evaluate=False)
        # Substituting numbers evaluates: max(100, 7, 3) = 100; ceiling(300 / 128) = 3
        assert m.xreplace({x: 100, y: 7}) == 100
        assert c.xreplace({x: 300}) == 3
        assert not provably_greater(2 * x, x)  # flat: symbolic comparisons answer "unknown"
    assert provably_greater(2 * x, x)  # outside: sympy is asked (2x - x = x > 0)


def test_floor_div_on_numbers_is_pythons():
    assert sm.floor_div(7, 2) == 3 and sm.floor_div(7.0, 2) == 3.0  # 7 // 2


def _point_totals(result, values):
    return {k: float(sympy.sympify(result.totals[k]).xreplace(values)) for k in ("bound_s", "estimate_s")}


def test_unknown_dims_price_the_same_values_flat_or_not(monkeypatch):
    graph = bench_unknown_dims.to_ir(bench_unknown_dims.build(2, named=False), infer=False)
    unknown = sorted(graph.free_symbols(), key=lambda s: s.name)
    assert len(unknown) > sm.SIMPLIFY_MAX_DIMS  # 2 blocks x 9 tensors x 3 dims, each its own
    hw = hwdesc.load("b200")
    flat = estimate(graph, hw, tiling=True)
    monkeypatch.setattr(sm, "SIMPLIFY_MAX_DIMS", 10_000)
    full = estimate(graph, hw, tiling=True)
    values = {s: 64 if s.name.endswith("_2") else 256 for s in unknown}
    got, want = _point_totals(flat, values), _point_totals(full, values)
    for key in got:
        assert got[key] == pytest.approx(want[key], rel=1e-12)
