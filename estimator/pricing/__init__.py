"""Pricing: every kernel's bound and estimate, written once over number types (python numbers, numpy
arrays of points, sympy expressions: the operations of estimator/symmath.py).

- units.py: an execution unit's peak and efficiency, the limiter (`dominant`): the lowest module here;
- gemm.py, attention.py (+ menu, tmem, pick, decode_launch, quant, l2, residency, problem): the tile
  model of one kernel's candidates;
- plan.py: the tiling step: a TilePlan per kernel, the tile chosen by symmath.argmin over the menu;
- collectives.py: the collective model; price.py: `price(work, hw, plan)`, the Timing;
- points.py: a lowered graph's kernels at arrays of points, through plan.py and price.py (sweeps and
  serving steps);
- compiled.py: a compiled kernel's figures (--kernel-sass) as the tiling step takes them; memo.py:
  plans and Timings remembered across calls.
"""
