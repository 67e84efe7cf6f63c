"""Weights stored in a block-scaled format ONNX has no element type for (MXFP4: e2m1 values and an e8m0
scale per 32 values, held as one tensor by the serving engines' weight-only kernels).

A graph names them in its metadata: `metadata_props["estimator.stored_formats"]` is a JSON object
{weight name: format}, each format a key of estimator.dtypes.STORED_FORMATS. The builders in models/
write it (models/decoder_moe.py for gpt-oss's MXFP4 experts); `apply` re-types those weights in the IR,
so their bytes are the stored ones (4.25 bits a weight for MXFP4) while the ops reading them keep the
activations' dtype (the GEMM dequantizes in its mainloop: see estimator/fused.py). A malformed entry, a
format the estimator does not know or a name that is no weight is a FrontendError.
"""

from __future__ import annotations

import json
from dataclasses import replace

import onnx

from estimator.dtypes import STORED_FORMATS
from estimator.errors import UserError
from estimator.ir import Graph

KEY = "estimator.stored_formats"  # = models._builder.STORED_FORMATS_KEY


class StoredFormatError(UserError):
    pass


def read(model: onnx.ModelProto) -> dict[str, str]:
    """{weight: format} from `model`'s metadata ({} when it names none)."""
    raw = next((p.value for p in model.metadata_props if p.key == KEY), None)
    if raw is None:
        return {}
    try:
        formats = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StoredFormatError(f"metadata {KEY}: not valid JSON ({exc.msg})") from None
    if not isinstance(formats, dict) or not all(isinstance(v, str) for v in formats.values()):
        raise StoredFormatError(f"metadata {KEY}: must map weight names to format names")
    unknown = sorted({v for v in formats.values() if v not in STORED_FORMATS})
    if unknown:
        raise StoredFormatError(f"metadata {KEY}: unknown format {', '.join(unknown)} "
                                f"(known: {', '.join(STORED_FORMATS)})")
    return formats


def apply(graph: Graph, formats: dict[str, str]) -> Graph:
    """`graph` with each named weight re-typed to its stored format."""
    if not formats:
        return graph
    missing = sorted(n for n in formats if n not in graph.tensors or not graph.tensors[n].is_weight)
    if missing:
        raise StoredFormatError(f"metadata {KEY}: {', '.join(missing[:3])} is not a weight of the graph")
    return graph.with_tensors({n: replace(graph.tensors[n], dtype=f) for n, f in formats.items()})
