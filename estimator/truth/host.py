"""`--arch host`: a hardware descriptor for the machine the estimator runs on, measured once and cached.

`resolve_arch("host")` returns the path of the cached descriptor (`$XDG_CACHE_HOME/gpu-estimator/host.yaml`,
else `~/.cache/gpu-estimator/host.yaml`), calibrating first when it is missing; any other `--arch` passes
through unchanged. hwdesc itself stays data only: it never measures anything.

The descriptor is an ordinary hwdesc YAML of family `cpu` (see hwdesc/schema.py) written from the
microbenchmarks of estimator/truth/host_bench.py. How CPU figures map onto the GPU-shaped schema:

Per benchmark size or op, a rate is its best run (single-threaded times the CPUs, or with onnxruntime's
default thread pool); peaks are the best of them plus 10% headroom, efficiencies their median over the
peak (see host_bench).

- `cuda_flops_per_s.fp32`: MatMul FLOP/s (the SIMD FMA units); elementwise instructions run at half of
  it, as on a GPU's CUDA cores. `tensor_flops_per_s` is empty: a CPU has no tensor cores.
- `sfu_ops_per_s`: the transcendental rate, in the SFU ops the cost registry charges (a CPU computes
  exp/tanh/erf as vectorised polynomials on the same FMA units; the figure prices them).
- `dram_bytes_per_s`: the streaming rate of an elementwise op whose tensors sit in the last-level
  cache. NB: it is a cache figure, not DRAM: the estimator has no cache model, and a bound must use the
  fastest memory a kernel's bytes can come from. `efficiency.dram` prices bytes at the cache-resident rate
  too: the activations of the models this validates (a few MB) live in the cache, and their weights
  feed compute-bound MatMuls. Streaming from DRAM itself (tensors several times the cache) is in the note.
- `l2_bytes`: the last-level cache (L3), the CPU's analogue of a GPU's L2; `smem_bytes_per_sm`: L1d per
  core; `sm_count`: the CPUs this process may run on.
- `efficiency.dram` and `efficiency.op_overhead_s` come from chains of elementwise ops at several sizes,
  run back to back as a model runs them: per-op wall time = overhead + bytes / rate (see
  host_bench.chain_fit). The overhead is added to every kernel's estimate; `efficiency.min_kernel_s` is
  then only a placeholder (10 ns).
- `kernel_classes`: per kernel kind (and for op types whose runtime kernel is far off their kind's,
  e.g. Where) the fraction of the roofline reached and a per-op cost, fitted on a calibration network's
  profile (estimator/truth/host_classes.py). They replace the per-unit efficiencies above for kernels of a
  listed class; those stay for the rest (attention, conv, ...).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # host_bench imports the onnxruntime runner: loaded only when this host is measured
    from estimator.truth import host_classes
    from estimator.truth.host_bench import HostFigures, Settings

HOST = "host"
MIN_KERNEL_S = 1e-8  # the schema wants a positive floor; on a CPU the per-op cost is op_overhead_s
CACHE_ENV = "XDG_CACHE_HOME"


def cache_path() -> Path:
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base) / "gpu-estimator" / "host.yaml"


def resolve_arch(arch: str, settings: Settings | None = None) -> str:
    """`--arch` as hwdesc.load takes it: "host" becomes the cached descriptor's path (measured now if
    missing with `settings`, host_bench.FULL by default, and a note on stderr); anything else is returned
    unchanged."""
    if not isinstance(arch, str) or arch.strip().lower() != HOST:
        return arch
    path = cache_path()
    if not path.exists():
        print(f"note: calibrating this host once (a few seconds); cached in {path}", file=sys.stderr)
        calibrate(path, settings)
    return str(path)


def calibrate(path: str | os.PathLike[str], settings: Settings | None = None) -> Path:
    """Measure this host and write its descriptor YAML to `path` (folders created); returns the path.

    Two steps: the peaks and per-unit efficiencies (host_bench), then the kernel classes, fitted against
    the bounds of a provisional descriptor made of the first step's figures."""
    import yaml

    from estimator.truth import host_bench, host_classes
    from estimator.truth.validate import profiler_overhead
    from hwdesc.schema import validate

    settings = settings or host_bench.FULL
    figures = host_bench.measure(settings)
    provisional = validate(yaml.safe_load(descriptor_yaml(figures, settings)), "<host, provisional>")
    classes = host_classes.fit_classes(provisional, settings.class_sizes, settings.class_layers,
                                       max(settings.runs // 3, 3), profiler_overhead("cpu", "disable_all"))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    tmp.write_text(descriptor_yaml(figures, settings, classes), encoding="utf-8")
    tmp.replace(out)  # atomic: a concurrent reader sees the old file or the new one, never half of one
    return out


def cpu_model() -> str:
    for line in _cpuinfo():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_mhz() -> float | None:
    for line in _cpuinfo():
        if line.startswith("cpu MHz"):
            try:
                return float(line.split(":", 1)[1])
            except ValueError:
                return None
    return None


def vector_width() -> str:
    """The widest SIMD extension the CPU reports (its fp32 lanes per instruction)."""
    flags: set[str] = set()
    for line in _cpuinfo():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    for flag, text in (("avx512f", "AVX-512, 16 fp32 lanes"), ("avx2", "AVX2, 8 fp32 lanes"),
                       ("avx", "AVX, 8 fp32 lanes"), ("sve", "SVE"), ("asimd", "NEON, 4 fp32 lanes"),
                       ("sse2", "SSE2, 4 fp32 lanes")):
        if flag in flags:
            return text
    return "unknown vector width"


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _sysconf(key: str, default: int) -> int:
    try:
        value = os.sysconf(key)
    except (ValueError, OSError):
        return default
    return int(value) if value and value > 0 else default


def _fig(value: float, source: str, confidence: str | None = None, note: str | None = None,
         indent: int = 2) -> str:
    pad = " " * indent
    text = f"{value}" if isinstance(value, int) else f"{value:.4e}"  # `1.2345e+11`: a float in YAML 1.1 too
    lines = [f"{pad}value: {text}", f"{pad}source: {_quote(source)}"]
    if confidence:
        lines.append(f"{pad}confidence: {confidence}")
    if note:
        lines.append(f"{pad}note: {_quote(note)}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', "'") + '"'


def descriptor_yaml(f: HostFigures, settings: Settings,
                    classes: Mapping[str, host_classes.ClassFit] | None = None) -> str:
    """The descriptor text: hwdesc's format, with a `source` per figure and the CPU notes as comments;
    `classes` (host_classes.fit_classes) become its `kernel_classes`."""
    import onnxruntime

    from estimator.truth import host_bench

    quick = " (quick settings)" if settings == host_bench.QUICK else ""
    by = (f"measured by estimator/truth/host_bench.py{quick} through onnxruntime {onnxruntime.__version__} "
          f"CPUExecutionProvider")
    peak = "best run (single thread x CPUs, or pooled) + 10% headroom, over"
    fp32, sfu, bw = f.fp32_flops, f.sfu_ops_per_s, f.cache_bytes_per_s
    mhz = cpu_mhz()
    clock = (_fig(mhz * 1e6, "/proc/cpuinfo cpu MHz (nominal; turbo may run faster)", "low") if mhz
             else _fig(1.0e9, "unknown: /proc/cpuinfo has no cpu MHz", "low"))
    memory = float(_sysconf("SC_PHYS_PAGES", 0) * _sysconf("SC_PAGE_SIZE", 4096)) or 1.0
    l1d = _sysconf("SC_LEVEL1_DCACHE_SIZE", 32 * 1024)
    efficiency = {
        "tensor": _fig(1.0, "unused: a CPU has no tensor cores", indent=4),
        "cuda": _fig(fp32.achievable / fp32.peak, f"{by}: MatMul rate, median over the sizes / peak",
                     indent=4),
        "sfu": _fig(sfu.achievable / sfu.peak, f"{by}: rate, median over the ops / peak", indent=4),
        "dram": _fig(min(1.0, f.chain_bytes_per_s / bw.peak),
                     f"{by}: in-cache rate of Adds run back to back (chains of {settings.chain_length} at "
                     f"{settings.chain_numels} elements) / peak", indent=4),
        "min_kernel_s": _fig(MIN_KERNEL_S, "placeholder: no floor of its own; every op costs op_overhead_s "
                                           "on top of its bytes", indent=4),
        "op_overhead_s": _fig(f.op_overhead_s, f"{by}: per-op wall time beyond the bytes, fitted on the "
                                               f"same chains", indent=4),
    }
    cuda = {
        "fp32": _fig(fp32.peak, f"{by}: {peak} {fp32.detail}", indent=4,
                     note=f"SIMD FMA units ({vector_width()})"),
        "fp16": _fig(fp32.peak, "assumed = fp32: onnxruntime's CPU kernels compute fp16 in fp32", "low",
                     indent=4),
        "fp64": _fig(fp32.peak / 2, "assumed: half the fp32 rate (half the lanes)", "low", indent=4),
    }
    dram = f.dram_bytes_per_s
    dram_note = (f"last-level-cache streaming peak; from DRAM itself: {dram.achievable / 1e9:.1f} GB/s "
                 f"({dram.detail}, best pooled run)")
    sections = [
        "# This host, measured through onnxruntime (not a GPU), written by estimator/truth/host.py.\n"
        "# Re-measure with `estimate --calibrate-host PATH` or estimate calibrate --host.\n"
        f"# CPU notes: {vector_width()}; no tensor cores (tensor_flops_per_s is empty); elementwise and\n"
        "# transcendental math runs on the same SIMD FMA units as MatMul. dram_bytes_per_s is the\n"
        "# streaming peak with tensors in the last-level cache (a bound must not be beaten by\n"
        "# cache-resident tensors); efficiency.dram prices bytes at the cache-resident rate a model's\n"
        "# activations see; streaming from DRAM itself is in its note (the estimator has no\n"
        "# cache-residency model yet).",
        "schema_version: 1\nname: host",
        f"display_name: {_quote(f'{cpu_model()} ({f.cpus} CPUs, host)')}",
        "family: cpu\ncompute_capability: null  # no CUDA compute capability",
        "sm_count:\n" + _fig(f.cpus, "os.sched_getaffinity: CPUs this process may use",
                             note="onnxruntime's default pool runs one thread per physical core"),
        "clock_hz:\n" + clock,
        "tensor_flops_per_s: {}  # a CPU has no tensor cores",
        "cuda_flops_per_s:\n" + "\n".join(f"  {k}:\n{v}" for k, v in cuda.items()),
        "sfu_ops_per_s:\n" + _fig(sfu.peak, f"{by}: {peak} {sfu.detail}", "medium",
                                  note="CPUs evaluate transcendentals as SIMD polynomials on the FMA units"),
        "dram_bytes_per_s:\n" + _fig(bw.peak, f"{by}: {peak} {bw.detail}", "medium", note=dram_note),
        "dram_bytes:\n" + _fig(memory, "os.sysconf: physical memory"),
        "l2_bytes:\n" + _fig(f.llc_bytes, "os.sysconf: last-level cache size",
                             note="the CPU's last-level cache (L3), the analogue of a GPU's L2"),
        "smem_bytes_per_sm:\n" + _fig(l1d, "os.sysconf: L1d per core", "low",
                                      note="a CPU has no shared memory; L1d is the closest analogue"),
        "nvlink_bytes_per_s:\n  value: null\n  source: \"a host CPU has no NVLink\"",
        "efficiency:\n" + "\n".join(f"  {k}:\n{v}" for k, v in efficiency.items()),
    ]
    if classes:
        sizes = ", ".join(f"{t}x{w}" for t, w in settings.class_sizes)
        fitted = (f"{by}: least squares on the profile of a calibration network "
                  f"(estimator/truth/host_classes.py, {settings.class_layers} blocks at tokens x width "
                  f"{sizes})")
        entries = []
        for name, c in classes.items():
            how = f"{fitted}; {c.points} nodes, median fit error {c.median_abs_error:.0%}"
            lines = [f"  {name}:", "    roofline:", _fig(c.roofline, how, indent=6)]
            if c.op_overhead_s > 0:
                lines += ["    op_overhead_s:", _fig(c.op_overhead_s, fitted, indent=6)]
            entries.append("\n".join(lines))
        sections.append("# estimate_s = bound_s / roofline + op_overhead_s for kernels of these classes\n"
                        "kernel_classes:\n" + "\n".join(entries))
    return "\n".join(sections) + "\n"
