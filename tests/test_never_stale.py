"""Never stale, never reused: jitted methods read `self` at every call, donated arrays are
marked, dataclasses are pytrees."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tessc as ts

X = np.ones((4, 3), np.float32)


class Model:
    def __init__(self, w: np.ndarray):
        self.w = w
        self.scale = 2.0
        self.layers = {"b": np.zeros(2, np.float32)}

    @ts.jit
    def forward(self, x):
        return (x @ self.w + self.layers["b"]) * self.scale

    def loss(self, x):
        return ((x @ self.w) ** 2).sum()


def test_jitted_method_reads_the_instance_at_every_call():
    model = Model(np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 6.0))
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 6.0))  # planned call
    model.w = np.full((3, 2), 2.0, np.float32)  # a new array: taken
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 12.0))
    model.w[:] = 3.0  # updated in place: taken
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 18.0))
    model.layers["b"] = np.ones(2, np.float32)  # nested in a dict
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 20.0))
    model.scale = 1.0  # a number attribute: static, retraced
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 10.0))
    other = Model(np.zeros((3, 2), np.float32))  # another instance: its own arrays
    np.testing.assert_array_equal(other.forward(X), np.zeros((4, 2)))
    np.testing.assert_array_equal(model.forward(X), np.full((4, 2), 10.0))


def test_jit_and_grad_of_a_bound_method_are_not_stale():
    model = Model(np.ones((3, 2), np.float32))
    loss = ts.jit(model.loss)
    gradient = ts.grad(model.loss)
    assert float(loss(X)) == 4 * 2 * 9.0
    np.testing.assert_allclose(gradient(X), 2 * (X @ model.w) @ model.w.T)  # d/dx, as JAX
    model.w = np.full((3, 2), 0.5, np.float32)
    assert float(loss(X)) == pytest.approx(4 * 2 * 1.5**2)
    np.testing.assert_allclose(gradient(X), 2 * (X @ model.w) @ model.w.T)


def test_grad_as_a_method_differentiates_self_like_jax():
    class Linear:
        def __init__(self, w):
            self.w = w

        @ts.grad
        def loss_grad(self, x):
            return (x @ self.w).sum()

    layer = Linear(np.ones((3, 2), np.float32))
    gradient = layer.loss_grad(X)
    assert isinstance(gradient, Linear)
    np.testing.assert_allclose(gradient.w, np.full((3, 2), 4.0))


def test_an_instance_with_arrays_and_unhashable_attributes_is_a_clear_error():
    class Holder:
        def __init__(self):
            self.w = np.ones(3, np.float32)
            self.seen = {1, 2}

        @ts.jit
        def f(self, x):
            return x * self.w

    with pytest.raises(TypeError, match="holding arrays, which jit reads at every call"):
        Holder().f(np.ones(3, np.float32))


# ---------------------------------------------------------------------------------------
# donation
# ---------------------------------------------------------------------------------------


def _sgd(w, g):
    return w - 0.5 * g


def _not_returned(w, g):
    return (w * g).sum()


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_a_donated_array_passed_again_raises(target):
    step = ts.jit(_not_returned, target=target, donate_argnums=0)
    w, g = np.ones(8, np.float32), np.ones(8, np.float32)
    step(w, g)
    with pytest.raises(ValueError, match="argument `w` was donated to `_not_returned`"):
        step(w, g)
    with pytest.raises(ValueError, match="its buffer now holds another value"):
        ts.jit(_sgd)(g, w)  # to any function, in any position
    step(np.ones(8, np.float32), g)  # a fresh array is fine


def test_a_donated_array_returned_updated_in_place_stays_usable():
    step = ts.jit(_sgd, donate_argnums=0)
    w, g = np.ones(8, np.float32), np.ones(8, np.float32)
    for _ in range(4):  # the planned call, too
        w = step(w, g)
    np.testing.assert_allclose(w, np.full(8, -1.0))


def test_reuse_is_caught_on_the_planned_path_too():
    step = ts.jit(_not_returned, donate_argnums=0)
    g = np.ones(8, np.float32)
    for _ in range(3):
        step(np.ones(8, np.float32), g)
    assert step._fast is not None and step._fast.plan is not None
    w = np.ones(8, np.float32)
    step(w, g)
    with pytest.raises(ValueError, match="was donated"):
        step(w, g)


def test_a_donated_argument_aliasing_another_is_refused():
    step = ts.jit(_sgd, donate_argnums=0)
    w = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="argument `w` is donated to `_sgd` but shares memory"):
        step(w, w)
    with pytest.raises(ValueError, match="shares memory with argument `g`"):
        step(w, w[::-1])
    for _ in range(3):  # after planned calls
        w = step(w, np.ones(8, np.float32))
    with pytest.raises(ValueError, match="shares memory"):
        step(w, w)


# ---------------------------------------------------------------------------------------
# dataclasses as pytrees
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Params:
    w: np.ndarray
    b: np.ndarray
    name: str = "mlp"


def test_dataclass_pytrees_in_and_out_like_named_tuples():
    step = ts.jit(lambda p, x: Params(p.w * 2.0, p.b + x.sum(), p.name))
    params = Params(np.ones((3, 2), np.float32), np.zeros(2, np.float32))
    for _ in range(3):
        params = step(params, X)
    assert isinstance(params, Params) and params.name == "mlp"
    np.testing.assert_array_equal(params.w, np.full((3, 2), 8.0))
    np.testing.assert_array_equal(params.b, np.full(2, 36.0))
    gradient = ts.grad(lambda p, x: ((x @ p.w + p.b) ** 2).sum())(params, X)
    assert isinstance(gradient, Params)
    np.testing.assert_allclose(gradient.b, 2 * (X @ params.w + params.b).sum(0))


def test_an_optimizer_step_reads_a_changed_learning_rate():
    opt = ts.optim.SGD(lr=0.5)
    params = {"w": np.ones(4)}
    grads = {"w": np.ones(4)}
    state = opt.init(params)
    params, state = opt.step(params, grads, state)
    np.testing.assert_allclose(params["w"], 0.5)
    opt.lr = 0.25
    params, state = opt.step(params, grads, state)
    np.testing.assert_allclose(params["w"], 0.25)
