"""Kernel classes: a host descriptor's per-class roofline fraction and per-op cost (schema, price, fit)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hostutil import fixed_cpu, quick_host_yaml, write_yaml
from onnx import TensorProto, helper

import hwdesc
from estimator.cost.registry import Work
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.kernel import lower
from estimator.pricing.price import price
from estimator.truth import host, host_bench, host_classes, ort_runner
from estimator.truth.host_classes import ClassFit, calibration_model, class_of, fit
from hwdesc import HwdescError
from onnxutil import matmul_model


def _fig(value):
    return {"value": value, "source": "test"}


def _classed_cpu(tmp_path, classes):
    data = fixed_cpu()
    data["kernel_classes"] = classes
    return hwdesc.load(str(write_yaml(tmp_path / "c.yaml", data)))


def _add_model(n: int):
    vi = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [n]) for t in ("a", "b", "y")]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"], name="add")], "g", vi[:2], vi[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


# --- schema ----------------------------------------------------------------------------------------------

def test_kernel_classes_are_optional_and_read(tmp_path):
    assert dict(hwdesc.load(str(write_yaml(tmp_path / "a.yaml", fixed_cpu()))).kernel_classes) == {}
    hw = _classed_cpu(tmp_path, {"movement": {"roofline": _fig(0.1), "op_overhead_s": _fig(2e-6)},
                                 "Where": {"roofline": _fig(0.05)}})
    assert dict(hw.kernel_classes["movement"]) == {"roofline": 0.1, "op_overhead_s": 2e-6}
    assert dict(hw.kernel_classes["Where"]) == {"roofline": 0.05}
    assert hw.sources["kernel_classes.movement.roofline"] == "test"
    for name in ("h100-sxm", "b200"):  # bundled GPUs list none: their estimate is unchanged
        assert dict(hwdesc.load(name).kernel_classes) == {}


@pytest.mark.parametrize("classes, message", [
    ({"movement": {"roofline": _fig(1.5)}}, r"kernel_classes.movement.roofline: must be in \(0, 1\]"),
    ({"movement": {"op_overhead_s": _fig(1e-6)}}, "kernel_classes.movement.roofline: missing"),
    ({"movement": {"roofline": _fig(0.5), "speed": _fig(1.0)}}, "kernel_classes.movement.speed: unknown key"),
    ({"movement": {"roofline": _fig(0.5), "op_overhead_s": _fig(5e-3)}},
     "kernel_classes.movement.op_overhead_s: must be in"),
    ({"bad class!": {"roofline": _fig(0.5)}}, "kernel_classes.bad class!: a class is"),
    ({"movement": {"roofline": {"value": 0.5}}}, "kernel_classes.movement.roofline.source"),
    ([1, 2], "kernel_classes: must be a mapping"),
])
def test_bad_kernel_classes_are_one_line(tmp_path, classes, message):
    with pytest.raises(HwdescError, match=message):
        _classed_cpu(tmp_path, classes)


# --- price: estimate = bound / roofline + op_overhead_s -------------------------------------------------

def test_a_listed_kind_is_priced_by_its_class(tmp_path):
    hw = _classed_cpu(tmp_path, {"elementwise": {"roofline": _fig(0.25), "op_overhead_s": _fig(3e-6)}})
    (k,) = estimate(import_model(_add_model(1 << 20)), hw, roofline=True).kernels
    memory = 3 * 4 * 2**20 / 100e9  # a, b and y once at the 100 GB/s peak: 125.8 us
    assert math.isclose(float(k.timing.bound_s), memory, rel_tol=1e-9)  # the bound never changes
    assert math.isclose(float(k.timing.estimate_s), memory / 0.25 + 3e-6, rel_tol=1e-9)
    assert k.timing.limiter == "memory"


def test_unlisted_kinds_keep_the_unit_efficiencies(tmp_path):
    hw = _classed_cpu(tmp_path, {"elementwise": {"roofline": _fig(0.25)}})
    (k,) = estimate(import_model(matmul_model(256, 256, 256, dtype=1)), hw, roofline=True).kernels
    assert math.isclose(float(k.timing.estimate_s), 2 * 256**3 / 200e9 / 0.8 + 5e-7, rel_tol=1e-9)


def test_the_op_type_class_wins_over_the_kind(tmp_path):
    hw = _classed_cpu(tmp_path, {"elementwise": {"roofline": _fig(0.5)}, "Add": {"roofline": _fig(0.1)}})
    work = Work(bytes_read=600_000, bytes_written=400_000)
    bound = 1e6 / 100e9
    # a class without op_overhead_s costs no fixed time (not the global 0.5 us)
    assert math.isclose(float(price(work, hw, kind="elementwise", op="Add").estimate_s), bound / 0.1)
    assert math.isclose(float(price(work, hw, kind="elementwise", op="Mul").estimate_s), bound / 0.5)
    unlisted = price(work, hw, kind="movement", op="Transpose")
    assert math.isclose(float(unlisted.estimate_s), bound / 0.5 + 5e-7)


def test_class_of_separates_where_from_its_kind():
    assert class_of("elementwise", "Where") == "Where"
    assert class_of("elementwise", "Add") == "elementwise"


# --- the fit ------------------------------------------------------------------------------------------

def test_fit_recovers_a_known_line():
    bounds = [1e-6, 4e-6, 2e-5, 1e-4, 1e-3]
    pairs = [(b, b / 0.4 + 2e-6) for b in bounds]
    roofline, overhead = fit(pairs)
    assert roofline == pytest.approx(0.4) and overhead == pytest.approx(2e-6)


def test_fit_never_beats_the_bound_and_never_goes_negative():
    # measured below bound/1 on large kernels (noise): roofline clipped to 1, overhead refitted >= 0
    roofline, overhead = fit([(1e-4, 0.9e-4), (1e-3, 0.95e-3), (1e-5, 1.2e-5)])
    assert roofline == 1.0 and overhead >= 0
    # pure rate (no fixed cost): overhead 0, slope through the origin
    roofline, overhead = fit([(1e-6, 2e-6), (1e-5, 2e-5), (1e-4, 2e-4)])
    assert overhead == pytest.approx(0.0, abs=1e-12) and roofline == pytest.approx(0.5)


def test_calibration_network_runs_and_covers_the_transformer_kinds():
    model, feeds = calibration_model(32, 16, layers=2)
    (y,) = ort_runner.session(model.SerializeToString()).run(None, feeds)
    assert y.shape == (32, 16) and np.isfinite(y).all()
    kernels = lower(import_model(model)).kernels
    assert len(kernels) == len(model.graph.node)  # every node prices as one kernel
    classes = {class_of(k.kind, k.nodes[0].op_type) for k in kernels}
    assert classes == {"matmul", "elementwise", "Where", "norm", "movement", "reduction"}


def test_calibration_writes_classes_that_round_trip(tmp_path):
    hw = hwdesc.load(str(quick_host_yaml()))
    assert {"matmul", "elementwise", "movement", "norm"} <= set(hw.kernel_classes)
    for figures in hw.kernel_classes.values():
        assert 0 < figures["roofline"] <= 1 and 0 <= figures.get("op_overhead_s", 0) < 1e-3
    # and a descriptor written from made-up fits reads back with the same figures
    from test_host import _figures
    fits = {"matmul": ClassFit(0.8, 2e-6, 12, 0.05), "movement": ClassFit(0.1, 0.0, 9, 0.2)}
    path = tmp_path / "h.yaml"
    path.write_text(host.descriptor_yaml(_figures(), host_bench.FULL, fits))
    classes = hwdesc.load(str(path)).kernel_classes
    assert dict(classes["matmul"]) == {"roofline": 0.8, "op_overhead_s": 2e-6}
    assert dict(classes["movement"]) == {"roofline": 0.1}  # a zero overhead is left out
    assert host_classes.OWN_CLASS_OPS == ("Where",)
