"""Structural checks of an ONNX graph before shape inference and pricing.

A graph that breaks one of these rules is bad input, refused with one FrontendError naming the node and
the tensor, before anything expensive runs (a tensor nothing produces has no shape, and unknown dims
then cost minutes of symbolic simplification; a cycle spins shape inference):

- names: graph inputs are unique, no tensor is produced twice (by two nodes, or by a node and as a graph
  input / initializer);
- references: every non-empty node input is a graph input, an initializer or some node's output, and
  every graph output is one of those;
- order: the nodes form a DAG (Kahn's algorithm, linear in nodes + edges);
- opsets: every opset version is positive and each domain is imported once; a node's domain is imported;
- dtypes: every declared element type (inputs, outputs, value_info, initializers) is a TensorProto
  DataType (set, on graph inputs and outputs; one the estimator knows the size of, on initializers);
  graph input / output dims are sizes (>= 0; a dim_param provably zero or infinite, `seq//0`, is refused);
  initializer dims are non-negative; an inline initializer's raw bytes match its dims;
- nodes: onnx's own per-node checker (attributes, input / output counts against the op's schema) for
  every op whose schema onnx knows. NB: ops onnx does not know (custom domains, newer ops) are left
  to the importer, which keeps them as uncosted nodes; the checker never sees external data (it checks
  nodes, not the model file) so no weight byte is read.

Subgraphs (If / Loop bodies) may name tensors of the enclosing graph; they are not checked here (nor
are their nodes run through onnx's checker).
"""

from __future__ import annotations

from collections import deque

import onnx

from estimator.dtypes import from_onnx
from estimator.frontends.errors import FrontendError
from estimator.ir import DimParseError, parse_dim

# Raw bytes per element of the fixed-size types (the ones whose raw_data length is checkable).
_ITEMSIZE = {
    onnx.TensorProto.FLOAT: 4, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.FLOAT16: 2,
    onnx.TensorProto.BFLOAT16: 2, onnx.TensorProto.INT8: 1, onnx.TensorProto.UINT8: 1,
    onnx.TensorProto.INT16: 2, onnx.TensorProto.UINT16: 2, onnx.TensorProto.INT32: 4,
    onnx.TensorProto.UINT32: 4, onnx.TensorProto.INT64: 8, onnx.TensorProto.UINT64: 8,
    onnx.TensorProto.BOOL: 1,
}
_DTYPES = frozenset(onnx.TensorProto.DataType.values())


# Axis-like attributes: the range any real graph stays in (ranks beyond 64 do not occur). NB: onnx's
# shape inference crashes the process (a segfault, no exception) on some out-of-range values, e.g.
# GatherND batch_dims=-100, so they are refused here first.
_ATTR_RANGES = {"batch_dims": (0, 64), "axis": (-64, 64), "axes": (-64, 64), "perm": (0, 64)}


class GraphError(FrontendError):
    """A structurally invalid graph (the CLI prints one `error:` line and exits 2)."""


def _node_label(node: onnx.NodeProto, index: int) -> str:
    return f"node {node.name or f'#{index}'} ({node.op_type})"


def validate_graph(model: onnx.ModelProto) -> None:
    """Raise GraphError for the first broken rule (see the module docstring); linear in the graph."""
    opsets = check_opsets(model)
    g = model.graph
    check_dtypes(g)
    producer = check_names(g)
    check_references(g, producer)
    check_acyclic(g, producer)
    check_nodes(model, opsets)


def check_opsets(model: onnx.ModelProto) -> dict[str, int]:
    """{domain: version}; GraphError on a non-positive version or a domain imported twice."""
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        if imp.version <= 0:
            raise GraphError(f"opset import for domain {domain or 'ai.onnx'!r} has version {imp.version}")
        if domain in opsets and opsets[domain] != imp.version:
            raise GraphError(f"domain {domain or 'ai.onnx'!r} is imported twice "
                             f"(opsets {opsets[domain]} and {imp.version})")
        opsets[domain] = imp.version
    return opsets


def check_dtypes(g: onnx.GraphProto) -> None:
    """Declared element types are TensorProto types; initializers have sane dims and raw byte counts."""
    for kind, infos in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
        for vi in infos:
            if not vi.type.HasField("tensor_type"):
                continue
            elem = vi.type.tensor_type.elem_type
            if elem not in _DTYPES or (elem == onnx.TensorProto.UNDEFINED and kind != "value_info"):
                raise GraphError(f"graph {kind} {vi.name!r} has unknown element type {elem}")
            for axis, d in enumerate(vi.type.tensor_type.shape.dim):
                _check_dim(kind, vi.name, axis, d)
    for init in g.initializer:
        if init.data_type not in _DTYPES or from_onnx(init.data_type) == "undefined":
            raise GraphError(f"initializer {init.name!r} has unknown element type {init.data_type}")
        if any(d < 0 for d in init.dims):
            raise GraphError(f"initializer {init.name!r} has a negative dim {list(init.dims)}")
        size = _ITEMSIZE.get(init.data_type)
        if init.data_location == onnx.TensorProto.EXTERNAL or size is None or not init.raw_data:
            continue  # external bytes are never read; typed fields are checked by protobuf itself
        numel = _numel(init.dims)
        if len(init.raw_data) != numel * size:
            raise GraphError(f"initializer {init.name!r}: {len(init.raw_data)} raw bytes for dims "
                             f"{list(init.dims)} (expected {numel * size}); the file is corrupt")


def _numel(dims) -> int:
    numel = 1
    for d in dims:
        numel *= d
    return numel


def _check_dim(kind: str, tensor: str, axis: int, d: onnx.TensorShapeProto.Dimension) -> None:
    """A declared dim is a size: a dim_value >= 0 (on graph inputs and outputs), a dim_param not provably
    zero, negative or infinite (`seq//0`, `seq-seq`; `seq-1` passes)."""
    if d.HasField("dim_value"):
        if d.dim_value < 0 and kind != "value_info":  # 0 is legal: an empty tensor (CastLike's `like`)
            raise GraphError(f"graph {kind} {tensor!r} has dim {d.dim_value} at axis {axis}; dims are "
                             f"sizes (>= 0)")
        return
    if not d.dim_param:
        return
    try:
        expr = parse_dim(d.dim_param)
    except DimParseError:
        return  # the importer names the tensor and the parse error
    if expr.is_finite is False or expr.is_positive is False:
        raise GraphError(f"graph {kind} {tensor!r}: dim {d.dim_param!r} at axis {axis} is not a positive "
                         f"size ({expr})")


def check_names(g: onnx.GraphProto) -> dict[str, int]:
    """{tensor: index of the node producing it}; GraphError on a name defined twice."""
    defined: dict[str, str] = {}
    for vi in g.input:
        if vi.name in defined:
            raise GraphError(f"graph input {vi.name!r} is declared twice")
        defined[vi.name] = "a graph input"
    inits: set[str] = set()
    for init in g.initializer:
        if init.name in inits:
            raise GraphError(f"initializer {init.name!r} is defined twice")
        inits.add(init.name)
        defined.setdefault(init.name, "an initializer")  # IR < 4 lists initializers among the inputs
    producer: dict[str, int] = {}
    for i, node in enumerate(g.node):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                first = g.node[producer[out]]
                raise GraphError(f"{_node_label(node, i)} writes tensor {out!r}, already written by "
                                 f"{_node_label(first, producer[out])}")
            if out in defined:
                raise GraphError(f"{_node_label(node, i)} writes tensor {out!r}, which is {defined[out]}")
            producer[out] = i
    return producer


def check_references(g: onnx.GraphProto, producer: dict[str, int]) -> None:
    """Every node input and graph output names a defined tensor."""
    known = {vi.name for vi in g.input} | {init.name for init in g.initializer} | set(producer)
    for i, node in enumerate(g.node):
        for tensor in node.input:
            if tensor and tensor not in known:
                raise GraphError(f"{_node_label(node, i)} reads tensor {tensor!r}, which no node produces "
                                 f"and is neither a graph input nor an initializer")
    for out in g.output:
        if out.name not in known:
            raise GraphError(f"graph output {out.name!r} is produced by no node")


def check_acyclic(g: onnx.GraphProto, producer: dict[str, int]) -> None:
    """Kahn's algorithm over the node DAG; GraphError naming some nodes of a cycle."""
    n = len(g.node)
    users: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for i, node in enumerate(g.node):
        for src in {producer[t] for t in node.input if t in producer}:
            users[src].append(i)
            indegree[i] += 1
    ready = deque(i for i in range(n) if indegree[i] == 0)
    seen = 0
    while ready:
        i = ready.popleft()
        seen += 1
        for j in users[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    if seen < n:
        stuck = [g.node[i].name or g.node[i].op_type for i in range(n) if indegree[i] > 0]
        raise GraphError(f"graph has a cycle through nodes {stuck[:6]}")


def check_nodes(model: onnx.ModelProto, opsets: dict[str, int]) -> None:
    """Each node's domain is imported, and onnx's per-node checker passes where onnx knows the op."""
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = opsets
    lex = onnx.checker.C.LexicalScopeContext()
    for i, node in enumerate(model.graph.node):
        domain = "" if node.domain == "ai.onnx" else node.domain
        if domain not in opsets:
            raise GraphError(f"{_node_label(node, i)} uses domain {domain!r}, which the model does not "
                             f"import (opset_import)")
        _check_attribute_ranges(node, i)
        if not onnx.defs.has(node.op_type, domain) or any(a.g.node or a.graphs for a in node.attribute):
            continue  # unknown ops are the importer's; subgraphs may read outer names (not in scope here)
        try:
            onnx.checker.C.check_node(node.SerializeToString(), ctx, lex)
        except Exception as exc:  # noqa: BLE001 - onnx raises ValidationError or a C++ exception type
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise GraphError(f"{_node_label(node, i)}: {first}") from None


def _check_attribute_ranges(node: onnx.NodeProto, index: int) -> None:
    for a in node.attribute:
        bounds = _ATTR_RANGES.get(a.name)
        if bounds is None:
            continue
        values = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
        bad = [v for v in values if not bounds[0] <= v <= bounds[1]]
        if bad:
            raise GraphError(f"{_node_label(node, index)}: attribute {a.name}={bad[0]} is out of range "
                             f"[{bounds[0]}, {bounds[1]}]")
