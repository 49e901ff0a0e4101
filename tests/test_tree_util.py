"""Custom pytree nodes (issue 22 §3): `ts.tree_util.register_pytree_node` with JAX's
signature, used by jit and grad arguments and results and by the optimizers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import tessc as ts


class Affine:
    """A plain class (no dataclass): a pytree only once registered."""

    def __init__(self, w: object, b: object, name: str = "layer"):
        self.w, self.b, self.name = w, b, name


ts.tree_util.register_pytree_node(
    Affine, lambda a: ((a.w, a.b), a.name), lambda name, children: Affine(*children, name=name)
)


@ts.tree_util.register_pytree_node_class
class Pair:
    def __init__(self, first: object, second: object):
        self.first, self.second = first, second

    def tree_flatten(self) -> tuple[tuple[object, object], None]:
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple) -> Pair:
        return cls(*children)


@dataclass
class Params:
    w: np.ndarray
    b: np.ndarray


def _affine() -> Affine:
    rng = np.random.default_rng(0)
    return Affine(rng.normal(size=(3, 2)).astype(np.float32), np.ones(2, np.float32))


def test_registered_node_in_and_out_of_jit() -> None:
    layer = _affine()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    @ts.jit
    def scale(a: Affine, x: np.ndarray) -> Affine:
        return Affine(a.w * 2.0, a.b + x.sum(), name=a.name + "!")

    out = scale(layer, x)
    assert isinstance(out, Affine) and out.name == "layer!"
    np.testing.assert_allclose(out.w, layer.w * 2)
    np.testing.assert_allclose(out.b, layer.b + x.sum())
    layer.w = layer.w + 1.0  # read at every call, the fast path included
    np.testing.assert_allclose(scale(layer, x).w, layer.w * 2)
    np.testing.assert_allclose(scale(layer, x).w, layer.w * 2)
    assert scale.trace_count == 1
    scale(Affine(layer.w, layer.b, name="other"), x)  # aux data is part of the signature
    assert scale.trace_count == 2


def test_registered_node_grad_and_decorator_class() -> None:
    layer = _affine()
    x = np.ones((4, 3), np.float32)

    def loss(a: Affine, x: np.ndarray) -> ts.Tensor:
        return ((x @ a.w + a.b) ** 2).sum()

    grads = ts.grad(loss)(layer, x)
    assert isinstance(grads, Affine)
    y = x @ layer.w + layer.b
    np.testing.assert_allclose(grads.w, x.T @ (2 * y), rtol=1e-5)
    np.testing.assert_allclose(grads.b, (2 * y).sum(0), rtol=1e-5)
    swapped = ts.jit(lambda p: Pair(p.second, p.first))(Pair(x, layer.w))
    assert isinstance(swapped, Pair)
    np.testing.assert_array_equal(swapped.first, layer.w)


def test_registered_node_as_optimizer_parameters() -> None:
    layer = _affine()
    grads = Affine(np.ones_like(layer.w), np.ones_like(layer.b))
    opt = ts.optim.SGD(lr=0.5)
    state = opt.init(layer)
    new, _ = opt.step(layer, grads, state)
    assert isinstance(new, Affine)
    np.testing.assert_allclose(new.w, layer.w - 0.5)


def test_tree_functions_follow_jax() -> None:
    tree = {"a": Params(np.zeros(2), np.ones(3)), "b": [Pair(1.0, 2.0), None]}
    leaves, treedef = ts.tree_util.tree_flatten(tree)
    assert len(leaves) == 3  # a dataclass is a leaf unless registered, as in JAX
    doubled = ts.tree_util.tree_map(lambda v: v * 2 if isinstance(v, float) else v, tree)
    assert doubled["b"][0].second == 4.0 and doubled["b"][1] is None
    assert ts.tree_util.tree_unflatten(treedef, leaves)["b"][0].first == 1.0


def test_unhashable_aux_data_is_a_clear_error() -> None:
    class Bad:
        def __init__(self, v: object):
            self.v = v

    ts.tree_util.register_pytree_node(Bad, lambda b: ((b.v,), [1]), lambda a, c: Bad(*c))
    with pytest.raises(TypeError, match="auxiliary data of type list, which is not hashable"):
        ts.jit(lambda b: b.v + 1.0)(Bad(np.ones(2, np.float32)))
