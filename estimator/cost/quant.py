"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, the integer GEMMs
MatMulInteger and QLinearMatMul, and onnxruntime's weight-only com.microsoft MatMulNBits.

Counting rule: elementwise (de)quantization is a few CUDA ops per element (NB: counted at the fp32
CUDA-core rate, see `alu_unit`); a GEMM's multiply-add is 2 FLOPs, int8/uint8 GEMMs on the int8 tensor
path, key (TENSOR, "int8"). DRAM bytes: every input (scales and zero points included) read once and
every output written once, each at its own dtype.
"""

from __future__ import annotations

from estimator.cost.registry import (
    TENSOR,
    CostError,
    OpView,
    Work,
    alu_unit,
    io_bytes,
    matmul_unit,
    register,
)
from estimator.ir import Expr

INT8_TENSOR = (TENSOR, "int8")  # uint8 and int8 GEMMs share the int8 tensor-core rate
REQUANT_OPS = 3  # per output of a QLinear* op: scale multiply, add zero point, round-and-clamp
QUANTIZE_OPS = 3  # per element: divide (multiply by 1/scale), round, add zero point and clamp
DEQUANTIZE_OPS = 2  # per element: subtract zero point, multiply by scale
# NVFP4 (the Blackwell block-scaled fp4 MMA operand): an e4m3 scale per 16 fp4 values, as
# hwdesc/tiles/blackwell.yaml's block_scales (the GEMM's tile model reads them beside the data).
NVFP4_BLOCK = 16
NVFP4_SCALE_BYTES = 1


def gemm_unit(dtype: str) -> tuple[str, str]:
    """The unit a quantized GEMM runs on: the int8 tensor path for 8-bit integers, else as MatMul
    (QLinearMatMul also takes float8)."""
    return INT8_TENSOR if dtype in ("int8", "uint8") else matmul_unit(dtype)


@register("QuantizeLinear")
def quantize_linear(op: OpView) -> Work:
    """~3 CUDA ops per element (scale, round, zero point + saturate); reads x, y_scale, y_zero_point,
    writes y at its dtype (the `output_dtype` attribute's, see frontends/quant_types.py). An fp4e2m1 y
    without a blocked scale in the graph (block_size 0) is NVFP4 as the GEMM reads it: it also writes
    one e4m3 scale per NVFP4_BLOCK elements (computing each block's amax: 1 more CUDA op per element),
    beside the per-tensor scale the graph passes. A graph with block_size > 0 spells its scales out
    (they are in its y_scale tensor)."""
    x, y = op.input(0), op.output(0)
    read, written = io_bytes(op)
    ops = QUANTIZE_OPS * x.numel
    if y.dtype == "fp4e2m1" and not op.attr("block_size", 0):
        written += x.numel / NVFP4_BLOCK * NVFP4_SCALE_BYTES
        ops += x.numel
    return Work({alu_unit(x.dtype): ops}, read, written)


@register("DequantizeLinear")
def dequantize_linear(op: OpView) -> Work:
    """~2 CUDA ops per element ((x - zero_point) * scale); reads x, x_scale, x_zero_point, writes y."""
    y = op.output(0)
    return Work({alu_unit(y.dtype): DEQUANTIZE_OPS * y.numel}, *io_bytes(op))


@register("DynamicQuantizeLinear")
def dynamic_quantize_linear(op: OpView) -> Work:
    """A min/max reduction over x (2 CUDA ops per element) then the quantize (3 per element): 5 per
    element. Writes uint8 y plus the scalar scale and zero point. NB: x is read twice (one pass per
    phase); when x fits in L2 the second read does not reach DRAM."""
    x = op.input(0)
    read, written = io_bytes(op)
    return Work({alu_unit(x.dtype): (2 + QUANTIZE_OPS) * x.numel}, read + x.nbytes, written)


def _k(op: OpView, a_i: int) -> Expr:
    a = op.input(a_i)
    if not a.shape:
        raise CostError(f"{op.op_type}: input {a.name!r} is a scalar, not a matrix")
    return a.shape[-1]


@register("MatMulInteger")
def matmul_integer(op: OpView) -> Work:
    """int8/uint8 A x B accumulating into int32: flops = 2 * numel(Y) * K on (TENSOR, "int8"); reads
    A, B and the zero points (their subtraction folds into the GEMM), writes int32 Y."""
    y = op.output(0)
    return Work({INT8_TENSOR: 2 * y.numel * _k(op, 0)}, *io_bytes(op))


@register("QLinearMatMul")
def qlinear_matmul(op: OpView) -> Work:
    """(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the 8-bit GEMM, 2 * numel(Y) * K on
    `gemm_unit`, plus a requantize epilogue of ~3 CUDA ops per output; scales and zero points read
    once, y written at its 8-bit dtype."""
    a, y = op.input(0), op.output(0)
    return Work({gemm_unit(a.dtype): 2 * y.numel * _k(op, 0), alu_unit("fp32"): REQUANT_OPS * y.numel},
                *io_bytes(op))


@register("MatMulNBits", domain="com.microsoft")
def matmul_nbits(op: OpView) -> Work:
    """A [..., K] x dequant(B) with B packed at `bits` per weight ([N, K/block_size, block_size*bits/8]
    uint8) and per-block scales (and zero points): flops = 2 * numel(Y) * K on the tensor unit of A's
    dtype, plus ~2 CUDA ops per weight element for the dequantize. Reads A, packed B, scales, zero
    points, bias; writes Y. NB: the dequantize is counted once per weight; a large-M GEMM redoes it
    per M tile (still small next to the GEMM)."""
    a, y = op.input(0), op.output(0)
    k, n = op.attr("K"), op.attr("N")
    if k is None or n is None:
        raise CostError("MatMulNBits: attributes K and N are required")
    flops = {matmul_unit(a.dtype): 2 * y.numel * int(k), alu_unit(a.dtype): DEQUANTIZE_OPS * int(n) * int(k)}
    return Work(flops, *io_bytes(op))
