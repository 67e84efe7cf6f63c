"""The collective model (estimator/pricing/collectives.py) on a made-up interconnect with round constants,
so every expected time is worked out by hand beside it; then the cost functions, price() and the CLI."""

from __future__ import annotations

import dataclasses
import json

import onnx
import pytest
import sympy
from cliutil import assert_one_error_line, cli
from onnx import TensorProto, helper

import hwdesc
from costutil import cost, op
from estimator.cost.collective import CollectiveNodeError
from estimator.pricing import collectives as coll
from hwdesc.interconnect import CollectiveConstants, Interconnect, Line

MiB = 2**20
LINK = 400e9  # bytes/s per direction
DRAM = 3.35e12  # h100-sxm dram_bytes_per_s
DRAM_EFF = 0.822  # h100-sxm efficiency.dram


def _hw(sharp: bool = True, domain: int = 8, simple_only: bool = False):
    simple = Line(5e-6, 1e-6, (0.5,))
    ll = Line(2e-6, 0.5e-6, (0.01,))
    protos = {"simple": simple} if simple_only else {"ll": ll, "simple": simple}
    consts = CollectiveConstants(
        nccl={op_: protos for op_ in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")},
        nvls=Line(20e-6, 0.0, (0.8,)), nvls_min_gpus=8,
        custom={"oneshot": Line(3e-6, 0.1e-6, (0.5,)), "twoshot": Line(10e-6, 0.5e-6, (0.5,)),
                "multimem": Line(6e-6, 0.25e-6, (0.4,))},
        source="test")
    ic = Interconnect(4, LINK, domain, sharp, 8, "pcie", 50e9, 25e9, consts)
    return dataclasses.replace(hwdesc.load("h100-sxm"), interconnect=ic)


def close(a, b):
    return float(a) == pytest.approx(b, rel=1e-9)


def test_ring_all_reduce_by_hand():
    hw = _hw(sharp=False, simple_only=True)
    c = coll.collective_cost("AllReduce", 8 * MiB, 4, hw)
    # 6 ring steps (2(g-1)); bus bytes 2(g-1)/g * N = 1.5 * 8 MiB at 0.5 of 400 GB/s
    assert close(c.estimate_s, 5e-6 + 6 * 1e-6 + 1.5 * 8 * MiB / (0.5 * LINK))  # 73.9 us
    assert close(c.bound_s, 1.5 * 8 * MiB / LINK)  # 31.5 us: above the DRAM read + write 2 * 8 MiB / DRAM
    assert (c.algorithm, c.protocol) == ("ring", "Simple")


def test_small_message_takes_the_low_latency_protocol():
    c = coll.collective_cost("AllReduce", 1024, 4, _hw(sharp=False))
    # LL: 2 + 6 * 0.5 = 5 us + 1.5 KiB / 4 GB/s = 0.384 us; Simple: 11 us + 1.5 KiB / 200 GB/s
    assert close(c.estimate_s, 2e-6 + 6 * 0.5e-6 + 1.5 * 1024 / (0.01 * LINK))
    assert c.protocol == "LL"


def test_nvls_for_large_bf16_all_reduce_on_eight_gpus_only():
    hw = _hw()
    n = 256 * MiB
    bf16 = coll.collective_cost("AllReduce", n, 8, hw, dtype="bf16")
    # NVLS: 20 us + N / (0.8 * 400 GB/s) = 858.9 us; ring Simple: 5 + 14 us + 1.75 N / 200 GB/s = 2368 us
    assert close(bf16.estimate_s, 20e-6 + n / (0.8 * LINK))
    assert bf16.algorithm == "nvls"
    assert close(bf16.bound_s, 7 / 8 * n / LINK)  # the switch reduces: (g-1)/g of N leaves each GPU
    int8 = coll.collective_cost("AllReduce", n, 8, hw, dtype="int8")
    assert int8.algorithm == "ring" and close(int8.bound_s, 1.75 * n / LINK)
    four = coll.collective_cost("AllReduce", n, 4, hw, dtype="bf16")
    assert four.algorithm == "ring"  # nvls_min_gpus = 8


def test_nvls_chunk_ladder_by_hand():
    # NCCL's ladder, ops = 24 NVLS channels x 8 heads = 192: 128 KiB halves to 64 KiB under
    # 64 * 192 * 128 KiB = 1.5 GiB, to 32 KiB under 8 * 192 * 64 KiB = 96 MiB, to 16 KiB under
    # 2 * 192 * 32 KiB = 12 MiB
    ops = 192
    assert coll.nvls_chunk_bytes(12 * MiB - 1, ops) == 16384
    assert coll.nvls_chunk_bytes(12 * MiB, ops) == 32768
    assert coll.nvls_chunk_bytes(96 * MiB - 1, ops) == 32768
    assert coll.nvls_chunk_bytes(96 * MiB, ops) == 65536
    assert coll.nvls_chunk_bytes(1536 * MiB, ops) == 131072
    x = sympy.Symbol("x", positive=True)
    assert coll.nvls_chunk_bytes(x, ops).subs(x, 32 * MiB) == 32768  # the Piecewise agrees


def test_nvls_rate_is_capped_by_chunks_per_chunk_time():
    hw = _hw()
    consts = dataclasses.replace(hw.interconnect.collectives, nvls_channels=24, nvls_chunk_s=20e-6)
    ic = dataclasses.replace(hw.interconnect, collectives=consts)
    chunked = dataclasses.replace(hw, interconnect=ic)
    n = 32 * MiB
    # 192 ops x 32 KiB / 20 us = 314.6 GB/s, under 0.8 x 400 GB/s = 320 GB/s
    assert close(coll.nvls_rate(n, 8, consts, LINK), 192 * 32768 / 20e-6)
    c = coll.collective_cost("AllReduce", n, 8, chunked, dtype="bf16")
    assert c.algorithm == "nvls" and close(c.estimate_s, 20e-6 + n / (192 * 32768 / 20e-6))
    # from 96 MiB the chunk is 64 KiB: 629 GB/s of chunks, so the link's 320 GB/s caps it
    assert close(coll.nvls_rate(256 * MiB, 8, consts, LINK), 0.8 * LINK)
    # no chunk constants (Hopper's file): the line alone
    assert close(coll.nvls_rate(n, 8, hw.interconnect.collectives, LINK), 0.8 * LINK)


def test_all_gather_reduce_scatter_all_to_all_and_send():
    hw = _hw(simple_only=True)
    n = 64 * MiB
    for kind in ("AllGather", "ReduceScatter", "AllToAll"):
        c = coll.collective_cost(kind, n, 8, hw)
        # 7 steps; bus bytes (g-1)/g * N
        assert close(c.estimate_s, 5e-6 + 7 * 1e-6 + 7 / 8 * n / (0.5 * LINK)), kind
        assert close(c.bound_s, 7 / 8 * n / LINK), kind
    send = coll.collective_cost("Send", n, 2, hw)
    assert close(send.estimate_s, 5e-6 + 1e-6 + n / (0.5 * LINK))  # one step of a 2-GPU all-gather
    assert send.algorithm == "p2p"


def _p2p_hw(ll_max: int = 32768):
    """_hw() with NCCL's p2p rule: LL up to `ll_max` bytes per peer (the LL efficiency is one peer's
    stream: 0.01 of 400 GB/s = 4 GB/s), Simple above (5 us + 1 us per peer, 0.5 of the link)."""
    hw = _hw()
    consts = dataclasses.replace(hw.interconnect.collectives, p2p_ll_max_bytes_per_peer=float(ll_max))
    return dataclasses.replace(hw, interconnect=dataclasses.replace(hw.interconnect, collectives=consts))


def test_all_to_all_takes_ll_by_the_bytes_per_peer_one_stream_per_peer():
    hw = _p2p_hw()
    c = coll.collective_cost("AllToAll", 64 * 1024, 8, hw)
    # 8 KiB per peer <= 32 KiB: LL, 2 us + 7 peers x 0.5 us = 5.5 us, + 8192 B / 4 GB/s = 2.048 us
    assert close(c.estimate_s, 2e-6 + 7 * 0.5e-6 + 8192 / (0.01 * LINK))  # 7.548 us
    assert (c.algorithm, c.protocol) == ("p2p", "LL")
    four = coll.collective_cost("AllToAll", 32 * 1024, 4, hw)  # the same 8 KiB per peer, 3 peers
    assert close(float(c.estimate_s) - float(four.estimate_s), 4 * 0.5e-6)  # only the 4 more peer steps
    big = coll.collective_cost("AllToAll", MiB, 8, hw)
    # 128 KiB per peer > 32 KiB: Simple, 5 + 7 x 1 = 12 us + 7 x 128 KiB / 200 GB/s = 4.5875 us
    assert close(big.estimate_s, 5e-6 + 7 * 1e-6 + 7 * 131072 / (0.5 * LINK))  # 16.5875 us
    assert big.protocol == "Simple"


def test_p2p_protocol_is_nccls_rule_not_the_fastest_line():
    hw = _p2p_hw()
    at = coll.collective_cost("AllToAll", 64 * 1024, 2, hw)
    # 32 KiB per peer: still LL (2.5 us + 32768 / 4 GB/s = 10.692 us), though Simple would take
    # 6 us + 32768 / 200 GB/s = 6.164 us
    assert close(at.estimate_s, 2e-6 + 0.5e-6 + 32768 / (0.01 * LINK))
    assert at.protocol == "LL"
    above = coll.collective_cost("AllToAll", 64 * 1024 + 2, 2, hw)  # one byte more per peer: Simple
    assert close(above.estimate_s, 5e-6 + 1e-6 + 32769 / (0.5 * LINK)) and above.protocol == "Simple"


def test_send_is_one_p2p_transfer_on_the_two_gpu_lines():
    hw = _p2p_hw()
    small = coll.collective_cost("Send", 16384, 2, hw)
    assert close(small.estimate_s, 2e-6 + 0.5e-6 + 16384 / (0.01 * LINK))  # LL: 6.596 us
    big = coll.collective_cost("Send", MiB, 2, hw)
    assert close(big.estimate_s, 5e-6 + 1e-6 + MiB / (0.5 * LINK))  # Simple: 11.243 us
    assert (small.protocol, big.protocol, big.algorithm) == ("LL", "Simple", "p2p")


def test_symbolic_all_to_all_is_a_piecewise_at_the_per_peer_threshold():
    hw = _p2p_hw()
    t = sympy.Symbol("tokens", integer=True, positive=True)
    c = coll.collective_cost("AllToAll", 8192 * t, 8, hw)  # 1 KiB per peer per token
    assert c.estimate_s.has(sympy.Piecewise) and c.protocol == "LL|Simple"
    for tokens in (1, 32, 33, 4096):  # LL up to 32 tokens (32 KiB per peer), Simple from 33
        num = coll.collective_cost("AllToAll", 8192 * tokens, 8, hw)
        assert close(c.estimate_s.subs(t, tokens), float(num.estimate_s)), tokens


def test_group_beyond_the_nvlink_domain_uses_the_scale_out_link():
    c = coll.collective_cost("AllReduce", 8 * MiB, 16, _hw(simple_only=True))
    # 30 steps; 2 * 15/16 * N over 0.5 of the 25 GB/s NIC
    assert close(c.estimate_s, 5e-6 + 30 * 1e-6 + 30 / 16 * 8 * MiB / (0.5 * 25e9))
    assert close(c.bound_s, 30 / 16 * 8 * MiB / 25e9)


def test_trtllm_takes_the_faster_of_oneshot_and_nccl():
    hw = _hw(sharp=False, simple_only=True)
    over = coll.frameworks()["trtllm"].graph_overhead_s
    small = coll.collective_cost("AllReduce", 64 * 1024, 8, hw, framework="trtllm", graphed=True)
    # one-shot: 3 + 7 * 0.1 us + overhead + 7 * 64 KiB / 200 GB/s = 3.7 us + 2.29 us; ring: 19 + ... us
    assert close(small.estimate_s, 3e-6 + 0.7e-6 + over + 7 * 64 * 1024 / (0.5 * LINK))
    assert (small.algorithm, small.protocol) == ("oneshot", "custom")
    big = coll.collective_cost("AllReduce", 4 * MiB, 8, hw, framework="trtllm", graphed=True)
    # one-shot 3.7 us + 7 * 4 MiB / 200 GB/s = 150.5 us; ring 19 us + 1.75 * 4 MiB / 200 GB/s = 55.7 us
    assert big.algorithm == "ring"


def test_trtllm_on_blackwell_takes_its_sm100_routes():
    """TensorRT-LLM's SM100 strategy table: the faster of one-shot and two-shot (and NCCL) up to 32 MiB at
    8 GPUs (16 MiB at 2 and 4), NCCL above; on Hopper one-shot up to 8 MiB only."""
    bw = dataclasses.replace(_hw(sharp=False, simple_only=True), family="blackwell")
    over = coll.frameworks()["trtllm"].graph_overhead_s
    mid = coll.collective_cost("AllReduce", 16 * MiB, 8, bw, framework="trtllm", graphed=True)
    # two-shot: 10 + 7 * 0.5 us + overhead + 1.75 * 16 MiB / 200 GB/s = 13.5 us + 146.8 us;
    # one-shot: 7 * 16 MiB / 200 GB/s = 587 us; ring: 5 + 14 us + 146.8 us
    assert mid.algorithm == "twoshot"
    assert close(mid.estimate_s, 10e-6 + 3.5e-6 + over + 1.75 * 16 * MiB / (0.5 * LINK))
    hopper = coll.collective_cost("AllReduce", 16 * MiB, 8, _hw(sharp=False, simple_only=True),
                                  framework="trtllm", graphed=True)
    assert hopper.algorithm == "ring"  # beyond Hopper's 8 MiB: NCCL
    assert close(hopper.estimate_s, 5e-6 + 14e-6 + 1.75 * 16 * MiB / (0.5 * LINK))
    big = coll.collective_cost("AllReduce", 64 * MiB, 8, bw, framework="trtllm", graphed=True)
    assert big.algorithm == "ring"  # beyond 32 MiB: NCCL on Blackwell too
    two = coll.collective_cost("AllReduce", 32 * MiB, 2, bw, framework="trtllm", graphed=True)
    assert two.algorithm == "ring"  # beyond 16 MiB at 2 GPUs


# hwdesc/families/blackwell.yaml's all-reduce lines (alpha_s, step_s, bus efficiency at 2 / 4 / 8 GPUs)
B200_AR_LL128 = (8.18e-06, 1.3e-06, (0.285, 0.353, 0.424))
B200_AR_SIMPLE = (2.12e-05, 2.75e-06, (0.612, 0.735, 0.688))
# LL128 at 8 GPUs, 1 MiB: 8.49 + 14 x 1.29 us + 1.75 x 1 MiB / (0.469 x 900 GB/s) = 8.49 + 18.06 + 4.347
# = 30.90 us (Simple: 23.8 + 7.95 + 3.09 = 34.84 us; NVLS: 52 + 2.60 us); measured on B200: 30.1 us
B200_AR_8GPU_1MIB_S = 31.189e-6


def test_b200_all_reduce_by_hand_from_the_blackwell_constants():
    """One B200 all-reduce priced by hand from hwdesc/families/blackwell.yaml (fitted on the B200 tables;
    the link is the descriptor's NVLink 5, 900 GB/s per direction): 8 GPUs, 1 MiB of fp16, and 2 GPUs, 512
    bytes. A refit changes these constants: update them here with it."""
    hw = hwdesc.load("b200")
    c = hw.interconnect.collectives
    link = 900e9
    assert hw.interconnect.link_bytes_per_s(8) == link
    ll128, simple, nvls = c.nccl["all_reduce"]["ll128"], c.nccl["all_reduce"]["simple"], c.nvls
    assert (ll128.alpha_s, ll128.step_s, ll128.bus_efficiency) == B200_AR_LL128
    assert (simple.alpha_s, simple.step_s, simple.bus_efficiency) == B200_AR_SIMPLE
    a, s, e = B200_AR_LL128
    # ring LL128 at 8 GPUs: alpha + 14 steps + 2 * 7/8 * 1 MiB / (eta(8) * 900 GB/s)
    expected = a + 14 * s + 1.75 * MiB / (e[2] * link)
    got = coll.collective_cost("AllReduce", MiB, 8, hw, dtype="fp16")
    lines = [x.alpha_s + 14 * x.step_s + 1.75 * MiB / (x.efficiency(8) * link)
             for x in c.nccl["all_reduce"].values()]
    # NVLS: 1 MiB is under 12 MiB, 16 KiB chunks: 24 x 8 ops x 16 KiB / chunk_s caps the rate
    assert (c.nvls_channels, c.nvls_chunk_s) == (24, 2.8e-05)
    nvls_s = nvls.alpha_s + MiB / min(nvls.efficiency(8) * link, 192 * 16384 / 2.8e-05)
    assert close(got.estimate_s, min(*lines, nvls_s))
    assert got.protocol == "LL128" and close(got.estimate_s, expected)
    assert float(got.estimate_s) == pytest.approx(B200_AR_8GPU_1MIB_S, rel=1e-4)
    tiny = coll.collective_cost("AllReduce", 512, 2, hw, dtype="fp16")
    ll = c.nccl["all_reduce"]["ll"]
    assert tiny.protocol == "LL"  # the latency floor: alpha + 2 steps, the bytes negligible
    assert close(tiny.estimate_s, ll.alpha_s + 2 * ll.step_s + 512 / (ll.efficiency(2) * link))


def test_blackwell_skus_share_the_family_constants_through_their_descriptors():
    """GB200 and B300 take B200's fitted collective constants (no per-SKU tuning); what differs is the
    descriptor: GB200's 72-GPU NVLink domain keeps a 16-GPU all-reduce on NVLink 5."""
    b200, gb200, b300 = (hwdesc.load(n) for n in ("b200", "gb200", "b300"))
    assert gb200.interconnect.collectives.nccl == b200.interconnect.collectives.nccl
    assert b300.interconnect.collectives.custom == b200.interconnect.collectives.custom
    on_nvl72 = coll.collective_cost("AllReduce", 64 * MiB, 16, gb200, dtype="bf16")
    off_node = coll.collective_cost("AllReduce", 64 * MiB, 16, b200, dtype="bf16")
    assert gb200.interconnect.link_bytes_per_s(16) == 900e9  # inside NVL72
    assert b200.interconnect.link_bytes_per_s(16) == b200.interconnect.scaleout_bytes_per_s_per_gpu
    assert float(on_nvl72.estimate_s) < float(off_node.estimate_s) / 5


def test_vllm_routes_custom_then_symmetric_memory_then_nccl():
    hw = _hw(simple_only=True)
    over = coll.frameworks()["vllm"].graph_overhead_s
    a = coll.collective_cost("AllReduce", 128 * 1024, 8, hw, framework="vllm", graphed=True)
    assert a.algorithm == "oneshot"  # custom all-reduce up to 256 KiB at 8 GPUs, one-stage below it
    b = coll.collective_cost("AllReduce", 1 * MiB, 4, hw, framework="vllm", graphed=True)
    # 4 GPUs, 1 MiB >= 512 KiB: two-shot: 10 + 3 * 0.5 us + overhead + 1.5 * 1 MiB / 200 GB/s (7.86 us)
    assert b.algorithm == "twoshot"
    assert close(b.estimate_s, 10e-6 + 1.5e-6 + over + 1.5 * MiB / (0.5 * LINK))
    c = coll.collective_cost("AllReduce", 8 * MiB, 8, hw, framework="vllm", graphed=True)
    # beyond 256 KiB at 8 GPUs: symmetric memory (multimem): 6 + 7 * 0.25 us + overhead + N / 160 GB/s
    assert c.algorithm == "multimem"
    assert close(c.estimate_s, 6e-6 + 1.75e-6 + over + 8 * MiB / (0.4 * LINK))
    d = coll.collective_cost("AllReduce", 8 * MiB, 8, _hw(sharp=False, simple_only=True), framework="vllm",
                             graphed=True)
    assert d.algorithm == "ring"  # no NVLink SHARP: no multimem, NCCL
    e = coll.collective_cost("AllReduce", 256 * MiB, 8, hw, framework="vllm", graphed=True)
    assert e.algorithm in ("ring", "nvls")  # beyond symmetric memory's 128 MiB: NCCL
    two = coll.collective_cost("AllReduce", 4 * MiB, 2, hw, framework="vllm", graphed=True)
    assert two.algorithm == "oneshot"  # always one-stage on two GPUs


def test_eager_call_copies_into_the_buffer_and_pays_the_host():
    hw = _hw(sharp=False, simple_only=True)
    fw = coll.frameworks()["vllm"]
    graphed = coll.collective_cost("AllReduce", 4 * MiB, 8, hw, framework="vllm", graphed=True)
    eager = coll.collective_cost("AllReduce", 4 * MiB, 8, hw, framework="vllm", graphed=False)
    copy = 2 * 4 * MiB / (DRAM * DRAM_EFF)  # read + write the input at achievable DRAM speed: 3.05 us
    assert graphed.algorithm == "ring"  # no NVLink SHARP here: beyond 256 KiB at 8 GPUs vLLM uses NCCL
    assert close(eager.estimate_s, max(fw.host_s(8), float(graphed.estimate_s) + copy))
    tiny = coll.collective_cost("AllReduce", 256, 8, hw, framework="vllm", graphed=False)
    assert close(tiny.estimate_s, fw.host_s(8))  # host-bound


def test_symbolic_message_is_a_piecewise_that_agrees_with_numbers():
    hw = _hw()
    t = sympy.Symbol("tokens", integer=True, positive=True)
    c = coll.collective_cost("AllReduce", 16384 * t, 8, hw, framework="vllm", graphed=True)
    assert not sympy.sympify(c.estimate_s).is_number
    assert "oneshot" in c.algorithm and "twoshot" in c.algorithm
    for tokens in (1, 8, 64, 512, 4096):
        num = coll.collective_cost("AllReduce", 16384 * tokens, 8, hw, framework="vllm", graphed=True)
        assert close(c.estimate_s.subs(t, tokens), float(num.estimate_s)), tokens


def test_group_of_one_is_free_and_bad_input_is_an_error():
    assert coll.collective_cost("AllReduce", MiB, 1, _hw()).estimate_s == 0
    with pytest.raises(coll.CollectiveError, match="unknown framework"):
        coll.collective_cost("AllReduce", MiB, 8, _hw(), framework="tgi")
    with pytest.raises(coll.CollectiveError, match="group size"):
        coll.collective_cost("AllReduce", MiB, 0, _hw())
    bare = dataclasses.replace(hwdesc.load("h100-sxm"), interconnect=None)
    with pytest.raises(coll.CollectiveError, match="no interconnect.collectives"):
        coll.collective_cost("AllReduce", MiB, 8, bare)


# ---- cost functions ---------------------------------------------------------------------------------

def test_cost_of_all_reduce_and_all_gather():
    w = cost(op("AllReduce", [([16, 4096], "bf16")], [([16, 4096], "bf16")], {"group_size": 8},
                domain="com.microsoft"))
    assert w.comm.nbytes == 16 * 4096 * 2 and w.comm.group == 8 and w.comm.dtype == "bf16"
    assert w.bytes_read == w.bytes_written == 16 * 4096 * 2  # input read, output written
    assert not w.flops
    g = cost(op("AllGather", [([16, 1024], "bf16")], [([16, 4096], "bf16")], {"group_size": 4, "axis": 1},
                domain="com.microsoft"))
    assert g.comm.nbytes == 4 * 16 * 1024 * 2  # the gathered output: group x the input
    s = cost(op("Send", [([16, 4096], "bf16")], [], {"peer_stage": 1}, domain="estimator"))
    assert s.comm.group == 2 and s.bytes_written == 0


def test_missing_group_size_is_a_user_error():
    with pytest.raises(CollectiveNodeError, match="no group_size"):
        cost(op("AllReduce", [([16, 4096], "bf16")], [([16, 4096], "bf16")], domain="com.microsoft"))


# ---- through estimate() and the CLI ---------------------------------------------------------------------

def _tp_model(tmp_path, group: int | None = 8, tokens="tokens") -> str:
    """y = AllReduce(x @ w): a row-parallel GEMM's output summed over `group` GPUs."""
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [tokens, 512])
    y = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [tokens, 4096])
    w = TensorProto(name="w", data_type=TensorProto.BFLOAT16, dims=[512, 4096],
                    data_location=TensorProto.EXTERNAL)
    for key, val in (("location", "w.bin"), ("offset", "0"), ("length", str(2 * 512 * 4096))):
        e = w.external_data.add()
        e.key, e.value = key, val
    attrs = {} if group is None else {"group_size": group}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"], name="o_proj"),
             helper.make_node("AllReduce", ["p"], ["y"], name="ar", domain="com.microsoft", **attrs)]
    graph = helper.make_graph(nodes, "tp", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    path = tmp_path / "tp.onnx"
    onnx.save(model, path)
    return str(path)


def test_cli_table_and_json_show_the_collective(tmp_path, capsys):
    path = _tp_model(tmp_path)
    code, out, _ = cli(capsys, path, "--arch", "h100-sxm", "--dim", "tokens=16")
    assert code == 0
    assert "AllReduce 128 KiB x8 " in out  # 16 x 4096 x 2 bytes over 8 GPUs
    assert "communication" in out
    code, out, _ = cli(capsys, path, "--arch", "h100-sxm", "--dim", "tokens=16", "--json")
    kernel = next(k for k in json.loads(out)["kernels"] if k["kind"] == "communication")
    assert kernel["limiter"] == "communication"
    assert kernel["comm"]["bytes"] == 16 * 4096 * 2 and kernel["comm"]["group"] == 8
    assert kernel["comm"]["algorithm"] in ("ring", "nvls", "p2p")  # no framework: NCCL
    assert kernel["bound_s"] <= kernel["estimate_s"]


def test_cli_collective_without_group_size_is_one_error_line(tmp_path, capsys):
    code, _, err = cli(capsys, _tp_model(tmp_path, group=None), "--dim", "tokens=16")
    assert_one_error_line(code, err, "no group_size")


def test_estimate_with_a_framework_prices_the_custom_all_reduce(tmp_path):
    from estimator.estimate import estimate
    from estimator.frontends.onnx_import import import_file

    graph = import_file(_tp_model(tmp_path))
    hw = hwdesc.load("h100-sxm")
    nccl = estimate(graph, hw, dims={"tokens": 16}, roofline=True)
    trt = estimate(graph, hw, dims={"tokens": 16}, framework="trtllm", roofline=True)
    [a] = [p.timing for p in nccl.kernels if p.kernel.kind == "communication"]
    [b] = [p.timing for p in trt.kernels if p.kernel.kind == "communication"]
    assert b.comm["algorithm"] == "oneshot"
    assert float(b.estimate_s) < float(a.estimate_s)  # a 128 KiB custom all-reduce beats NCCL's floor


def test_onnx_import_keeps_shapes_through_the_collectives():
    """onnxruntime's shape inference does not know the collectives; estimator/frontends/collective_shapes.py
    gives their outputs shapes, so the ops after them are costed."""
    from estimator.frontends.onnx_import import import_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["t", 512])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)
    ms = "com.microsoft"
    nodes = [helper.make_node("AllGather", ["x"], ["g"], domain=ms, group_size=4, axis=1, name="ag"),
             helper.make_node("AllReduce", ["g"], ["r"], domain=ms, group_size=4, name="ar"),
             helper.make_node("ReduceScatter", ["r"], ["s"], domain=ms, group_size=4, axis=1, name="rs"),
             helper.make_node("Add", ["r", "g"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ms, 1)])
    g = import_model(model)
    t = sympy.Symbol("t", integer=True, positive=True)
    assert g.tensors["g"].shape == (t, 2048)  # gathered along axis 1: 4 x 512
    assert g.tensors["r"].shape == (t, 2048)
    assert g.tensors["s"].shape == (t, 512)  # scattered back along axis 1
    assert g.tensors["y"].shape == (t, 2048)
