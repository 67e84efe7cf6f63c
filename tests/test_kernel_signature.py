"""Kernel signatures are the keys of every price cache (estimator/kernel.CostCache, the cross-call memo
estimator/pricing/memo.py, the serving steps' units): two kernels that price differently must never share
one (a wrong hit is a silent wrong number), and identical layers must keep sharing one."""

import numpy as np
import sympy

from estimator.ir import FUSED_DOMAIN, FUSED_OP, Graph, Node, Tensor
from estimator.kernel import _hashable, op_view, signature

X = Tensor("x", (sympy.Integer(4), sympy.Integer(8)), "fp16")


def _graph() -> Graph:
    return Graph("g", [], {"x": X}, ["x"], [])


def _fused(prefix: str, core: tuple[str, ...]) -> Node:
    """A fused node of two members (a Mul then a Relu), `core` naming the members its attention core
    stands for (fused_work prices those apart)."""
    mul = Node(f"{prefix}.mul", "Mul", inputs=("x", "x"), outputs=(f"{prefix}.y",))
    relu = Node(f"{prefix}.relu", "Relu", inputs=(f"{prefix}.y",), outputs=(f"{prefix}.z",))
    return Node(f"{prefix}.fused", FUSED_OP, FUSED_DOMAIN, inputs=("x",), outputs=(f"{prefix}.z",),
                attrs={"attention": {"dk": 8, "_members": core}}, body=(mul, relu))


def _sig(node: Node):
    g = _graph()
    return signature(op_view(g, node), g)


def test_arrays_alike_in_their_first_4096_bytes_are_two_keys():
    a = np.zeros(1024, dtype=np.float64)  # 8192 bytes
    b = a.copy()
    b[-1] = 1.0  # differs in byte 8185, past the 4096 the key once kept
    assert _hashable(a) != _hashable(b)
    assert _hashable(a) == _hashable(a.copy())
    na = Node("c", "Constant", outputs=("x",), attrs={"value": a})
    nb = Node("c", "Constant", outputs=("x",), attrs={"value": b})
    assert _sig(na) != _sig(nb)


def test_fused_nodes_of_one_body_and_different_cores_are_two_keys():
    # the same members, the core on the Mul in one and on the Relu in the other: fused_work skips
    # different members, so the two must not share a price
    assert _sig(_fused("a", ("a.mul",))) != _sig(_fused("a", ("a.relu",)))
    assert _sig(_fused("a", ("a.mul",))) != _sig(_fused("a", ("a.mul", "a.relu")))


def test_identical_layers_keep_one_key():
    # layer 0 and layer 1: other names, the core at the same place -> one signature (folding and the
    # per-signature pricing rely on it)
    assert _sig(_fused("layers.0", ("layers.0.mul",))) == _sig(_fused("layers.1", ("layers.1.mul",)))
