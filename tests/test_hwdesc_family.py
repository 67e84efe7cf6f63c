"""hwdesc/family.py: the fitted constants live per family (hwdesc/families/<family>.yaml), a SKU file
holds its datasheet figures only, and the loader merges the two so `hw.efficiency` reads the family's."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
import yaml
from cliutil import assert_one_error_line, cli

import hwdesc
from hwdesc import HwdescError
from hwdesc.loader import families_dir, list_families, load_family
from hwdesc.schema import CPU_FAMILY, FAMILIES
from onnxutil import matmul_model

ROOT = Path(__file__).resolve().parent.parent
HOPPER_ONLY = ["block_scale_oob_s", "block_scale_straddle_s", "block_scale_store", "block_quant_round_s"]


def _raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _family_values(name: str) -> dict[str, float]:
    """A family's constants read straight from its file (and its `inherits` parent's), by hand."""
    raw = _raw(families_dir() / f"{name}.yaml")
    own = {k: f["value"] for k, f in (raw.get("efficiency") or {}).items()}
    if "inherits" not in raw:
        return own
    base = _family_values(raw["inherits"]["family"])
    return {**{k: v for k, v in base.items() if k not in raw["inherits"].get("except", [])}, **own}


def _sku_without(arch: str, tmp_path: Path, **extra) -> Path:
    """A copy of a bundled SKU file as a user's file, with `extra` top-level groups added."""
    raw = _raw(hwdesc.bundled_dir() / f"{arch}.yaml")
    raw.update(extra)
    path = tmp_path / f"my-{arch}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# --- the bundled families --------------------------------------------------------------------------


def test_families_are_the_tile_menus_families():
    assert list_families() == ["ampere", "blackwell", "blackwell-rtx", "hopper"]
    assert set(list_families()) == FAMILIES - {CPU_FAMILY}
    assert list_families() == sorted(p.stem for p in (hwdesc.bundled_dir() / "tiles").glob("*.yaml"))


@pytest.mark.parametrize("arch", hwdesc.list_archs())
def test_hw_efficiency_reads_the_family_file(arch):
    hw = hwdesc.load(arch)
    assert dict(hw.efficiency) == _family_values(hw.family)


def test_one_h100_fit_read_by_every_family_but_blackwell():
    # the H100 fit is written once (hopper.yaml); sm_120 and Ampere read it through `inherits`
    tensor = _raw(families_dir() / "hopper.yaml")["efficiency"]["tensor"]["value"]
    assert tensor == 0.829
    hopper_fit = [a for a in hwdesc.list_archs() if hwdesc.load(a).family != "blackwell"]
    assert {hwdesc.load(a).efficiency["tensor"] for a in hopper_fit} == {0.829}
    assert hwdesc.load("h100-sxm").efficiency["tensor_fp8"] == 0.669
    assert set(HOPPER_ONLY) <= set(hwdesc.load("h200").efficiency)
    # Blackwell (B200, GB200, B300) has its own B200 fit: one set of constants, no Hopper value inherited
    raw = _raw(families_dir() / "blackwell.yaml")
    assert "inherits" not in raw
    own = {k: f["value"] for k, f in raw["efficiency"].items()}
    for arch in ("b200", "gb200", "b300"):
        assert dict(hwdesc.load(arch).efficiency) == own, arch
    assert own["tensor"] != tensor
    assert not set(HOPPER_ONLY) & set(own) and "block_scale" not in own  # Hopper's promotion kernel's
    for key in ("tensor", "dram", "softmax_overlap", "attention_dram", "tensor_fp8", "tensor_fp4",
                "block_scale_step_s"):
        assert "b200_sxm" in raw["efficiency"][key]["fitted_on"], key


def test_family_collectives_reach_the_skus():
    assert hwdesc.load("h100-sxm").interconnect.collectives.nvls.bus_efficiency == (0.597,)
    # Blackwell's own fit on the B200 tables (hwdesc/families/blackwell.yaml), read by every Blackwell SKU
    b200, b300 = (hwdesc.load(a).interconnect.collectives for a in ("b200", "b300"))
    assert b300.nvls.bus_efficiency == (0.549,) and b300 == b200
    assert (b300.nvls_channels, b300.nvls_chunk_s) == (24, 2.8e-05)  # the NVLS chunk limit too
    assert hwdesc.load("h100-sxm").interconnect.collectives.nvls_chunk_s is None  # Hopper: not fitted
    a100, h100 = (hwdesc.load(a).interconnect.collectives for a in ("a100", "h100-sxm"))
    assert replace(a100, source="") == replace(h100, source="")  # inherited: the same H100 fit
    assert a100.source.startswith("H100 fit, not refitted for this family: ")


def test_no_bundled_sku_file_repeats_a_family_constant():
    for arch in hwdesc.list_archs():
        raw = _raw(hwdesc.bundled_dir() / f"{arch}.yaml")
        assert "efficiency" not in raw and "efficiency_overrides" not in raw, arch
        assert "collectives" not in raw["interconnect"], arch


@pytest.mark.parametrize("name", ["ampere", "blackwell", "blackwell-rtx", "hopper"])
def test_every_family_constant_says_where_it_came_from(name):
    raw = _raw(families_dir() / f"{name}.yaml")
    for key, fig in raw["efficiency"].items():
        fitted = "fitted_on" in fig and "command" in fig
        assert fitted or "not a fit" in fig["source"] or "not refitted for this family" in fig["source"], key
        if fitted:
            assert fig["command"].startswith("estimate calibrate"), key
    if name not in ("hopper", "blackwell"):  # no fit of its own yet: it says so
        assert raw["inherits"] == {"family": "hopper", "except": HOPPER_ONLY,
                                   "source": "H100 fit, not refitted for this family"}
    assert _raw(families_dir() / "hopper.yaml")["efficiency"]["min_kernel_s"]["source"].startswith(
        "an engineering figure, not a fit")


def test_family_files_ship_with_the_package():
    line = next(x for x in (ROOT / "pyproject.toml").read_text().splitlines() if x.startswith("hwdesc = ["))
    assert '"families/*.yaml"' in line  # [tool.setuptools.package-data]


# --- a SKU file repeating a family constant, or naming no known family -----------------------------


def test_sku_repeating_a_family_constant_is_refused(tmp_path):
    path = _sku_without("h100-sxm", tmp_path, efficiency={"tensor": {"value": 0.829, "source": "copied"}})
    with pytest.raises(HwdescError) as err:
        hwdesc.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: efficiency.tensor: repeats a family constant")
    assert "hwdesc/families/hopper.yaml" in message and "efficiency_overrides" in message


def test_sku_repeating_the_collectives_is_refused(tmp_path):
    raw = _raw(hwdesc.bundled_dir() / "b200.yaml")
    fitted = _raw(families_dir() / "blackwell.yaml")["collectives"]
    path = _sku_without("b200", tmp_path, interconnect={**raw["interconnect"], "collectives": fitted})
    with pytest.raises(HwdescError, match=r"interconnect\.collectives: repeats a family constant.*"
                                          r"hwdesc/families/blackwell\.yaml"):
        hwdesc.load(path)


def test_bundled_sku_may_not_override(tmp_path, monkeypatch):
    monkeypatch.setattr(hwdesc.loader, "bundled_dir", lambda: tmp_path.resolve())
    _sku_without("h200", tmp_path, efficiency_overrides={"dram": {"value": 0.5, "source": "mine"}})
    (tmp_path / "my-h200.yaml").rename(tmp_path / "h200.yaml")
    with pytest.raises(HwdescError, match=r"efficiency_overrides: a bundled SKU takes its family's"):
        hwdesc.load_file(tmp_path / "h200.yaml")


def test_missing_family_is_refused(tmp_path):
    path = _sku_without("a100", tmp_path, family="volta")
    with pytest.raises(HwdescError) as err:
        hwdesc.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: family: 'volta' has no family file hwdesc/families/volta.yaml")
    assert "known: ampere, blackwell, blackwell-rtx, hopper" in message


def test_cli_refuses_a_sku_repeating_a_family_constant(capsys, tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(matmul_model(64, 64, 64), str(model))
    path = _sku_without("h100-sxm", tmp_path, efficiency={"launch_s": {"value": 2e-6, "source": "copied"}})
    code, _, err = cli(capsys, str(model), "--arch", str(path))
    assert_one_error_line(code, err, "efficiency.launch_s: repeats a family constant")


def test_cli_runs_a_users_own_gpu_file(capsys, tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(matmul_model(64, 64, 64), str(model))
    own = _sku_without("h100-sxm", tmp_path, efficiency_overrides={"launch_s": {"value": 9e-6,
                                                                               "source": "my own fit"}})
    code, out, _ = cli(capsys, str(model), "--arch", str(own), "--json")
    assert code == 0
    mine = json.loads(out)["total"]["estimate_s"]
    code, out, _ = cli(capsys, str(model), "--arch", "h100-sxm", "--json")
    assert code == 0 and mine > json.loads(out)["total"]["estimate_s"]  # a longer launch: a longer estimate
    assert hwdesc.load(own).efficiency["launch_s"] == 9e-6
    assert hwdesc.load(own).efficiency["tensor"] == hwdesc.load("h100-sxm").efficiency["tensor"]


# --- family files ---------------------------------------------------------------------------------


def _families(tmp_path: Path) -> Path:
    folder = tmp_path / "families"
    shutil.copytree(families_dir(), folder)
    return folder


def test_a_fit_names_both_its_table_and_its_command(tmp_path):
    folder = _families(tmp_path)
    path = folder / "hopper.yaml"
    path.write_text(path.read_text().replace('    command: "estimate calibrate --data '
                                             '../shared/calibration/h100_sxm --write"\n', "", 1))
    with pytest.raises(HwdescError, match=r"hopper\.yaml: efficiency\.tensor\.command: missing"):
        load_family("hopper", folder)


def test_inherits_except_must_name_a_parent_constant(tmp_path):
    folder = _families(tmp_path)
    path = folder / "ampere.yaml"
    path.write_text(path.read_text().replace("block_quant_round_s]", "block_quant_rnd_s]"))
    with pytest.raises(HwdescError, match=r"ampere\.yaml: inherits\.except: 'block_quant_rnd_s' is not a "
                                          r"constant of .*hopper\.yaml"):
        load_family("ampere", folder)


def test_inherits_in_a_circle_is_refused(tmp_path):
    folder = _families(tmp_path)
    raw = _raw(folder / "hopper.yaml")
    raw["inherits"] = {"family": "ampere", "source": "a mistake"}
    (folder / "hopper.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(HwdescError, match="circle: ampere -> hopper -> ampere"):
        load_family("ampere", folder)


def test_family_without_a_required_constant_is_refused(tmp_path):
    folder = _families(tmp_path)
    raw = _raw(folder / "hopper.yaml")
    del raw["efficiency"]["min_kernel_s"]
    (folder / "hopper.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(HwdescError, match=r"hopper\.yaml: efficiency\.min_kernel_s: missing"):
        load_family("hopper", folder)


def test_sku_reads_a_changed_family_value(tmp_path):
    # the family file, and nothing else, decides what hw.efficiency reads (here through inherits)
    folder = _families(tmp_path)
    path = folder / "hopper.yaml"
    path.write_text(path.read_text().replace("value: 0.829", "value: 0.5", 1))
    hw = hwdesc.load_file(hwdesc.bundled_dir() / "rtx-5090.yaml", families=folder)
    assert hw.efficiency["tensor"] == 0.5
    assert hwdesc.load("rtx-5090").efficiency["tensor"] == 0.829  # the bundled family as it is
