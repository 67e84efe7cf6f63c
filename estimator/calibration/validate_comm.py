"""`estimate validate comm` (and the `nccl`, `allreduce` tables of `estimate validate kernels`): measured
collectives through the estimator.

Each row becomes a one-node ONNX graph (com.microsoft AllReduce / AllGather / ReduceScatter / AllToAll
with `group_size`; estimator/calibration/fit_comm.py explains the tables) and runs through
`estimator.estimate.estimate` as the CLI would: no framework for nccl.csv.gz (nccl-tests, plain NCCL),
`framework=` trtllm / vllm / sglang and `comm_graphed=` the row's graph or eager variant for
custom_allreduce.csv.gz. Regimes: one per (op, GPU count) for nccl, per (source, GPU count) for
allreduce, plus the pooled GPU count (every source of the table).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from estimator.calibration.fit_comm import OPS, SOURCES, read
from estimator.estimate import estimate
from estimator.frontends.onnx_import import import_model

ONNX_OP = {"all_reduce": "AllReduce", "all_gather": "AllGather", "reduce_scatter": "ReduceScatter",
           "all_to_all": "AllToAll"}
ELEM = {"half": (TensorProto.FLOAT16, 2), "int8": (TensorProto.INT8, 1),
        "bfloat16": (TensorProto.BFLOAT16, 2)}
TABLES = {"nccl": "nccl.csv.gz", "allreduce": "custom_allreduce.csv.gz"}


def collective_model(op: str, elements: int, group: int, dtype: str) -> onnx.ModelProto:
    """One collective over a 1-D buffer of `elements` (nccl-tests' total: all-gather's output,
    reduce-scatter's input)."""
    elem, _ = ELEM[dtype]
    n_in = elements // group if op == "all_gather" else elements
    n_out = elements // group if op == "reduce_scatter" else elements
    x = helper.make_tensor_value_info("x", elem, [n_in])
    y = helper.make_tensor_value_info("y", elem, [n_out])
    attrs = {"group_size": group, **({"axis": 0} if op == "all_gather" else {})}
    node = helper.make_node(ONNX_OP[op], ["x"], ["y"], name=op, domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "collective", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                   helper.make_opsetid("com.microsoft", 1)])


def rows_of(data: Path, table: str) -> dict:
    rows = read(data / TABLES[table])
    if table == "nccl":
        rows["op"] = np.array([OPS[o] for o in rows["op_name"]])
    else:
        rows["op"] = np.array(["all_reduce"] * len(rows["t"]))
    return rows


def price(table: str, row: dict, hw) -> tuple[float, float]:
    dtype = str(row["dtype_name"])
    model = collective_model(str(row["op"]), int(float(row["message_elements"])), int(row["n"]), dtype)
    framework, graphed = (None, True) if table == "nccl" else SOURCES[str(row["kernel_source"])]
    r = estimate(import_model(model), hw, framework=framework, comm_graphed=graphed, roofline=True)
    return float(r.totals["bound_s"]), float(r.totals["estimate_s"])


def key_of(table: str, row: dict) -> tuple:
    return tuple(str(row[k]) for k in ("op", "n", "dtype_name", "message_elements")) + (
        (str(row["kernel_source"]),) if table == "allreduce" else ())


def regimes(table: str, rows: dict) -> list[tuple[str, np.ndarray]]:
    label = rows["op_name"] if table == "nccl" else rows["kernel_source"]
    out = [(f"{a} n={n}", (label == a) & (rows["n"] == n)) for a in np.unique(label) for n in (2, 4, 8)]
    if table == "allreduce":
        out += [(f"all sources n={n}", rows["n"] == n) for n in (2, 4, 8)]
    return [(name, mask) for name, mask in out if mask.any()]
