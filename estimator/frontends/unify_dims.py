"""Symbolic shape unification: invented dims that the graph proves equal become one symbol.

A dim that neither a value nor a name describes is imported as its own symbol (``unk__<tensor>_<axis>``,
onnx_import._shape_of; onnxruntime's symbolic inference invents ``unk__N`` the same way). Every such
symbol is a free dim of its own, so two tensors of the same shape look different to every pass: the
elementwise fusion rule, which needs provably equal iteration spaces, fuses nothing, and pricing
carries thousands of symbols. The ops themselves say which dims are equal; this module reads those
equalities off the graph once, after import, and renames each class of equal dims to one member:

- broadcasting (elementwise ops, the scale and bias of layer norms): dims that meet at one position and
  are not the literal 1 are equal, and the output's dim at that position is that dim (1 when every
  input has 1 there). NB: an invented dim is assumed not to be 1 where it meets another dim (a 1 would
  broadcast instead); onnxruntime's SymbolicShapeInference merges under the same assumption (its
  auto_merge, which the ONNX frontend turns on);
- shape-preserving ops (Softmax, the normalizations, Q/DQ, Identity, Cast...): output 0 has input 0's
  shape;
- Transpose: output dim i is input dim perm[i];
- MatMul / Gemm: the contracted dims are equal, the output's rows and columns are the operands', its
  batch dims their broadcast;
- Concat / Split: the dims off the axis are equal on every input and output.

A union-find over the invented symbols (plain ``unk__`` symbols only) holds the classes; a class may
also be tied to one *anchor*, a dim that is not invented (an integer, a declared name, an expression of
those), which then replaces every member. The representative of a class without an anchor is its member
seen first (graph inputs first, then nodes in order), so its name is one the user sees on an input.
Equalities that would tie a class to two different anchors (64 and 256; batch and seq) are refused and
reported as conflicts: the graph is inconsistent there or the NB above does not hold, and nothing is
guessed. Named dims are never renamed: on a graph without invented dims nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import sympy

from estimator.ir import Node, Shape, Tensor
from estimator.ops import ELEMENTWISE, QUANTIZATION

INVENTED_PREFIX = "unk__"
ONE = sympy.S.One
Pair = tuple[sympy.Expr, sympy.Expr]
ShapeOf = Callable[[str], Shape | None]
RULES: dict[str, Callable[[Node, ShapeOf], Iterator[Pair]]] = {}


def rule(*op_types: str):
    """Register the equality rule of `op_types` (each op type once)."""
    def register(fn):
        for op in op_types:
            if op in RULES:
                raise ValueError(f"unify_dims: op {op!r} registered twice")
            RULES[op] = fn
        return fn
    return register


def invented(d: sympy.Expr) -> bool:
    return d.is_Symbol and d.name.startswith(INVENTED_PREFIX)


@dataclass
class Unified:
    """The outcome: tensors with merged shapes, merged name -> its representative (a symbol or its
    anchor), and the equalities refused as conflicts (one line each)."""

    tensors: dict[str, Tensor]
    merges: dict[str, sympy.Expr] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)


def unify(nodes: Sequence[Node], tensors: Mapping[str, Tensor], inputs: Iterable[str]) -> Unified:
    """Merge the invented dims of `tensors` that the ops of `nodes` prove equal (see the module doc).
    `tensors` is left as it is; the result's are new values where a shape changed."""
    if not any(invented(d) for t in tensors.values() for d in t.shape or ()):
        return Unified(dict(tensors))  # a graph without invented dims: nothing to do (the usual case)
    classes = _Classes()
    for name in inputs:  # the inputs' dims are seen first: they name the classes
        t = tensors.get(name)
        for d in (t.shape or ()) if t is not None else ():
            classes.see(d)

    def shape_of(name: str) -> Shape | None:
        t = tensors.get(name) if name else None
        return None if t is None else t.shape

    for node in nodes:
        fn = RULES.get(node.op_type)
        if fn is None:
            continue
        for a, b in fn(node, shape_of):
            classes.equate(a, b, node.name)
    mapping = classes.mapping()
    if not mapping:
        return Unified(dict(tensors), conflicts=classes.conflicts)
    out = dict(tensors)
    for name, t in tensors.items():
        if t.shape and any(d in mapping or _mentions(d, mapping) for d in t.shape):
            out[name] = replace(t, shape=tuple(mapping[d] if d in mapping else _renamed(d, mapping)
                                                for d in t.shape))
    return Unified(out, {s.name: v for s, v in mapping.items()}, classes.conflicts)


def _mentions(d: sympy.Expr, mapping: Mapping) -> bool:
    return not d.is_Number and not d.is_Symbol and any(s in mapping for s in d.free_symbols)


def _renamed(d: sympy.Expr, mapping: Mapping) -> sympy.Expr:
    return d.xreplace(mapping) if _mentions(d, mapping) else d


class _Classes:
    """Union-find over invented symbols; each root may carry one anchor (a dim that is not invented)."""

    def __init__(self) -> None:
        self.parent: dict[sympy.Symbol, sympy.Symbol] = {}
        self.order: dict[sympy.Symbol, int] = {}  # first sighting: the smaller index is the root
        self.anchor: dict[sympy.Symbol, sympy.Expr] = {}  # root -> anchor
        self.conflicts: list[str] = []

    def see(self, d: sympy.Expr) -> None:
        if d not in self.parent and invented(d):
            self.parent[d] = d
            self.order[d] = len(self.order)

    def find(self, s: sympy.Symbol) -> sympy.Symbol:
        # symbols are interned (ir.dim and sympy's cache): identity is equality, and much cheaper
        parent = self.parent
        root = s
        while (up := parent[root]) is not root:
            root = up
        while (up := parent[s]) is not root:  # path compression
            parent[s], s = root, up
        return root

    def equate(self, a: sympy.Expr, b: sympy.Expr, node: str) -> None:
        """Record a == b (proved by `node`); a dim that is neither invented nor free of invented
        symbols (e.g. 2*unk__3) takes no part."""
        if a is b:
            return
        if not invented(a):
            a, b = b, a
        if not invented(a) or (not invented(b) and any(invented(s) for s in b.free_symbols)):
            return  # two anchors (nothing to merge), or an expression in invented dims
        self.see(a)
        ra = self.find(a)
        if not invented(b):
            self._tie(ra, b, node, a)
            return
        self.see(b)
        rb = self.find(b)
        if ra is rb:
            return
        xa, xb = self.anchor.get(ra), self.anchor.get(rb)
        if xa is not None and xb is not None and xa != xb:
            self._conflict(node, a, b, f"{a} is {xa} and {b} is {xb}")
            return
        if self.order[rb] < self.order[ra]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        anchor = xa if xa is not None else xb
        self.anchor.pop(rb, None)
        if anchor is not None:
            self.anchor[ra] = anchor

    def _tie(self, root: sympy.Symbol, value: sympy.Expr, node: str, member: sympy.Expr) -> None:
        have = self.anchor.get(root)
        if have is None:
            self.anchor[root] = value
        elif have != value:
            self._conflict(node, member, value, f"{member} is already {have}")

    def _conflict(self, node: str, a: sympy.Expr, b: sympy.Expr, why: str) -> None:
        line = f"{node}: {a} == {b} not merged ({why})"
        if not self.conflicts or self.conflicts[-1] != line:  # a node's output repeats its inputs' case
            self.conflicts.append(line)

    def mapping(self) -> dict[sympy.Symbol, sympy.Expr]:
        """Each invented symbol that changes -> its class's anchor, or else its root."""
        out = {}
        for s in self.parent:
            root = self.find(s)
            target = self.anchor.get(root, root)
            if target is not s:
                out[s] = target
        return out


# ---- the rules: each yields the pairs of dims its op proves equal ---------------------------------

def broadcast(shapes: Sequence[Shape], out: Shape | None) -> Iterator[Pair]:
    """Numpy broadcasting of `shapes` (right-aligned) into `out`: the non-1 dims of each position are
    equal, and `out`'s dim there is that dim (1 where all are 1). `out` of another rank is left out."""
    rank = max((len(s) for s in shapes), default=0)
    for i in range(1, rank + 1):
        column = [s[-i] for s in shapes if len(s) >= i]
        big = [d for d in column if d is not ONE]  # Integer(1) is sympy's singleton
        yield from ((big[0], d) for d in big[1:])
        if out is not None and len(out) == rank:
            yield out[-i], big[0] if big else ONE


def _shapes(node: Node, shape_of: ShapeOf, indices: Iterable[int] | None = None) -> list[Shape] | None:
    """The shapes of the node's inputs at `indices` (all present ones by default); None when one of
    them has no known shape."""
    names = node.inputs if indices is None else [node.inputs[i] for i in indices if i < len(node.inputs)]
    shapes = [shape_of(n) for n in names if n]
    return None if any(s is None for s in shapes) else shapes


def _out(node: Node, shape_of: ShapeOf, index: int = 0) -> Shape | None:
    return shape_of(node.outputs[index]) if len(node.outputs) > index and node.outputs[index] else None


@rule(*(ELEMENTWISE - {"CastLike"}), "LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization",
      "SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def _broadcasting(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """Elementwise ops broadcast every input; a layer norm's skip, scale and bias broadcast to its input
    (its output 0 has the input's shape; its mean and inverse deviation outputs are left out)."""
    shapes = _shapes(node, shape_of)
    if shapes:
        yield from broadcast(shapes, _out(node, shape_of))


@rule("Softmax", "LogSoftmax", "LpNormalization", "BatchNormalization", "InstanceNormalization",
      "GroupNormalization", "CastLike", "Identity", "Dropout", *QUANTIZATION)
def _same_shape(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """Output 0 has input 0's shape (per-channel scales and CastLike's type source are left out)."""
    x, y = (shape_of(node.inputs[0]) if node.inputs else None), _out(node, shape_of)
    if x is not None and y is not None and len(x) == len(y):
        yield from zip(y, x, strict=True)


@rule("Transpose")
def _transpose(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """Output dim i is input dim perm[i] (perm reversed by default)."""
    x, y = (shape_of(node.inputs[0]) if node.inputs else None), _out(node, shape_of)
    if x is None or y is None or len(x) != len(y):
        return
    perm = node.attrs.get("perm") or tuple(reversed(range(len(x))))
    if _ints(perm) and sorted(perm) == list(range(len(x))):  # a corrupt perm proves nothing
        yield from ((y[i], x[p]) for i, p in enumerate(perm))


def _ints(values) -> bool:
    return isinstance(values, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                      for v in values)


@rule("MatMul", "MatMulInteger")
def _matmul(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """[..., m, k] @ [..., k, n] -> [..., m, n], batch dims broadcast; a 1-D operand is a row (left) or
    a column (right) whose 1 leaves the output."""
    shapes, y = _shapes(node, shape_of, (0, 1)), _out(node, shape_of)
    if not shapes or len(shapes) != 2 or not shapes[0] or not shapes[1]:
        return
    a, b = shapes
    a2 = a if len(a) >= 2 else (sympy.Integer(1), *a)
    b2 = b if len(b) >= 2 else (*b, sympy.Integer(1))
    yield a2[-1], b2[-2]
    kept = ([a2[-2]] if len(a) >= 2 else []) + ([b2[-1]] if len(b) >= 2 else [])
    batch_rank = max(len(a2), len(b2)) - 2
    if y is not None and len(y) == batch_rank + len(kept):
        yield from zip(y[batch_rank:], kept, strict=True)
    yield from broadcast([a2[:-2], b2[:-2]], y[:batch_rank] if y is not None and len(y) >= batch_rank
                         else None)


@rule("Gemm")
def _gemm(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """op(A)[m, k] @ op(B)[k, n] (+ C broadcast to [m, n]) -> [m, n], op a transpose per transA/B."""
    shapes, y = _shapes(node, shape_of, (0, 1)), _out(node, shape_of)
    if not shapes or len(shapes) != 2 or any(len(s) != 2 for s in shapes):
        return
    a, b = shapes
    a = a[::-1] if node.attrs.get("transA") else a
    b = b[::-1] if node.attrs.get("transB") else b
    yield a[1], b[0]
    if y is not None and len(y) == 2:
        yield y[0], a[0]
        yield y[1], b[1]
        c = _shapes(node, shape_of, (2,))
        if c and len(c[0]) <= 2:
            yield from ((d, y[-i]) for i, d in enumerate(reversed(c[0]), start=1) if d is not ONE)


@rule("Concat", "Split")
def _along_axis(node: Node, shape_of: ShapeOf) -> Iterator[Pair]:
    """Concat's inputs and output (Split's input and outputs) agree on every dim off the axis."""
    shapes = _shapes(node, shape_of)
    outs = [shape_of(t) for t in node.outputs if t]
    if not shapes or any(s is None for s in outs):
        return
    if node.op_type == "Split":
        shapes = shapes[:1]
    everyone = [*shapes, *outs]
    rank = len(everyone[0])
    axis = node.attrs.get("axis", 0)
    if not _ints((axis,)) or rank == 0 or any(len(s) != rank for s in everyone) or not -rank <= axis < rank:
        return
    axis %= rank
    first = everyone[0]
    yield from ((first[i], s[i]) for s in everyone[1:] for i in range(rank) if i != axis)
