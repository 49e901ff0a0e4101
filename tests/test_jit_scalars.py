"""Python numbers given to a jit function are traced (weakly typed 0-d arrays, as in JAX);
`static_argnums`/`static_argnames` make them static."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tessc as ts
from tessc.frontend.jit import RetraceWarning

RNG = np.random.default_rng(5)
TARGETS = ["reference", "cpu"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_changing_step_count_traces_once(target: str) -> None:
    @ts.jit(target=target)
    def step(x, t, lr):
        return x - lr * x / (t + 1)

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for t in range(12):
            lr = 0.1 / (t + 1)
            result = step(x, t, lr)
            assert result.dtype == np.float32
            expected = x - np.float32(lr) * x / np.float32(t + 1)
            np.testing.assert_allclose(result, expected, rtol=1e-6)
    assert step.trace_count == 1


@pytest.mark.parametrize(
    ("dtype", "number", "expected"),
    [
        (np.float32, 2, np.float32),
        (np.float32, 2.5, np.float32),
        (np.float64, 2.5, np.float64),
        (np.int32, 3, np.int32),
        (np.int64, 3, np.int64),
        (np.int32, 2.5, np.float32),  # a float number makes an int tensor the float type
        (np.bool_, 3, np.int64),
    ],
)
def test_traced_numbers_are_weakly_typed(dtype: type, number: float, expected: type) -> None:
    x = (RNG.standard_normal(5) * 4).astype(dtype)
    traced = ts.jit(lambda x, n: x * n, target="reference")(x, number)
    baked = ts.jit(lambda x: x * number, target="reference")(x)
    assert traced.dtype == baked.dtype == expected
    np.testing.assert_array_equal(traced, baked)
    np.testing.assert_allclose(traced, x.astype(expected) * number, rtol=1e-6)


def test_numbers_in_containers_and_the_fast_path() -> None:
    f = ts.jit(lambda x, h: x * h["scale"] + h["shift"][0], target="cpu")
    x = RNG.standard_normal(4).astype(np.float32)
    for scale in (1.0, 2.0, -3.0):
        np.testing.assert_allclose(
            f(x, {"scale": scale, "shift": (1,)}), x * np.float32(scale) + 1, rtol=1e-6
        )
    assert f.trace_count == 1
    f(x, {"scale": 1, "shift": (1,)})  # an int where a float was: a new signature
    assert f.trace_count == 2


def test_static_argnums_and_argnames() -> None:
    x = np.arange(6, dtype=np.float32)
    f = ts.jit(lambda x, n, scale: x.reshape(n, -1) * scale, static_argnums=1)
    assert f(x, 2, 1.0).shape == (2, 3) and f(x, 3, 2.0).shape == (3, 2)
    assert f.trace_count == 2
    g = ts.jit(lambda x, *, k=2: x.sum() * k, target="reference", static_argnames="k")
    assert g(x, k=3) == 45 and g(x, k=4) == 60 and g.trace_count == 2
    assert "fill 4" in g.ir(x, k=4).replace(".000000e+00", "")
    with pytest.raises(ValueError, match="static_argnums"):
        ts.jit(lambda x: x, static_argnums=1)
    with pytest.raises(ValueError, match="static_argnames names no parameter"):
        ts.jit(lambda x: x, static_argnames="y")


@pytest.mark.parametrize("target", TARGETS)
def test_static_floats_equal_but_different_are_different_signatures(target: str) -> None:
    """`-0.0 == 0.0`, yet `1 / (x * s)` tells them apart: a static float's signature holds
    its bits, in the general path and in the planned fast path (a tuple holds the second
    one)."""
    x = np.ones(3, np.float32)
    f = ts.jit(lambda x, s: 1.0 / (x * s), target=target, static_argnums=1)
    for _ in range(2):  # the second round takes the planned path
        assert np.all(f(x, 0.0) == np.inf) and np.all(f(x, -0.0) == -np.inf)
    assert f.trace_count == 2
    g = ts.jit(lambda x, s: x * s[0], target=target, static_argnums=1)
    for _ in range(2):
        assert not np.signbit(g(x, (0.0,))).any() and np.signbit(g(x, (-0.0,))).all()
    h = ts.jit(lambda x, s: x + s, target=target, static_argnums=1)
    assert np.isnan(h(x, float("nan"))).all() and np.all(h(x, 0.0) == 1)


def test_a_number_used_as_a_python_value_falls_back_to_static() -> None:
    f = ts.jit(lambda x, n, t: x[:n] * t, target="reference")
    x = np.arange(6, dtype=np.float32)
    for t in range(4):  # `n` is a slice bound: static; `t` stays traced
        np.testing.assert_array_equal(f(x, 2, t), x[:2] * t)
    np.testing.assert_array_equal(f(x, 4, 5), x[:4] * 5)
    assert f.trace_count == 2
    # A value needed of a number computed from numbers: all its numbers become static.
    g = ts.jit(lambda x, n: x[: n + 1] * n, target="reference")
    np.testing.assert_array_equal(g(x, 2), x[:3] * 2)
    np.testing.assert_array_equal(g(x, 3), x[:4] * 3)
    assert g.trace_count == 2


def test_the_traced_number_error_names_static_argnums() -> None:
    import inspect

    from tessc.frontend.trace_function import flatten_arguments, trace_signature
    from tessc.frontend.user_location import TraceError

    def body(x, n):
        return x.reshape(n, -1)

    signature, arrays = flatten_arguments(
        inspect.signature(body), (np.ones(6), 2), {}, scalars=True
    )
    assert signature.weak == (1,)
    with pytest.raises(TraceError, match="static_argnums or static_argnames"):
        trace_signature(body, signature, [name for name, _ in arrays])


def _central_difference(f, value: float, eps: float = 1e-6) -> float:
    return (f(value + eps) - f(value - eps)) / (2 * eps)


@pytest.mark.parametrize("target", TARGETS)
def test_gradients_with_traced_numbers(target: str) -> None:
    x = RNG.standard_normal(5)

    def loss(x, scale):
        return ((x * scale).tanh() ** 2).sum()

    def numpy_loss(x, scale):
        return float((np.tanh(x * scale) ** 2).sum())

    grads = ts.jit(ts.grad(loss, argnums=(0, 1)), target=target)
    for scale in (0.5, 1.5):
        gx, gscale = grads(x, scale)
        want = _central_difference(lambda s: numpy_loss(x, s), scale)
        np.testing.assert_allclose(gscale, want, rtol=1e-6)
        want_x = [
            _central_difference(
                lambda v, i=i, s=scale: numpy_loss(np.where(np.arange(5) == i, v, x), s), x[i]
            )
            for i in range(5)
        ]
        np.testing.assert_allclose(gx, want_x, rtol=1e-6)
    assert grads.trace_count == 1


def test_numbers_among_donated_var_positional_arguments() -> None:
    @ts.jit(target="cpu", donate_argnums=(2,))
    def f(*args):
        scale, shift, w = args
        return w * scale + shift

    w = np.ones(4)
    for scale in (2.0, 3.0):
        w = f(scale, 1, w)
    np.testing.assert_array_equal(w, np.full(4, (1 * 2 + 1) * 3 + 1.0))
    assert f.trace_count == 1
    assert "tess.donated" in f.ir(2.0, 1, np.ones(4)).split("%args_2")[1].split(")")[0]
