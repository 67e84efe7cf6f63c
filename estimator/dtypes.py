"""Element types: names, sizes, and the mapping from ONNX's TensorProto enum.

The estimator names dtypes by short strings (``bf16``, ``fp8e4m3``...) because hardware peaks are quoted
per precision family; `tensor_peak_key` maps a dtype to the key used in a hardware descriptor.
"""

from __future__ import annotations

from functools import lru_cache

import sympy

# Bytes per element. fp4 and int4 pack two elements per byte.
DTYPE_BYTES: dict[str, sympy.Rational] = {
    "fp64": sympy.Integer(8),
    "fp32": sympy.Integer(4),
    "tf32": sympy.Integer(4),  # stored as fp32; only the tensor-core math is reduced
    "bf16": sympy.Integer(2),
    "fp16": sympy.Integer(2),
    "fp8e4m3": sympy.Integer(1),
    "fp8e5m2": sympy.Integer(1),
    "fp4e2m1": sympy.Rational(1, 2),
    "fp8e8m0": sympy.Integer(1),  # the MX block-scale type
    # OCP MXFP4 as a weight is stored: fp4 e2m1 values + one e8m0 scale per 32 of them, 4 + 8/32 = 4.25
    # bits a weight (gpt-oss's expert weights). See STORED_FORMATS.
    "mxfp4": sympy.Rational(17, 32),
    # int4 weight-only with a bf16 scale per group of 128 along K (AWQ / GPTQ / compressed-tensors W4A16,
    # Kimi-K2-Thinking's and K2.5's int4 experts): 4 + 16/128 = 4.125 bits a weight. See STORED_FORMATS.
    "int4g128": sympy.Rational(33, 64),
    "int2": sympy.Rational(1, 4),
    "uint2": sympy.Rational(1, 4),
    "int4": sympy.Rational(1, 2),
    "uint4": sympy.Rational(1, 2),
    "int8": sympy.Integer(1),
    "uint8": sympy.Integer(1),
    "int16": sympy.Integer(2),
    "uint16": sympy.Integer(2),
    "int32": sympy.Integer(4),
    "uint32": sympy.Integer(4),
    "int64": sympy.Integer(8),
    "uint64": sympy.Integer(8),
    "bool": sympy.Integer(1),
    "complex64": sympy.Integer(8),
    "complex128": sympy.Integer(16),
    # NB: strings have no fixed size; counted as 8 bytes (a pointer) per element.
    "string": sympy.Integer(8),
}

FLOAT_DTYPES = frozenset({"fp64", "fp32", "tf32", "bf16", "fp16", "fp8e4m3", "fp8e5m2", "fp4e2m1"})

@lru_cache(maxsize=None)
def _onnx_to_name() -> dict[int, str]:
    """ONNX TensorProto element type -> dtype name. NB: onnx is imported here, on the first ONNX graph read,
    not with this module: importing onnx imports ml_dtypes, ~0.4 s of a 1.5 s `estimate` start-up, and a
    bundled model loaded from the graph cache (estimator/frontends/bundled.py) reads no ONNX."""
    from onnx import TensorProto

    names = {
        TensorProto.FLOAT: "fp32",
        TensorProto.DOUBLE: "fp64",
        TensorProto.FLOAT16: "fp16",
        TensorProto.BFLOAT16: "bf16",
        TensorProto.FLOAT8E4M3FN: "fp8e4m3",
        TensorProto.FLOAT8E4M3FNUZ: "fp8e4m3",
        TensorProto.FLOAT8E5M2: "fp8e5m2",
        TensorProto.FLOAT8E5M2FNUZ: "fp8e5m2",
        TensorProto.INT8: "int8",
        TensorProto.UINT8: "uint8",
        TensorProto.INT16: "int16",
        TensorProto.UINT16: "uint16",
        TensorProto.INT32: "int32",
        TensorProto.UINT32: "uint32",
        TensorProto.INT64: "int64",
        TensorProto.UINT64: "uint64",
        TensorProto.BOOL: "bool",
        TensorProto.STRING: "string",
        TensorProto.COMPLEX64: "complex64",
        TensorProto.COMPLEX128: "complex128",
    }
    for attr, name in (("FLOAT4E2M1", "fp4e2m1"), ("INT4", "int4"), ("UINT4", "uint4"),
                       ("INT2", "int2"), ("UINT2", "uint2"), ("FLOAT8E8M0", "fp8e8m0")):
        if hasattr(TensorProto, attr):  # newer onnx only
            names[getattr(TensorProto, attr)] = name
    return names


# Block-scaled storage formats a weight-only GEMM reads and dequantizes in its mainloop (W4A16 on Hopper):
# the tensor's bytes are values + scales, its math runs at the other operand's dtype. ONNX has no
# element type for a format stored as one tensor, so the builders name such weights in the model's
# metadata (estimator/frontends/stored_formats.py). `--precision` leaves them as stored (not FLOAT_DTYPES).
STORED_FORMATS: dict[str, dict[str, int]] = {
    "mxfp4": {"value_bits": 4, "block": 32, "scale_bits": 8},  # OCP MX spec v1.0: e2m1 + e8m0 per 32
    "int4g128": {"value_bits": 4, "block": 128, "scale_bits": 16},  # W4A16 group 128, bf16 scales
}

# --precision choices -> the dtype float tensors are re-typed to.
PRECISIONS: dict[str, str] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8e4m3",
    "fp4": "fp4e2m1",
}

# dtype -> key of HardwareDescriptor.tensor_flops_per_s
_TENSOR_PEAK_KEY = {
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8e4m3": "fp8",
    "fp8e5m2": "fp8",
    "fp4e2m1": "fp4",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int8",  # NB: int4 math is priced at the int8 rate (no int4 tensor cores on Hopper/Blackwell)
    "uint4": "int8",
}


def from_onnx(elem_type: int) -> str:
    """The estimator's dtype name for an ONNX TensorProto element type ("undefined" if unknown)."""
    return _onnx_to_name().get(elem_type, "undefined")


class DtypeError(ValueError):
    """A tensor whose element type the estimator cannot size; its node is listed as uncosted."""


def itemsize(dtype: str) -> sympy.Rational:
    """Bytes per element; an undefined dtype is an error, never a silent zero."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise DtypeError(f"element type {dtype!r} has no known size") from None


def tensor_peak_key(dtype: str) -> str | None:
    """Key of the tensor-core peak that math in `dtype` runs at, or None (fp32/fp64 run on CUDA cores)."""
    return _TENSOR_PEAK_KEY.get(dtype)
