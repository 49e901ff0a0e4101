"""Reversed slices and dropped dims on the cuda target, fused into their consumers (the
copies tess-to-linalg makes for them read the source backwards, or at 0, inside the
consuming kernel): values and gradients against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts


def program(x, b):
    reversed_rows = x[::-1] * 2.0 + b
    stepped = x[5:1:-2, 0] - x[..., -1][:2]
    column_sums = x[:, ::-1].sum(1) + x[0].max()
    return reversed_rows, stepped, column_sums, x[::-1][2, 1:4].sum()


def loss(x):
    return (x[::-1, 1:] * x[:, :0:-1]).sum() + (x[0] * x[..., -1][:5]).sum() + x[::-2].sum(1).max()


@pytest.mark.parametrize("rows", [6, 9])
def test_views_match_the_reference(rows: int) -> None:
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5)).astype(np.float32)
    want = ts.jit(program, target="reference")(x, b)
    got = ts.jit(program, target="cuda")(x, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_view_gradients_match_the_reference() -> None:
    x = np.random.default_rng(0).standard_normal((7, 5))
    want = ts.jit(ts.grad(loss), target="reference")(x)
    got = ts.jit(ts.grad(loss), target="cuda")(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)
