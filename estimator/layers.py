"""The layers of the code, lowest first: an import only goes down this list (or stays in its layer), at
module level, inside a function or under `if TYPE_CHECKING:` alike, and no import makes a cycle, within a
layer or a package included. tests/test_layers.py reads the imports with `ast` and holds the code to it.

Each layer names module prefixes: a prefix is the module itself and every module under it, the longest
prefix naming a module wins, and `X.__init__` names the package X alone (not its modules). A module that
no layer names fails the test: a new top-level module or package is placed here when it is written. A
prefix may name what does not exist yet (`estimator.calibration`; `tools` while it is no package).

Why this order (the code's own dependencies, not only the design sketch's list):
- core: leaves and the IR. `symmath` (the number-type arithmetic), `ops` (op kind sets) and `textfit`
  (tables fitted to the terminal, SI prefixes: for the text of every layer) import nothing of the
  project; `gc_pause` is a process utility the entry points use; `version` (the tool's and the JSON
  schema's version, stamped on every JSON) reads only the installed metadata; `input_limits` (what any
  reader of a user's file takes in) is read by the readers of every layer above (hwdesc, which imports
  nothing of estimator, mirrors the two limits it needs); `jsonout` is the strict JSON writer of every mode.
- hwdesc: a GPU is data; its loader needs only the core.
- inputs: what comes from outside, read without pricing: model graphs (`frontends`) and the bundled
  builders and configs (`models`).
- cost: one op's Work (`cost`), a fused kernel's Work (`fused`) and the lowering of a graph to kernels
  (`kernel`). Nothing here needs a pass: what a fused node is belongs to the IR (`ir.is_fused`).
- passes: graph rewrites before pricing: the pass pipeline, and `--precision` (`precision`, `w8a8`), a
  re-typing of the graph that checks the GPU has tensor cores for it.
- pricing: tile plans, collectives, price.
- estimate: the library's entry points, `estimate()` and `from_torch()` (`estimator/__init__.py` exports
  the latter lazily).
- views: what is asked of many estimates: sweeps and closed forms (`study`), serving (`serve`), runs
  against onnxruntime and the host (`truth`), compiled kernels (`sass`: cuobjdump/nvdisasm output,
  occupancy; the plan `--kernel-sass` hands to pricing is a record of pricing's own,
  `estimator/pricing/compiled.py`, so pricing never reads the sass package).
- report: tables, JSON, HTML, traces, recommendations (their recommenders of serving what-ifs included).
- profile: measured profiles joined with the estimate. Above report, not beside truth as the sketch has
  it: its join is printed with report's validation table and recommendations, and nothing below it reads
  a profile.
- calibration: the validation and calibration commands (`estimate validate`, `estimate calibrate`).
- cli: the parser and one module per mode.
- tools: benchmarks of the estimator and the GPU check, on top of everything.
"""

from __future__ import annotations

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("estimator.layers", "estimator.errors", "estimator.dtypes", "estimator.ops",
              "estimator.symmath", "estimator.gc_pause", "estimator.ir", "estimator.input_limits",
              "estimator.version", "estimator.jsonout", "estimator.textfit")),
    ("hwdesc", ("hwdesc",)),
    ("inputs", ("estimator.frontends", "models")),
    ("cost", ("estimator.cost", "estimator.fused", "estimator.kernel")),
    ("passes", ("passes", "estimator.precision", "estimator.w8a8")),
    ("pricing", ("estimator.pricing",)),
    ("estimate", ("estimator.estimate", "estimator.__init__")),
    ("views", ("estimator.study", "estimator.serve", "estimator.truth", "estimator.sass")),
    ("report", ("estimator.report",)),
    ("profile", ("estimator.profile",)),
    ("calibration", ("estimator.calibration",)),
    ("cli", ("estimator.cli",)),
    ("tools", ("tools",)),
)
