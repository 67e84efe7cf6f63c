"""One price per kernel: a sweep point and `--dim` at the same point must agree, and the free-dim
closed form must equal `--dim` or say which kernels it approximates and by how much.

    python -m tools.check_one_price [--models all|NAME,...] [--arch b200,h100-sxm] [--precision bf16]
                                    [--points 1,7,64,512,1024,4096,8192]

Models: every bundled model (`estimate --list-models`) and the transformers exports hf-llama, hf-gpt2,
hf-bert (models/hf_tiny.py; needs torch and transformers). Per model and GPU: the swept dim (seq, else
past_seq, else batch; the others at their defaults, or 1), the worst relative difference between the
sweep (estimator.study.sweep.Sweeper) and a fresh estimate with every dim bound, for the estimate and
the bound; and the closed form's worst relative error at the same points (0 when exact). Exit 1 when a
sweep point is off by more than 1e-6.

    python -m tools.check_one_price --serve gpt-oss-120b,qwen3-235b-a22b [--arch h100-sxm]

`--serve`: the serving steps instead (estimator/serve/steps.py, priced at arrays of points): per model
and GPU the worst relative difference between the decode step at (batch, past_seq) and the prefill step
at (batch, seq) and the same folded graphs priced by `--dim` there (MoE models included: their fused
MoE kernels by the grouped-GEMM MoE plan on both paths).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import hwdesc
import models
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model
from estimator.study.closed_form import closed_form
from estimator.study.sweep import Sweeper
from passes import DEFAULT_STRATEGY, pipeline_for

HF = ("hf-llama", "hf-gpt2", "hf-bert")
TOL = 1e-6


def load(name: str, tmp: Path):
    if name.startswith("hf-"):
        import onnx

        from models import hf_tiny

        return import_model(onnx.load(str(hf_tiny.export(name[3:], tmp / f"{name}.onnx")))), {}
    spec = models.MODELS[name]
    return import_model(spec.build()), dict(spec.default_dims)


def check(graph, defaults: dict, hw, precision, points: list[int]) -> tuple[str, float, float, float]:
    free = sorted(s.name for s in graph.free_symbols())
    swept = next((d for d in ("seq", "past_seq", "batch") if d in free), free[0])
    fixed = {d: defaults.get(d, 1) for d in free if d != swept}
    pipe = pipeline_for(DEFAULT_STRATEGY, hw.family)

    def build(extra):
        return estimate(graph, hw, precision=precision, dims={**fixed, **extra}, pipeline=pipe)

    sweeper = Sweeper(build)
    pts = sweeper.evaluate({swept: np.array(points, dtype=float)})
    worst_est = worst_bound = 0.0
    for i, v in enumerate(points):
        r = build({swept: v})
        est, bound = float(r.totals["estimate_s"]), float(r.totals["bound_s"])
        worst_est = max(worst_est, abs(float(pts.estimate_s[i]) - est) / est)
        worst_bound = max(worst_bound, abs(float(pts.bound_s[i]) - bound) / bound)
    above = [p for p in points if p > 1]  # a dim of 1 is a build of its own (Sweeper)
    cf = closed_form(sweeper.result, {swept: (min(above), max(above))})
    cf_err = max((abs(e) for _, e in cf.total_rel_error), default=0.0) if cf and not cf.exact else 0.0
    return swept, worst_est, worst_bound, cf_err


SERVE_DECODE = ((1, 100), (16, 1536), (64, 3000), (256, 1))  # (batch, past_seq); a past of 1: own build
SERVE_PREFILL = ((1, 1024), (4, 512))  # (batch, seq)


def check_serve(name: str, hw, precision: str | None = "bf16", decode=SERVE_DECODE,
                prefill=SERVE_PREFILL) -> float:
    """The worst relative difference between model `name`'s serving steps (at arrays of points) and the
    same folded graphs priced by estimate() with every dim bound (TensorRT-LLM, tp 1)."""
    from estimator.serve.frameworks import framework
    from estimator.serve.steps import Options, _retyped, model_steps

    opts = Options(hw, 1, precision, None, pipeline_for(DEFAULT_STRATEGY, hw.family), framework("trtllm"))
    steps = model_steps(name, opts)

    def ref(attr: str, dims: dict) -> float:
        return sum(v.weight * float(estimate(_retyped(getattr(v, attr), opts), hw, dims=dims,
                                             pipeline=opts.pipeline).totals["estimate_s"])
                   for v in steps.variants)

    worst = 0.0
    steps.prefetch(decode=[(b, [p]) for b, p in decode], prefill=list(prefill))
    for b, p in decode:
        want = ref("decode", {"batch": b, "past_seq": p})
        worst = max(worst, abs(float(steps.decode(b, p)) - want) / want)
    for b, s in prefill:
        want = ref("prefill", {"batch": b, "seq": s})
        worst = max(worst, abs(steps.prefill(b, s) - want) / want)
    return worst


def main_serve(names: list[str], arches: list[str], precision: str | None) -> int:
    print(f"precision {precision or 'graph'}; decode (batch, past_seq) {list(SERVE_DECODE)}; "
          f"prefill (batch, seq) {list(SERVE_PREFILL)}")
    print(f"{'model':<20}{'arch':<10}{'steps vs --dim':>16}")
    failed = False
    for name in names:
        for arch in arches:
            worst = check_serve(name, hwdesc.load(arch), precision)
            failed |= worst > TOL
            print(f"{name:<20}{arch:<10}{worst:>16.1e}")
    print(f"serving steps = --dim within {TOL:g} at every point: {'yes' if not failed else 'NO'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="all")
    p.add_argument("--arch", default="b200,h100-sxm")
    p.add_argument("--precision", default=None)
    p.add_argument("--points", default="1,7,64,512,1024,4096,8192")
    p.add_argument("--serve", default=None, help="bundled decoder models: check the serving steps instead")
    args = p.parse_args(argv)
    if args.serve:
        return main_serve(args.serve.split(","), args.arch.split(","), args.precision or "bf16")
    names = ([s.name for s in models.list_models()] + list(HF)) if args.models == "all" \
        else args.models.split(",")
    points = [int(v) for v in args.points.split(",")]
    print(f"precision {args.precision or 'graph'}; points {points}")
    print(f"{'model':<20}{'arch':<10}{'dim':<10}{'sweep vs --dim':>16}{'bound':>10}{'closed form':>13}")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            graph, defaults = load(name, Path(tmp))
            if not graph.free_symbols():
                continue
            for arch in args.arch.split(","):
                swept, est, bound, cf = check(graph, defaults, hwdesc.load(arch), args.precision, points)
                failed |= est > TOL or bound > TOL
                print(f"{name:<20}{arch:<10}{swept:<10}{est:>16.1e}{bound:>10.1e}{cf:>12.1%}")
    print(f"sweep = --dim within {TOL:g} at every point: {'yes' if not failed else 'NO'}; closed form: worst "
          f"|total error| over the points' range (0: exact; else `--symbolic` lists the kernels)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
