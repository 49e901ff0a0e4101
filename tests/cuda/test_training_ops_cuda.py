"""Issue 11's ops on the cuda target: integer inputs, casts, slices (views), gathers,
one_hot, concatenate, clip, var and `ts.nn.cross_entropy` with its gradient, each against
the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts


def program(x, labels, idx):
    sliced = x[1:5, ::2].astype(np.float64).sum()
    gathered = x[idx].amax(dim=1)
    mixed = ts.concatenate([x, x * 2], 0).mean() + ts.one_hot(labels, 5).sum(dim=0)
    spread = ts.clip(x, -0.5, 0.5).var(dim=0) + x.argmax(dim=1).astype(np.float32).sum()
    return sliced, gathered, mixed, spread, ts.nn.cross_entropy(x, labels)


def loss(x, labels):
    return ts.nn.cross_entropy(x[::-1] * 2.0, labels)


@pytest.mark.parametrize("rows", [1, 6, 33])
def test_training_ops_match_the_reference(rows: int) -> None:
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((max(rows, 6), 5)).astype(np.float32)
    labels = rng.integers(0, 5, len(x)).astype(np.int64)
    idx = rng.integers(0, len(x), rows).astype(np.int32)
    want = ts.jit(program, target="reference")(x, labels, idx)
    got = ts.jit(program, target="cuda")(x, labels, idx)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_cross_entropy_gradient_matches_the_reference() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 5))
    labels = rng.integers(0, 5, 7)
    want = ts.jit(ts.grad(loss), target="reference")(x, labels)
    got = ts.jit(ts.grad(loss), target="cuda")(x, labels)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dim", [0, 1])
def test_take_gradient_adds_repeated_indices(dim: int) -> None:
    """take's gradient (scatter_add) with repeated and negative indices: on the GPU a
    thread per output element sums the gradient elements whose index names its row."""
    rng = np.random.default_rng(dim)
    x = rng.standard_normal((6, 5))
    idx = np.array([1, 4, 1, -1, 1, 0, 4], dtype=np.int64)
    w = rng.standard_normal(np.shape(np.take(x, idx, dim)))

    def loss(x, idx):
        return (ts.take(x, idx, dim) * w).sum()

    want = ts.jit(ts.grad(loss), target="reference")(x, idx)
    got = ts.jit(ts.grad(loss), target="cuda")(x, idx)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
