"""`tess-gpu-conv`'s shared-memory convolutions in Numba's simulator: forward convs and
both gradients (themselves convs) at shapes off the tile sizes (more than one spatial box,
more out-channels than a block's lanes, more input channels than one staged chunk),
strides, padding, dilation, groups, float32 and a zero-size batch, each against the
reference interpreter; and the gpu level shows that every conv took the staged kernel."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tessc as ts

# (input shape, weight shape, keyword arguments); conv1d when the input has rank 3.
CASES = {
    "boxes_features_chunks": (
        (1, 9, 11, 9),
        (17, 9, 2, 2),
        {},
    ),  # 10x8 outputs: two 8x8 boxes; 17 features: two rows per lane; 9 channels: two chunks
    "stride_padding_dilation": (
        (2, 3, 7, 9),
        (4, 3, 3, 2),
        {"stride": (1, 2), "padding": (1, 0), "dilation": (1, 2)},
    ),
    "wide_rows": ((1, 2, 3, 40), (3, 2, 2, 3), {}),  # 2 x 38 outputs: three 2 x 16 boxes
    "depthwise": ((1, 4, 6, 5), (4, 1, 3, 3), {"padding": "same", "groups": 4}),
    "conv1d_long": ((1, 2, 150), (3, 2, 3), {"stride": 2, "dilation": 3, "padding": 2}),
}


def conv(x: Any, w: Any, b: Any, kw: dict[str, Any]) -> Any:
    op = ts.nn.conv1d if len(x.shape) == 3 else ts.nn.conv2d
    return op(x, w, b, **kw).relu()


def staged_kernels(function: Any, *args: Any) -> int:
    """How many `gpu.func`s of the program stage an input patch in workgroup memory."""
    ir = ts.jit(function, target="cuda").ir(*args, stage="gpu")
    return len(re.findall(r"%patch: memref<[^>]*#gpu.address_space<workgroup>>", ir))


def check(name: str, dtype: type, rtol: float) -> None:
    x_shape, w_shape, kw = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)

    def f(x: Any, w: Any, b: Any) -> Any:
        return conv(x, w, b, kw)

    want = np.asarray(ts.jit(f, target="reference")(x, w, b))
    got = np.asarray(ts.jit(f, target="cuda")(x, w, b))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    seed = rng.standard_normal(want.shape).astype(dtype)
    g = ts.grad(lambda *a: (f(*a) * seed).sum(), argnums=(0, 1, 2))
    for got_g, want_g in zip(
        ts.jit(g, target="cuda")(x, w, b), ts.jit(g, target="reference")(x, w, b), strict=True
    ):
        np.testing.assert_allclose(np.asarray(got_g), np.asarray(want_g), rtol=rtol, atol=rtol)
    assert staged_kernels(f, x, w, b) == 1
    # Every conv of the gradient program: the forward, the weight gradient and the input
    # gradient (one conv per stride phase where the stride is > 1).
    convs = ts.jit(g, target="cuda").ir(x, w, b, stage="tess").count("tess.conv ")
    assert convs >= 3
    assert staged_kernels(g, x, w, b) == convs


@pytest.mark.parametrize("name", sorted(CASES))
def test_staged_conv_and_gradients_match_the_reference(name: str) -> None:
    check(name, np.float64, 1e-10)


def test_staged_conv_in_float32() -> None:
    check("stride_padding_dilation", np.float32, 1e-4)


def test_zero_size_batch() -> None:
    x, w = np.ones((0, 2, 5, 5)), np.ones((3, 2, 3, 3))
    y = ts.jit(lambda x, w: ts.nn.conv2d(x, w, padding=1), target="cuda")(x, w)
    assert np.asarray(y).shape == (0, 3, 5, 5)
