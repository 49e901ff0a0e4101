"""The input gradient of a strided convolution (lowering/autodiff/vjp_conv.py): one stride-1
conv per phase of the padded input, each with only the taps that reach it, so it does
about the forward's multiply-adds instead of s^2 times them (the dilated output gradient's
zeros). Checked against central differences and, where installed, PyTorch."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tessc as ts

from helpers import central_difference

# (x shape, w shape, keywords): strides 2 and 3, odd sizes, dilation coprime with the
# stride and not, padding past the taps' reach, groups, 1-D.
CASES = [
    ((2, 4, 9, 8), (6, 4, 3, 3), {"stride": 2, "padding": 1}),
    ((2, 4, 9, 8), (6, 2, 3, 3), {"stride": 2, "padding": 1, "groups": 2}),  # dilated form
    ((1, 3, 11, 10), (2, 3, 3, 2), {"stride": (3, 2), "dilation": (2, 1), "padding": (2, 0)}),
    ((1, 2, 10, 9), (3, 2, 2, 3), {"stride": 2, "dilation": 2, "padding": (4, 1)}),
    ((2, 3, 7, 7), (2, 3, 1, 1), {"stride": 3}),  # 1x1 taps: most phases get none
    ((2, 4, 13), (4, 4, 4), {"stride": 3, "padding": 2}),
]


def conv(x: Any, w: Any, kw: dict[str, Any]) -> Any:
    return (ts.nn.conv1d if len(x.shape) == 3 else ts.nn.conv2d)(x, w, **kw)


def conv_multiply_adds(ir: str) -> int:
    """The multiply-adds of every `tess.conv` in `ir`: output size x weight size / F."""
    total = 0
    for w, out in re.findall(
        r"tess\.conv [^\n]*?, tensor<([\dx]+)xf64> -> tensor<([\dx]+)xf64>", ir
    ):
        dims = [int(d) for d in w.split("x")]
        total += int(np.prod([int(d) for d in out.split("x")])) * int(np.prod(dims[1:]))
    return total


@pytest.mark.parametrize("case", range(len(CASES)))
def test_strided_input_gradient(case: int) -> None:
    x_shape, w_shape, kw = CASES[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    seed = rng.standard_normal(ts.jit(lambda x, w: conv(x, w, kw), target="reference")(x, w).shape)

    def loss(x: Any, w: Any) -> Any:
        return (conv(x, w, kw) * seed).sum()

    grad = ts.grad(loss, argnums=0)
    dx = ts.jit(grad)(x, w)
    np.testing.assert_allclose(ts.jit(grad, target="reference")(x, w), dx, rtol=1e-10, atol=1e-10)
    value = ts.jit(loss, target="reference")
    np.testing.assert_allclose(dx, central_difference(lambda v: value(v, w), x), atol=1e-6)
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x, requires_grad=True)
    F = torch.nn.functional
    (
        getattr(F, f"conv{len(x_shape) - 2}d")(xt, torch.tensor(w), **kw) * torch.tensor(seed)
    ).sum().backward()
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_strided_input_gradient_does_the_forward_work() -> None:
    """A stride-2 3x3 conv: the input gradient's convs do about the forward's multiply-adds
    (the zero-inserted form did 4x them, plus the padding's)."""
    x, w = np.zeros((2, 8, 32, 32)), np.zeros((8, 8, 3, 3))

    def forward(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, stride=2, padding=1)

    seed = np.ones((2, 8, 16, 16))
    work = conv_multiply_adds(ts.jit(forward).ir(x, w, stage="tess"))
    grad = ts.grad(lambda x, w: (forward(x, w) * seed).sum(), argnums=0)
    # The loss is linear in the conv: its gradient program holds the input gradient's
    # convs only (4 phases: 2x2, 2x1, 1x2 and 1x1 taps over 17x17 positions).
    gradient_work = conv_multiply_adds(ts.jit(grad).ir(x, w, stage="tess"))
    assert work <= gradient_work <= 1.25 * work
