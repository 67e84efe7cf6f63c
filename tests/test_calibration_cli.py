"""`estimate validate ...` and `estimate calibrate ...` (estimator/calibration/) on tiny synthetic tables
written here, with the errors worked by hand; bad input is one `error:` line and exit 2."""

from __future__ import annotations

import gzip
import json

import pytest
from cliutil import assert_one_error_line, cli

import hwdesc
from estimator.calibration import markdown, validate_kernels, validate_serving

# Two bf16 GEMM rows, one per end of the m regimes (m <= 64, m > 1024).
SHAPES = [(16, 4096, 4096), (2048, 4096, 4096)]
# measured = estimate / 0.9 and estimate / 1.3: (estimate - measured) / measured = 0.9 - 1 = -10 % and
# 1.3 - 1 = +30 %. |errors| 10 %, 30 %: median 20 %, p90 = 10 + 0.9 x (30 - 10) = 28 % (numpy's linear
# percentile), signed median (-10 + 30) / 2 = +10 %.
RATIOS = [0.9, 1.3]


def _estimate_s(m: int, n: int, k: int) -> float:
    """The estimate `estimate validate kernels --warm-inputs` gives the row (the graph it builds, priced
    by estimate(); the activation warm in L2, as the calibration takes it too)."""
    row = {"m": float(m), "n": float(n), "k": float(k), "dtype": "bfloat16"}
    model, retype, warm = validate_kernels.model_of("gemm", row)
    return validate_kernels.price(model, hwdesc.load("h100-sxm"), retype, warm)[1]


@pytest.fixture(scope="module")
def gemm_data(tmp_path_factory):
    """A folder with gemm.csv.gz: the two rows, each measured at its estimate / ratio."""
    data = tmp_path_factory.mktemp("h100")
    lines = ["dtype,m,n,k,latency_ms"]
    for (m, n, k), ratio in zip(SHAPES, RATIOS, strict=True):
        lines.append(f"bfloat16,{m},{n},{k},{_estimate_s(m, n, k) / ratio * 1e3!r}")
    with gzip.open(data / "gemm.csv.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    return data


def test_validate_kernels_markdown_has_the_hand_worked_errors(gemm_data, capsys):
    code, out, err = cli(capsys, "validate", "kernels", "--data", str(gemm_data), "--tables", "gemm",
                         "--warm-inputs", "--markdown")
    assert code == 0, err
    assert out.startswith("**gemm**: 2 rows\n\n| regime | rows | median error | p90 error | median signed |")
    rows = {line.split(" | ")[0]: line.split(" | ")[1:5]
            for line in out.splitlines() if line.startswith("| ")}
    assert rows["| m <= 64"] == ["1", "10.0%", "10.0%", "-10.0%"]  # the first row alone
    assert rows["| m > 1024"] == ["1", "30.0%", "30.0%", "+30.0%"]  # the second
    assert rows["| all"] == ["2", "20.0%", "28.0%", "+10.0%"]  # median, p90 and signed median (above)


def test_validate_kernels_text_and_json(gemm_data, tmp_path, capsys):
    out_json = tmp_path / "v.json"
    code, out, _ = cli(capsys, "validate", "kernels", "--data", str(gemm_data), "--tables", "gemm",
                       "--warm-inputs", "--json", str(out_json))
    assert code == 0
    assert out.startswith("gemm: 2 rows, ")
    every = json.loads(out_json.read_text())["tables"][0]["all"]
    assert every["rows"] == 2
    assert every["median_err"] == pytest.approx(0.20, abs=1e-9)
    assert every["p90_err"] == pytest.approx(0.28, abs=1e-9)
    assert every["median_signed"] == pytest.approx(0.10, abs=1e-9)


def test_calibrate_no_fit_prints_the_same_residuals(gemm_data, capsys):
    # --no-fit prices the rows with the descriptor's constants through the vectorized tile model
    # (estimator/calibration/tables.py), which equals estimate(): the same hand-worked errors
    code, out, err = cli(capsys, "calibrate", "--data", str(gemm_data), "--gemm-keys", "launch_s",
                         "--no-fit")
    assert code == 0, err
    assert "launch_s: " in out and "gemm bfloat16: 2 rows" in out
    every = next(line for line in out.splitlines() if line.strip().startswith("all"))
    assert "median |err|  20.0%" in every and "p90  28.0%" in every and "median signed +10.0%" in every


@pytest.mark.parametrize(("argv", "fragment"), [
    (["validate"], "the following arguments are required"),
    (["validate", "bogus", "--data", "."], "invalid choice: 'bogus'"),
    (["validate", "kernels"], "--data"),
    (["validate", "kernels", "--data", "{tmp}/absent"], "absent: no such folder"),
    (["validate", "kernels", "--data", "{tmp}", "--tables", "gemm,nope"], "unknown table(s) nope"),
    (["validate", "kernels", "--data", "{tmp}", "--tables", "context"], "no context_attention.csv.gz there"),
    (["validate", "comm", "--data", "{tmp}"], "no nccl.csv.gz, custom_allreduce.csv.gz there"),
    (["validate", "serving", "--data", "{tmp}"], "no e2e_serving.csv.gz there"),
    (["validate", "serving", "--data", "{tmp}", "--sets", "nope"], "unknown set(s) nope"),
    (["validate", "moe-serving", "--data", "{tmp}", "--models", "nope"], "unknown model(s) nope"),
    (["validate", "moe-serving", "--data", "{tmp}/absent"], "no such folder"),
    (["validate", "host", "--seqs", "a,b"], "--seqs a,b"),
    (["validate", "host", "--models", "nope"], "unknown model(s) nope"),
    (["calibrate", "--data", "{tmp}/absent"], "no such folder"),
    (["calibrate", "--data", "{tmp}"], "no context_attention.csv.gz, generation_attention.csv.gz there"),
    (["calibrate", "--data", "{tmp}", "--comm"], "no nccl.csv.gz, custom_allreduce.csv.gz there"),
    (["calibrate", "--attention", "--comm"], "not allowed with argument"),
    (["calibrate", "--data", "{tmp}", "--gemm-keys", "nope"], "not GEMM constants: nope"),
    (["calibrate", "--data", "{tmp}", "--fp8", "--fp8-keys", "nope"], "not fp8 constants: nope"),
    (["calibrate", "--sample", "0"], "--sample"),
])
def test_bad_input_is_one_error_line(gemm_data, argv, fragment, capsys):
    # {tmp}: a folder holding gemm.csv.gz only
    code, _, err = cli(capsys, *[a.replace("{tmp}", str(gemm_data)) for a in argv])
    assert_one_error_line(code, err, fragment)


def test_a_table_that_is_not_one_is_one_error_line(tmp_path, capsys):
    (tmp_path / "gemm.csv.gz").write_bytes(b"not gzip")
    code, _, err = cli(capsys, "validate", "kernels", "--data", str(tmp_path), "--tables", "gemm")
    assert_one_error_line(code, err, "gemm.csv.gz: not a gzipped CSV")
    with gzip.open(tmp_path / "gemm.csv.gz", "wt") as f:
        f.write("dtype,m,n,k\nbfloat16,16,16,16\n")
    code, _, err = cli(capsys, "validate", "kernels", "--data", str(tmp_path), "--tables", "gemm")
    assert_one_error_line(code, err, "gemm.csv.gz: no column latency_ms")


def test_serving_markdown_by_hand():
    def point(tp, tpot, tpot_pred, ttft, ttft_pred):
        return {"tp": tp, "tpot_ms": tpot, "tpot_pred_ms": tpot_pred, "ttft_ms": ttft,
                "ttft_pred_ms": ttft_pred}

    # TPOT errors: tp 1 (11 - 10) / 10 = +10 %, tp 2 (9 - 10) / 10 = -10 %, (13 - 10) / 10 = +30 %;
    # TTFT errors: +50 %, 0 %, -20 %
    points = [point(1, 10, 11, 100, 150), point(2, 10, 9, 100, 100), point(2, 10, 13, 100, 80)]
    table = validate_serving.markdown("toy", points)
    lines = table.splitlines()
    assert lines[0] == "**toy**: 3 rows"
    assert lines[4] == "| tp 1 | 1 | 10.0% | 10.0% | +10.0% | 50.0% | 50.0% | +50.0% |"
    # tp 2: |TPOT| 10, 30: median 20, p90 10 + 0.9 x 20 = 28, signed (-10 + 30) / 2 = +10;
    #       |TTFT| 0, 20: median 10, p90 18, signed (0 - 20) / 2 = -10
    assert lines[5] == "| tp 2 | 2 | 20.0% | 28.0% | +10.0% | 10.0% | 18.0% | -10.0% |"
    # all: |TPOT| 10, 10, 30: median 10, p90 10 + 0.8 x 20 = 26, signed +10;
    #      |TTFT| 50, 0, 20: median 20, p90 20 + 0.8 x 30 = 44, signed 0
    assert lines[6] == "| all | 3 | 10.0% | 26.0% | +10.0% | 20.0% | 44.0% | +0.0% |"


def test_markdown_table_aligns_the_first_column_left():
    assert markdown.table(("a", "b"), [("x", 1)]) == "| a | b |\n|:---|---:|\n| x | 1 |"
    assert markdown.pct(0.0512) == "5.1%" and markdown.pct(-0.0512, signed=True) == "-5.1%"


def test_docs_tables_replaces_each_commands_output():
    from tools.docs_tables import fill

    page = "x\n```text\nestimate validate a\n```\n\n<!-- output -->\nold\n<!-- /output -->\ny\n"
    assert fill(page.replace("validate a", "validate a --markdown"), lambda command: "| t |\n") == (
        "x\n```text\nestimate validate a --markdown\n```\n\n<!-- output -->\n| t |\n<!-- /output -->\ny\n")
    assert fill(page, lambda command: f"| {command} |\n") == (
        "x\n```text\nestimate validate a\n```\n\n<!-- output -->\n```text\n| estimate validate a |\n```\n"
        "<!-- /output -->\ny\n")


def test_the_validation_page_holds_command_made_tables():
    from tools.docs_tables import BLOCK, ROOT

    page = (ROOT / "docs" / "validation.md").read_text()
    blocks = list(BLOCK.finditer(page))
    assert {m.group(1).split()[2] for m in blocks} >= {"kernels", "comm", "serving", "moe-serving"}
    for m in blocks:  # each validation's --markdown output: at least one table under it
        if m.group(1).startswith("estimate validate "):
            assert m.group(1).endswith("--markdown") and "\n|:---|" in m.group(0), m.group(1)
        else:  # text output, fenced
            assert "<!-- output -->\n```text\n" in m.group(0), m.group(1)


def test_validate_host_markdown_matches_its_json(tmp_path, capsys):
    from hostutil import fixed_cpu, write_yaml

    arch = tmp_path / "cpu.yaml"
    write_yaml(arch, fixed_cpu())  # a fixed descriptor: no calibration of this machine
    code, out, err = cli(capsys, "validate", "host", "--arch", str(arch), "--models", "llama-tiny",
                         "--seqs", "16", "--runs", "2", "--json", str(tmp_path / "h.json"), "--markdown")
    assert code == 0, err
    assert out.startswith("**Test CPU**; --fusion none; 1 x 2 runs per row\n\n| model | seq |")
    row = json.loads((tmp_path / "h.json").read_text())["rows"][0]
    cells = next(line for line in out.splitlines() if line.startswith("| llama-tiny | 16 |")).split(" | ")
    # error = (estimate - measured) / measured, against the fastest and the median of the runs
    assert cells[5] == markdown.pct((row["estimate_s"] - row["measured_min_s"]) / row["measured_min_s"], True)
    assert cells[6].rstrip(" |") == markdown.pct((row["estimate_s"] - row["measured_s"]) / row["measured_s"],
                                                 True)
    assert str(tmp_path) not in out  # the page names the machine, not its descriptor's path
