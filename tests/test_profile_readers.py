"""Readers of measured profiles (estimator/profile/): every fixture in tests/data/profiles/ (genuine tool
outputs, provenance in its README.md) loads with the numbers the tools themselves show, or is refused
with one `error:` line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from cliutil import assert_one_error_line, cli

from estimator.profile import gpu, names, peaks, summary
from estimator.profile.load import load

DATA = Path(__file__).parent / "data" / "profiles"

# file -> (records, a fragment of a warning or None) when it loads; an error fragment when refused
LOADS = {
    "ncu_details_rtx5090_cublas_gemv.csv": (1, None),
    "ncu_details_rtx5090_cutlass_tensorop_gemm.csv": (1, None),
    "ncu_details_rtx5090_flash_fwd_splitkv.csv": (1, None),
    "ncu_report_a10g_sm86_esmm.ncu-rep": (3, "action 3 (vectorized_blocktiling): no measured duration"),
    "ncu_report_h800_sm90_full_set.ncu-rep": (4, "action 4 (flash_fwd_kernel): no measured duration"),
    "nsys_cuda_gpu_kern_sum_rtx5090_decode.csv": (46, "no per-launch timestamps"),
    "nsys_cuda_gpu_kern_sum_rtx5090_projector.csv": (2, "no per-launch timestamps"),
    "nsys_export_h100_nvfuser_matmul.sqlite": (19, None),
    "nsys_export_h200_nvfuser_matmul.sqlite": (19, None),
    "nsys_export_h100_2gpu_1s_trimmed.sqlite": (3442, "1810 of 3442 kernels have no runtime launch record"),
    "nsys_export_a100_saxpy_schema2.9_trimmed.sqlite": (5, None),
    "pytorch_kineto_a100_alexnet_trace.json.gz": (79, None),
    "pytorch_kineto_a100_cupti_counters_trace.json.gz": (77, "CUPTI range-profiler trace"),
}
REFUSED = {
    "nsys_nvtx_pushpop_trace_nbody.csv": "NVTX range trace (nvtx_pushpop_trace) holds ranges, not kernels",
    "nsys_stats_console_h100_nvfuser_matmul.txt": "column-aligned nsys console output",
}
NEEDS_NCU_REPORT = {f for f in LOADS if f.endswith(".ncu-rep")}


def _ncu_report_or_skip():
    pytest.importorskip(
        "ncu_report",
        reason="NVIDIA's ncu_report module (extra 'nsight': pip install ncu-report) reads .ncu-rep files",
    )


def test_every_fixture_is_listed():
    fixtures = {p.name for p in DATA.iterdir() if not p.name.startswith(("LICENSE", "README"))}
    assert fixtures == set(LOADS) | set(REFUSED)


@pytest.mark.parametrize("name", sorted(LOADS))
def test_fixture_loads(name, capsys):
    if name in NEEDS_NCU_REPORT:
        _ncu_report_or_skip()
    records, warning = LOADS[name]
    p = load(str(DATA / name))
    assert len(p.kernels) == records
    assert all(k.duration_s >= 0 and k.kind in names.KINDS for k in p.kernels)
    if warning:
        assert any(warning in w for w in p.warnings), p.warnings
    code, out, err = cli(capsys, "profile", str(DATA / name), "--arch", "h100-sxm", "--top", "3")
    assert code == 0 and "by kind:" in out
    if warning:
        assert warning in out


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_fixture_refused_with_reason(name, capsys):
    code, out, err = cli(capsys, "profile", str(DATA / name))
    assert_one_error_line(code, err, REFUSED[name])


# ---- the H100 nvFuser export against nsys's own cuda_gpu_kern_sum ----------------------------------


def _oracle_rows() -> list[tuple[str, int, int, float, float, int, int, float]]:
    """(name prefix, instances, total ns, avg, med, min, max, stddev) of the console kern_sum table."""
    text = (DATA / "nsys_stats_console_h100_nvfuser_matmul.txt").read_text()
    table = text.split("Executing 'cuda_gpu_kern_sum' stats report")[1].split("Executing '")[0]
    rows = []
    for line in table.splitlines():
        m = re.match(
            r"\s*[\d.]+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(.*)$", line
        )
        if m:
            total, n, avg, med, lo, hi, sd, name = m.groups()
            rows.append(
                (
                    name.rstrip().rstrip("…"),
                    int(n),
                    int(total),
                    float(avg),
                    float(med),
                    int(lo),
                    int(hi),
                    float(sd),
                )
            )
    return rows


def test_h100_export_reproduces_nsys_kern_sum():
    rows = summary.by_name(load(str(DATA / "nsys_export_h100_nvfuser_matmul.sqlite")).kernels)
    oracle = _oracle_rows()
    assert len(oracle) == 15 == len(rows)
    assert sum(o[2] for o in oracle) == round(sum(r.total_s for r in rows) * 1e9) == 402301  # ns
    # Names in the console table are truncated with "...": compare, per prefix, the multiset of rows.
    for prefix in {o[0] for o in oracle}:
        want = sorted(o[1:] for o in oracle if o[0] == prefix)
        got = sorted(
            (
                r.instances,
                round(r.total_s * 1e9),
                round(r.avg_s * 1e9, 1),
                round(r.med_s * 1e9, 1),
                round(r.min_s * 1e9),
                round(r.max_s * 1e9),
                round(r.std_s * 1e9, 1),
            )
            for r in rows
            if r.name.startswith(prefix)
        )
        assert got == want, prefix
    nvfuser = next(r for r in rows if "nvfuser_none_f0_c0_r0_g0" in r.name)
    assert (nvfuser.instances, round(nvfuser.total_s * 1e9)) == (1, 135999)
    dist = next(r for r in rows if "distribution_elementwise" in r.name)
    assert round(dist.avg_s * 1e9, 1) == (40416 + 40256) / 2 == 40336.0


def test_h100_export_gpu_and_launch_latency():
    p = load(str(DATA / "nsys_export_h100_nvfuser_matmul.sqlite"))
    assert (p.gpu.name, p.gpu.compute_capability, p.gpu.sm_count) == ("NVIDIA H100 80GB HBM3", "9.0", 132)
    assert p.gpu.dram_bytes_per_s == 3_352_320_000_000
    assert gpu.sku_for(p.gpu.name) == "h100-sxm"
    # nvjet launched by cuLaunchKernel: the earliest launch-to-start latency of the capture is 5.687 us
    assert min(k.start_s - k.launch_s for k in p.kernels) == pytest.approx(5.687e-6, abs=1e-9)


def test_schema_2_export_and_nvtx_attribution():
    p = load(str(DATA / "nsys_export_a100_saxpy_schema2.9_trimmed.sqlite"))
    assert p.gpu.name == "NVIDIA A100-SXM4-40GB" and p.gpu.dram_bytes_per_s == 1_555_200_000_000
    # each saxpy launch sits inside the NVTX push/pop range "saxpy" of its launching thread
    assert [k.node for k in p.kernels] == ["saxpy"] * 5 and {k.short for k in p.kernels} == {"saxpy"}


# ---- Nsight Compute ---------------------------------------------------------------------------------


def _section_metric(action, section_id: str, label: str) -> float:
    section = next(s for s in action.sections() if s.identifier() == section_id)
    metric = next(m for m in [*section.header_metrics(), *section.body_metrics()] if m.label() == label)
    return metric.value()


def test_h800_report_matches_its_sections():
    _ncu_report_or_skip()
    import ncu_report

    path = str(DATA / "ncu_report_h800_sm90_full_set.ncu-rep")
    p = load(path)
    hw, note = gpu.resolve(p.gpu, None)
    assert p.gpu.name == "NVIDIA H800" and hw.name == "h100-sxm"
    rng = ncu_report.load_report(path).range_by_idx(0)
    actions = [rng.action_by_idx(j) for j in range(rng.num_actions())][:4]  # the 5th holds NaN only
    for k, action in zip(p.kernels, actions, strict=True):
        a = peaks.achieved(k, hw)
        assert k.duration_s == _section_metric(action, "SpeedOfLight", "Duration") / 1e9  # ns
        assert a.dram == _section_metric(action, "SpeedOfLight", "DRAM Throughput") / 100
        assert a.occupancy == _section_metric(action, "Occupancy", "Achieved Occupancy") / 100
        assert a.source("dram") == a.source("occupancy") == "counter"
    first = peaks.achieved(p.kernels[0], hw)
    assert p.kernels[0].duration_s == pytest.approx(16448e-9) and first.occupancy == pytest.approx(
        0.57721, abs=1e-5
    )
    assert p.kernels[0].grid == (1056, 1, 1) and p.kernels[0].block == (256, 1, 1)


def test_rtx5090_cutlass_gemm_csv():
    p = load(str(DATA / "ncu_details_rtx5090_cutlass_tensorop_gemm.csv"))
    (k,) = p.kernels
    assert k.kind == "gemm" and k.grid == (332, 1, 1) and k.block == (256, 1, 1) and k.stream == 7
    assert p.gpu.compute_capability == "12.0"
    hw, _ = gpu.resolve(p.gpu, "rtx-5090")
    a = peaks.achieved(k, hw)
    assert k.duration_s == pytest.approx(111.81e-6)  # "Duration","us","111.81"
    # tensor ops over the duration against the bf16 dense peak: 12,532,580,352 / 111.81 us / 209.5 TF/s
    assert a.tensor == pytest.approx(12_532_580_352 / 111.81e-6 / 209.5e12) and a.source("tensor") == "ops"
    assert a.tensor == pytest.approx(0.5350, abs=1e-4)
    assert a.dram == pytest.approx(0.0887) and a.source("dram") == "counter"  # "DRAM Throughput","%","8.87"
    assert a.l2_hit == pytest.approx(0.8044) and a.occupancy == pytest.approx(0.1673)
    # the nsys spelling of the same kernel (MANIFEST.md) normalises to the ncu one
    nsys = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
            "(T1::Params)")
    assert names.normalise(nsys) == names.normalise(k.name) == k.short
    assert k.short == "Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"


def test_ncu_raw_page_csv(tmp_path):
    f = tmp_path / "raw.csv"
    f.write_text(
        "==PROF== Connected to process 1\n"
        '"ID","Kernel Name","Stream","Block Size","Grid Size","Device","CC",'
        '"dram__bytes_read.sum","gpu__time_duration.sum","lts__t_sector_hit_rate.pct"\n'
        '"","","","","","","","Mbyte","usecond","%"\n'
        '"0","void nvjet_hsh_64x8(int)","7","(128, 1, 1)","(66, 1, 1)","0","9.0","1,024.5","12.5","80"\n'
        '"1","ampere_sgemm_32x32","7","(64, 1, 1)","(8, 2, 1)","0","9.0","n/a","2","n/a"\n'
    )
    p = load(str(f))
    a, b = p.kernels
    assert a.counters["dram__bytes_read.sum"] == 1024.5e6 and a.duration_s == pytest.approx(12.5e-6)
    assert a.counters["lts__t_sector_hit_rate.pct"] == 80.0 and a.grid == (66, 1, 1)
    assert b.duration_s == pytest.approx(2e-6) and "dram__bytes_read.sum" not in b.counters  # n/a
    assert a.kind == b.kind == "gemm" and a.short == "nvjet_hsh_64x8"


def test_nsys_kern_sum_and_gpu_trace(tmp_path):
    p = load(str(DATA / "nsys_cuda_gpu_kern_sum_rtx5090_projector.csv"))
    gemm, copy = p.kernels
    assert (gemm.kind, gemm.instances, gemm.duration_s) == ("gemm", 1, pytest.approx(33696e-9))
    assert copy.kind == "copy" and copy.duration_s == pytest.approx(1792e-9)
    f = tmp_path / "trace.csv"
    f.write_text(
        "Generating SQLite file report.sqlite\nProcessing [report.sqlite] with [cuda_gpu_trace.py]...\n"
        "Start (us),Duration (us),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),"
        "DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name\n"
        '10.0,5.0,1,4,1,1,128,1,1,32,0,0,,,,,NVIDIA H200 (0),1,,7,"void gemv<float, 4>(int)"\n'
        "16.0,1.0,2,,,,,,,,,,0.5,500,Device,Pageable,NVIDIA H200 (0),1,,7,[CUDA memcpy Device-to-Host]\n"
        "20.0,2.0,3,1,1,1,32,1,1,16,0,0,,,,,NVIDIA H200 (0),1,,7,layer_norm_kernel\n"
    )
    t = load(str(f))
    assert [k.short for k in t.kernels] == ["gemv<float, 4>", "layer_norm_kernel"]
    assert t.kernels[0].start_s == pytest.approx(10e-6) and t.kernels[1].duration_s == pytest.approx(2e-6)
    assert t.gpu.name == "NVIDIA H200" and t.kernels[0].device == 0 and t.timeline
    assert t.warnings == ["1 memcpy/memset rows left out"]


def test_kineto_trace():
    p = load(str(DATA / "pytorch_kineto_a100_alexnet_trace.json.gz"))
    assert p.gpu.name == "NVIDIA A100-PG509-200" and gpu.sku_for(p.gpu.name) == "a100"
    k = p.kernels[0]
    assert k.grid == (864, 1, 1) and k.block == (256, 1, 1) and k.stream == 7 and k.duration_s == 71e-6
    assert sum(x.launch_s is not None for x in p.kernels) == 79  # every kernel finds its cudaLaunchKernel
    counters = load(str(DATA / "pytorch_kineto_a100_cupti_counters_trace.json.gz")).kernels[0]
    assert counters.counters["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] == 38731776


def test_ort_json_kernel_events_follow_their_node(tmp_path):
    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100, "ph": "X"},
        {
            "cat": "Node",
            "name": "mm_kernel_time",
            "ts": 1,
            "dur": 30,
            "ph": "X",
            "args": {"op_name": "MatMul", "provider": "CUDAExecutionProvider"},
        },
        {
            "cat": "Kernel",
            "name": "nvjet_hsh_128x64",
            "ts": 2,
            "dur": 20,
            "ph": "X",
            "args": {
                "stream": "7",
                "grid_x": "4",
                "grid_y": "1",
                "grid_z": "1",
                "block_x": "128",
                "block_y": "1",
                "block_z": "1",
            },
        },
        {
            "cat": "Node",
            "name": "sm_kernel_time",
            "ts": 40,
            "dur": 10,
            "ph": "X",
            "args": {"op_name": "Softmax", "provider": "CUDAExecutionProvider"},
        },
        {"cat": "Kernel", "name": "softmax_warp_forward", "ts": 41, "dur": 4, "ph": "X", "args": {}},
    ]
    import json

    f = tmp_path / "ort.json"
    f.write_text(json.dumps(events))
    p = load(str(f))
    assert [(k.short, k.node, k.op, k.duration_s) for k in p.kernels] == [
        ("nvjet_hsh_128x64", "mm", "MatMul", 20e-6),
        ("softmax_warp_forward", "sm", "Softmax", 4e-6),
    ]
    assert p.kernels[0].grid == (4, 1, 1) and p.kernels[0].stream == 7 and not p.host
    assert p.run_wall_s == [100e-6] and math.isclose(p.total_s, 24e-6)
