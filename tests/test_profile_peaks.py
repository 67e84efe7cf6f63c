"""Fractions of peak, bottleneck classes and timelines of measured kernels, on records built in code
with hand-worked numbers."""

from __future__ import annotations

import pytest

import hwdesc
from estimator.cost.registry import Work
from estimator.profile import peaks, timeline
from estimator.profile.names import kind_of, normalise
from estimator.profile.record import MeasuredKernel

H100 = hwdesc.load("h100-sxm")  # bf16 tensor 989.4e12 FLOP/s, DRAM 3.35e12 B/s


def k(
    name="nvjet_hsh_128x256",
    dur=1e-3,
    start=None,
    launch=None,
    stream=7,
    device=0,
    counters=None,
    instances=1,
):
    return MeasuredKernel(
        name,
        normalise(name),
        kind_of(name),
        dur,
        instances=instances,
        start_s=start,
        launch_s=launch,
        stream=stream,
        device=device,
        counters=counters or {},
    )


@pytest.mark.parametrize(
    "name, kind",
    [
        ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "gemm"),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
            "_execute_segment_k_off",
            "gemm",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
            "(T1::Params)",
            "gemm",
        ),
        (
            "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false>, true>"
            "(Flash_fwd_params)",
            "attention",
        ),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
        ("triton_poi_fused_add_mul_0", "elementwise"),
        ("triton_red_fused_sum_1", "reduction"),
        ("triton_tem_fused_mm_2", "gemm"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int)", "norm"),
        (
            "void at::native::unrolled_elementwise_kernel<"
            "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)"
            "::[lambda() (instance 3)], std::array<char *, (unsigned long)2>>(int, T1)",
            "copy",
        ),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096>)", "communication"),
        ("std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float>(T13)", "gemm"),
        ("__myl_bb0_1_ResTraCasMul", "other"),
    ],
)
def test_kinds(name, kind):
    assert kind_of(name) == kind


def test_fractions_from_counters_then_ops_then_work():
    # counters: Hopper pipe and DRAM percentages are read as they are
    a = peaks.achieved(
        k(
            counters={
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 72.0,
                "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 10.0,
            }
        ),
        H100,
    )
    assert (a.tensor, a.dram, a.source("tensor")) == (0.72, 0.10, "counter")
    # Blackwell's tcgen05 pipe wins over the older name when both are there
    a = peaks.achieved(
        k(
            counters={
                "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active": 90.0,
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 5.0,
            }
        ),
        H100,
    )
    assert a.tensor == 0.90
    # op counts: 494.7e9 bf16 ops in 1 ms = 494.7 TFLOP/s = half of 989.4; 1.675e9 B in 1 ms = 1.675 TB/s
    a = peaks.achieved(
        k(
            counters={
                "sm__ops_path_tensor_src_bf16_dst_fp32.sum": 494.7e9,
                "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum": 494.7e9,  # not twice
                "dram__bytes_read.sum": 1.0e9,
                "dram__bytes_write.sum": 0.675e9,
            }
        ),
        H100,
    )
    assert a.tensor == pytest.approx(0.5) and a.source("tensor") == "ops"
    assert a.dram == pytest.approx(1.675e9 / 1e-3 / H100.dram_bytes_per_s)
    # the estimator's Work: 2 * 4096^3 bf16 FLOPs in 1 ms against 989.4e12; 3 * 4096^2 * 2 B at DRAM peak
    work = Work({("tensor", "bf16"): 2 * 4096**3}, 2 * 4096 * 4096 * 2, 4096 * 4096 * 2)
    a = peaks.achieved(k(), H100, work)
    assert a.tensor == pytest.approx(2 * 4096**3 / 989.4e12 / 1e-3)  # 0.1389
    assert a.dram == pytest.approx(3 * 4096 * 4096 * 2 / 1e-3 / H100.dram_bytes_per_s)
    assert a.source("tensor") == a.source("dram") == "work"
    # a summary record of 4 launches sharing 4 ms: Work is per launch, so the fraction is unchanged
    assert peaks.achieved(k(dur=4e-3, instances=4), H100, work).tensor == pytest.approx(a.tensor)


def test_bottleneck_rules():
    busy = peaks.Achieved(tensor=0.8, dram=0.3)
    assert peaks.bottleneck(k(), busy) == peaks.Bottleneck("compute", 0.8, "tensor at 80% of peak")
    assert peaks.bottleneck(k(), peaks.Achieved(tensor=0.1, dram=0.7)).kind == "memory"
    slow = peaks.bottleneck(k(), peaks.Achieved(tensor=0.2, dram=0.3, occupancy=0.12))
    assert slow == peaks.Bottleneck("latency", 0.3, "busiest unit dram at 30% of peak, occupancy 12%")
    # the stream waited 2 ms for a 1 ms kernel: the launch, not the GPU, set the pace
    gap = peaks.bottleneck(k(), busy, gap_before_s=2e-3)
    assert (gap.kind, gap.value) == ("launch gap", 2e-3)
    assert peaks.bottleneck(k("ncclDevKernel_AllGather"), busy).kind == "communication"
    assert peaks.bottleneck(k(), peaks.Achieved()).kind == "unknown"


def test_timeline_busy_gaps_launch_and_overlap():
    us = 1e-6
    ks = [  # stream 7: [0, 10] [15, 20] [20, 30]; stream 9: an all-reduce [5, 25] overlapping both
        k(dur=10 * us, start=0.0, launch=-5 * us),
        k(dur=5 * us, start=15 * us, launch=12 * us),  # launched after the first ended: a launch-bound gap
        k(dur=10 * us, start=20 * us, launch=1 * us),
        k("ncclDevKernel_AllReduce", dur=20 * us, start=5 * us, launch=0.0, stream=9),
    ]
    t = timeline.build(ks)
    s7 = next(s for s in t.streams if s.stream == 7)
    assert s7.busy_s == pytest.approx(25 * us) and s7.gaps_s == pytest.approx(5 * us) and s7.gap_count == 1
    assert t.gap_before == {1: pytest.approx(5 * us)}
    assert t.span_s == pytest.approx(30 * us) and t.busy_s == pytest.approx(30 * us) and t.idle_s == 0.0
    # the 5 us gap on stream 7 is covered by the all-reduce on stream 9: the device never waited
    assert t.launch_bound_gaps_s == pytest.approx(0.0)
    # communication [5, 25] overlaps compute [0, 10] + [15, 30]: 5 + 10 = 15 of its 20 us
    assert t.comm_s == pytest.approx(20 * us) and t.comm_overlap_s == pytest.approx(15 * us)
    assert t.comm_overlap_share == pytest.approx(0.75)
    # launch latency = start - launch call: 5, 3, 19 and 5 us
    assert t.launch_latency_min_s == pytest.approx(3 * us) and t.launch_latency_median_s == pytest.approx(
        5 * us
    )
    alone = timeline.build(ks[:3])
    assert alone.launch_bound_gaps_s == pytest.approx(
        5 * us
    ) and alone.launch_overhead_share == pytest.approx(5 / 30)
    assert timeline.build([k()]) is None  # no timestamps, no timeline
