"""The command line's one frozen options object: `from_args(namespace)` reads argparse once, resolves the
GPUs (each `--arch` item through `resolve_arch`, its pass pipeline for its family) and parses every spec
(--dim, --tp, --serve, --sweep concurrency=..., --compare-fusion); every mode (estimator/cli/*.py)
receives the `Options` and never reads the Namespace.

It lives in cli/ (the top layer), not beside `estimate()`: it holds what the modes above the library need
(the serving workload, the report paths) and the library takes its own small record,
estimator.estimate.EstimateOptions, which each GPU here carries as `Gpu.pricing`.

Importing this module is cheap (no sympy, no onnx): `estimate --list-archs` loads it through the modes'
parser; the heavy imports happen in `from_args`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from estimator.errors import UserError

if TYPE_CHECKING:
    from estimator.estimate import EstimateOptions
    from estimator.serve.serving import Workload
    from hwdesc import HardwareDescriptor


class UsageError(UserError):
    pass


@dataclass(frozen=True)
class Model:
    """Where the graph comes from: MODEL, --model NAME, --hf-config (with --decode / --no-kv-cache) or
    --torch (with --save-mlir); `expert_parallel`: one GPU's expert share (estimator/cli/hf.py)."""

    path: str | None = None
    name: str | None = None
    hf_config: str | None = None
    decode: bool = False
    kv_cache: bool = True
    torch: str | None = None
    save_mlir: str | None = None
    expert_parallel: int | None = None
    # the whole split when --expert-parallel, --attention-dp or --moe-tp is given (one GPU's MoE share
    # is built into the graph: estimator/serve/parallel.py Parallelism.config), else None
    parallel: Any = None

    @property
    def moe_split(self) -> bool:
        return self.parallel is not None and not self.parallel.plain

    @property
    def title(self) -> str:
        return self.name or os.path.basename(self.path or "") or self.torch or "model"


@dataclass(frozen=True)
class Gpu:
    """One --arch item: as given, its descriptor, and how estimate() prices on it (its family's
    pipeline)."""

    arch: str
    hw: HardwareDescriptor
    pricing: EstimateOptions


@dataclass(frozen=True)
class Fusion:
    """The fusion choice as given (--fusion, --pipeline; each Gpu's pricing holds the resolved pipeline),
    --compare-fusion's strategies, and what to show about the passes."""

    strategy: str | None = None
    pipeline: str | None = None
    compare: tuple[str, ...] | None = None
    explain: bool = False
    print_after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Output:
    json: bool = False
    symbolic: bool = False
    top: int = 15
    wide: bool = False  # every table column whole (estimator/textfit.py)


@dataclass(frozen=True)
class Reports:
    """--recommend (with --recommend-only, --recommend-threshold in percent), --report, --trace and the
    figures (estimator/cli/report.py)."""

    recommend: bool = False
    recommend_only: tuple[str, ...] | None = None
    recommend_threshold: float = 2.0
    report: str | None = None
    trace: str | None = None
    roofline_plot: str | None = None
    breakdown_plot: str | None = None

    @property
    def wanted(self) -> bool:
        return bool(self.recommend or self.report or self.trace or self.roofline_plot or self.breakdown_plot)

    @property
    def threshold(self) -> float:
        """--recommend-threshold as a fraction of the total."""
        return self.recommend_threshold / 100


@dataclass(frozen=True)
class Parallel:
    """--tp (None when not given; a tuple, a comma list goes with a serving sweep), --pp, --attention-dp,
    --moe-tp and --expert-parallel (None when not given); `at(tp)` is the whole split at one --tp
    (estimator/serve/parallel.py Parallelism, checked there)."""

    tp: tuple[int, ...] | None = None
    pp: int | None = None
    attention_dp: int | None = None
    moe_tp: int | None = None
    ep: int | None = None

    @property
    def asked(self) -> bool:
        """Any deployment flag beyond --expert-parallel alone on a plain kernel table."""
        return bool(self.tp or self.pp or self.attention_dp or self.moe_tp)

    def at(self, tp: int | None = None):
        from estimator.serve.parallel import Parallelism

        if not self.tp and tp == 1:  # --tp not given (the default 1): --expert-parallel alone may still
            tp = None                # mean attention DP; a caller's own TP (a search, a disagg pool) holds
        given = tp if tp is not None else (self.tp[0] if self.tp else None)
        return Parallelism.from_flags(given, self.attention_dp, self.moe_tp, self.ep, self.pp)


@dataclass(frozen=True)
class Serving:
    """--serve (parsed), --memory, --framework, --kv-precision, --batching and, with --serve or --memory,
    the `--sweep concurrency=...` values (taken out of the dim sweeps)."""

    workload: Workload | None = None
    memory: bool = False
    framework: str | None = None
    kv_precision: str | None = None
    batching: str = "inflight"
    concurrency: tuple[int, ...] | None = None

    @property
    def asked(self) -> bool:
        return bool(self.workload or self.memory or self.kv_precision or self.framework)


@dataclass(frozen=True)
class Study:
    """--sweep (dim sweeps only), --crossover, --csv, --plot, --plot-stack (estimator/cli/sweep.py)."""

    sweeps: tuple[str, ...] = ()
    crossover: bool = False
    csv: str | None = None
    plot: str | None = None
    plot_stack: str | None = None


@dataclass(frozen=True)
class Search:
    """--search gpus=N, --sla, --disagg (the flag alone: disaggregated units join the search; a SPEC:
    one xPyD unit served), --solve DIM, --sensitivity, --scheduler / --dask-local
    (estimator/cli/search.py)."""

    budget: str | None = None
    sla: str | None = None
    disagg: str | None = None
    solve: str | None = None
    sensitivity: bool = False
    scheduler: str | None = None
    dask_local: bool = False
    concurrency_given: bool = False  # --serve named its concurrency (else --disagg serves y x B clients)

    @property
    def asked(self) -> bool:
        return bool(self.budget or self.disagg or self.solve or self.sensitivity)


@dataclass(frozen=True)
class Validation:
    """--validate (with --ep, --runs) and --calibrate-host (estimator/cli/validate.py)."""

    validate: bool = False
    ep: str = "cpu"
    runs: int = 10
    calibrate_host: str | None = None


@dataclass(frozen=True)
class Options:
    """Everything a mode needs, built once by `from_args`. `gpus`: one per --arch item (none only for
    --calibrate-host alone); `dims`: the --dim bindings (a bundled model's defaults join them when its
    graph is loaded); `pricing`: the family-independent EstimateOptions (precision, roofline, warm
    inputs, strict, verify-each), each Gpu's pricing adds its family's pipeline."""

    model: Model
    gpus: tuple[Gpu, ...]
    dims: Mapping[str, int]
    pricing: EstimateOptions
    fusion: Fusion = field(default_factory=Fusion)
    output: Output = field(default_factory=Output)
    reports: Reports = field(default_factory=Reports)
    parallel: Parallel = field(default_factory=Parallel)
    serving: Serving = field(default_factory=Serving)
    study: Study = field(default_factory=Study)
    validation: Validation = field(default_factory=Validation)
    search: Search = field(default_factory=Search)
    kernel_sass: tuple[str, ...] = ()  # --kernel-sass NODE=FILE[#KERNEL] (estimator/sass/seam.py)

    @property
    def gpu(self) -> Gpu:
        """The GPU of the modes that take one (the first --arch item)."""
        return self.gpus[0]

    @property
    def hw(self) -> HardwareDescriptor:
        return self.gpus[0].hw

    @property
    def precision(self) -> str | None:
        """The first GPU's precision (--precision, else the checkpoint's where that GPU runs it)."""
        return self.gpus[0].pricing.precision if self.gpus else self.pricing.precision

    @property
    def roofline(self) -> bool:
        return self.pricing.roofline

    def steps_options(self, tp: int, gpu: Gpu | None = None):
        """estimator.serve.steps.Options of the serving mode on `gpu` (default the first) at attention
        tensor parallelism `tp`, with the rest of the split the flags give (Parallel.at)."""
        from estimator.serve.frameworks import framework
        from estimator.serve.steps import Options as StepsOptions

        gpu = gpu or self.gpu
        parallel = self.parallel.at(tp)
        return StepsOptions(gpu.hw, parallel.tp, gpu.pricing.precision, self.serving.kv_precision,
                            gpu.pricing.pipeline, framework(self.serving.framework or "trtllm"),
                            tiling=not self.roofline, parallel=parallel)


def parse_dims(items: list[str]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--dim {item!r}: expected NAME=VALUE, e.g. --dim seq=4096")
        try:
            dims[name] = int(value)
        except ValueError:
            raise UsageError(f"--dim {item!r}: value must be an integer") from None
        if dims[name] <= 0:
            raise UsageError(f"--dim {item!r}: value must be a positive integer")
    return dims


def parse_archs(text: str) -> list[str]:
    archs = [a.strip() for a in text.split(",")]
    if any(not a for a in archs):
        raise UsageError(f"--arch {text!r}: empty name in the comma list")
    if len(set(archs)) < len(archs):
        raise UsageError(f"--arch {text!r}: a GPU is listed twice")
    return archs


def parse_tps(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        tps = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise UsageError(f"--tp {text!r}: expected an integer or a comma list of integers") from None
    if not tps or any(t < 1 for t in tps):
        raise UsageError(f"--tp {text!r}: tensor-parallel sizes must be positive integers")
    return tps


def strategy_list(text: str) -> tuple[str, ...]:
    from passes import STRATEGIES

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or not names:
        raise UsageError(f"--compare-fusion: unknown strategy {unknown[0] if unknown else text!r}; "
                         f"choose from {', '.join(STRATEGIES)}")
    return tuple(names)


def pipeline_of(strategy: str | None, pipeline: str | None, family: str | None = None) -> str:
    """The pass pipeline --pipeline or --fusion (default tensorrt) asks for, on a GPU of `family`."""
    from passes import DEFAULT_STRATEGY, pipeline_for

    if pipeline is not None:
        if strategy is not None:
            raise UsageError("give either --fusion or --pipeline, not both")
        return pipeline
    return pipeline_for(strategy or DEFAULT_STRATEGY, family)


def concurrency_sweep(sweeps: list[str], serve: bool) -> tuple[int, ...] | None:
    """The `--sweep concurrency=...` values of the serving mode (with --serve or --memory)."""
    specs = [s for s in sweeps if s.startswith("concurrency=")]
    if not specs:
        if sweeps:
            raise UsageError("with --serve, sweep the concurrency: --sweep concurrency=1,2,4,...")
        return None
    if not serve:
        raise UsageError("--sweep concurrency=... needs --serve isl=I,osl=O,concurrency=C")
    try:
        values = tuple(int(v) for v in specs[0].partition("=")[2].split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--sweep {specs[0]!r}: expected concurrency=1,2,4,...") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--sweep {specs[0]!r}: concurrencies must be positive integers")
    return values


def _gpus(a: Any, base: EstimateOptions) -> tuple[Gpu, ...]:
    import dataclasses

    import hwdesc
    from estimator.truth.host import resolve_arch

    gpus = []
    for arch in parse_archs(a.arch):
        hw = hwdesc.load(resolve_arch(arch))  # "host": this machine, measured once and cached
        pipeline = pipeline_of(a.fusion, a.pipeline, hw.family)
        precision = base.precision if a.precision else supported_default(base.precision, hw)
        gpus.append(Gpu(arch, hw, dataclasses.replace(base, pipeline=pipeline, precision=precision)))
    return tuple(gpus)


def default_precision(a: Any) -> str | None:
    """The precision when --precision is not given: the checkpoint's own (a bundled LLM's published
    dtype; --hf-config's quantization_config / torch_dtype: estimator/frontends/checkpoint_precision.py),
    else None (the graph's dtypes). Not under --validate, which runs the graph as built."""
    if a.precision or a.validate:
        return a.precision
    if a.model_name:
        from estimator.frontends.checkpoint_precision import bundled_precision

        return bundled_precision(a.model_name)
    if a.hf_config:
        from estimator.frontends.hf_config import load_precision

        return load_precision(a.hf_config)
    return None


def supported_default(precision: str | None, hw) -> str | None:
    """A default precision on `hw`: itself when the GPU has its tensor cores, else bf16 when it has those
    (an fp8 checkpoint on an A100 runs as bf16 there), else the graph's dtypes (None)."""
    from estimator.precision import PrecisionError, check_precision

    for p in (precision, "bf16") if precision else ():
        try:
            check_precision(p, hw)
            return p
        except PrecisionError:
            continue
    return None


def _serving(a: Any) -> tuple[Serving, tuple[str, ...]]:
    """The serving options and the dim sweeps left for the other modes."""
    sweeps = tuple(a.sweep)
    workload = None
    if a.serve:
        from estimator.serve.serving import parse_workload

        text = a.serve
        searching = getattr(a, "search", None) or getattr(a, "solve", None) or getattr(a, "disagg", None)
        if searching and "concurrency" not in text:  # the search and --solve choose it; --disagg: y x B
            text = f"{text.rstrip(',')},concurrency=1"
        workload = parse_workload(text, a.batching)
    concurrency = None
    if a.serve or a.memory:  # the serving mode's --sweep is over the concurrency
        concurrency = concurrency_sweep(list(sweeps), bool(a.serve))
        sweeps = tuple(s for s in sweeps if not s.startswith("concurrency="))
    return Serving(workload, a.memory, a.framework, a.kv_precision, a.batching, concurrency), sweeps


# the flags that write a file, checked before anything is estimated (a run of minutes must not fail at
# its last step on a path it could have refused at once)
OUTPUT_FLAGS = ("report", "trace", "csv", "plot", "roofline_plot", "breakdown_plot", "save_mlir")


def check_writable(flag: str, path: str) -> None:
    """`path` can be written: its folder exists and is writable, and it is no folder itself."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: no such directory {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")


def _check_outputs(a: Any) -> None:
    for name in OUTPUT_FLAGS:
        path = getattr(a, name, None)
        if path:
            check_writable("--" + name.replace("_", "-"), path)


def _check_print_after(names, gpus) -> None:
    """--print-after names passes of the pipeline that runs (or 'all')."""
    from passes import Pipeline

    ran = {n for g in gpus for n in Pipeline.parse(g.pricing.pipeline).names}
    for name in names:
        if name != "all" and gpus and name not in ran:
            raise UsageError(f"--print-after {name}: no such pass in the pipeline (its passes: "
                             f"{', '.join(sorted(ran))}; or 'all')")


def from_args(a: Any) -> Options:
    """The Options of a parsed command line (`a`: the argparse Namespace of estimator/cli/main.py)."""
    from estimator.estimate import EstimateOptions

    par = Parallel(parse_tps(a.tp), a.pp, a.attention_dp, a.moe_tp, a.expert_parallel)
    split = par.at() if (a.expert_parallel or a.attention_dp or a.moe_tp) else None
    _check_outputs(a)
    model = Model(a.model_path, a.model_name, a.hf_config, a.decode, a.kv_cache, a.torch, a.save_mlir,
                  a.expert_parallel, split)
    dims = MappingProxyType(parse_dims(a.dim))
    serving, sweeps = _serving(a)
    base = EstimateOptions(precision=default_precision(a), roofline=a.roofline, warm_inputs=a.warm_inputs,
                           strict=a.strict, verify_each=a.verify_each)
    validation = Validation(a.validate, a.ep, a.runs, a.calibrate_host)
    # --calibrate-host alone measures this machine and needs no GPU (nor `--arch host` measured first)
    gpus = () if a.calibrate_host and not a.validate else _gpus(a, base)
    _check_print_after(a.print_after, gpus)
    only = tuple(n.strip() for n in a.recommend_only.split(",") if n.strip()) if a.recommend_only else None
    return Options(
        model=model,
        gpus=gpus,
        dims=dims,
        pricing=base,
        fusion=Fusion(a.fusion, a.pipeline, strategy_list(a.compare_fusion) if a.compare_fusion else None,
                      a.explain, tuple(a.print_after)),
        output=Output(a.json, a.symbolic, a.top, a.wide),
        reports=Reports(a.recommend, only, a.recommend_threshold, a.report, a.trace, a.roofline_plot,
                        a.breakdown_plot),
        parallel=par,
        serving=serving,
        study=Study(sweeps, a.crossover, a.csv, a.plot, a.plot_stack),
        validation=validation,
        search=Search(getattr(a, "search", None), getattr(a, "sla", None), getattr(a, "disagg", None),
                      getattr(a, "solve", None), bool(getattr(a, "sensitivity", False)),
                      getattr(a, "scheduler", None), bool(getattr(a, "dask_local", False)),
                      bool(a.serve and "concurrency" in a.serve)),
        kernel_sass=tuple(a.kernel_sass),
    )
