"""The convolution ops on the cuda target (Numba's simulator: small shapes): conv2d with
odd sizes, stride 2, padding, dilation and groups, conv1d, max/avg pooling and pad, values
and every gradient, each against the reference interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tessc as ts

CONVS = [
    ((1, 4, 5, 5), (2, 2, 3, 3), {"stride": 2, "padding": 1, "groups": 2}),
    ((2, 1, 5, 4), (2, 1, 2, 3), {"padding": "same", "dilation": (2, 1)}),
]


def grads_of(f: Any, count: int, seed_out: np.ndarray) -> Any:
    return ts.grad(lambda *a: (f(*a) * seed_out).sum(), argnums=tuple(range(count)))


def assert_same(got: Any, want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv2d_and_gradients_match_the_reference(case: int) -> None:
    x_shape, w_shape, kw = CONVS[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])

    def f(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.conv2d(x, w, b, **kw).relu()

    want = ts.jit(f, target="reference")(x, w, b)
    assert_same([ts.jit(f, target="cuda")(x, w, b)], [want])
    seed_out = rng.standard_normal(want.shape)
    g = grads_of(f, 3, seed_out)
    assert_same(ts.jit(g, target="cuda")(x, w, b), ts.jit(g, target="reference")(x, w, b))


def test_conv1d_pools_and_pad_match_the_reference() -> None:
    rng = np.random.default_rng(0)
    x = np.round(rng.standard_normal((1, 2, 7)) * 2) / 2  # tied maxima
    w = rng.standard_normal((3, 2, 2))

    def f(x: Any, w: Any) -> Any:
        y = ts.nn.conv1d(ts.nn.pad(x, (0, 1)), w, stride=2)
        return ts.nn.max_pool1d(x, 3, 2, 1).sum() + ts.nn.avg_pool1d(y, 2).sum() * 2

    assert_same([ts.jit(f, target="cuda")(x, w)], [ts.jit(f, target="reference")(x, w)])
    g = grads_of(f, 2, np.ones(()))
    assert_same(ts.jit(g, target="cuda")(x, w), ts.jit(g, target="reference")(x, w))
