"""The one pricing core (estimator/pricing/plan.py, price.py over estimator/symmath.py's operations) on
each number type: python floats, numpy arrays of points and sympy expressions give the same number at
the same point; hand-worked stream, roofline and GEMM prices on h100-sxm."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import sympy

import hwdesc
from estimator import symmath as sm
from estimator.cost.registry import CUDA, TENSOR, Work
from estimator.ir import dim
from estimator.pricing import gemm as gemm_model
from estimator.pricing import plan as tp
from estimator.pricing.menu import menu_for
from estimator.pricing.points import NO_RESIDENCY, PointWork, plan_gemms
from estimator.pricing.price import price
from estimator.pricing.units import dominant

H100 = hwdesc.load("h100-sxm")
EFF = H100.efficiency
SEQ = dim("seq")


def _c(time, t_compute, **kw):
    return SimpleNamespace(time=time, t_compute=t_compute, **kw)


def test_argmin_takes_the_fastest_then_least_compute_then_first_on_numbers_and_arrays():
    # point 0: 2 < 3; point 1: a tie at 5 goes to the least t_compute (1); point 2: full tie, the first
    times = [[3.0, 5.0, 4.0], [2.0, 5.0, 4.0]]
    computes = [[0.0, 2.0, 1.0], [0.0, 1.0, 1.0]]
    arrays = [_c(np.array(t), np.array(c)) for t, c in zip(times, computes, strict=True)]
    assert list(sm.argmin(arrays)) == [1, 1, 0]
    for i in range(3):  # the same rule point by point on python numbers
        assert sm.argmin([_c(t[i], c[i]) for t, c in zip(times, computes, strict=True)]) == [1, 1, 0][i]
    # times equal to 1e-15 s tie (floating-point noise), then the least t_compute wins
    assert sm.argmin([_c(1e-6 + 1e-17, 0.0), _c(1e-6, 1.0)]) == 0


def test_pick_gathers_each_points_winner():
    cands = [_c(np.array([1.0, 9.0]), 0.0, split=1, name="a"),
             _c(np.array([5.0, 2.0]), 0.0, split=4, name="b")]
    best = sm.pick(cands, sm.argmin(cands))
    assert list(best.time) == [1.0, 2.0]
    assert list(best.split) == [1.0, 4.0]
    assert list(best.name) == ["a", "b"]
    assert sm.pick(cands, 1) is cands[1]  # an int index: the candidate itself


def test_dominant_names_the_largest_term_per_point():
    terms = {"compute": np.array([3.0, 1.0, 2.0]), "memory": np.array([1.0, 4.0, 2.0]), "launch": 1.5}
    assert list(dominant(terms)) == ["compute", "memory", "compute"]  # a tie goes to the first listed
    assert dominant({"compute": 3.0, "memory": 1.0, "launch": 1.5}) == "compute"


def _stream_by_hand(n: float) -> tuple[float, float]:
    """(bound, estimate) of an elementwise kernel over n fp32 elements: n CUDA-core FLOPs, 4n bytes read
    and 4n written, on h100-sxm (estimator/pricing/plan.py's streaming model, composed by price)."""
    compute = n / (66.9e12 * EFF["cuda"])
    memory = max(8 * n / (3.35e12 * EFF["dram"]), 8 * n / (12.39e12 * EFF["l2"]))  # DRAM: the slower
    fixed = EFF["launch_s"] + EFF["mem_latency_s"]  # 1.8 us + 0.83 us
    bound = max(n / 66.9e12, 8 * n / 3.35e12)
    return bound, max(fixed + max(compute, memory), bound)


def _stream_timing(work):
    return price(work, H100, tp.stream_plan(work, H100, NO_RESIDENCY))


def test_stream_price_by_hand_on_floats_arrays_and_sympy():
    n = SEQ * 4096
    symbolic = _stream_timing(Work({(CUDA, "fp32"): n}, 4 * n, 4 * n))
    points = np.array([1000.0, 8192.0])
    arrays = _stream_timing(PointWork({(CUDA, "fp32"): points * 4096}, 8 * points * 4096))
    for i, seq in enumerate(points):
        bound, est = _stream_by_hand(seq * 4096)
        floats = _stream_timing(PointWork({(CUDA, "fp32"): seq * 4096}, 8 * seq * 4096))
        assert floats.estimate_s == pytest.approx(est, rel=1e-12)
        assert floats.bound_s == pytest.approx(bound, rel=1e-12)
        assert arrays.estimate_s[i] == floats.estimate_s and arrays.bound_s[i] == floats.bound_s  # one code
        assert arrays.limiter[i] == floats.limiter == "memory"
        at = float(symbolic.estimate_s.subs(SEQ, int(seq)))
        assert at == pytest.approx(floats.estimate_s, rel=1e-12)
        bound_dims = _stream_timing(Work({(CUDA, "fp32"): int(seq) * 4096}, 4 * int(seq) * 4096,
                                         4 * int(seq) * 4096))
        assert isinstance(bound_dims.estimate_s, sympy.Basic)  # a Work of bound dims stays sympy
        assert float(bound_dims.estimate_s) == pytest.approx(floats.estimate_s, rel=1e-12)


def test_roofline_price_by_hand_on_floats_and_arrays():
    # a 4096^3 bf16 GEMM without a plan: compute-bound, 2 * 4096^3 FLOPs at the bf16 peak x `tensor`
    flops, nbytes = 2 * 4096.0**3, 3 * 2 * 4096.0**2
    floats = price(PointWork({(TENSOR, "bf16"): flops}, nbytes), H100)
    assert floats.bound_s == pytest.approx(flops / 989.4e12, rel=1e-12)
    assert floats.estimate_s == pytest.approx(flops / (989.4e12 * EFF["tensor"]), rel=1e-12)
    assert floats.limiter == "compute"
    arrays = price(PointWork({(TENSOR, "bf16"): np.array([flops, 2.0])}, np.array([nbytes, 6.0])), H100)
    assert arrays.estimate_s[0] == floats.estimate_s
    assert arrays.estimate_s[1] == EFF["min_kernel_s"] and arrays.limiter[1] == "launch"  # a tiny kernel
    sym = price(Work({(TENSOR, "bf16"): 2 * 4096**3}, 2 * 2 * 4096**2, 2 * 4096**2), H100)
    assert float(sym.estimate_s) == pytest.approx(floats.estimate_s, rel=1e-12)


def _gemm(m, n=4096, k=4096):
    return gemm_model.Gemm(1, m, n, k, 2.0, 2.0, 2.0, 989.4e12, EFF["tensor"],
                           dram_bytes=2 * (m * k + k * n + m * n))


def _gemm_plan(m):
    return tp.gemm_plan(_gemm(m), (TENSOR, "bf16"), None, H100, tp.hw_params(H100), menu_for(H100.family),
                        NO_RESIDENCY)


def test_gemm_plan_is_one_code_on_floats_arrays_and_sympy():
    ms = [1.0, 8.0, 64.0, 300.0, 4096.0, 16384.0]
    arrays = _gemm_plan(np.array(ms))
    for i, m in enumerate(ms):  # each point takes its own tile, exactly as a float GEMM of that M
        alone = _gemm_plan(m)
        assert arrays.tile[i] == alone.tile
        assert arrays.estimate_s[i] == alone.estimate_s
        assert arrays.limiter[i] == alone.limiter
        assert arrays.parts["launch"][i] == alone.parts["launch"]
    # free M: the tile chosen at SYMBOLIC_DIM_VALUE (4096), its formula kept symbolic
    m = dim("m")
    sym = _gemm_plan(m)
    assert sym.tile == _gemm_plan(4096.0).tile
    assert float(sympy.sympify(sym.estimate_s).subs(m, 4096)) == pytest.approx(_gemm_plan(4096.0).estimate_s,
                                                                               rel=1e-12)


def test_gemm_plan_by_hand_at_4096_cubed():
    p = _gemm_plan(4096.0)
    rows, cols = (int(x) for x in p.tile.split()[0].split("x")[:2])
    split = int(p.tile.split("splitK")[1]) if "splitK" in p.tile else 1
    assert p.ctas == math.ceil(4096 / rows) * math.ceil(4096 / cols) * split  # tiles x splits
    fixed = EFF["launch_s"] + EFF["mem_latency_s"] + (EFF["split_k_s"] if split > 1 else 0)
    assert p.parts["launch"] == fixed
    assert p.estimate_s == pytest.approx(fixed + max(p.parts["compute"], p.parts["memory"]), rel=1e-12)
    # a compute-bound GEMM: never faster than its MMA work at the achievable tensor rate
    assert p.limiter == "compute" and p.parts["compute"] >= 2 * 4096**3 / (989.4e12 * EFF["tensor"])
    # priced: the plan's estimate, never below the bound (here well above it)
    t = price(PointWork({(TENSOR, "bf16"): 2 * 4096.0**3}, 3 * 2 * 4096.0**2), H100, p)
    assert t.estimate_s == p.estimate_s and t.bound_s == pytest.approx(2 * 4096**3 / 989.4e12, rel=1e-12)


def test_price_keeps_the_estimate_at_or_above_the_bound_on_arrays():
    plan = tp.TilePlan("gemm", "t", None, None, None, None, np.array([1e-6, 1.0]),
                       {"compute": np.array([1e-6, 1.0])}, "compute")
    work = PointWork({(TENSOR, "bf16"): np.array([989.4e12 * 5e-6, 1.0])}, np.array([1.0, 1.0]))
    t = price(work, H100, plan)
    assert list(t.bound_s) == pytest.approx([5e-6, 1 / 3.35e12])
    assert list(t.estimate_s) == pytest.approx([5e-6, 1.0])  # point 0: the bound; point 1: the plan


def test_alike_gemms_planned_together_equal_each_alone():
    small, big = _gemm(np.array([1.0, 300.0])), _gemm(np.array([64.0, 4096.0, 16384.0]))
    together = plan_gemms([(small, 2), (big, 3)], H100)
    for joined, g in zip(together, (small, big), strict=True):
        alone = tp.gemm_plan(g, None, None, H100, tp.hw_params(H100), menu_for(H100.family), NO_RESIDENCY)
        assert list(joined.estimate_s) == list(alone.estimate_s)
        assert list(joined.tile) == list(alone.tile)
