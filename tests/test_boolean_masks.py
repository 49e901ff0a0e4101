"""Boolean masks (issue 22 §4): `ts.where` with bool tensors and broadcasting, `x[mask]`
and `x.at[mask]` with a constant (NumPy) mask as NumPy does, and with a traced mask what
JAX allows: updates (a select), never a read (its shape would depend on the values)."""

from __future__ import annotations

import numpy as np
import pytest

import tessc as ts

X = np.arange(12, dtype=np.float64).reshape(3, 4) - 5.0
MASK = np.array(
    [[True, False, True, False], [False, False, False, True], [True, True, False, False]]
)
ROWS = np.array([True, False, True])


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_constant_masks_read_and_update_as_numpy(target: str) -> None:
    def f(x):  # noqa: ANN001, ANN202
        return (
            x[MASK] * 2.0,
            x[ROWS, 1:],
            x[:, [True, False, False, True]],
            x.at[MASK].set(-1.0),
            x.at[MASK].add(np.arange(5.0)),
            ts.where(MASK, x, -x),
            ts.where(x > 0, x, np.zeros(4)),  # a bool Tensor, broadcast against a row
        )

    got = ts.jit(f, target=target)(X)
    set_, add = X.copy(), X.copy()
    set_[MASK] = -1.0
    add[MASK] += np.arange(5.0)
    want = (X[MASK] * 2, X[ROWS, 1:], X[:, [True, False, False, True]], set_, add)
    want += (np.where(MASK, X, -X), np.where(X > 0, X, 0.0))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target", ["cpu", "reference"])
def test_traced_mask_updates_are_selects(target: str) -> None:
    def f(x):  # noqa: ANN001, ANN202
        row = ts.any(x > 0, axis=1)
        return x.at[x > 0].set(0.0), x.at[row].mul(np.arange(4.0)), x.at[x < -2].max(-2.0)

    got = ts.jit(f, target=target)(X)
    a, b, c = X.copy(), X.copy(), X.copy()
    a[X > 0] = 0.0
    b[(X > 0).any(1)] *= np.arange(4.0)
    c[X < -2] = np.maximum(c[X < -2], -2.0)
    for g, w in zip(got, (a, b, c), strict=True):
        np.testing.assert_array_equal(g, w)


def test_gradient_through_a_constant_mask() -> None:
    grad = ts.grad(lambda x: (x[MASK] ** 2).sum() + ts.where(MASK, x, 0.0).sum())(X)
    np.testing.assert_allclose(grad, (2 * X + 1) * MASK)


def test_traced_masks_that_would_need_a_dynamic_shape_raise() -> None:
    with pytest.raises(ts.TraceError, match="NonConcreteBooleanIndexError.*ts.where"):
        ts.jit(lambda x: x[x > 0])(X)
    with pytest.raises(ts.TessError, match="depend on how many elements the mask selects"):
        ts.jit(lambda x: x.at[x > 0].set(np.ones(7)))(X)
    with pytest.raises(ts.TessError, match="does not match the indexed dims"):
        ts.jit(lambda x: x[ROWS[:2]])(X)

    def assign(x):  # noqa: ANN001, ANN202
        x[x > 0] = 0.0
        return x

    with pytest.raises(ts.TraceError, match=r"x = x.at\[key\].set\(v\)"):
        ts.jit(assign)(X)
