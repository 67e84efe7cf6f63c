"""`estimate validate serving` (estimator/calibration/validate_serving.py): each measured row runs at the
benchmark's own server configuration."""

from cliutil import assert_one_error_line, cli

from estimator.calibration import validate_serving
from estimator.serve.frameworks import framework
from estimator.serve.serving import Workload


def test_bench_framework_sets_the_generators_token_budget():
    fw = framework("trtllm")
    bench = validate_serving.bench_framework(fw, Workload(1024, 128, 64), block=32)
    assert bench.max_num_tokens == 2592  # 64 + 1024 + 1500 = 2588, rounded up to 81 blocks of 32
    assert bench.max_batch_size == 64  # the deployment's batch is the concurrency
    assert fw.max_num_tokens == 8192  # the framework's own default is untouched
    vllm = validate_serving.bench_framework(framework("vllm"), Workload(8192, 1024, 4), block=1)
    assert vllm.max_num_tokens == 4 + 8192 + 1500  # vllm.rule does not round


def test_every_set_names_its_budget_rounding():
    assert {spec["budget_block"] for spec in validate_serving.SETS.values()} == {32, 1}


def test_rows_are_priced_over_the_benchmarks_rounds():
    # the client sends 10 x C requests (--request-count 10 x concurrency): 10 rounds, the first a burst
    assert validate_serving.BENCH_ROUNDS == 10
    import inspect

    assert inspect.signature(validate_serving.predict).parameters["rounds"].default == 10


def test_read_rows_keeps_only_the_sets_version(tmp_path):
    import gzip

    header = "backend,backend_version,model_path,mode,isl\n"
    body = ("trtllm,1.0.0rc3,Qwen/Qwen3-32B,agg,1024\n"
            "trtllm,1.2.0rc6.post1,Qwen/Qwen3-32B,agg,2048\n"
            "trtllm,1.0.0rc3,Qwen/Qwen3-32B,disagg,4096\n"
            "vllm,0.12.0,Qwen/Qwen3-32B,agg,512\n")
    with gzip.open(tmp_path / "e2e_serving.csv.gz", "wt") as f:
        f.write(header + body)
    spec = validate_serving.SETS["32b-trtllm"]
    rows = validate_serving.read_rows(tmp_path, *spec["match"], spec["version"])
    assert [r["isl"] for r in rows] == ["1024"]  # the held-out set: one version, aggregated serving
    assert len(validate_serving.read_rows(tmp_path, *spec["match"])) == 2  # no version: both agg rows


def test_bad_sets_or_data_is_one_error_line(tmp_path, capsys):
    assert validate_serving.bad_args("8b-trtllm,nope", tmp_path) == (
        "error: --sets: unknown set(s) nope; known: 8b-trtllm, 70b-vllm, 32b-trtllm, 32b-vllm, 32b-sglang, "
        "235b-trtllm, gpt-oss-vllm")
    no_table = f"error: --data {tmp_path}: no e2e_serving.csv.gz there"
    assert validate_serving.bad_args("8b-trtllm", tmp_path) == no_table
    (tmp_path / "e2e_serving.csv.gz").write_bytes(b"")
    assert validate_serving.bad_args("8b-trtllm,32b-trtllm", tmp_path) is None
    code, _, err = cli(capsys, "validate", "serving", "--sets", "nope", "--data", str(tmp_path))
    assert_one_error_line(code, err, "--sets: unknown set(s) nope")
    code, _, err = cli(capsys, "validate", "serving", "--data", str(tmp_path / "absent"))
    assert_one_error_line(code, err, "no e2e_serving.csv.gz there")


def test_moe_rows_are_priced_at_their_own_expert_parallel_split():
    # Qwen3-235B's TensorRT-LLM rows ran TP 4 / EP 4 (and two at TP 4 / MoE-TP 2 / EP 2): one GPU holds
    # 128 / 4 = 32 whole experts, not all 128 at a quarter of their width
    spec = validate_serving.SETS["235b-trtllm"]

    def row(tp, moe_tp, ep):
        return {"tp_size": tp, "moe_tp_size": moe_tp, "moe_ep_size": ep}

    assert validate_serving.split_of(spec, row("4", "1", "4")) == (4, 1, 4)
    assert validate_serving.split_of(spec, row("4", "2", "2")) == (4, 2, 2)
    # a dense model's MoE columns (Qwen3-32B's 1 / 1, or 0 / 0) say nothing: attention TP alone
    dense = validate_serving.SETS["32b-trtllm"]
    assert validate_serving.split_of(dense, row("8", "1", "1")) == (8, 8, 1)
    assert validate_serving.label({"tp": 4, "ep": 4, "moe_tp": 1}) == "tp 4 ep 4"
    assert validate_serving.label({"tp": 4, "ep": 2, "moe_tp": 2}) == "tp 4 ep 2 moe-tp 2"
    assert validate_serving.label({"tp": 8, "ep": 1, "moe_tp": 8}) == "tp 8"
