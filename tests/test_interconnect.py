"""The descriptors' `interconnect` group (hwdesc/interconnect.py), the constants writer
(estimator/calibration/comm_constants.py) and the calibration's numpy mirror of the collective model
(estimator/calibration/fit_comm.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

import hwdesc
from estimator.calibration import comm_constants
from estimator.calibration import fit_comm as calibrate_comm
from estimator.errors import UserError
from estimator.pricing import collectives as coll
from hwdesc import HwdescError


@pytest.mark.parametrize("arch", hwdesc.list_archs())
def test_every_bundled_gpu_has_links_and_fitted_collectives(arch):
    ic = hwdesc.load(arch).interconnect
    assert ic is not None and ic.collectives is not None
    assert set(ic.collectives.nccl) == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    assert ic.sources and all(s.strip() for s in ic.sources.values())  # a source per figure
    assert ic.link_bytes_per_s(2) > 0


def test_per_sku_figures():
    h100, gb200, rtx = (hwdesc.load(a).interconnect for a in ("h100-sxm", "gb200", "rtx-5090"))
    assert h100.nvlink_bytes_per_s_per_direction == 450e9  # 900 GB/s bidirectional
    assert (h100.nvlink_domain_gpus, h100.nvlink_sharp, h100.gpus_per_node) == (8, True, 8)
    assert (gb200.nvlink_domain_gpus, gb200.gpus_per_node) == (72, 4)  # NVL72; 4 GPUs per tray
    assert gb200.link_bytes_per_s(16) == 900e9  # still NVLink across trays
    assert h100.link_bytes_per_s(16) == 50e9  # beyond the HGX board: the 400 Gb/s NIC
    assert rtx.nvlink_generation is None and rtx.link_bytes_per_s(2) == 64e9  # PCIe Gen5 x16


def test_blackwell_has_its_own_collective_fit():
    """The Blackwell family is fitted on the B200 tables (estimate calibrate --comm --arch b200): the
    NVLink 5 latency floor is higher than Hopper's (a 2-GPU all-reduce of 512 bytes measures 10.3 us on
    B200, 6.2 on H100) and the bandwidth twice the link (64 MiB int8 over 8 GPUs: 255 us against 373)."""
    h100, b200 = hwdesc.load("h100-sxm"), hwdesc.load("b200")
    assert "B200" in b200.interconnect.collectives.source
    small = [float(coll.collective_cost("AllReduce", 512, 2, hw, dtype="int8").estimate_s)
             for hw in (h100, b200)]
    assert small[1] > 1.4 * small[0]
    big = [float(coll.collective_cost("AllReduce", 64 * 2**20, 8, hw, dtype="int8").estimate_s)
           for hw in (h100, b200)]
    assert big[1] < 0.8 * big[0]


def _raw(arch="h100-sxm") -> dict:
    return yaml.safe_load((hwdesc.bundled_dir() / f"{arch}.yaml").read_text())


def _load(tmp_path, raw) -> hwdesc.HardwareDescriptor:
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(raw))
    return hwdesc.load_file(path)


@pytest.mark.parametrize(("edit", "key"), [
    (lambda ic: ic.pop("nvlink_domain_gpus"), "interconnect.nvlink_domain_gpus"),
    (lambda ic: ic.update(nvlink_lanes={"value": 1, "source": "x"}), "interconnect.nvlink_lanes"),
    (lambda ic: ic["nvlink_sharp"].update(value="yes"), "interconnect.nvlink_sharp.value"),
    (lambda ic: ic["scaleout_bytes_per_s_per_gpu"].pop("source"), "scaleout_bytes_per_s_per_gpu.source"),
    (lambda ic: ic["nvlink_generation"].update(value=None), "nvlink_bytes_per_s_per_direction"),
])
def test_bad_interconnect_names_the_key(tmp_path, edit, key):
    raw = _raw()
    edit(raw["interconnect"])
    with pytest.raises(HwdescError, match=key.replace(".", r"\.")):
        _load(tmp_path, raw)


@pytest.mark.parametrize(("edit", "key"), [
    (lambda c: c["nccl"]["all_reduce"]["ll"].update(alpha_s=-1), "all_reduce.ll.alpha_s"),
    (lambda c: c["custom"]["oneshot"].update(bus_efficiency=[0.5, 0.5]), "custom.oneshot.bus_efficiency"),
    (lambda c: c.update(p2p_ll_max_bytes_per_peer=-1), "p2p_ll_max_bytes_per_peer"),
    (lambda c: c.pop("command"), "collectives.command"),  # a fit names its table and its command
    (lambda c: c["nvls"].update(channels=16), "nvls.channels"),  # channels without chunk_s
    (lambda c: c["nvls"].update(channels=0, chunk_s=1e-5), "nvls.channels"),
    (lambda c: c["nvls"].update(channels=16, chunk_s=-1), "nvls.chunk_s"),
])
def test_bad_collectives_name_the_family_file_and_key(tmp_path, edit, key):
    # the fitted collective constants live in the family file (hwdesc/families/hopper.yaml)
    folder = tmp_path / "families"
    shutil.copytree(hwdesc.loader.families_dir(), folder)
    raw = yaml.safe_load((folder / "hopper.yaml").read_text())
    edit(raw["collectives"])
    (folder / "hopper.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(HwdescError, match=r"hopper\.yaml: .*" + key.replace(".", r"\.")):
        hwdesc.loader.load_family("hopper", folder)


def test_a_descriptor_without_interconnect_still_loads(tmp_path):
    raw = _raw()
    del raw["interconnect"]
    assert _load(tmp_path, raw).interconnect is None


def test_writer_round_trips_the_constants(tmp_path):
    # a Hopper fit replaces hopper.yaml's `collectives` (and a family's that carries the Hopper fit over,
    # none now); Blackwell has its own fit (B200 tables) and is left alone; Ampere and sm_120 inherit
    shutil.copytree(hwdesc.loader.families_dir(), tmp_path / "families")
    folder = tmp_path / "families"
    blackwell = (folder / "blackwell.yaml").read_text()
    consts = {"nccl": {op: {"simple": {"alpha_s": 1e-5, "step_s": 1e-6, "bus_efficiency": [0.5, 0.6, 0.7]}}
                       for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")},
              "nvls": {"alpha_s": 5e-5, "bus_efficiency": 0.6, "min_gpus": 8},
              "custom": {"oneshot": {"alpha_s": 3e-6, "step_s": 1e-7, "bus_efficiency": 0.6}}}
    written = ["families/hopper.yaml"]
    fit = {"fitted_on": "../shared/calibration/h100_sxm/nccl.csv.gz", "command": "python tools/x.py"}
    assert comm_constants.write(consts, tmp_path, **fit) == written
    assert comm_constants.write(consts, tmp_path, **fit) == written  # idempotent: replaces, never duplicates
    assert (folder / "blackwell.yaml").read_text() == blackwell
    text = (folder / "hopper.yaml").read_text()
    assert text.count("\ncollectives:") == 1 and text.count("\nefficiency:") == 1
    assert 'command: "python tools/x.py"' in text and "H100 SXM" in text
    c = hwdesc.load_file(hwdesc.bundled_dir() / "h100-sxm.yaml", families=folder).interconnect.collectives
    assert c.nccl["all_reduce"]["simple"].bus_efficiency == (0.5, 0.6, 0.7)
    assert set(c.nccl["all_reduce"]) == {"simple"} and set(c.custom) == {"oneshot"}
    assert c.nvls.alpha_s == 5e-5
    assert c.p2p_ll_max_bytes_per_peer is None  # not fitted: the all-to-all takes its fastest line
    a100 = hwdesc.load_file(hwdesc.bundled_dir() / "a100.yaml", families=folder).interconnect.collectives
    assert a100.nvls.bus_efficiency == (0.6,)  # inherited from hopper
    comm_constants.write({**consts, "p2p_ll_max_bytes_per_peer": 32768}, tmp_path)
    c = hwdesc.load_file(hwdesc.bundled_dir() / "h100-sxm.yaml", families=folder).interconnect.collectives
    assert c.p2p_ll_max_bytes_per_peer == 32768


def test_a_blackwell_fit_goes_to_its_family_alone_unscaled(tmp_path):
    shutil.copytree(hwdesc.loader.families_dir(), tmp_path / "families")
    folder = tmp_path / "families"
    hopper = (folder / "hopper.yaml").read_text()
    consts = {"nccl": {op: {"simple": {"alpha_s": 2e-5, "step_s": 1e-6, "bus_efficiency": [0.5, 0.6, 0.7]}}
                       for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")},
              "nvls": {"alpha_s": 5e-5, "bus_efficiency": 0.6, "min_gpus": 8, "channels": 24,
                       "chunk_s": 3e-5},
              "custom": {"oneshot": {"alpha_s": 4e-6, "step_s": 1e-7, "bus_efficiency": 0.7}}}
    fit = {"fitted_on": "../shared/calibration/b200_sxm/nccl.csv.gz", "command": "estimate calibrate --comm"}
    assert comm_constants.write(consts, tmp_path, **fit, family="blackwell") == ["families/blackwell.yaml"]
    assert (folder / "hopper.yaml").read_text() == hopper
    text = (folder / "blackwell.yaml").read_text()
    assert "B200 SXM" in text and "b200_sxm/nccl.csv.gz" in text and text.count("\ncollectives:") == 1
    for sku in ("b200", "gb200", "b300"):  # every SKU of the family, through its own descriptor
        c = hwdesc.load_file(hwdesc.bundled_dir() / f"{sku}.yaml", families=folder).interconnect.collectives
        assert c.nvls.bus_efficiency == (0.6,)  # its own fit: no nvlsEfficiency scaling
        assert (c.nvls_channels, c.nvls_chunk_s) == (24, 3e-5)  # the NVLS chunk limit round-trips
        assert c.nccl["all_gather"]["simple"].alpha_s == 2e-5


def test_comm_tables_read_both_column_layouts(tmp_path):
    """The B200 custom all-reduce table names its columns as the source does (message_size,
    allreduce_dtype): read as the H100 table's message_elements and dtype."""
    import gzip
    path = tmp_path / "custom_allreduce.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("op_name,kernel_source,allreduce_dtype,num_gpus,message_size,latency_ms,implementation\n"
                "all_reduce,TRTLLM,bfloat16,2,128,0.0045,trtllm\nall_reduce,TRTLLM,bfloat16,8,1024,0.005,trtllm\n")
    rows = calibrate_comm.read(path)
    assert list(rows["bytes"]) == [256.0, 2048.0] and list(rows["n"]) == [2, 8]
    assert list(rows["t"]) == [4.5e-06, 5e-06]
    with gzip.open(path, "wt") as f:
        f.write("op_name,nccl_dtype,num_gpus,latency_ms\nall_gather,half,2,0.01\n")
    with pytest.raises(UserError, match="no column message_elements"):
        calibrate_comm.read(path)


def test_split_fits_every_other_size_and_checks_the_rest():
    """--comm-split: per curve every other size; the int8 curve starts one size later, so each byte size
    of an op is fitted once (in one dtype) and checked once (in the other)."""
    sizes = [256, 512, 1024, 2048]
    rows = {"op_name": np.array(["all_gather"] * 8), "n": np.array([2] * 8),
            "dtype_name": np.array(["half"] * 4 + ["int8"] * 4),
            "bytes": np.array([2.0 * s for s in sizes] + [float(2 * s) for s in sizes]),
            "t": np.ones(8)}
    fit = calibrate_comm.fit_mask(rows, True)
    assert list(fit) == [True, False, True, False, False, True, False, True]
    assert set(rows["bytes"][fit]) == set(rows["bytes"][~fit]) == {512.0, 1024.0, 2048.0, 4096.0}
    assert calibrate_comm.fit_mask(rows, False).all()


def test_h100_all_to_all_is_nccls_p2p_kernel():
    """The fitted H100 all-to-all: LL by the bytes per peer, no LL128 (NCCL's send/recv have none)."""
    c = hwdesc.load("h100-sxm").interconnect.collectives
    assert c.p2p_ll_max_bytes_per_peer in calibrate_comm.P2P_LL_CANDIDATES
    assert set(c.nccl["all_to_all"]) == {"ll", "simple", "simple_wide"}
    assert len(c.nccl["all_to_all"]["ll"].bus_efficiency) == 1  # one peer's stream, at any group size


SIZES = np.array([2.0**k for k in range(8, 30, 3)])


@pytest.mark.parametrize("arch", ["h100-sxm", "b200"])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
def test_calibration_mirror_agrees_with_the_model_nccl(op, arch):
    """The fit's numpy evaluation must be the estimator's model, or the fitted constants mean nothing."""
    hw = hwdesc.load(arch)
    consts = _consts(hw)
    link = hw.interconnect.nvlink_bytes_per_s_per_direction
    for n in (2, 4, 8):
        groups = np.full(len(SIZES), n)
        mirror = calibrate_comm.nccl_times(consts, op, groups, SIZES, np.ones(len(SIZES), bool), link)
        model = [float(coll.collective_cost(op, b, n, hw, dtype="fp16").estimate_s) for b in SIZES]
        np.testing.assert_allclose(mirror, np.maximum(mirror, _bounds(op, n, hw)), rtol=1e-9)
        np.testing.assert_allclose(model, mirror, rtol=1e-9)


@pytest.mark.parametrize(("framework", "graphed", "arch"),
                         [("trtllm", True, "h100-sxm"), ("vllm", True, "h100-sxm"),
                          ("vllm", False, "h100-sxm"), ("sglang", True, "h100-sxm"),
                          ("sglang", False, "h100-sxm"), ("trtllm", True, "b200"), ("vllm", True, "b200")])
def test_calibration_mirror_agrees_with_the_model_frameworks(framework, graphed, arch):
    hw = hwdesc.load(arch)
    consts = _consts(hw)
    link = hw.interconnect.nvlink_bytes_per_s_per_direction
    for n in (2, 4, 8):
        groups = np.full(len(SIZES), n)
        mirror = calibrate_comm.custom_times(consts, coll.frameworks(), framework, graphed, groups, SIZES, hw,
                                             link)
        model = [float(coll.collective_cost("AllReduce", b, n, hw, dtype="bf16", framework=framework,
                                            graphed=graphed).estimate_s) for b in SIZES]
        np.testing.assert_allclose(model, mirror, rtol=1e-9)


def _bounds(op, n, hw):
    return np.array([float(coll.collective_cost(op, b, n, hw, dtype="fp16").bound_s) for b in SIZES])


def _consts(hw) -> dict:
    """The descriptor's constants as the calibration's nested dict."""
    c = hw.interconnect.collectives

    def line(x):
        eff = list(x.bus_efficiency) if len(x.bus_efficiency) > 1 else x.bus_efficiency[0]
        return {"alpha_s": x.alpha_s, "step_s": x.step_s, "bus_efficiency": eff}

    return {"nccl": {op: {p: line(x) for p, x in protos.items()} for op, protos in c.nccl.items()},
            "nvls": {**line(c.nvls), "min_gpus": c.nvls_min_gpus,
                     **({"channels": c.nvls_channels, "chunk_s": c.nvls_chunk_s} if c.nvls_chunk_s else {})},
            "custom": {k: line(x) for k, x in c.custom.items()},
            "p2p_ll_max_bytes_per_peer": c.p2p_ll_max_bytes_per_peer}
