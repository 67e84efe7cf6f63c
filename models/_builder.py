"""A small emitter for reference ONNX graphs, written the way torch's exporter writes them.

The family builders (gpt2, llama, bert, resnet) describe a network op by op; this module owns the
bookkeeping: torch-style node names ("/model/layers.0/self_attn/MatMul_1"), inline constants shared by
value, and weights that are either real random numbers (so onnxruntime can run the graph) or external
references to a file that does not exist (so a 70B model stays a few MB: the estimator never reads
weight bytes, only dims and dtypes).

It also holds the few idioms every transformer family shares (a Linear, splitting and merging heads,
LayerNormalization), so each family file reads as the network it describes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from models import _shapes

# opset 18 is what torch.onnx.export writes by default today; IR 9 is accepted by onnxruntime >= 1.15.
OPSET = 18
IR_VERSION = 9
WEIGHT_MODES = ("random", "external")

FLOAT = TensorProto.FLOAT
# metadata key naming weights stored in a block-scaled format (MXFP4), read by
# estimator/frontends/stored_formats.py (KEY there)
STORED_FORMATS_KEY = "estimator.stored_formats"
INT64 = TensorProto.INT64
Dims = Sequence[int | str]

# HF fills masked attention scores with torch.finfo(dtype).min rather than -inf, so softmax of a fully
# masked row stays finite; the estimator re-types precision, so the exact value does not matter.
MASK_FILL = float(np.finfo(np.float32).min)


class GraphBuilder:
    """Collects nodes, initializers and graph inputs/outputs for one model."""

    def __init__(self, model_name: str, weights: str, seed: int = 0) -> None:
        if weights not in WEIGHT_MODES:
            raise ValueError(f"weights must be one of {WEIGHT_MODES}, got {weights!r}")
        self.model_name = model_name
        self.weights = weights
        # made on the first random weight: importing numpy.random costs an external-weights build ~5 ms
        self._seed = seed
        self._rng_made: np.random.Generator | None = None
        # Initializers go straight into the final proto: copying a 650 MB list of random tensors
        # through make_graph/make_model costs seconds per model in the tests.
        self._model = onnx.ModelProto()
        self._initializers = self._model.graph.initializer
        self._nodes: list[onnx.NodeProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._aliases: dict[str, str] = {}
        self._const_names: dict[tuple, str] = {}
        self._scope: list[str] = []
        self._name_counts: Counter[str] = Counter()
        self._external_offset = 0
        self._stored_formats: dict[str, str] = {}
        # what each tensor's shape is as nodes are added (models/_shapes.py); False once a node is not covered
        self._known: dict[str, _shapes.Known] = {}
        self._shapes_complete = True

    # ---- naming -------------------------------------------------------------------------------

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Nest node names under `name`, like torch's module path in exported node names."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _node_name(self, op_type: str) -> str:
        base = "/" + "/".join([*self._scope, op_type])
        count = self._name_counts[base]
        self._name_counts[base] += 1
        return base if count == 0 else f"{base}_{count}"

    # ---- nodes --------------------------------------------------------------------------------

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs) -> str | list[str]:
        """Append one node; returns its output name (or names when outputs > 1)."""
        name = self._node_name(op_type)
        out_names = [f"{name}_output_{i}" for i in range(outputs)]
        node = helper.make_node(op_type, list(inputs), out_names, name=name, **attrs)
        self._nodes.append(node)
        self._infer(node)
        return out_names[0] if outputs == 1 else out_names

    def _infer(self, node: onnx.NodeProto) -> None:
        """Record the node's output shapes (models/_shapes.py), or give the builder's shapes up."""
        if not self._shapes_complete:
            return
        try:
            ins = [self._known[t] for t in node.input]
            outs = _shapes.infer(node, ins)
        except (KeyError, _shapes.UnshapedError):
            self._shapes_complete = False
            return
        self._known.update(zip(node.output, outs, strict=True))

    def dim(self, x: str, axis: int) -> str:
        """A 1-element int64 tensor holding x.shape[axis]: Shape with start/end, as torch exports it."""
        return self.op("Shape", x, start=axis, end=axis + 1)

    def scalar_dim(self, x: str, axis: int) -> str:
        """x.shape[axis] as a 0-d int64 tensor, the form Range wants."""
        return self.op("Squeeze", self.dim(x, axis))

    # ---- initializers -------------------------------------------------------------------------

    def _rng(self) -> np.random.Generator:
        """The seeded generator of random weights, made once on first use (same draws as made up front)."""
        if self._rng_made is None:
            self._rng_made = np.random.default_rng(self._seed)
        return self._rng_made

    def const(self, value, dtype=np.int64) -> str:
        """An inline constant (shape vector, axes, scalar). Always inline so shape inference can read it.

        Equal constants share one initializer: it keeps big graphs small and changes no node.
        """
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._const_names:
            name = f"const_{len(self._const_names)}"
            self._initializers.append(numpy_helper.from_array(array, name))
            self._const_names[key] = name
            self._known[name] = _shapes.known_array(array)
        return self._const_names[key]

    def weight(self, name: str, shape: Sequence[int], init: str = "normal", std: float = 0.02) -> str:
        """A learned parameter: random float32 values, or an external reference without bytes."""
        # A tensor of at most 16 elements is a host constant to the estimator (onnx_import's
        # HOST_CONST_MAX_NUMEL) that shape inference may read, so it is never external.
        if self.weights == "external" and int(np.prod(shape, dtype=np.int64)) > 16:
            return self._external(name, shape, FLOAT, np.dtype(np.float32).itemsize)
        if init == "normal":
            array = self._rng().standard_normal(tuple(shape), dtype=np.float32)
            array *= np.float32(std)
        elif init == "ones":
            array = np.ones(shape, dtype=np.float32)
        elif init == "zeros":
            array = np.zeros(shape, dtype=np.float32)
        else:
            raise ValueError(f"unknown init {init!r}")
        tensor = self._initializers.add(name=name, data_type=FLOAT, dims=list(shape))
        tensor.raw_data = array.tobytes()
        self._known[name] = _shapes.known_array(array)
        return name

    def buffer(self, name: str, array: np.ndarray) -> str:
        """A non-learned table (RoPE cos/sin, a causal mask) that is as big as a weight.

        It follows the weights mode: external tables keep a 70B proto small, and nothing in shape
        inference needs their values (they are only Gathered or Sliced).
        """
        if self.weights == "external":
            elem_type = helper.np_dtype_to_tensor_dtype(array.dtype)
            return self._external(name, array.shape, elem_type, array.dtype.itemsize)
        self._initializers.append(numpy_helper.from_array(array, name))
        self._known[name] = _shapes.known_array(array)
        return name

    def _external(self, name: str, shape: Sequence[int], elem_type: int, itemsize: int) -> str:
        tensor = self._initializers.add(name=name, data_type=elem_type, dims=list(shape))
        length = int(np.prod(shape, dtype=np.int64)) * itemsize
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", f"{self.model_name}.weights.bin"),
            ("offset", str(self._external_offset)),
            ("length", str(length)),
        ):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self._external_offset += length
        self._known[name] = _shapes.Known(elem_type, tuple(_shapes.dim_expr(int(d)) for d in shape))
        return name

    def stored_format(self, weight: str, fmt: str) -> str:
        """Mark `weight` as stored in block-scaled format `fmt` (e.g. "mxfp4"; the model's metadata)."""
        self._stored_formats[weight] = fmt
        return weight

    # ---- graph interface ----------------------------------------------------------------------

    def input(self, name: str, elem_type: int, dims: Dims) -> str:
        self._inputs.append(helper.make_tensor_value_info(name, elem_type, list(dims)))
        try:
            self._known[name] = _shapes.Known(elem_type, tuple(_shapes.dim_expr(d) for d in dims))
        except (TypeError, ValueError, SyntaxError):  # a dim text the rules do not read (e.g. min(...))
            self._shapes_complete = False
        return name

    def output(self, tensor: str, name: str, elem_type: int, dims: Dims, first: bool = False) -> None:
        """Expose `tensor` as a graph output called `name` (placed before the others when `first`).

        The producing node's output is renamed at the end (no Identity node), as exporters name outputs
        directly; renaming late lets a family pick output names after the tensor is already consumed.
        """
        self._aliases[tensor] = name
        value_info = helper.make_tensor_value_info(name, elem_type, list(dims))
        self._outputs.insert(0 if first else len(self._outputs), value_info)

    def model(self, doc: str) -> onnx.ModelProto:
        """Finish the graph. Call once: the proto already holds the initializers and is handed out."""
        if self._model.graph.name:
            raise RuntimeError("GraphBuilder.model() was already called")
        shape_infos = self._shape_infos()
        for node in self._nodes:
            for field in (node.input, node.output):
                for i, tensor in enumerate(field):
                    if tensor in self._aliases:
                        field[i] = self._aliases[tensor]
        model = self._model
        model.ir_version = IR_VERSION
        model.producer_name = "gpu-inference-estimator.models"
        model.opset_import.append(helper.make_opsetid("", OPSET))
        domains = sorted({n.domain for n in self._nodes} - {"", "ai.onnx"})  # e.g. com.microsoft collectives
        model.opset_import.extend(helper.make_opsetid(d, 1) for d in domains)
        model.doc_string = doc
        if self._stored_formats:
            entry = model.metadata_props.add()
            entry.key, entry.value = STORED_FORMATS_KEY, json.dumps(self._stored_formats, sort_keys=True)
        graph = model.graph
        graph.name = self.model_name
        graph.doc_string = doc
        graph.node.extend(self._nodes)
        graph.input.extend(self._inputs)
        graph.output.extend(self._outputs)
        if shape_infos is not None:
            graph.value_info.extend(shape_infos)
            entry = model.metadata_props.add()
            entry.key, entry.value = _shapes.SHAPES_KEY, "complete"
        return model

    def _shape_infos(self) -> list[onnx.ValueInfoProto] | None:
        """value_info of every node output that is not a graph output, when every node was shaped and each
        declared graph output has the shape its node gives it (else None: the model is left to inference)."""
        if not self._shapes_complete:
            return None
        declared = {vi.name: vi for vi in self._outputs}
        infos = []
        for node in self._nodes:
            for out in node.output:
                k = self._known[out]
                if out not in self._aliases:
                    infos.append(_shapes.value_info(out, k))
                    continue
                vi = declared[self._aliases[out]]
                dims = [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
                try:
                    same = tuple(map(_shapes.dim_expr, dims)) == k.shape
                except ValueError:
                    same = False
                if vi.type.tensor_type.elem_type != k.elem_type or not same:
                    return None
        return infos


# ---- idioms shared by the transformer families ----------------------------------------------------


def linear(b: GraphBuilder, x: str, prefix: str, d_in: int, d_out: int, bias: bool = True) -> str:
    """nn.Linear as exported: MatMul by a [d_in, d_out] weight (torch pre-transposes it), then Add bias."""
    with b.scope(prefix.rsplit(".", 1)[-1]):
        y = b.op("MatMul", x, b.weight(f"{prefix}.weight", [d_in, d_out]))
        if bias:
            y = b.op("Add", b.weight(f"{prefix}.bias", [d_out], init="zeros"), y)
    return y


def layer_norm(b: GraphBuilder, x: str, prefix: str, hidden: int, eps: float) -> str:
    """nn.LayerNorm: torch exports a single LayerNormalization op since opset 17."""
    with b.scope(prefix.rsplit(".", 1)[-1]):
        scale = b.weight(f"{prefix}.weight", [hidden], init="ones")
        bias = b.weight(f"{prefix}.bias", [hidden], init="zeros")
        return b.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)


def position_ids(b: GraphBuilder, input_ids: str, past_len: str) -> str:
    """arange(past, past + seq) as a [seq] int64 tensor: HF's position ids / cache_position."""
    end = b.op("Add", past_len, b.scalar_dim(input_ids, 1))
    return b.op("Range", past_len, end, b.const(1))


def split_heads(b: GraphBuilder, x: str, heads: int, head_dim: int, perm=(0, 2, 1, 3)) -> str:
    """[batch, seq, heads*head_dim] -> [batch, heads, seq, head_dim]; 0 copies the symbolic dims."""
    y = b.op("Reshape", x, b.const([0, 0, heads, head_dim]))
    return b.op("Transpose", y, perm=list(perm))


def merge_heads(b: GraphBuilder, x: str, width: int) -> str:
    """[batch, heads, seq, head_dim] -> [batch, seq, heads*head_dim]."""
    y = b.op("Transpose", x, perm=[0, 2, 1, 3])
    return b.op("Reshape", y, b.const([0, 0, width]))


def decoder_inputs(b: GraphBuilder, num_layers: int, kv_heads: int, head_dim: int, decode: bool):
    """input_ids [batch, seq] (prefill) or [batch, 1] (decode), the per-layer past K/V inputs of a decode
    step ([batch, kv_heads, past_seq, head_dim], named as HF names them) and the present K/V dims."""
    kv_dims = ["batch", kv_heads, "past_seq", head_dim]
    present_dims = ["batch", kv_heads, "past_seq + 1" if decode else "seq", head_dim]
    input_ids = b.input("input_ids", INT64, ["batch", 1 if decode else "seq"])
    pasts = []
    if decode:
        for i in range(num_layers):
            pasts.append((
                b.input(f"past_key_values.{i}.key", FLOAT, kv_dims),
                b.input(f"past_key_values.{i}.value", FLOAT, kv_dims),
            ))
    return input_ids, pasts, present_dims
