"""Bad profile files: one `error:` line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest
from cliutil import assert_one_error_line, cli

DATA = Path(__file__).parent / "data" / "profiles"


def _write(tmp_path, name, data: bytes) -> str:
    f = tmp_path / name
    f.write_bytes(data)
    return str(f)


def _sqlite(tmp_path, name, sql: list[str]) -> str:
    f = tmp_path / name
    db = sqlite3.connect(f)
    for s in sql:
        db.execute(s)
    db.commit()
    db.close()
    return str(f)


CASES = {
    "empty": (lambda t: _write(t, "empty.sqlite", b""), "empty file"),
    "missing": (lambda t: str(t / "nope.sqlite"), "no such file"),
    "truncated sqlite": (
        lambda t: _write(
            t, "cut.sqlite", (DATA / "nsys_export_h100_nvfuser_matmul.sqlite").read_bytes()[:20000]
        ),
        "truncated",
    ),
    "wrong format": (lambda t: _write(t, "x.bin", bytes(range(256)) * 4), "not a profile this tool reads"),
    "plain sqlite": (
        lambda t: _sqlite(t, "other.sqlite", ["create table t(a)"]),
        "not an Nsight Systems export",
    ),
    "unknown schema version": (
        lambda t: _sqlite(
            t,
            "v9.sqlite",
            [
                "create table META_DATA_EXPORT(name, value)",
                "insert into META_DATA_EXPORT values ('EXPORT_SCHEMA_VERSION', '9.1.0')",
            ],
        ),
        "schema '9.1.0'",
    ),
    "kernel table without columns": (
        lambda t: _sqlite(
            t,
            "cols.sqlite",
            [
                "create table META_DATA_EXPORT(name, value)",
                "insert into META_DATA_EXPORT values ('EXPORT_SCHEMA_VERSION', '3.99.0')",
                "create table CUPTI_ACTIVITY_KIND_KERNEL(start, end)",
            ],
        ),
        "lacks deviceId",
    ),
    "no kernels captured": (
        lambda t: _sqlite(
            t,
            "nok.sqlite",
            [
                "create table META_DATA_EXPORT(name, value)",
                "insert into META_DATA_EXPORT values ('EXPORT_SCHEMA_VERSION', '3.16.1')",
            ],
        ),
        "no CUDA kernel",
    ),
    "ncu csv missing columns": (
        lambda t: _write(t, "m.csv", b'"ID","Kernel Name","Metric Name"\n"0","k","x"\n'),
        "needs the column(s) Metric Unit, Metric Value",
    ),
    "nsys csv missing columns": (
        lambda t: _write(t, "n.csv", b"Time (%),Total Time (ns),Name\n1,2,k\n"),
        "needs the columns",
    ),
    "nsys csv truncated row": (
        lambda t: _write(
            t, "tr.csv", (DATA / "nsys_cuda_gpu_kern_sum_rtx5090_projector.csv").read_bytes()[:105]
        ),
        "truncated",
    ),
    "truncated gzip": (
        lambda t: _write(
            t, "t.json.gz", (DATA / "pytorch_kineto_a100_alexnet_trace.json.gz").read_bytes()[:3000]
        ),
        "truncated gzip",
    ),
    "truncated json": (
        lambda t: _write(t, "t.json", b'[{"cat": "Node", "name": "a_kernel_time"'),
        "not valid JSON",
    ),
    "json of another tool": (lambda t: _write(t, "o.json", b'{"hello": 1}'), "neither a PyTorch"),
    "gzip of junk": (lambda t: _write(t, "j.json.gz", gzip.compress(b"not json")), "not valid JSON"),
    "truncated ncu-rep": (
        lambda t: _write(
            t, "r.ncu-rep", (DATA / "ncu_report_h800_sm90_full_set.ncu-rep").read_bytes()[:100000]
        ),
        "holds no ranges",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_is_one_error_line(case, tmp_path, capsys):
    make, fragment = CASES[case]
    if case == "truncated ncu-rep":
        pytest.importorskip("ncu_report", reason="NVIDIA's ncu_report module (extra 'nsight') reads .ncu-rep")
    code, out, err = cli(capsys, "profile", make(tmp_path))
    assert_one_error_line(code, err, fragment)
    assert out == ""


def test_bad_options(capsys):
    path = str(DATA / "nsys_export_h100_nvfuser_matmul.sqlite")
    assert_one_error_line(*cli(capsys, "profile", path, "--frobnicate")[::2], "unrecognized arguments")
    assert_one_error_line(*cli(capsys, "profile", path, "--top", "0")[::2], "--top must be at least 1")
    assert_one_error_line(*cli(capsys, "profile", path, "--dim", "seq=8")[::2], "give --model too")
    assert_one_error_line(*cli(capsys, "profile", path, "--model", "nope")[::2], "neither an .onnx file")
    assert_one_error_line(*cli(capsys, "profile", path, "--arch", "z900")[::2], "z900")


def test_an_unwritable_report_fails_before_the_profile_is_read(capsys, monkeypatch):
    import estimator.profile.load

    def never(*a, **k):
        raise AssertionError("read the profile before the --report path was checked")

    monkeypatch.setattr(estimator.profile.load, "load", never)
    path = str(DATA / "nsys_export_h100_nvfuser_matmul.sqlite")
    code, _, err = cli(capsys, "profile", path, "--model", "gpt2-small", "--report", "/nonexistent/r.html")
    assert_one_error_line(code, err, "--report /nonexistent/r.html: no such directory")
    code, _, err = cli(capsys, "profile", path, "--report", "r.html")
    assert_one_error_line(code, err, "give --model too")
