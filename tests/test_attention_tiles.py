"""The attention tile model's mechanisms (estimator/pricing/attention.py) against hand arithmetic: the
online softmax's O rescale, the SFU and FP32 pipes side by side, whole KV pages, CTAs per KV head past
a decode kernel's max group, the later waves' CTA cost under the K/V stream, and the L2 figure."""

from dataclasses import replace

import pytest
import yaml

import hwdesc
from estimator.pricing import attention as attn_model
from estimator.pricing import gemm as gemm_model
from estimator.pricing import plan
from estimator.pricing.menu import menu_for, parse

HOPPER = menu_for("hopper")
# Round figures: 100 SMs, no fixed costs, every efficiency 1 unless a test says otherwise.
EFF = {"tensor": 1.0, "cuda": 1.0, "sfu": 1.0, "dram": 1.0, "l2": 1.0, "softmax_overlap": 0.0,
       "attention_step_s": 0.0, "attention_cta_s": 0.0, "attention_decode_cta_s": 0.0, "launch_s": 0.0,
       "mem_latency_s": 0.0, "attention_prefill_s": 0.0, "attention_decode_s": 0.0, "split_k_s": 0.0}
HW = gemm_model.Hw(100, 1e12, 10e12, 50 * 2**20, 233472, EFF)


def _attn(**kw):
    base = dict(batch=1, heads=1, kv_heads=1, seq_q=128, seq_kv=128, dk=128, dv=128, causal=False,
                q_bytes=2.0, kv_bytes=2.0, peak=1e15, eff_unit=1.0, sfu_ops_per_s=1e12, alu_ops_per_s=1e13,
                decode=False, dram_bytes=0.0)
    return attn_model.Attn(**{**base, **kw})


def _hw(**eff):
    return replace(HW, eff={**EFF, **eff})


def test_step_time_rescale_and_parallel_softmax_pipes():
    # One 128 x 128 step on one of 100 slots (1 / 100 of each peak):
    #   MMAs     2 * 128 * 128 * (128 + 128) = 8,388,608 FLOP / (1e15 / 100)      = 8.388608e-7 s
    #   exp      128 * 128 = 16,384 on the SFU / (1e12 / 100)                      = 1.6384e-6 s
    #   FP32     4 * 16,384 = 65,536 ops / (1e13 / 100)                            = 6.5536e-7 s
    #   softmax  max(exp, FP32) (separate pipes)                                   = 1.6384e-6 s
    #   rescale  1 * 128 rows * 128 dv = 16,384 ops / (1e13 / 100), after the MMA  = 1.6384e-7 s
    serial = 1.6384e-6 + 8.388608e-7 + 1.6384e-7  # softmax_overlap 0: the MMAs do not hide
    t = attn_model._step_time(_attn(), 128, 128, 128, 1, _hw())
    assert t == pytest.approx(serial, rel=1e-12)
    # softmax_overlap 1 hides the shorter of MMA and softmax, never the rescale
    t = attn_model._step_time(_attn(), 128, 128, 128, 1, _hw(softmax_overlap=1.0))
    assert t == pytest.approx(1.6384e-6 + 1.6384e-7, rel=1e-12)


def test_rescale_grows_with_dv_over_kv():
    # the same 128 x 64 step at dv 256 pays 128 * 256 = 32,768 rescale ops = 3.2768e-7 s, 4 per score
    # (dv / kv = 256 / 64), against 1 per score for dv 128 over kv 128
    a = _attn(dk=256, dv=256)
    t = attn_model._step_time(a, 128, 64, 128, 1, _hw(softmax_overlap=1.0))
    mma = 2 * 128 * 64 * 512 / 1e13  # 8.388608e-7 s
    softmax = 128 * 64 / 1e10  # exp: 8.192e-7 s (the FP32 part is 3.2768e-7)
    assert t == pytest.approx(max(mma, softmax) + 128 * 256 / 1e11, rel=1e-12)


def test_decode_reads_whole_pages_and_splits_big_fp8_groups():
    # fp8 cache, 16 query heads over 1 KV head, 65 keys: the sm90 kernel takes 8 heads per CTA, so
    # 2 CTAs per KV head; K/V move in 64-token pages: 2 pages = 128 tokens, 63 of them padding.
    a = _attn(heads=16, kv_heads=1, seq_q=1, seq_kv=65, kv_bytes=1.0, decode=True, dram_bytes=1000.0)
    c = attn_model.decode(a, HOPPER, 1, _hw(), grouped=True)
    assert c.ctas == 2  # batch 1 x KV head 1 x 2 CTAs x split 1
    pad = 63 * (128 + 128) * 1  # 16,128 bytes of padding, read once from DRAM
    assert c.t_dram == pytest.approx((1000 + pad) / 1e12)
    # L2: DRAM's bytes plus the second CTA's re-read of the 128 padded tokens (128 * 256 = 32,768 B)
    assert c.t_l2 == pytest.approx((1000 + pad + 128 * 256) / 10e12)
    # bf16 cache: one CTA per KV head whatever the group (no max_group), still whole pages
    b = attn_model.decode(replace(a, kv_bytes=2.0), HOPPER, 1, _hw(), grouped=True)
    assert b.ctas == 1 and b.t_dram == pytest.approx((1000 + 63 * 256 * 2) / 1e12)


def test_per_head_decode_far_die_rereads_cross_the_link():
    # 64 query heads over 1 KV head, 1000 bf16 keys, head dim 128: the per-head kernel (one CTA per
    # query head) reads K/V from DRAM once and re-reads it from L2 63 times:
    #   re-reads  63 x 1000 x (128 + 128) x 2 B = 32,256,000 B / 10e12 B/s (L2)      = 3.2256e-6 s
    # On a two-die L2 (far share 1/2, link 10e12 B/s) half of them also cross the link, in series:
    #   link      0.5 x 32,256,000 B / 10e12 B/s                                    = 1.6128e-6 s
    a = _attn(heads=64, kv_heads=1, seq_q=1, seq_kv=1000, decode=True)
    one_die = attn_model.decode(a, HOPPER, 1, _hw(), grouped=False)
    assert one_die.t_l2 == pytest.approx(3.2256e-6, rel=1e-12)
    two_dies = replace(_hw(), l2_far_share=0.5, l2_link_bytes_per_s=10e12)
    c = attn_model.decode(a, HOPPER, 1, two_dies, grouped=False)
    assert c.t_l2 == pytest.approx(3.2256e-6 + 1.6128e-6, rel=1e-12)
    # no re-read (group 1: one CTA per KV head), no link time
    g1 = _attn(heads=1, kv_heads=1, seq_q=1, seq_kv=1000, decode=True)
    assert attn_model.decode(g1, HOPPER, 1, two_dies, False).t_l2 == attn_model.decode(g1, HOPPER, 1, _hw(),
                                                                                       False).t_l2
    # the descriptors: B200's two dies and NV-HBI figure reach the tile model, H100 (one die) none
    b200, h100 = plan.hw_params(hwdesc.load("b200")), plan.hw_params(hwdesc.load("h100-sxm"))
    assert (b200.l2_far_share, b200.l2_link_bytes_per_s) == (0.5, 10e12)
    assert (h100.l2_far_share, h100.l2_link_bytes_per_s) == (0.0, 0.0)


def test_later_waves_cta_cost_hides_under_the_kv_stream():
    # 1024 sequences x 32 heads of one head each (group 1: the CUDA-core kernel, 4 CTAs per SM): 32,768
    # CTAs over 100 x 4 = 400 slots = 82 waves. 1e10 DRAM bytes take 1e10 / 1e12 = 10 ms, far above
    # the CTAs' own chain (81 x 5 us = 405 us + their short K/V steps): the first wave's 5 us is
    # exposed, the other 81 overlap the stream: 10 ms + 5 us, not 10 ms + 82 x 5 us.
    a = _attn(batch=1024, heads=32, kv_heads=32, seq_q=1, seq_kv=8, decode=True, dram_bytes=1e10)
    c = attn_model.decode(a, HOPPER, 1, _hw(attention_decode_cta_s=5e-6), grouped=False)
    assert c.waves == 82
    assert c.time == pytest.approx(1e10 / 1e12 + 5e-6, rel=1e-9)


def test_decode_cta_cost_and_l2_fall_back_to_the_shared_figures():
    assert attn_model.l2_fraction({"l2": 0.9}) == 0.9
    assert attn_model.l2_fraction({"l2": 0.9, "attention_l2": 0.5}) == 0.5
    eff = {k: v for k, v in EFF.items() if k != "attention_decode_cta_s"}
    a = _attn(seq_q=1, seq_kv=8, decode=True)
    one = attn_model.decode(a, HOPPER, 1, replace(HW, eff={**eff, "attention_cta_s": 3e-6}), False)
    two = attn_model.decode(a, HOPPER, 1, replace(HW, eff={**eff, "attention_cta_s": 4e-6}), False)
    assert two.time - one.time == pytest.approx(1e-6)  # one exposed CTA cost: attention_cta_s's


def test_decode_kernel_menu_keys_are_checked():
    raw = yaml.safe_load((hwdesc.bundled_dir() / "tiles" / "hopper.yaml").read_text())
    fp8 = parse(raw, "hopper.yaml").decode_mma[0]
    assert (fp8.max_group, fp8.page_tokens) == (8, 64)
    raw["attention"]["decode_mma"][0]["page_tokens"] = 0
    with pytest.raises(hwdesc.HwdescError, match="page_tokens"):
        parse(raw, "hopper.yaml")


def test_bf16_decode_cta_cost_grows_with_its_16_row_q_tile():
    # bf16 cache, 24 query heads over 1 KV head, 1 new row: the mma.sync kernel pads 24 rows to 32 (two
    # 16-row fragments). One CTA, one wave, so its fixed cost is paid once:
    #   t_cta = attention_decode_cta_s * cta_cost + attention_decode_row_s * rows * dk
    #         = 5e-6 * 0.6 + 1e-9 * 32 * 128 = 3e-6 + 4.096e-6 = 7.096e-6 s
    a = _attn(heads=24, kv_heads=1, seq_q=1, seq_kv=64, decode=True)
    base = attn_model.decode(a, HOPPER, 1, _hw(), grouped=True)
    cta = attn_model.decode(a, HOPPER, 1, _hw(attention_decode_cta_s=5e-6), grouped=True)
    assert cta.time - base.time == pytest.approx(3e-6, rel=1e-9)
    rows = attn_model.decode(a, HOPPER, 1, _hw(attention_decode_row_s=1e-9), grouped=True)
    assert rows.time - base.time == pytest.approx(4.096e-6, rel=1e-9)
    # 16 heads fill one fragment: 1e-9 * 16 * 128 = 2.048e-6 s
    a16 = replace(a, heads=16)
    d16 = (attn_model.decode(a16, HOPPER, 1, _hw(attention_decode_row_s=1e-9), grouped=True).time
           - attn_model.decode(a16, HOPPER, 1, _hw(), grouped=True).time)
    assert d16 == pytest.approx(2.048e-6, rel=1e-9)
    # the fp8 (sm90) kernel has no row cost: its CTA cost is attention_decode_cta_s * cta_cost alone
    f = replace(a, kv_bytes=1.0)
    assert (attn_model.decode(f, HOPPER, 1, _hw(attention_decode_row_s=1e-9), grouped=True).time
            == pytest.approx(attn_model.decode(f, HOPPER, 1, _hw(), grouped=True).time, rel=1e-12))


def test_decode_kernel_row_cost_must_be_a_bool():
    raw = yaml.safe_load((hwdesc.bundled_dir() / "tiles" / "hopper.yaml").read_text())
    bf16 = parse(raw, "hopper.yaml").decode_mma[1]
    assert (bf16.q_rows, bf16.cta_cost, bf16.row_cost) == (16, 0.6, True)
    raw["attention"]["decode_mma"][1]["row_cost"] = 1
    with pytest.raises(hwdesc.HwdescError, match="row_cost"):
        parse(raw, "hopper.yaml")


def test_decode_kernel_pads_the_head_to_its_built_sizes():
    # XQA and the mma.sync kernel are built for head dims 64 / 128 / 256: hd 192 runs as 256
    dims = HOPPER.decode_mma[0].head_dims
    assert dims == (64, 128, 256)
    assert attn_model._head_dim(192, dims) == 256 and attn_model._head_dim(64, dims) == 64
    assert attn_model._head_dim(300, dims) == 300  # past the largest: as it is
    # fp8 smem per CTA: 8 Q rows x dk x 2 B + two stages of 128 keys x (dk + dv) x 1 B
    #   hd 256 (and 192 padded): 4096 + 131072 = 135168 B -> 233472 // 135168 = 1 CTA per SM
    #   hd 128: 2048 + 65536 = 67584 B -> 3 (the kernel's cap)
    cpsm = {hd: attn_model.decode(_attn(heads=8, kv_heads=1, seq_q=1, seq_kv=64, dk=hd, dv=hd, kv_bytes=1.0,
                                        decode=True), HOPPER, 1, HW, grouped=True).ctas_per_sm
            for hd in (128, 192, 256)}
    assert cpsm == {128: 3, 192: 1, 256: 1}


def test_emulated_exp2_balances_the_sfu_and_fma_pipes():
    # 16,384 scores, 4 FP32 ops each; SFU 1e12/s and FP32 1e13/s over 100 slots (1e10 and 1e11 a slot):
    #   exp on the SFU alone  16,384 / 1e10               = 1.6384e-6 s
    #   FP32 ops              65,536 / 1e11               = 6.5536e-7 s
    # a share f of the exps at 7 FMA-pipe instructions each balances the pipes:
    #   f = (1.6384e-6 - 6.5536e-7) / (1.6384e-6 + 7 * 16,384 / 1e11) = 9.8304e-7 / 2.78528e-6 = 0.352941
    #   t = (1 - f) * 1.6384e-6 = 1.060141e-6 s (= 6.5536e-7 + f * 1.14688e-6 on the FP32 pipe)
    scores, alu = 16384, 4 * 16384
    f = (1.6384e-6 - 6.5536e-7) / (1.6384e-6 + 7 * 16384 / 1e11)
    t = attn_model._softmax_time(scores, alu, 1e10, 1e11, 7)
    assert t == pytest.approx((1 - f) * 1.6384e-6) == pytest.approx(6.5536e-7 + f * 7 * 16384 / 1e11)
    assert t == pytest.approx(1.060141e-6, rel=1e-6)
    # without emulation, the slower pipe alone; with an FP32 pipe already the slower, no exp moves over
    assert attn_model._softmax_time(scores, alu, 1e10, 1e11, 0) == pytest.approx(1.6384e-6)
    assert attn_model._softmax_time(scores, 40 * scores, 1e10, 1e11, 7) == pytest.approx(40 * 16384 / 1e11)


def test_sm100_prefill_tile_holds_two_q_tiles_and_emulates_exp2():
    bw = menu_for("blackwell")
    small, mid, big = bw.attention_tiles
    # TMEM (512 fp32 columns): two 128-row Q tiles of S (128 columns) + O (head dim) while 2 x (128 + 128)
    # <= 512, one past it (128 + 256 = 384)
    assert (small.q, small.kv, small.max_head_dim) == (256, 128, 128)
    assert 2 * (128 + 128) == bw.tmem.columns and 2 * (128 + 256) > bw.tmem.columns >= 128 + 256
    assert (mid.q, mid.kv, mid.max_head_dim) == (128, 128, 256) and big.max_head_dim == 512
    assert {t.exp2_fma_ops for t in bw.attention_tiles} == {7}
    assert {t.exp2_fma_ops for t in HOPPER.attention_tiles} == {0}  # Hopper: every exp on MUFU
    # a 256-row tile streams each K/V step once for twice the query rows: half the L2 bytes of 128 rows
    # (non-causal 1 x 1 x 1024 x 1024, hd 128, bf16): steps x kv x (dk + dv) x 2 B
    a = _attn(seq_q=1024, seq_kv=1024)
    two = attn_model.prefill(a, small, HW)
    one = attn_model.prefill(a, replace(small, q=128), HW)
    assert two.t_l2 * 10e12 == pytest.approx(4 * 8 * 128 * 256 * 2)  # 4 Q tiles x 8 steps
    assert one.t_l2 == pytest.approx(2 * two.t_l2)


def test_b300_doubles_the_exponent_rate_per_sm():
    # Blackwell Ultra: 32 MUFU.EX2 a clock per SM, B200's 16 (datasheet figures of the SKU files)
    b200, b300 = hwdesc.load("b200"), hwdesc.load("b300")
    assert b200.sfu_ops_per_s == pytest.approx(16 * 148 * 1.98e9)
    assert b300.sfu_ops_per_s == pytest.approx(32 * 160 * 1.98e9)


def test_persistent_decode_overlaps_tile_costs_as_far_as_smem_holds_kv():
    # Blackwell's decode kernel is persistent when unsplit (trtllm-gen). bf16 head dim 256, 4 query heads
    # over 1 KV head: smem per CTA 8 * 256 * 2 + 2 * 128 * 512 * 2 = 266,240 B > 233,472, so one CTA per
    # SM: 1000 sequences = 1000 CTAs over 100 slots = 10 waves of one tile each (64 keys: one step, one
    # whole page, so no padding bytes; no DRAM bytes: the chain decides).
    bw = menu_for("blackwell")
    assert bw.decode_mma[0].persistent and bw.decode_mma[0].max_ctas_per_sm == 3
    launched = replace(bw, decode_mma=tuple(replace(k, persistent=False) for k in bw.decode_mma))
    a = _attn(batch=1000, heads=4, kv_heads=1, seq_q=1, seq_kv=64, dk=256, dv=256, decode=True)
    hw = _hw(attention_decode_cta_s=3e-6)
    per_tile = attn_model.decode(a, launched, 1, hw, grouped=True)
    persistent = attn_model.decode(a, bw, 1, hw, grouped=True)
    assert per_tile.ctas_per_sm == 1 and per_tile.waves == 10
    # one CTA per tile: (10 - 1) later waves x 3 us = 27 us of CTA costs in the chain; persistent: the
    # tiles' costs overlap as far as smem holds the next tiles' K/V, 233,472 / (128 x 512 x 2 B) = 1.78
    # K/V tiles per SM (at most 3): ceil(1000 / 178.125) - 1 = 5 x 3 us = 15 us; the K/V steps
    # (10 waves x 1 step) are the same in both
    assert per_tile.time - persistent.time == pytest.approx(27e-6 - 15e-6, rel=1e-9)
    # head dim 128: 233,472 / (128 x 256 x 2 B) = 3.56 K/V tiles, capped at max_ctas_per_sm 3, while
    # smem holds one CTA (8 x 128 x 2 + 2 x 128 x 256 x 2 = 133,120 B): ceil(1000 / 300) - 1 = 3 x 3 us
    h128 = replace(a, dk=128, dv=128)
    assert (attn_model.decode(h128, launched, 1, hw, grouped=True).time
            - attn_model.decode(h128, bw, 1, hw, grouped=True).time) == pytest.approx(27e-6 - 9e-6, rel=1e-9)
    # a split launch is not persistent (the library's multi-CTA KV mode), nor is one wave different
    assert (attn_model.decode(a, bw, 2, hw, grouped=True).time
            == pytest.approx(attn_model.decode(a, launched, 2, hw, grouped=True).time, rel=1e-12))
    small = replace(a, batch=100)
    assert (attn_model.decode(small, bw, 1, hw, grouped=True).time
            == pytest.approx(attn_model.decode(small, launched, 1, hw, grouped=True).time, rel=1e-12))


def test_decode_kernel_persistent_must_be_a_bool():
    raw = yaml.safe_load((hwdesc.bundled_dir() / "tiles" / "blackwell.yaml").read_text())
    raw["attention"]["decode_mma"][0]["persistent"] = "yes"
    with pytest.raises(hwdesc.HwdescError, match="persistent"):
        parse(raw, "blackwell.yaml")
