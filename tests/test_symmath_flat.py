"""symmath.py's flat mode: Max/Min/ceiling/floor over many unknown dims built without sympy's
pairwise simplification, with the same value at every point (issue 11: pricing that cannot blow up)."""


import pytest
import sympy

import hwdesc
from estimator import symmath as sm
from estimator.estimate import estimate
from estimator.pricing.price import provably_greater
from tools import bench_unknown_dims

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
    graph = bench_unknown_dims.to_ir(bench_unknown_dims.build(2, named=False), infer=False,
                                     unify=False)  # every dim its own: the flat path
    unknown = sorted(graph.free_symbols(), key=lambda s: s.name)
    assert len(unknown) > sm.SIMPLIFY_MAX_DIMS  # 2 blocks x 9 tensors x 3 dims, each its own
    hw = hwdesc.load("b200")
    flat = estimate(graph, hw)
    monkeypatch.setattr(sm, "SIMPLIFY_MAX_DIMS", 10_000)
    full = estimate(graph, hw)
    values = {s: 64 if s.name.endswith("_2") else 256 for s in unknown}
    got, want = _point_totals(flat, values), _point_totals(full, values)
    for key in got:
        assert got[key] == pytest.approx(want[key], rel=1e-12)


# ---- the per-kernel constant over unknown dims (issue 11): one canonical form, one renaming ----------

a, b, c = sympy.symbols("a b c", integer=True, positive=True)


def test_flat_sum_folds_numbers_and_flattens_without_sorting():
    with sm.flat_symbolic(100):
        s = sm.sym_sum([x + 2, 3, y * 4, sympy.Float(0.5)])
        # (x + 2) + 3 + 4y + 0.5: the nested sum is flattened, 2 + 3 + 0.5 folds into 5.5
        assert isinstance(s, sympy.Add) and set(s.args) == {x, 4 * y, sympy.Float(5.5)}
        assert s.xreplace({x: 10, y: 100}) == pytest.approx(10 + 400 + 5.5)
        assert sm.sym_sum([x]) == x and sm.sym_sum([]) == 0 and sm.sym_sum([2, 3]) == 5
    assert sm.sym_sum([x, x, 1]) == 2 * x + 1  # outside: sympy's Add (x + x collects into 2x)


def test_canonical_is_walked_once_per_block_and_renames_by_first_seen_order():
    sig = ((a, b, 64), "fp32", (b, c))
    with sm.flat_symbolic(100):
        key, to_actual = sm.canonical(sig)
        assert sm.canonical(((a, b, 64), "fp32", (b, c))) == (key, to_actual)  # an equal obj: the same
        assert sm.canonical(((a, b, 64), "fp32", (b, c)))[1] is to_actual  # ... mapping object
        to_canon = {actual: canon for canon, actual in to_actual.items()}
        c0, c1, c2 = to_canon[a], to_canon[b], to_canon[c]
        assert [s.name for s in (c0, c1, c2)] == ["_canon0", "_canon1", "_canon2"]
        assert key == ((c0, c1, 64), "fp32", (c1, c2))
        assert c0.is_integer and c0.is_positive  # the actual symbol's assumptions
        other = sm.canonical(((c, a, 64), "fp32", (a, b)))  # alike up to a renaming: the same key
        assert other[0] == key
    assert sm.canonical(sig)[1] is not to_actual  # outside a block: walked afresh


def test_renamed_values_share_the_subtrees_their_canonical_forms_share():
    # A plan and the Timing built on it, as estimate() stores them: keyed by the same signature, the
    # Timing's expression holding the plan's. Renamed to a second kernel's dims, the Timing's copy of the
    # shared subtree is the very object the plan's renaming built (built once, not twice).
    cache: dict = {}
    with sm.flat_symbolic(100):
        plan1 = sm.renamed(cache, (a, b), lambda: sm.ceil(a / 128) * sm.ceil(b / 64), "plan")
        sm.renamed(cache, (a, b), lambda: sm.maximum(plan1 + a, a * b), "timing")
        plan2 = sm.renamed(cache, (c, a), lambda: pytest.fail("a hit"), "plan")
        timing2 = sm.renamed(cache, (c, a), lambda: pytest.fail("a hit"), "timing")
        assert plan2 == sympy.ceiling(c / 128) * sympy.ceiling(a / 64)  # a -> c, b -> a
        assert any(t is plan2 for t in sympy.preorder_traversal(timing2))  # the same object, built once
        # max(ceil(300 / 128) * ceil(100 / 64) + 300, 300 * 100) = max(3 * 2 + 300, 30000)
        assert timing2.xreplace({c: 300, a: 100}) == 30000
        assert timing2.xreplace({c: 300, a: 1}) == 3 * 1 + 300  # max(3 * ceil(1 / 64) + 300, 300)


def test_rebuilt_rounding_functions_equal_sympys():
    e = sm.rename(sympy.ceiling(a / 128) + sympy.floor(a * b / 7), {a: c})
    f = next(t for t in e.args if isinstance(t, sympy.ceiling))
    want = sympy.ceiling(c / 128)
    assert f == want and hash(f) == hash(want) and f.nargs == want.nargs and f.is_integer
    # NB: the renamed product keeps its argument order (b*c rebuilt as c*b): equal values, not forms
    assert e.xreplace({c: 300, b: 7}) == 3 + 300  # ceil(300 / 128) = 3, floor(300 * 7 / 7) = 300


def test_flat_and_full_pricing_never_share_a_remembered_timing(monkeypatch):
    # the cross-call memo (pricing/memo.py) keys on flat(): the same kernels priced flat and not are built
    # in different forms, and a full pricing must not be handed a flat one
    graph = bench_unknown_dims.to_ir(bench_unknown_dims.build(1, named=False), infer=False,
                                     unify=False)
    hw = hwdesc.load("b200")
    flat = estimate(graph, hw)
    monkeypatch.setattr(sm, "SIMPLIFY_MAX_DIMS", 10_000)
    full = estimate(graph, hw)
    again = estimate(graph, hw)
    assert all(p.timing is not q.timing for p, q in zip(flat.kernels, full.kernels, strict=True))
    assert all(p.timing is q.timing for p, q in zip(full.kernels, again.kernels, strict=True))  # remembered


def test_round_numbers_rounds_in_place_without_re_simplifying():
    """JSON's closed forms (report.table.jsonable): numbers rounded to 6 digits, the Max kept as built
    (evalf would rebuild it and re-run sympy's pairwise simplification), the same value at a point."""
    import sympy

    from estimator.report.table import jsonable
    from estimator.symmath import round_numbers

    x, y = sympy.symbols("x y", positive=True)
    e = sympy.Max(sympy.Float("1.23456789") * x, sympy.Rational(1, 3) * y, evaluate=False)
    r = round_numbers(e, 6)
    assert r.func is sympy.Max and sorted(str(a) for a in r.args) == ["0.333333*y", "1.23457*x"]
    assert abs(float(r.subs({x: 2, y: 9})) - 3.0) < 1e-5
    assert jsonable(e) == str(r)
