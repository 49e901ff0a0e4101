"""`.tess`: `x.shape[i]`, indexing, `tessc.nn`'s functions and `grad(f, wrt=...)`."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts
from tessc.compiler import compile_module
from tessc.frontend.tess_lang import TessSourceError, parse_tess

RNG = np.random.default_rng(11)
SIGNATURE = "x: f32[4, 3], w: f32[3, 5], labels: i64[4]"


def _inputs(dtype: type = np.float32) -> list[np.ndarray]:
    return [
        RNG.standard_normal((4, 3)).astype(dtype),
        RNG.standard_normal((3, 5)).astype(dtype),
        RNG.integers(0, 5, 4).astype(np.int64),
    ]


NN = {
    "softmax(x @ w, dim=1)": lambda x, w, labels: ts.nn.softmax(x @ w, dim=1),
    "log_softmax(x @ w)": lambda x, w, labels: ts.nn.log_softmax(x @ w),
    "logsumexp(x, dim=0, keepdim=True)": lambda x, w, labels: ts.nn.logsumexp(x, 0, True),
    "cross_entropy(x @ w, labels)": lambda x, w, labels: ts.nn.cross_entropy(x @ w, labels),
    "nll_loss(log_softmax(x @ w), labels)": lambda x, w, labels: ts.nn.nll_loss(
        ts.nn.log_softmax(x @ w), labels
    ),
    "mse_loss(x, x * 2)": lambda x, w, labels: ts.nn.mse_loss(x, x * 2),
    "gelu(x)": lambda x, w, labels: ts.nn.gelu(x),
    "sin(x), x.cos(), prod(x, dim=1), x.var(0), std(x)": lambda x, w, labels: (
        ts.sin(x),
        x.cos(),
        ts.prod(x, dim=1),
        ts.var(x, 0),  # `.tess`'s var is tessc.var: NumPy's (ddof=0)
        ts.std(x),
    ),
    "argmax(x, 1), clip(x, 0, 1), x.astype(i32), take(w, labels, dim=1)": lambda x, w, labels: (
        ts.argmax(x, 1),
        ts.clip(x, 0, 1),
        x.astype("i32"),
        ts.take(w, labels, dim=1),
    ),
    "one_hot(labels, 5), concatenate([x, x], 1), stack((x, x)), x.flatten()": lambda x, w, labels: (
        ts.one_hot(labels, 5),
        ts.concatenate([x, x], 1),
        ts.stack((x, x)),
        x.flatten(),
    ),
    "x.shape[0] * x.shape[-1] + x.ndim * x": lambda x, w, labels: 12 + 2 * x,
    "x[1], x[-1, 2], w.shape[1] * x[0]": lambda x, w, labels: (x[1], x[-1, 2], 5 * x[0]),
}


@pytest.mark.parametrize("expression", sorted(NN))
def test_nn_shape_and_indexing_give_the_tracers_ir(expression: str) -> None:
    source = f"def f({SIGNATURE}):\n    return {expression}\n"
    fn = NN[expression]
    fn.__name__ = "f"
    assert str(parse_tess(source, "f.tess")) == ts.trace(fn, *_inputs()).ir()


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_nn_functions_run_like_numpy(target: str) -> None:
    source = f"""\
def f({SIGNATURE}):
    z = x @ w
    return softmax(z, dim=1), cross_entropy(z, labels), mse_loss(x, x * 2), x.shape[1] * x[0]
"""
    x, w, labels = _inputs()
    outputs = compile_module(parse_tess(source, "f.tess"), "f", target)(x, w, labels)
    z = x.astype(np.float64) @ w
    e = np.exp(z - z.max(1, keepdims=True))
    softmax = e / e.sum(1, keepdims=True)
    expected = [
        softmax,
        -np.log(softmax[np.arange(4), labels]).mean(),
        np.mean(x.astype(np.float64) ** 2),
        3 * x[0],
    ]
    for out, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_tensor_functions_run_like_numpy(target: str) -> None:
    source = (
        f"def f({SIGNATURE}):\n    return sin(x), cos(x), prod(x, dim=1), x.var(0), argmax(x, 1)\n"
    )
    x, w, labels = _inputs()
    outputs = compile_module(parse_tess(source, "f.tess"), "f", target)(x, w, labels)
    expected = [np.sin(x), np.cos(x), x.prod(1), x.var(0), x.argmax(1)]
    for out, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


GRAD_SOURCE = """\
def loss(x: f64[4, 3], w: f64[3, 5], labels: i64[4]) -> f64[]:
    return cross_entropy(tanh(x @ w), labels) + 0.5 * mean(w * w)

def step(x: f64[4, 3], w: f64[3, 5], labels: i64[4]):
    g = grad(loss, wrt=w)
    value, grads = value_and_grad(loss, wrt=(x, 1))(x, w, labels)
    return w - 0.1 * g(x, w, labels), value, grads[0], grads[1], grad(loss)(x, w, labels)
"""


def _loss(x: np.ndarray, w: np.ndarray, labels: np.ndarray) -> float:
    z = np.tanh(x @ w)
    lse = np.log(np.exp(z).sum(1))
    return float((lse - z[np.arange(len(labels)), labels]).mean() + 0.5 * np.mean(w * w))


def _central_difference(f, array: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    gradient = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        up, down = array.copy(), array.copy()
        up[index] += eps
        down[index] -= eps
        gradient[index] = (f(up) - f(down)) / (2 * eps)
    return gradient


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_grad_expression_matches_central_differences(target: str) -> None:
    x, w, labels = _inputs(np.float64)
    step = compile_module(parse_tess(GRAD_SOURCE, "g.tess"), "step", target)
    new_w, value, gx, gw, gx_default = step(x, w, labels)
    want_gw = _central_difference(lambda v: _loss(x, v, labels), w)
    want_gx = _central_difference(lambda v: _loss(v, w, labels), x)
    np.testing.assert_allclose(value, _loss(x, w, labels), rtol=1e-12)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gx_default, want_gx, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(new_w, w - 0.1 * want_gw, rtol=1e-6, atol=1e-9)


def test_grad_expression_gives_the_python_grads_numbers() -> None:
    x, w, labels = _inputs(np.float64)

    def loss(x, w, labels):
        return ts.nn.cross_entropy((x @ w).tanh(), labels) + 0.5 * (w * w).mean()

    expected = ts.grad(loss, argnums=1, target="reference")(x, w, labels)
    step = compile_module(parse_tess(GRAD_SOURCE, "g.tess"), "step", "reference")
    np.testing.assert_allclose(step(x, w, labels)[3], expected, rtol=1e-12)


HEADER = "def f(x: f32[3, 4]) -> f32[]:\n    return sum(x)\n"
ERRORS = {
    "shape index out of range": (
        "def g(x: f32[3, 4]):\n    return x * x.shape[2]\n",
        "e.tess:2:16: error: index 2 is out of range for a list of 2 in `x.shape[2]`",
    ),
    "tensor index out of range": (
        "def g(x: f32[3, 4]):\n    return x[3]\n",
        "e.tess:2:12: error: index 3 is out of range for dim 0 of size 3 in `x[3]`",
    ),
    "wrt names no parameter": (
        HEADER + "def g(x: f32[3, 4]):\n    return grad(f, wrt=y)(x)\n",
        "e.tess:4:24: error: `wrt` names a parameter of `f`: one of x",
    ),
    "grad of something that is not a def": (
        HEADER + "def g(x: f32[3, 4]):\n    return grad(exp)(x)\n",
        "e.tess:4:17: error: `grad` differentiates a `def` of this file",
    ),
    "grad of a non-scalar": (
        "def f(x: f32[3]):\n    return x\ndef g(x: f32[3]):\n    return grad(f)(x)\n",
        "e.tess:4:12: error: grad needs `f` to return one scalar (a one-element tensor) "
        "in `grad(f)(x)`",
    ),
    "gradient argument types": (
        HEADER + "def g(y: f32[4]):\n    return grad(f)(y)\n",
        "e.tess:4:12: error: argument `x` of `f` must be f32[3, 4], got f32[4]",
    ),
    "grad of itself": (
        "def f(x: f32[]):\n    return grad(f)(x)\n",
        "e.tess:2:12: error: `f` differentiates itself (recursion cannot be traced)",
    ),
    "calling a tensor": (
        "def f(x: f32[]):\n    return sum(x)(x)\n",
        "e.tess:2:12: error: a tensor f32[] is not callable",
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_located(case: str) -> None:
    source, expected = ERRORS[case]
    with pytest.raises(TessSourceError) as info:
        parse_tess(source, "e.tess")
    assert str(info.value) == expected


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_grad_through_sin_prod_and_var(target: str) -> None:
    source = """\
def loss(x: f64[3, 4]) -> f64[]:
    return sum(prod(sin(x), dim=1)) + mean(x.var(0))

def dloss(x: f64[3, 4]):
    return grad(loss)(x)
"""
    x = RNG.uniform(0.2, 1.2, (3, 4))
    (gradient,) = compile_module(parse_tess(source, "g.tess"), "dloss", target)(x)

    def numpy_loss(v: np.ndarray) -> float:
        return float(np.prod(np.sin(v), axis=1).sum() + v.var(0).mean())

    np.testing.assert_allclose(gradient, _central_difference(numpy_loss, x), rtol=1e-6)
