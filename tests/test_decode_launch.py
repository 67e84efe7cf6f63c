"""TensorRT-LLM's decode launch rule (estimator/pricing/decode_launch.py) against hand arithmetic, and its
use by the decode candidates (estimator/pricing/attention.py): the library's KV split, the XQA-or-MMHA
fallback for a 16-bit cache, and the combine's cost per split."""

from dataclasses import replace

import numpy as np
import pytest
import yaml

import hwdesc
from estimator.pricing import attention as attn_model
from estimator.pricing import decode_launch
from estimator.pricing import gemm as gemm_model
from estimator.pricing.menu import menu_for, parse

HOPPER = menu_for("hopper")
RULE = HOPPER.decode_launch
EFF = {"tensor": 1.0, "cuda": 1.0, "sfu": 1.0, "dram": 1.0, "l2": 1.0, "softmax_overlap": 0.0,
       "attention_step_s": 0.0, "attention_cta_s": 0.0, "attention_decode_cta_s": 0.0, "launch_s": 0.0,
       "mem_latency_s": 0.0, "attention_prefill_s": 0.0, "attention_decode_s": 0.0, "split_k_s": 0.0}
HW = gemm_model.Hw(132, 1e12, 10e12, 50 * 2**20, 233472, EFF)


def _decode(**kw):
    base = dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_kv=4097, dk=128, dv=128, causal=True,
                q_bytes=2.0, kv_bytes=2.0, peak=1e15, eff_unit=1.0, sfu_ops_per_s=1e12, alu_ops_per_s=1e13,
                decode=True, dram_bytes=1e6)
    return attn_model.Attn(**{**base, **kw})


def test_hopper_menu_carries_the_library_constants():
    assert (RULE.min_tokens_per_split, RULE.split_sqrt_factor, RULE.target_waves,
            RULE.min_blocks_factor, RULE.fallback_kv_bytes) == (128, 8, 8, 4, (2, 4))
    raw = yaml.safe_load((hwdesc.bundled_dir() / "tiles" / "hopper.yaml").read_text())
    del raw["attention"]["decode_launch"]["source"]
    with pytest.raises(hwdesc.HwdescError, match="decode_launch"):
        parse(raw, "hopper.yaml")
    assert menu_for("blackwell").decode_launch is None  # no such rule assumed where no data shows it


def test_library_splits():
    # 4097 keys // 128 = 32 splits, capped at round(sqrt(8 * 32)) = 16; 1 x 8 x 16 = 128 CTAs < 8 waves
    assert decode_launch.library_splits(RULE, 1, 8, 4097, 132, 64) == 16
    # 131072 keys: 1024, capped at round(sqrt(8192)) = round(90.5) = 91; then the menu's largest, 64
    assert decode_launch.library_splits(RULE, 1, 1, 131072, 132, 64) == 64
    assert decode_launch.library_splits(RULE, 1, 1, 131072, 132, 128) == 91
    # batch 256 x 8 KV heads x 16 = 32768 CTAs = 248.2 waves, 31.03 x the 8-wave target: 16 / 31.03 -> 0
    # -> at least 1
    assert decode_launch.library_splits(RULE, 256, 8, 4097, 132, 64) == 1
    # batch 16 x 8 x 16 = 2048 CTAs = 15.5 waves, 1.94 x 8: floor(16 / 1.94) = 8
    assert decode_launch.library_splits(RULE, 16, 8, 4097, 132, 64) == 8
    # fewer keys than one split's 128: 1
    assert decode_launch.library_splits(RULE, 1, 8, 100, 132, 64) == 1
    got = decode_launch.library_splits(RULE, np.array([1, 16, 256]), 8, np.array([4097] * 3), 132, 64)
    assert list(got) == [16, 8, 1]


def test_xqa_or_per_head_kernel():
    # bf16 cache: XQA only when batch x kv_heads x max(1, keys // 128) x 4 >= 132 SMs
    assert not decode_launch.runs_grouped(RULE, 8, 1, 64, 132, 2.0)  # 8 x 1 x 1 x 4 = 32
    assert decode_launch.runs_grouped(RULE, 33, 1, 64, 132, 2.0)  # 33 x 4 = 132
    assert not decode_launch.runs_grouped(RULE, 32, 1, 255, 132, 2.0)  # 32 x 1 x 4 = 128
    assert decode_launch.runs_grouped(RULE, 32, 1, 256, 132, 2.0)  # 32 x 2 x 4 = 256
    assert decode_launch.runs_grouped(RULE, 1, 1, 64, 132, 1.0)  # an fp8 cache: always the sm90 kernel
    got = decode_launch.runs_grouped(RULE, np.array([8, 33]), 1, np.array([64, 64]), 132, 2.0)
    assert list(got) == [False, True]


def test_decode_candidates_follow_the_rule():
    # batch 1, 8 KV heads, 4097 keys, bf16: 1 x 8 x 32 x 4 = 1024 >= 132, XQA at the library's 16 splits
    (only,) = attn_model.candidates(_decode(), HOPPER, HW)
    assert only.name == "decode mma kv128 splitKV16" and only.ctas == 8 * 16
    # 64 keys: 1 x 8 x 1 x 4 = 32 < 132, the per-head kernel at its launch rule's split: 32 query heads
    # get 1024-thread blocks, splits clamp(ceil(132 / 32) = 5, 1, ceil(64 / 512) = 1) = 1
    (short,) = attn_model.candidates(_decode(seq_kv=64), HOPPER, HW)
    assert short.name == "decode simt kv128" and short.ctas == 1 * 32  # one CTA per query head
    assert short.ctas_per_sm == 1
    # the same with an fp8 cache stays on the grouped kernel
    (fp8,) = attn_model.candidates(_decode(seq_kv=64, kv_bytes=1.0), HOPPER, HW)
    assert fp8.name == "decode mma kv128"
    # without the rule: every split of the grouped kernel
    free = attn_model.candidates(_decode(), replace(HOPPER, decode_launch=None), HW)
    assert [c.split for c in free] == list(HOPPER.decode_splits)


def test_rows_of_a_table_price_as_each_alone():
    batch, seq = np.array([1.0, 1.0, 16.0]), np.array([4097.0, 64.0, 4097.0])
    rows = _decode(batch=batch, seq_kv=seq, dram_bytes=np.full(3, 1e6))
    best = np.min(np.stack([c.time for c in attn_model.candidates(rows, HOPPER, HW)]), axis=0)
    for i in range(3):
        one = _decode(batch=float(batch[i]), seq_kv=float(seq[i]))
        assert best[i] == pytest.approx(min(c.time for c in attn_model.candidates(one, HOPPER, HW)),
                                        rel=1e-12)


def test_combine_cost_per_split():
    # 16 splits: attention_split_s + 16 x attention_split_each_s = 2e-6 + 16 x 1e-7 = 3.6e-6 s; 1: none
    eff = {**EFF, "attention_split_s": 2e-6, "attention_split_each_s": 1e-7}
    assert attn_model.combine_s(eff, 16) == pytest.approx(3.6e-6, rel=1e-12)
    assert attn_model.combine_s(eff, 1) == 0.0
    a = _decode()
    one = attn_model.decode(a, HOPPER, 16, HW, grouped=True)
    each = attn_model.decode(a, HOPPER, 16, replace(HW, eff=eff), grouped=True)
    assert each.time - one.time == pytest.approx(3.6e-6, rel=1e-9)


def test_per_head_launch():
    # (batch x heads, history, head dim) -> (CTAs per SM, splits), 132 SMs, 4 CTAs of 256 threads per SM:
    # 1024 CTAs >= 4 x 132 = 528: factor min(ceil(528 / 1024), 4) = 1, 256 threads, 4 per SM;
    #   splits clamp(ceil(132 x 4 / 1024) = 1, ...) = 1
    assert decode_launch.per_head_launch(32, 32, 4096, 128, 132, 4, 64) == (4, 1)
    # 320 CTAs: factor ceil(528 / 320) = 2, 512 threads, 2 per SM (264 CTAs a wave: 320 take two)
    assert decode_launch.per_head_launch(10, 32, 1, 128, 132, 4, 64) == (2, 1)
    # 160 CTAs: factor ceil(528 / 160) = 4 -> 1024 threads, 1 per SM; 4096 keys: splits
    #   clamp(ceil(132 / 160) = 1, 1, ...) = 1
    assert decode_launch.per_head_launch(5, 32, 4096, 128, 132, 4, 64) == (1, 1)
    # 32 CTAs, 65536 keys, head dim 128: 1024 threads / (128 x 2 / 16 = 16 threads a row) x 8 = 512 keys
    #   a loop; splits clamp(ceil(132 / 32) = 5, 1, min(ceil(65536 / 512) = 128, 64)) = 5
    assert decode_launch.per_head_launch(1, 32, 65536, 128, 132, 4, 64) == (1, 5)
    # 1 CTA, 131072 keys, head dim 80 (built for 128): splits min(132, 256, cap 64) = 64; 1024 keys,
    #   head dim 64 (8 threads a row, 1024 keys a loop): 1 split
    assert decode_launch.per_head_launch(1, 1, 131072, 80, 132, 4, 64) == (1, 64)
    assert decode_launch.per_head_launch(1, 1, 1024, 64, 132, 4, 64) == (1, 1)
    cpsm, splits = decode_launch.per_head_launch(np.array([32, 10, 1]), 32, np.array([4096, 1, 65536]), 128,
                                                 132, 4, 64)
    assert list(cpsm) == [4, 2, 1] and list(splits) == [1, 1, 5]


def test_per_head_kernel_waves_follow_its_block_size():
    # 10 x 32 = 320 per-head CTAs at 2 per SM: ceil(320 / 264) = 2 waves; 8 x 32 = 256: 1 wave
    big = attn_model.candidates(_decode(batch=10, kv_heads=32, seq_kv=2), HOPPER, HW)
    small = attn_model.candidates(_decode(batch=8, kv_heads=32, seq_kv=2), HOPPER, HW)
    assert [(c.ctas, c.ctas_per_sm, c.waves) for c in big] == [(320, 2, 2)]
    assert [(c.ctas, c.ctas_per_sm, c.waves) for c in small] == [(256, 2, 1)]


def test_fp8_widening_cost_per_element():
    # the per-head kernel on an fp8 cache, one query row, a 128-key step at 1 CTA on each of 132 SMs:
    # widening is attention_dequant_ops instructions per K/V element on the FP32 pipe (1e13 / 132 a CTA),
    # 128 keys x (128 + 128) elements; 6 instead of the counted 4: 2 x 32768 x 132 / 1e13 = 8.650752e-7 s
    # more (the softmax-and-widening pipe stays the longer one: 4 x 128 + 4 x 32768 ops = 1.74e-6 s
    # against the products' 2 x 128 x 256 / (2 x 1e13 / 132) = 4.33e-7 s)
    a = _decode(kv_heads=32, kv_bytes=1.0)
    counted = attn_model._step_time(a, 1, 128, 1, 1, HW, mma=False)
    four = attn_model._step_time(a, 1, 128, 1, 1, replace(HW, eff={**EFF, "attention_dequant_ops": 4.0}),
                                 mma=False)
    six = attn_model._step_time(a, 1, 128, 1, 1, replace(HW, eff={**EFF, "attention_dequant_ops": 6.0}),
                                mma=False)
    assert four == pytest.approx(counted, rel=1e-12)
    assert six - four == pytest.approx(8.650752e-7, rel=1e-9)
    bf16 = _decode(kv_heads=32)  # a 16-bit cache widens nothing
    assert attn_model._step_time(bf16, 1, 128, 1, 1, replace(HW, eff={**EFF, "attention_dequant_ops": 6.0}),
                                 mma=False) == pytest.approx(attn_model._step_time(bf16, 1, 128, 1, 1, HW,
                                                                                   mma=False), rel=1e-12)
