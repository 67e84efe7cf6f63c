"""estimator/cli/options.py: the command line read once into one frozen Options that every mode receives;
the library's estimate() prices as the command line does (the tile model unless roofline=True); the
command line's modules import downward only."""

import ast
import dataclasses
from pathlib import Path

import pytest
from cliutil import assert_one_error_line, cli

import hwdesc
from estimator.cli.main import build_parser
from estimator.cli.options import Options, from_args
from estimator.estimate import EstimateOptions, estimate
from estimator.frontends.onnx_import import import_model
from onnxutil import matmul_model

ROOT = Path(__file__).resolve().parent.parent
H100 = hwdesc.load("h100-sxm")


def _opts(*argv) -> Options:
    return from_args(build_parser().parse_args(list(argv)))


def test_options_are_frozen_and_resolve_each_gpu_once():
    opts = _opts("--model", "llama-3-8b", "--arch", "h100-sxm,b200", "--fusion", "ort", "--roofline",
                 "--dim", "seq=128")
    assert [g.arch for g in opts.gpus] == ["h100-sxm", "b200"]
    assert [g.hw.name for g in opts.gpus] == ["h100-sxm", "b200"]
    assert all(g.pricing.roofline and g.pricing.pipeline for g in opts.gpus)
    assert dict(opts.dims) == {"seq": 128}
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.gpus = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        opts.dims["seq"] = 1  # type: ignore[index]  (a read-only mapping)


def test_serving_sweep_is_taken_out_of_the_dim_sweeps():
    opts = _opts("--model", "llama-3.1-8b", "--tp", "1,2", "--serve", "isl=128,osl=16,concurrency=4",
                 "--sweep", "concurrency=1,8", "--report", "x.html")
    assert opts.parallel.tp == (1, 2)
    assert opts.serving.concurrency == (1, 8)
    assert opts.study.sweeps == ()  # the report's sweep section is the Pareto plot, not a dim sweep
    w = opts.serving.workload
    assert (w.isl, w.osl, w.concurrency) == (128, 16, 4)


def test_a_report_run_resolves_the_arch_once(monkeypatch, capsys, tmp_path):
    import estimator.truth.host as host

    calls = []
    real = host.resolve_arch
    monkeypatch.setattr(host, "resolve_arch", lambda arch, *a: calls.append(arch) or real(arch, *a))
    code, _, _ = cli(capsys, "--model", "gpt2-small", "--dim", "seq=16", "--report", str(tmp_path / "r.html"))
    assert code == 0 and calls == ["h100-sxm"]


def test_bad_spec_is_one_error_line(capsys):
    code, _, err = cli(capsys, "--model", "llama-3.1-8b", "--tp", "2,x", "--serve",
                       "isl=1,osl=2,concurrency=1")
    assert_one_error_line(code, err, "--tp '2,x'")
    code, _, err = cli(capsys, "--model", "llama-3-8b", "--arch", "h100-sxm,h100-sxm", "--sweep", "seq=1,2")
    assert_one_error_line(code, err, "a GPU is listed twice")


def test_library_default_is_the_command_lines_tile_model():
    graph = import_model(matmul_model(4096, 4096, 4096))
    tiled, roof = estimate(graph, H100), estimate(graph, H100, roofline=True)
    assert tiled.tiling and not roof.tiling  # the tile model by default, as `estimate MODEL` prices
    assert estimate(graph, H100, EstimateOptions(roofline=True)).totals == roof.totals
    with pytest.raises(TypeError):
        estimate(graph, H100, "bf16")  # precision is a keyword (an EstimateOptions field)
    with pytest.raises(TypeError):
        estimate(graph, H100, tiling=True)  # the old name: roofline=True asks for the roofline


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at module level or inside a function."""
    found = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            found |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            found |= {n.module, *(f"{n.module}.{a.name}" for a in n.names)}
    return found


def test_the_command_line_is_imported_by_no_lower_layer_and_has_no_cycle():
    cli_dir = ROOT / "estimator" / "cli"
    for path in (ROOT / "estimator").rglob("*.py"):
        if cli_dir not in path.parents:
            assert not any(m.startswith("estimator.cli") for m in _imports(path)), path
    mods = {p.stem: p for p in cli_dir.glob("*.py") if p.stem not in ("__init__", "__main__")}
    edges = {m: {o for o in mods if o != m and f"estimator.cli.{o}" in _imports(p)} for m, p in mods.items()}

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and reaches(n, b, seen | {n})) for n in edges[a])

    assert not [m for m in mods if reaches(m, m, {m})]


def test_no_mode_reads_the_namespace():
    for path in (ROOT / "estimator" / "cli").glob("*.py"):
        text = path.read_text()
        assert "getattr(args" not in text, path
        # the builders of the options, and the subcommands that turn their own parser's Namespace into
        # frozen settings (estimate profile / sass / calibrate / validate)
        if path.stem not in ("main", "options", "profile", "sass", "calibrate", "validate_cmd"):
            assert "args." not in text.replace("example_args", "").replace("_args(", ""), path
