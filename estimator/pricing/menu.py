"""The per-family tile menus (hwdesc/tiles/<family>.yaml): data, read and checked here.

A menu lists the CTA tiles a family's libraries choose from and the structural facts the tile model
needs (pipeline depth limits, where accumulators live, split-K factors, attention tiles). Efficiency
constants are not here: they are fitted, and live in each GPU's descriptor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hwdesc import HwdescError, bundled_dir


@dataclass(frozen=True)
class GemmTile:
    m: int
    n: int
    max_ctas_per_sm: int = 1
    sms: int = 1  # SMs one tile spans (Blackwell 2-CTA UMMA: 2)
    cluster_m: int = 1  # thread-block cluster: CTAs along M sharing (multicasting) their B tile loads
    cluster_n: int = 1  # ... along N sharing their A tile loads


@dataclass(frozen=True)
class Tmem:
    """Tensor memory per SM (tcgen05 families only; estimator/pricing/tmem.py)."""

    lanes: int  # rows of 32-bit cells (the accumulator's M per SM)
    columns: int  # 32-bit columns (an fp32 accumulator of N columns takes N)
    min_alloc_columns: int  # tcgen05.alloc's smallest allocation (a power of two)
    accumulator_buffers: int  # accumulators a persistent CTA keeps (epilogue under the next mainloop)


SCHEDULERS = ("waves", "persistent")
PICKS = ("", "waves")  # how a block-scaled kernel's tile is set: fastest candidate, or the library's rule


@dataclass(frozen=True)
class BlockScaled:
    """The family's block-scaled GEMM kernel (an operand with one scale per `block` K elements, e.g. 1 x
    128 fp8 activation scales): the split-K factors it offers, and whether the scales are applied on
    CUDA cores in the K loop (`promote`: the accumulator is read out of the MMA, scaled and added every
    scale block) rather than by the MMA itself. `tiles`: the kernel's own tile menu where it has one (a
    JIT-specialised kernel such as DeepGEMM's, not the family's general GEMM tiles; empty: the family's).
    `pick: waves`: the library, not timing, sets the tile from the shape (estimator/pricing/pick.py):
    swap-AB below `swap_below_m` rows, block M the smallest of the menu covering the dim it spans (else
    the largest), block N the fewest waves, then the fullest last wave, then the smallest N
    (DeepGEMM's get_best_gemm_config). Empty `pick`: the fastest candidate, as for every other GEMM.
    `stream_k: false`: the kernel has no stream-K tail on a persistent family (each tile's K loop runs
    whole on one CTA or pair, as TensorRT-LLM's sm100 NVFP4 GEMM launches it)."""

    split_k: tuple[int, ...]
    promote: bool
    tiles: tuple[GemmTile, ...] = ()
    pick: str = ""
    swap_below_m: int = 0
    straddle_max_stages: int = 0  # pipeline stages of a tile straddling two weight-scale blocks (0: any)
    stream_k: bool = True


@dataclass(frozen=True)
class AttentionTile:
    q: int  # query rows per CTA
    kv: int  # keys per inner step
    max_head_dim: int
    max_ctas_per_sm: int = 1
    # FMA-pipe instructions of one exp2 computed in software (0: every exp on the SFU); a kernel that
    # has them moves the share of its exps that balances the two pipes (estimator/pricing/attention.py)
    exp2_fma_ops: int = 0


@dataclass(frozen=True)
class DecodeKernel:
    """An MMA decode kernel: the K/V element sizes it serves, the MMA rows the grouped query heads are
    padded to, and a cap on co-resident CTAs (smem may allow fewer)."""

    kv_bytes: tuple[int, ...]
    q_rows: int
    max_ctas_per_sm: int
    cta_cost: float = 1.0  # a CTA's fixed cost relative to efficiency.attention_cta_s
    max_group: int = 0  # query heads one CTA takes (0: every head of the group); more: CTAs per KV head
    page_tokens: int = 1  # K/V move in whole blocks of this many tokens (the last one padded)
    row_cost: bool = False  # a CTA's fixed cost grows by efficiency.attention_decode_row_s per Q row x dk
    head_dims: tuple[int, ...] = ()  # head dims the kernel is built for: smem and MMAs at the next one up
    persistent: bool = False  # unsplit, a persistent tile scheduler: no per-wave CTA cost (attention.py)


@dataclass(frozen=True)
class DecodeLaunch:
    """The framework's host-side decode launch rule (estimator/pricing/decode_launch.py): KV splits from
    the history, and the caches whose grouped kernel gives way to the per-head one on a small grid."""

    min_tokens_per_split: int  # history tokens per split before the caps
    split_sqrt_factor: int  # splits <= round(sqrt(factor * splits))
    target_waves: int  # splits shrink so that the grid stays within this many waves
    min_blocks_factor: int  # grouped kernel only when batch x kv_heads x splits x this >= SMs
    fallback_kv_bytes: tuple[int, ...]  # K/V element sizes the per-head fallback applies to


@dataclass(frozen=True)
class FamilyMenu:
    family: str
    mma: str
    gemm_k_bytes: int
    min_stages: int
    max_stages: int
    smem_reserved_bytes: int
    epilogue_smem_bytes: int
    accumulator_bytes_per_sm: int
    split_k: tuple[int, ...]
    gemm_tiles: tuple[GemmTile, ...]
    attention_tiles: tuple[AttentionTile, ...]
    decode_kv: int  # keys per inner step of the decode (split-KV) kernel
    decode_mma: tuple[DecodeKernel, ...]  # the MMA decode kernels, first match by K/V element size
    decode_splits: tuple[int, ...]
    decode_ctas_per_sm: int  # co-resident decode CTAs (the CUDA-core kernel; the MMA one by smem)
    decode_max_group: int  # largest query group the MMA decode kernel takes; past it, per-head CTAs
    block_scales: dict  # dtype -> {"block": elements per scale, "bytes": bytes per scale}
    tmem: Tmem | None = None  # tcgen05 tensor memory (None: accumulators in registers)
    block_scaled: BlockScaled | None = None  # None: a block-scaled GEMM runs as any other
    # "waves": CTAs launched in waves, as fitted on Hopper; "persistent": one CTA per slot taking tiles
    # from a queue (cluster launch control), the last wave's tiles spread over every slot (stream-K)
    scheduler: str = "waves"
    decode_launch: DecodeLaunch | None = None  # None: the cheapest split, the grouped kernel whenever it fits
    # the framework's 1 x block activation quantization kernel (estimator/pricing/quant.py): warps per SM of
    # its grid-stride loop, one group of block_size values per warp a round (0: priced as any stream)
    block_quant_warps_per_sm: int = 0


def menus_dir() -> Path:
    return bundled_dir() / "tiles"


def _need(raw: dict, key: str, path: str) -> Any:
    if key not in raw:
        raise HwdescError(f"{path}: {key}: missing")
    return raw[key]


def _positive_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise HwdescError(f"{where}: must be a positive integer, got {value!r}")
    return value


def _tiles(raw: list, cls: type, fields: tuple[str, ...], where: str) -> tuple:
    if not isinstance(raw, list) or not raw:
        raise HwdescError(f"{where}: must be a non-empty list")
    out = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or set(t) - set(fields):
            raise HwdescError(f"{where}[{i}]: a mapping with keys from {', '.join(fields)}")
        out.append(cls(**{k: _positive_int(v, f"{where}[{i}].{k}") for k, v in t.items()}))
    return tuple(out)


def _decode_kernels(raw: Any, where: str) -> tuple[DecodeKernel, ...]:
    if not isinstance(raw, list) or not raw:
        raise HwdescError(f"{where}.decode_mma: must be a non-empty list")
    out = []
    for i, k in enumerate(raw):
        if not isinstance(k, dict) or not {"kv_bytes", "q_rows", "max_ctas_per_sm"} <= set(k) \
                or set(k) - {"kv_bytes", "q_rows", "max_ctas_per_sm", "cta_cost", "max_group", "page_tokens",
                          "row_cost", "head_dims", "persistent"}:
            raise HwdescError(f"{where}.decode_mma[{i}]: keys kv_bytes (list), q_rows, max_ctas_per_sm, "
                              f"cta_cost, max_group, page_tokens, row_cost, head_dims, persistent (the last "
                              f"six optional)")
        cost = k.get("cta_cost", 1.0)
        if not isinstance(cost, (int, float)) or isinstance(cost, bool) or not 0 < cost <= 1:
            raise HwdescError(f"{where}.decode_mma[{i}].cta_cost: a number in (0, 1], got {cost!r}")
        at = f"{where}.decode_mma[{i}]"
        dims = tuple(sorted(_positive_int(d, f"{at}.head_dims") for d in k.get("head_dims", ())))
        for flag in ("row_cost", "persistent"):
            if not isinstance(k.get(flag, False), bool):
                raise HwdescError(f"{at}.{flag}: true or false, got {k[flag]!r}")
        out.append(DecodeKernel(tuple(_positive_int(b, f"{at}.kv_bytes") for b in k["kv_bytes"]),
                                _positive_int(k["q_rows"], f"{at}.q_rows"),
                                _positive_int(k["max_ctas_per_sm"], f"{at}.max_ctas_per_sm"), float(cost),
                                _positive_int(k["max_group"], f"{at}.max_group") if "max_group" in k else 0,
                                _positive_int(k.get("page_tokens", 1), f"{at}.page_tokens"),
                                k.get("row_cost", False), dims, k.get("persistent", False)))
    return tuple(out)


def _tmem(raw: Any, where: str) -> Tmem | None:
    if raw is None:
        return None
    keys = ("lanes", "columns", "min_alloc_columns", "accumulator_buffers")
    if not isinstance(raw, dict) or set(raw) - {*keys, "source"} or not set(keys) <= set(raw):
        raise HwdescError(f"{where}: keys {', '.join(keys)}, source")
    if not isinstance(raw.get("source"), str) or not raw["source"].strip():
        raise HwdescError(f"{where}.source: every figure needs a non-empty `source` string")
    return Tmem(*(_positive_int(raw[k], f"{where}.{k}") for k in keys))


def _scheduler(gemm: dict, where: str, tmem: Tmem | None, tiles: tuple[GemmTile, ...]) -> str:
    kind = gemm.get("scheduler", "waves")
    if kind not in SCHEDULERS:
        raise HwdescError(f"{where}.scheduler: one of {', '.join(SCHEDULERS)}, got {kind!r}")
    if kind != "waves" and not str(gemm.get("scheduler_source") or "").strip():
        raise HwdescError(f"{where}.scheduler_source: a `{kind}` scheduler needs its source")
    # a tile over a CTA pair is a 2-SM tcgen05 MMA: it needs tensor memory (sm_100), never sm_90 / sm_120
    pair = next((t for t in tiles if t.sms > 1), None)
    if pair is not None and tmem is None:
        raise HwdescError(f"{where}.tiles: {pair.m}x{pair.n} spans {pair.sms} SMs (a 2-CTA tcgen05 tile), "
                          f"which needs `tmem`")
    return kind


def _decode_launch(raw: Any, where: str) -> DecodeLaunch | None:
    if raw is None:
        return None
    keys = ("min_tokens_per_split", "split_sqrt_factor", "target_waves", "min_blocks_factor")
    if not isinstance(raw, dict) or set(raw) != {*keys, "fallback_kv_bytes", "source"}:
        raise HwdescError(f"{where}: a mapping with {', '.join(keys)}, fallback_kv_bytes and source")
    if not str(raw["source"] or "").strip():
        raise HwdescError(f"{where}.source: every figure needs a non-empty `source` string")
    fallback = raw["fallback_kv_bytes"]
    if not isinstance(fallback, list):
        raise HwdescError(f"{where}.fallback_kv_bytes: a list of K/V element sizes (may be empty)")
    return DecodeLaunch(*(_positive_int(raw[k], f"{where}.{k}") for k in keys),
                        tuple(_positive_int(b, f"{where}.fallback_kv_bytes") for b in fallback))


def _block_scaled(raw: Any, where: str) -> BlockScaled | None:
    if raw is None:
        return None
    required = {"split_k", "promote", "source"}
    optional = {"tiles", "pick", "swap_below_m", "straddle_max_stages", "stream_k"}
    if not isinstance(raw, dict) or not required <= set(raw) or set(raw) - required - optional:
        raise HwdescError(f"{where}: a mapping with split_k, promote and source "
                          f"(tiles, pick, swap_below_m, straddle_max_stages, stream_k optional)")
    if not isinstance(raw.get("stream_k", True), bool):
        raise HwdescError(f"{where}.stream_k: must be true or false")
    if not str(raw["source"] or "").strip() or not isinstance(raw["promote"], bool):
        raise HwdescError(f"{where}: promote must be true or false, with a non-empty source")
    split_k = tuple(_positive_int(s, f"{where}.split_k") for s in raw["split_k"] or ())
    if not split_k:
        raise HwdescError(f"{where}.split_k: must be a non-empty list")
    pick = raw.get("pick", "")
    if pick not in PICKS:
        raise HwdescError(f"{where}.pick: one of {', '.join(p for p in PICKS if p)}, got {pick!r}")
    tiles = ()
    if "tiles" in raw:
        tiles = _tiles(_expand_n(raw["tiles"], f"{where}.tiles"), GemmTile,
                       ("m", "n", "sms", "max_ctas_per_sm", "cluster_m", "cluster_n"), f"{where}.tiles")
    if pick and not tiles:
        raise HwdescError(f"{where}.pick: a library's pick needs its `tiles`")
    swap_below, stages = (_positive_int(raw[k], f"{where}.{k}") if k in raw else 0
                          for k in ("swap_below_m", "straddle_max_stages"))
    return BlockScaled(split_k, raw["promote"], tiles, pick, swap_below, stages, raw.get("stream_k", True))


def _expand_n(raw: Any, where: str) -> Any:
    """A tile entry whose `n` is a list stands for one tile per N (a JIT kernel's block-N range)."""
    if not isinstance(raw, list):
        raise HwdescError(f"{where}: must be a non-empty list")
    out = []
    for i, t in enumerate(raw):
        if isinstance(t, dict) and isinstance(t.get("n"), list):
            if not t["n"]:
                raise HwdescError(f"{where}[{i}].n: an empty list")
            out += [{**t, "n": n} for n in t["n"]]
        else:
            out.append(t)
    return out


def _block_quant(raw: Any, where: str) -> int:
    if raw is None:
        return 0
    if not isinstance(raw, dict) or set(raw) != {"warps_per_sm", "source"} or not str(raw["source"]).strip():
        raise HwdescError(f"{where}: a mapping with warps_per_sm and a non-empty source")
    return _positive_int(raw["warps_per_sm"], f"{where}.warps_per_sm")


def parse(raw: Any, path: str) -> FamilyMenu:
    if not isinstance(raw, dict):
        raise HwdescError(f"{path}: must be a mapping")
    gemm = _need(raw, "gemm", path)
    attn = _need(raw, "attention", path)
    where = f"{path}: gemm"
    split_k = tuple(_positive_int(s, f"{where}.split_k") for s in _need(gemm, "split_k", where))
    tiles = _tiles(_need(gemm, "tiles", where), GemmTile,
                   ("m", "n", "max_ctas_per_sm", "sms", "cluster_m", "cluster_n"), f"{where}.tiles")
    tmem = _tmem(gemm.get("tmem"), f"{where}.tmem")
    return FamilyMenu(
        family=str(_need(raw, "family", path)),
        mma=str(_need(raw, "mma", path)),
        gemm_k_bytes=_positive_int(_need(gemm, "k_bytes", where), f"{where}.k_bytes"),
        min_stages=_positive_int(_need(gemm, "min_stages", where), f"{where}.min_stages"),
        max_stages=_positive_int(_need(gemm, "max_stages", where), f"{where}.max_stages"),
        smem_reserved_bytes=int(_need(gemm, "smem_reserved_bytes", where)),
        epilogue_smem_bytes=int(_need(gemm, "epilogue_smem_bytes", where)),
        accumulator_bytes_per_sm=_positive_int(_need(gemm, "accumulator_bytes_per_sm", where),
                                               f"{where}.accumulator_bytes_per_sm"),
        split_k=split_k,
        gemm_tiles=tiles,
        attention_tiles=_tiles(_need(attn, "tiles", f"{path}: attention"), AttentionTile,
                               ("q", "kv", "max_head_dim", "max_ctas_per_sm", "exp2_fma_ops"),
                               f"{path}: attention.tiles"),
        decode_kv=_positive_int(_need(attn, "decode_kv", f"{path}: attention"), "attention.decode_kv"),
        decode_mma=_decode_kernels(_need(attn, "decode_mma", f"{path}: attention"), f"{path}: attention"),
        decode_splits=tuple(_positive_int(s, "attention.decode_splits")
                            for s in _need(attn, "decode_splits", f"{path}: attention")),
        decode_ctas_per_sm=_positive_int(_need(attn, "decode_ctas_per_sm", f"{path}: attention"),
                                         "attention.decode_ctas_per_sm"),
        decode_max_group=_positive_int(_need(attn, "decode_max_group", f"{path}: attention"),
                                       "attention.decode_max_group"),
        block_scales=dict(raw.get("block_scales") or {}),
        block_quant_warps_per_sm=_block_quant(raw.get("block_quant"), f"{path}: block_quant"),
        tmem=tmem,
        block_scaled=_block_scaled(gemm.get("block_scaled"), f"{where}.block_scaled"),
        scheduler=_scheduler(gemm, where, tmem, tiles),
        decode_launch=_decode_launch(attn.get("decode_launch"), f"{path}: attention.decode_launch"),
    )


@functools.lru_cache(maxsize=None)
def menu_for(family: str) -> FamilyMenu | None:
    """The bundled menu of `family`, or None when the family has none (the cpu family)."""
    path = menus_dir() / f"{family}.yaml"
    if not path.exists():
        return None
    shown = f"hwdesc/tiles/{path.name}"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise HwdescError(f"{shown}: not valid YAML: {exc}") from None
    menu = parse(raw, shown)
    if menu.family != family:
        raise HwdescError(f"{shown}: family must be {family!r}, got {menu.family!r}")
    return menu


def decode_kernel(menu: FamilyMenu, kv_bytes: float) -> DecodeKernel:
    """The MMA decode kernel serving a K/V cache of `kv_bytes` per element (else the last listed)."""
    for k in menu.decode_mma:
        if int(round(kv_bytes)) in k.kv_bytes:
            return k
    return menu.decode_mma[-1]
