"""Hold the estimator against onnxruntime on this machine: models x sequence lengths, one table.

    estimate validate host [--arch host] [--runs 10] [--seqs 64,128,256] [--json out.json]
                           [--models llama-tiny,gpt2-small,bert-base,hf-llama] [--fusion none|ort]
                           [--markdown]

Models are bundled builders (`estimate --list-models`, those with weights) or hf-llama / hf-gpt2 /
hf-bert: tiny random-init transformers exported by torch.onnx.export(dynamo=True) (models/hf_tiny.py;
needs torch and transformers). Each row: measured end-to-end (fastest and median run), bound and
estimate; efficiency = bound / measured; error = (estimate - measured) / measured. The summary gives the
median |error| against the fastest and the median run (on a shared host, the fastest run is the one
other processes disturbed least).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx

import hwdesc
from estimator import jsonout
from estimator.calibration.markdown import pct, table
from estimator.errors import UserError
from estimator.frontends.onnx_import import import_model
from estimator.report.validation import by_op, totals
from estimator.truth.host import resolve_arch
from estimator.truth.validate import name_nodes, validate_model

HF = "hf-"


def load(name: str, tmp: Path) -> onnx.ModelProto:
    if name.startswith(HF):
        from models import hf_tiny

        return onnx.load(str(hf_tiny.export(name[len(HF):], tmp / f"{name}.onnx")))
    import models

    return models.MODELS[name].build()


@dataclass(frozen=True)
class HostCheck:
    """What `estimate validate host` was asked (the command line, read once)."""

    arch: str = "host"
    models: tuple[str, ...] = ("llama-tiny", "gpt2-small", "bert-base", "hf-llama")
    seqs: tuple[int, ...] = (64, 128, 256)
    batch: int = 1
    fusion: str = "none"
    runs: int = 10
    repeat: int = 1
    json: Path | None = None
    markdown: bool = False


def markdown(rows: list[dict]) -> str:
    """Every row's measured, bound and estimate, with the error against the fastest and the median run."""
    cells = [(r["model"], r["seq"], f"{r['measured_min_s'] * 1e3:.3f}", f"{r['bound_s'] * 1e3:.3f}",
              f"{r['estimate_s'] * 1e3:.3f}", pct(r["error_vs_min"], True), pct(r["error_vs_median"], True))
             for r in rows]
    cells.append(("median \\|error\\|", "", "", "", "",
                  pct(statistics.median(abs(r["error_vs_min"]) for r in rows)),
                  pct(statistics.median(abs(r["error_vs_median"]) for r in rows))))
    return table(("model", "seq", "measured min (ms)", "bound (ms)", "estimate (ms)", "error (fastest run)",
                  "error (median run)"), cells)


def run(args: HostCheck) -> int:
    import models

    unknown = [m for m in args.models if not m.startswith(HF) and m not in models.MODELS]
    if unknown:
        raise UserError(f"--models: unknown model(s) {', '.join(unknown)} (see estimate --list-models, "
                        f"or hf-llama / hf-gpt2 / hf-bert)")
    hw = hwdesc.load(resolve_arch(args.arch))
    rows = measure(args, hw)
    for r in rows:
        r["error_vs_min"] = (r["estimate_s"] - r["measured_min_s"]) / r["measured_min_s"]
        r["error_vs_median"] = (r["estimate_s"] - r["measured_s"]) / r["measured_s"]
    runs = f"--fusion {args.fusion}; {args.repeat} x {args.runs} runs per row"
    if args.markdown:  # for docs: the machine by name, not the path of its descriptor
        print(f"**{hw.display_name}**; {runs}\n\n" + markdown(rows))
    else:
        print(f"{hw.display_name} ({hw.path}); {runs}\n" + text(rows))
    if args.json:
        Path(args.json).write_text(jsonout.dumps({"arch": hw.path, "rows": rows}, indent=1))
    return 0


def measure(args: HostCheck, hw) -> list[dict]:
    """Every (model, seq) row measured through onnxruntime and priced, `args.repeat` sweeps pooled."""
    seqs = list(args.seqs)
    best: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        loaded = {}
        for name in args.models:
            model = load(name, Path(tmp))
            name_nodes(model)
            loaded[name] = (model, import_model(model), model.SerializeToString())
        for _ in range(args.repeat):
            for name, (model, graph, data) in loaded.items():
                for seq in seqs:
                    v = validate_model(model, hw, {"batch": args.batch, "seq": seq}, graph=graph, source=data,
                                       runs=args.runs, fusion=args.fusion)
                    row = {"model": name, "seq": seq, **totals(v), "joined_share": v.joined_share,
                           "by_op": by_op(v), "wall_s": v.wall_s}
                    old = best.get((name, seq))
                    if old is not None:
                        row["wall_s"] = old["wall_s"] + row["wall_s"]
                        row["measured_min_s"] = min(row["wall_s"])
                        row["measured_s"] = statistics.median(row["wall_s"])
                    best[(name, seq)] = row
    return list(best.values())


def text(rows: list[dict]) -> str:
    lines = [f"{'model':<12}{'seq':>5}{'measured min':>14}{'median':>11}{'bound':>11}{'estimate':>11}"
             f"{'eff':>6}{'err(min)':>10}{'err(med)':>10}{'joined':>8}"]
    for r in rows:
        ms = [f"{r[k] * 1e3:>9.3f}ms" for k in ("measured_min_s", "measured_s", "bound_s", "estimate_s")]
        lines.append(f"{r['model']:<12}{r['seq']:>5}   {''.join(ms)}"
                     f"{r['bound_s'] / r['measured_min_s']:>6.0%}"
                     f"{r['error_vs_min']:>+10.0%}{r['error_vs_median']:>+10.0%}{r['joined_share']:>8.1%}")
    med_min = statistics.median(abs(r["error_vs_min"]) for r in rows)
    med_med = statistics.median(abs(r["error_vs_median"]) for r in rows)
    below = [f"{r['model']}@{r['seq']}" for r in rows if r["measured_min_s"] < r["bound_s"]]
    lines.append(f"median |estimate - measured| / measured: {med_min:.0%} (fastest run), {med_med:.0%} "
                 f"(median run); runs below the bound: {', '.join(below) or 'none'}")
    return "\n".join(lines)
