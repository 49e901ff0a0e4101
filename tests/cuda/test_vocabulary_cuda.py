"""Issue 22 §4's functions on the cuda target (simulator): rounding, float `//` and `%`,
the constants, masks, scans, norms and binary cross-entropies, and a gradient through
them, each against NumPy at small shapes."""

from __future__ import annotations

import numpy as np

import tessc as ts

HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.7])
X = np.random.default_rng(22).standard_normal((3, 4))


def assert_matches(got, want, tol: float = 1e-12) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def test_rounding_and_floored_division_match_numpy() -> None:
    def f(x):
        return ts.floor(x), ts.ceil(x), ts.round(x), x // 0.7, x % -1.1, ts.sign(x)

    want = (np.floor(HALVES), np.ceil(HALVES), np.round(HALVES), HALVES // 0.7)
    want += (HALVES % -1.1, np.sign(HALVES))
    assert_matches(ts.jit(f, target="cuda")(HALVES), want)


def test_constants_masks_scans_and_norms_match_numpy() -> None:
    def f(x):
        return (
            ts.eye(3, 4, 1, dtype=np.float64) * x,
            ts.triu(x),
            ts.cumsum(x, 1),
            ts.cumprod(x, 0),
            ts.flip(ts.roll(x, 1, 1), 0),
            ts.linalg.norm(x, axis=1),
            ts.any(x > 1.0, axis=0),
            ts.isfinite(x),
        )

    want = (np.eye(3, 4, 1) * X, np.triu(X), np.cumsum(X, 1), np.cumprod(X, 0))
    want += (np.flip(np.roll(X, 1, 1), 0), np.linalg.norm(X, axis=1))
    want += (np.any(X > 1.0, axis=0), np.isfinite(X))
    assert_matches(ts.jit(f, target="cuda")(X), want)


def test_gradients_match_the_reference() -> None:
    target = (X > 0).astype(np.float64)

    def loss(x):
        scanned = ts.cumsum(ts.triu(x), 1) + ts.cumprod(x, 0) + x % 0.7
        return ts.nn.binary_cross_entropy_with_logits(scanned, target) + ts.linalg.norm(x)

    want = ts.jit(ts.grad(loss), target="reference")(X)
    assert_matches([ts.jit(ts.grad(loss), target="cuda")(X)], [want])
