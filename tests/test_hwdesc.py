"""hwdesc: every bundled GPU loads, figures match the datasheets, and bad files fail with a named key."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import yaml

import hwdesc
from estimator.pricing.menu import menu_for
from hwdesc import HardwareDescriptor, HwdescError
from hwdesc.schema import BLOCK_KERNEL_KEYS, MLA_MOE_KEYS, OWN_KEYS, TILE_EFFICIENCY_KEYS

BUNDLED = ["a100", "b200", "b300", "gb200", "h100-pcie", "h100-sxm", "h200", "rtx-5090", "rtx-pro-6000"]


def _fig(value, source="test figure"):
    return {"value": value, "source": source}


def _custom() -> dict:
    """A small, complete, valid descriptor (a made-up GPU); each error test breaks one thing in it."""
    return {
        "schema_version": 1,
        "name": "my-gpu",
        "display_name": "My test GPU",
        "family": "hopper",
        "compute_capability": "9.0",
        "sm_count": _fig(100),
        "clock_hz": _fig(2.0e9),
        "tensor_flops_per_s": {"bf16": _fig(800e12), "fp8": {**_fig(1600e12), "confidence": "low"}},
        "cuda_flops_per_s": {"fp32": _fig(50e12), "fp16": _fig(50e12), "fp64": _fig(25e12)},
        "sfu_ops_per_s": _fig(3.2e12),
        "dram_bytes_per_s": _fig(2.0e12),
        "dram_bytes": _fig(64e9),
        "l2_bytes": _fig(50 * 2**20),
        "smem_bytes_per_sm": _fig(228 * 1024),
        "nvlink_bytes_per_s": {"value": None, "source": "PCIe only", "note": "null is allowed here"},
        # the efficiency constants are the family's (hwdesc/families/hopper.yaml); this GPU's own dram
        "efficiency_overrides": {"dram": _fig(0.9)},
    }


def _write(tmp_path: Path, data: dict, name: str = "custom.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- bundled files ---------------------------------------------------------------------------------


def test_list_archs_has_all_nine():
    assert hwdesc.list_archs() == BUNDLED


@pytest.mark.parametrize("arch", BUNDLED)
def test_bundled_file_loads_and_passes_schema(arch):
    hw = hwdesc.load(arch)
    assert isinstance(hw, HardwareDescriptor)
    assert hw.name == arch
    assert hw.path == f"hwdesc/{arch}.yaml"
    assert set(hw.cuda_flops_per_s) == {"fp32", "fp16", "fp64"}
    # the roofline's five constants plus the tile model's (estimator/tiling, fitted by estimate calibrate),
    # and a library-picked block-scaled kernel's own where the family's menu has one (Hopper), and the
    # MLA / MoE kernels' (estimator/pricing/mla.py) on the families that fit them and those inheriting theirs
    picked = menu_for(hw.family).block_scaled is not None and bool(menu_for(hw.family).block_scaled.pick)
    # (and datacenter Blackwell's own: its NVFP4 kernel's and attention's DRAM fraction; its block-scaled
    # MMA takes the scales, so it has no promotion fraction `block_scale`)
    scaled = menu_for(hw.family).block_scaled
    own = set(OWN_KEYS) if hw.family == "blackwell" else set()
    promotes = {"block_scale"} if scaled is None or scaled.promote else set()
    mla_moe = MLA_MOE_KEYS if hw.family in ("hopper", "blackwell", "ampere", "blackwell-rtx") else ()
    if hw.family != "blackwell":  # TensorRT-LLM's min-latency MoE chain (moe_fused_s) is an sm_100 path
        mla_moe = tuple(k for k in mla_moe if k != "moe_fused_s")
    else:  # an fp8 absorbed BMM runs bf16 on sm_100 (weights dequantized at load): no DeepGEMM constants
        mla_moe = tuple(k for k in mla_moe if not k.startswith("mla_bmm_fp8_"))
    assert set(hw.efficiency) == {"tensor", "cuda", "sfu", "dram", "min_kernel_s", *TILE_EFFICIENCY_KEYS,
                                  *(BLOCK_KERNEL_KEYS if picked else ()), *own, *mla_moe
                                  } - ({"block_scale"} - promotes)
    assert hw.l2_bytes_per_s is not None  # the tile model's L2 bandwidth
    assert "bf16" in hw.tensor_flops_per_s  # every bundled GPU has BF16 tensor cores
    # every figure has a source: 8 scalars + l2_bytes_per_s + the tensor dtypes + 3 CUDA dtypes + every
    # efficiency entry (+ l2_partitions and the link between them on the two-die Blackwells)
    two_die = 2 if hw.l2_partitions else 0
    assert len(hw.sources) == 8 + 1 + len(hw.tensor_flops_per_s) + 3 + len(hw.efficiency) + two_die
    assert hw.low_confidence <= set(hw.sources)


@pytest.mark.parametrize("arch", BUNDLED)
def test_bundled_file_reads_as_numbers_with_plain_pyyaml(arch):
    # Other tools may read these files with yaml.safe_load (YAML 1.1), where `1.98e9` is a string;
    # the bundled files must write exponents as `1.98e+9`.
    raw = yaml.safe_load((hwdesc.bundled_dir() / f"{arch}.yaml").read_text())
    assert isinstance(raw["clock_hz"]["value"], float)
    assert all(isinstance(f["value"], float) for f in raw["tensor_flops_per_s"].values())
    family = yaml.safe_load((hwdesc.loader.families_dir() / f"{raw['family']}.yaml").read_text())
    assert all(isinstance(f["value"], float) for f in family["efficiency"].values())


@pytest.mark.parametrize("arch", BUNDLED)
def test_sfu_rate_is_16_per_clock_per_sm(arch):
    hw = hwdesc.load(arch)
    # 16 MUFU results/clk/SM; Blackwell Ultra (B300, sm_103) doubles MUFU.EX2 to 32
    per_clock = 32 if hw.compute_capability == "10.3" else 16
    assert hw.sfu_ops_per_s == pytest.approx(per_clock * hw.sm_count * hw.clock_hz)


def test_h100_sxm_figures():
    hw = hwdesc.load("h100-sxm")
    assert hw.tensor_flops_per_s["bf16"] == 989.4e12  # 1979 TFLOPS sparse / 2
    assert hw.dram_bytes_per_s == 3.35e12
    assert hw.sm_count == 132
    assert hw.smem_bytes_per_sm == 228 * 1024
    assert hw.l2_bytes == 50 * 2**20
    assert hw.nvlink_bytes_per_s == 900e9
    assert 0.7 < hw.efficiency["dram"] <= 0.89  # fitted by estimate calibrate; a STREAM copy reaches ~89%
    assert "NVIDIA H100" in hw.sources["tensor_flops_per_s.bf16"]
    assert "sfu_ops_per_s" in hw.low_confidence
    assert "tensor_flops_per_s.bf16" not in hw.low_confidence


def test_precision_support():
    assert "fp4" in hwdesc.load("b200").tensor_flops_per_s
    assert hwdesc.load("b200").tensor_flops_per_s["fp4"] == 9000e12  # 18 PFLOPS sparse / 2
    assert "fp4" not in hwdesc.load("h100-sxm").tensor_flops_per_s
    assert "fp8" not in hwdesc.load("a100").tensor_flops_per_s
    assert "fp4" not in hwdesc.load("a100").tensor_flops_per_s


def test_pcie_parts_have_no_nvlink():
    assert hwdesc.load("rtx-5090").nvlink_bytes_per_s is None
    assert hwdesc.load("rtx-pro-6000").nvlink_bytes_per_s is None


def test_b300_fp4_is_low_confidence():
    hw = hwdesc.load("b300")
    assert hw.tensor_flops_per_s["fp4"] == 14000e12
    assert "tensor_flops_per_s.fp4" in hw.low_confidence


def test_ridge_point_h100_bf16():
    ridge = hwdesc.load("h100-sxm").ridge_flops_per_byte
    assert ridge["bf16"] == pytest.approx(989.4e12 / 3.35e12)  # ~295 FLOP/byte
    assert ridge["fp8"] == pytest.approx(1978.9e12 / 3.35e12)


def test_descriptor_is_frozen_and_hashable():
    hw = hwdesc.load("h100-sxm")
    with pytest.raises(AttributeError):
        hw.sm_count = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        hw.tensor_flops_per_s["bf16"] = 1.0  # type: ignore[index]
    assert hash(hw) == hash(hwdesc.load("h100-sxm"))


# --- name resolution -------------------------------------------------------------------------------


def test_aliases():
    assert hwdesc.ALIASES == {"hopper": "h100-sxm", "blackwell": "b200"}
    assert hwdesc.load("hopper").name == "h100-sxm"
    assert hwdesc.load("blackwell").name == "b200"


def test_case_insensitive_and_cached():
    assert hwdesc.load("H100-SXM") is hwdesc.load("h100-sxm")
    assert hwdesc.load("Hopper") is hwdesc.load("h100-sxm")


def test_unknown_sku_lists_known_names():
    with pytest.raises(HwdescError) as err:
        hwdesc.load("h300")
    message = str(err.value)
    assert "'h300'" in message
    for name in BUNDLED + ["hopper", "blackwell"]:
        assert name in message
    assert "\n" not in message


def test_missing_path():
    with pytest.raises(HwdescError, match="no such file"):
        hwdesc.load("nowhere/gpu.yaml")


# --- custom files ----------------------------------------------------------------------------------


def test_custom_yaml_loads_by_path(tmp_path):
    path = _write(tmp_path, _custom(), name="anything.yaml")  # a user's file may name itself freely
    hw = hwdesc.load(str(path))
    assert hw.name == "my-gpu"
    assert hw.path == str(path)
    assert hw.tensor_flops_per_s == {"bf16": 800e12, "fp8": 1600e12}
    assert hw.nvlink_bytes_per_s is None
    assert hw.sm_count == 100 and isinstance(hw.sm_count, int)
    # its own low-confidence figure and the family's two assumed constants
    assert hw.low_confidence == {"tensor_flops_per_s.fp8", "efficiency.cuda", "efficiency.sfu"}
    assert hw.sources["efficiency.dram"] == "test figure"
    assert hw.efficiency["dram"] == 0.9  # its own (efficiency_overrides), every other constant hopper's
    assert hw.efficiency["tensor"] == hwdesc.load("h100-sxm").efficiency["tensor"]
    assert hwdesc.load(path).name == "my-gpu"  # a Path works too


def test_custom_yaml_accepts_yaml12_exponents(tmp_path):
    text = _write(tmp_path, _custom()).read_text().replace("2000000000.0", "2.0e9")
    assert "2.0e9" in text
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    assert hwdesc.load(str(path)).clock_hz == 2.0e9


def _broken(**changes):
    """_custom() with dotted keys set (a value of ... deletes the key)."""
    data = _custom()
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        if value is ...:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return data


@pytest.mark.parametrize(("changes", "named"), [
    ({"clock_hz__source": ...}, "clock_hz.source"),
    ({"tensor_flops_per_s__bf16__source": "  "}, "tensor_flops_per_s.bf16.source"),
    ({"dram_bytes_per_s__value": -2.0e12}, "dram_bytes_per_s.value"),
    ({"l2_bytes__value": 0}, "l2_bytes.value"),
    ({"clock_hz__value": "fast"}, "clock_hz.value"),
    ({"dram_bytes__value": None}, "dram_bytes.value"),  # null only for nvlink
    ({"dram_bytes__value": math.inf}, "dram_bytes.value"),
    ({"sm_count__value": 100.5}, "sm_count.value"),
    ({"l2_bytes_mb": _fig(50)}, "l2_bytes_mb"),  # unknown top-level key (typo guard)
    ({"clock_hz__sorce": "typo"}, "clock_hz.sorce"),
    ({"tensor_flops_per_s__fp6": _fig(1e15)}, "tensor_flops_per_s.fp6"),
    ({"cuda_flops_per_s__fp64": ...}, "cuda_flops_per_s.fp64"),
    ({"efficiency_overrides__dram__value": 1.5}, "efficiency_overrides.dram"),
    ({"efficiency_overrides__min_kernel_s": _fig(0.5)}, "efficiency_overrides.min_kernel_s"),
    ({"efficiency_overrides__tensr": _fig(0.5)}, "efficiency_overrides.tensr"),
    ({"efficiency": {"tensor": _fig(0.8)}}, "efficiency.tensor"),  # a family constant (families/)
    ({"sm_count__confidence": "certain"}, "sm_count.confidence"),
    ({"family": "volta"}, "family"),
    ({"compute_capability": 9.0}, "compute_capability"),
    ({"schema_version": 2}, "schema_version"),
    ({"display_name": ...}, "display_name"),
])
def test_schema_violation_names_file_and_key(tmp_path, changes, named):
    path = _write(tmp_path, _broken(**changes))
    with pytest.raises(HwdescError) as err:
        hwdesc.load(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}: {named}")
    assert "\n" not in message


def test_efficiency_above_one_message(tmp_path):
    path = _write(tmp_path, _broken(efficiency_overrides__dram__value=1.5))
    with pytest.raises(HwdescError, match=r"efficiency_overrides\.dram: must be in \(0, 1\]"):
        hwdesc.load(str(path))


def test_not_yaml(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\nsm_count: {value: 1\n")
    with pytest.raises(HwdescError, match="not valid YAML") as err:
        hwdesc.load(str(path))
    assert str(err.value).startswith(str(path))


def test_yaml_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "notes.yml"
    path.write_text("just some prose, not a descriptor\n")
    with pytest.raises(HwdescError, match="must be a mapping"):
        hwdesc.load(str(path))


def test_bundled_name_must_equal_stem(tmp_path, monkeypatch):
    # Pretend tmp_path is the bundled folder: its files must then be named after their stem.
    monkeypatch.setattr(hwdesc.loader, "bundled_dir", lambda: tmp_path.resolve())
    _write(tmp_path, _broken(efficiency_overrides=...), name="other-gpu.yaml")  # a bundled file has none
    with pytest.raises(HwdescError, match=r"name: must equal the file stem 'other-gpu'"):
        hwdesc.load_file(tmp_path / "other-gpu.yaml")
