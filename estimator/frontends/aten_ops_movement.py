"""aten views, layout changes, data movement, casts and factories -> Reshape / Transpose / Expand /
Concat / Slice / Gather / Split / Pad / Cast ... Metadata-only ops (clone, contiguous, detach, eval-mode
dropout, a same-dtype copy) alias their input; factories (arange, zeros, full_like...) become Range /
ConstantOfShape with no tensor input, host constants. Registered on import (mlir_reader.py imports the
families)."""

from __future__ import annotations

from estimator.frontends.aten_call import Call, UnmappableError
from estimator.frontends.aten_registry import aten

# ---- views, layout and data movement --------------------------------------------------------------

@aten("view", "reshape", "_unsafe_view", "_reshape_alias", "flatten", "unflatten", "view_as",
      "reshape_as", "prims.collapse_view", "prims.view_of", "prims.split_dim")
def reshape(c: Call) -> None:
    c.emit("Reshape", [c.t(0)], [c.out()])


@aten("unsqueeze")
def unsqueeze(c: Call) -> None:
    c.emit("Unsqueeze", [c.t(0)], [c.out()], axes=(c.int(1),))


@aten("squeeze", "prims.squeeze")
def squeeze(c: Call) -> None:
    c.emit("Squeeze", [c.t(0)], [c.out()])


@aten("permute")
def permute(c: Call) -> None:
    rank = c.rank(c.t(0))
    c.emit("Transpose", [c.t(0)], [c.out()], perm=tuple(d % rank for d in c.ints(1)))


@aten("transpose", "swapaxes")
def transpose(c: Call) -> None:
    rank = c.rank(c.t(0))
    a, b = c.int(1) % rank, c.int(2) % rank
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    c.emit("Transpose", [c.t(0)], [c.out()], perm=tuple(perm))


@aten("t", "numpy_T")
def t(c: Call) -> None:
    rank = c.rank(c.t(0))
    if rank < 2:
        c.alias(0, c.t(0))
        return
    c.emit("Transpose", [c.t(0)], [c.out()], perm=tuple(reversed(range(rank))))


@aten("expand", "expand_as", "broadcast_to", "prims.broadcast_in_dim")
def expand(c: Call) -> None:
    c.emit("Expand", [c.t(0)], [c.out()])


@aten("repeat")
def repeat(c: Call) -> None:
    c.emit("Tile", [c.t(0)], [c.out()])


@aten("cat", "concat", "stack")
def concat(c: Call) -> None:
    """Concat along dim (stack: the exporter's per-input Unsqueeze is free)."""
    c.emit("Concat", c.tensor_list(0), [c.out()], axis=c.int(1, 0))


@aten("slice", "narrow")
def slice_(c: Call) -> None:
    c.emit("Slice", [c.t(0)], [c.out()], axes=(c.int(1, 0),))


@aten("select")
def select(c: Call) -> None:
    """x.select(dim, i): Gather with a host scalar index."""
    c.emit("Gather", [c.t(0), c.operand(2, "int64")], [c.out()], axis=c.int(1))


@aten("index_select")
def index_select(c: Call) -> None:
    c.emit("Gather", [c.t(0), c.t(2)], [c.out()], axis=c.int(1))


@aten("embedding")
def embedding(c: Call) -> None:
    """(weight, indices, ...): Gather rows of the table."""
    c.emit("Gather", [c.t(0), c.t(1)], [c.out()], axis=0)


@aten("index.Tensor", "index.Tensor_hacked_twin")
def index(c: Call) -> None:
    """x[..., idx, ...] with a single index tensor: Gather along its position."""
    items = c.arg(1, [])
    present = [i for i, x in enumerate(items) if x is not None]
    if len(present) != 1:
        raise UnmappableError("advanced indexing with several index tensors")
    c.emit("Gather", [c.t(0), items[present[0]].name], [c.out()], axis=present[0])


@aten("gather")
def gather(c: Call) -> None:
    c.emit("GatherElements", [c.t(0), c.t(2)], [c.out()], axis=c.int(1))


@aten("scatter", "scatter_add", "scatter_reduce")
def scatter(c: Call) -> None:
    base = c.key.split(".")[1]
    reduction = {"scatter_add": "add", "scatter_reduce": str(c.arg(4, "none"))}.get(base)
    reduction = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(reduction, reduction)
    c.emit("ScatterElements", [c.t(0), c.t(2), c.operand(3)], [c.out()], axis=c.int(1), reduction=reduction)


@aten("index_put", "_index_put_impl")
def index_put(c: Call) -> None:
    items = [x.name for x in c.arg(1, []) if x is not None]
    if len(items) != 1:
        raise UnmappableError("index_put with several index tensors")
    c.emit("ScatterND", [c.t(0), items[0], c.operand(2)], [c.out()],
           reduction="add" if c.arg(3) else None)


@aten("split", "split_with_sizes", "chunk", "unbind", "tensor_split", "unsafe_split")
def split(c: Call) -> None:
    """Split along dim; the outputs are the elements of the prim.ListUnpack that reads the list. An
    element torch.export left without a shape binding (one the model never reads) takes the input's
    dims off the split axis (unbind: the input's dims without it)."""
    x = c.t(0)
    unbind = c.key.split(".")[1] == "unbind"
    axis = c.axis(c.arg(1 if unbind else 2, 0), x)
    dims = list(c.shape(x))
    others = dims[:axis] + dims[axis + 1:] if unbind else dims

    def finish(names: list[str]) -> None:
        for name in names:
            c.fill_unknown_dims(name, others, skip=None if unbind else axis)
        c.emit("Split", [x], names, axis=axis)

    c.pending_list(finish)


@aten("constant_pad_nd", "pad", "reflection_pad1d", "reflection_pad2d", "replication_pad2d")
def pad(c: Call) -> None:
    mode = "reflect" if "reflection" in c.key else "edge" if "replication" in c.key else "constant"
    c.emit("Pad", [c.t(0)], [c.out()], mode=mode)


@aten("tril", "triu")
def trilu(c: Call) -> None:
    c.emit("Trilu", [c.t(0)], [c.out()], upper=int("triu" in c.key))


@aten("topk")
def topk(c: Call) -> None:
    c.emit("TopK", [c.t(0)], [c.out(0), c.out(1)], axis=c.int(2, -1), largest=int(bool(c.arg(3, True))))


@aten("cumsum")
def cumsum(c: Call) -> None:
    c.emit("CumSum", [c.t(0), c.scalar(c.int(1), "int64")], [c.out()])


@aten("_to_copy", "to", "type_as", "prims.convert_element_type")
def cast(c: Call) -> None:
    """Cast when the dtype changes; a same-dtype copy aliases its input."""
    x, y = c.t(0), c.out()
    if c.tensor(x).dtype == c.tensor(y).dtype:
        c.alias(0, x)
        return
    c.emit("Cast", [x], [y], to=c.tensor(y).dtype)


@aten("clone", "contiguous", "detach", "alias", "lift_fresh_copy", "lift_fresh", "dropout",
      "feature_dropout", "alpha_dropout", "copy")
def identity(c: Call) -> None:
    """Metadata-only ops (and eval-mode dropout) alias their input: no Node, as in the exported ONNX.
    ``copy(self, src)`` aliases src."""
    base = c.key.split(".")[1]
    if base in ("dropout", "feature_dropout", "alpha_dropout") and c.arg(2):
        c.emit("Dropout", [c.t(0)], [c.out()])
        return
    c.alias(0, c.t(1) if base == "copy" and c.is_tensor(1) else c.t(0))


@aten("prim.NumToTensor")
def num_to_tensor(c: Call) -> None:
    c.alias(0, c.scalar(c.arg(0), c.tensor(c.out()).dtype))


# ---- factories ----------------------------------------------------------------------------------

@aten("arange")
def arange(c: Call) -> None:
    c.emit("Range", [], [c.out()])


@aten("zeros", "ones", "full", "empty", "empty_strided", "new_zeros", "new_ones", "new_full",
      "new_empty", "new_empty_strided", "zeros_like", "ones_like", "full_like", "empty_like",
      "scalar_tensor", "eye", "fill", "tensor", "prims.iota")
def constant_of_shape(c: Call) -> None:
    """A filled tensor from a shape (and perhaps a like-tensor's shape only): ConstantOfShape."""
    c.emit("ConstantOfShape", [], [c.out()])


@aten("randn", "rand", "randn_like", "rand_like", "randint", "normal_functional", "uniform")
def random(c: Call) -> None:
    op_type = "RandomNormal" if "randn" in c.key or "normal" in c.key else "RandomUniform"
    c.emit(op_type, [], [c.out()])


@aten("bernoulli")
def bernoulli(c: Call) -> None:
    c.emit("Bernoulli", [c.t(0)], [c.out()])
