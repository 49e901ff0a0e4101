"""`tess-conv-tiles` (lowering/loops/conv_tiles.py): which convolutions become register-tiled
`micro.mma` nests, and their values against the reference interpreter: odd filter counts
(tile rows dividing F), output widths that leave partial vectors, strides and dilations
off the column axis, padding, 1-D, float32/float64, a bias + relu epilogue and the
gradients (themselves convolutions)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tessc as ts

# (input shape, weight shape, keywords); every case has at least 16 channels (`min-depth`).
CASES = [
    ((2, 16, 7, 9), (5, 16, 3, 3), {"padding": 1}),
    ((1, 16, 6, 21), (8, 16, 2, 3), {"stride": (2, 1), "dilation": (1, 2)}),
    ((2, 24, 5, 37), (12, 24, 3, 1), {"padding": (0, 2)}),
    ((1, 16, 4, 50), (3, 16, 1, 5), {"dilation": (1, 3), "padding": "same"}),
]


def rng_arrays(seed: int, *shapes: tuple[int, ...], dtype: Any = np.float64) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def tiled(fn: Any, *args: np.ndarray) -> bool:
    return "micro.mma" in ts.jit(fn).ir(*args, stage="loops")


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv2d_tiles_match_reference(case: int) -> None:
    x_shape, w_shape, kw = CASES[case]
    x, w, b = rng_arrays(case, x_shape, w_shape, (w_shape[0],))

    def f(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.conv2d(x, w, b, **kw).relu()

    assert tiled(f, x, w, b)
    want = ts.jit(f, target="reference")(x, w, b)
    np.testing.assert_allclose(ts.jit(f)(x, w, b), want, rtol=1e-10, atol=1e-10)


def test_conv1d_and_float32_tiles() -> None:
    x, w = rng_arrays(7, (3, 32, 45), (10, 32, 3), dtype=np.float32)

    def f(x: Any, w: Any) -> Any:
        return ts.nn.conv1d(x, w, padding=1)

    assert tiled(f, x, w)
    want = ts.jit(f, target="reference")(x, w)
    np.testing.assert_allclose(ts.jit(f)(x, w), want, rtol=1e-4, atol=1e-4)


def test_gradients_through_tiled_convs() -> None:
    x, w = rng_arrays(3, (2, 16, 6, 7), (16, 16, 3, 3))

    def loss(x: Any, w: Any) -> Any:
        return (ts.nn.conv2d(x, w, padding=1).relu() ** 2).sum()

    grad = ts.grad(loss, argnums=(0, 1))
    assert tiled(grad, x, w)  # the input gradient: a conv of 16 channels too
    want = ts.jit(grad, target="reference")(x, w)
    for got, ref in zip(ts.jit(grad)(x, w), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kw"),
    [
        ((1, 8, 6, 6), (4, 8, 3, 3), {}),  # fewer channels than min-depth
        ((1, 16, 9, 9), (4, 16, 3, 3), {"stride": 2}),  # strided columns
        ((1, 16, 6, 6), (4, 4, 3, 3), {"groups": 4}),
    ],
)
def test_convs_left_to_the_plain_nest(x_shape: Any, w_shape: Any, kw: Any) -> None:
    """Not the direct form (the first two take the im2col form: tests/test_conv_im2col.py)."""
    x, w = rng_arrays(1, x_shape, w_shape)

    def f(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, **kw)

    ir = ts.jit(f).ir(x, w, stage="loops")
    assert "micro.mma" not in ir or "%patch" in ir


def test_weight_gradient_tiles_over_its_taps() -> None:
    """The weight gradient's conv has the output's 10x20 extent as taps (over max-taps):
    each call's depth is a row of 20 taps, the batch (channels) a loop around the calls."""
    x, w, g = rng_arrays(5, (2, 4, 10, 20), (6, 4, 3, 3), (2, 6, 10, 20))

    def loss(x: Any, w: Any) -> Any:
        return (ts.nn.conv2d(x, w, padding=1) * g).sum()

    grad = ts.grad(loss, argnums=1)
    loops = ts.jit(grad).ir(x, w, stage="loops")
    assert "micro.mma" in loops and "strides = array<i64: 200, 1, 1>" in loops
    want = ts.jit(grad, target="reference")(x, w)
    np.testing.assert_allclose(ts.jit(grad)(x, w), want, rtol=1e-10, atol=1e-10)
