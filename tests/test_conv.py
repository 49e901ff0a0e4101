"""Convolution, pooling and padding (`tess_conv`): values and gradients of every input on
the `reference`, `cpu` and `cpu-unfused` targets against NumPy and PyTorch (float64),
gradients against central differences, and the shape errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

import tessc as ts
from tessc.dialects.builder_types import TessError
from tessc.dialects.tess_conv import conv_shape, pool_shape
from tessc.reference import interpret, parse_module

from helpers import central_difference

torch = pytest.importorskip("torch")
F = torch.nn.functional

TARGETS = ["reference", "cpu", "cpu-unfused"]


def cases(count: int, unfused: Sequence[int]) -> list[tuple[str, int]]:
    """Every case on `reference` and `cpu`; on `cpu-unfused` (a kernel per op, the slowest to
    compile) only the cases `unfused` lists, which between them cover every keyword."""
    return [(t, c) for t in ("reference", "cpu") for c in range(count)] + [
        ("cpu-unfused", c) for c in unfused
    ]


# (input shape, weight shape, keywords): stride, padding as int/tuple/"same"/"valid",
# dilation, groups, odd sizes, 1-D and 2-D.
CONV2D = [
    ((2, 4, 7, 6), (6, 2, 3, 2), {"stride": 2, "padding": 1, "groups": 2}),
    ((1, 3, 5, 8), (4, 3, 3, 3), {"padding": "same", "dilation": 2}),
    ((2, 2, 9, 7), (3, 2, 2, 3), {"stride": (2, 3), "padding": (3, 0), "dilation": (1, 2)}),
    ((1, 6, 5, 5), (6, 1, 3, 3), {"padding": "valid", "groups": 6}),
]
CONV1D = [
    ((2, 4, 9), (4, 1, 3), {"stride": 2, "padding": 2, "dilation": 2, "groups": 4}),
    ((3, 2, 6), (5, 2, 4), {"padding": "same"}),
]


def seeded(shape: Sequence[int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def torch_value_and_grads(
    f: Callable[..., Any], seed_out: np.ndarray, *args: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    tensors = [torch.tensor(a, requires_grad=True) for a in args]
    out = f(*tensors)
    (out * torch.tensor(seed_out)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in tensors]


def check_against_torch(
    target: str,
    ours: Callable[..., Any],
    theirs: Callable[..., Any],
    *args: np.ndarray,
) -> None:
    """Value and the gradient of every argument of `sum(f(args) * seed)`."""
    seed_out = seeded(theirs(*map(torch.tensor, args)).shape, 99)
    expected, expected_grads = torch_value_and_grads(theirs, seed_out, *args)

    def loss(*a: Any) -> Any:
        return (ours(*a) * seed_out).sum()

    forward = ts.jit(ours, target=target)
    np.testing.assert_allclose(forward(*args), expected, rtol=1e-10, atol=1e-10)
    argnums = tuple(range(len(args)))
    grads = ts.jit(ts.grad(loss, argnums=argnums), target=target)(*args)
    for got, want in zip(grads, expected_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("target", "case"), cases(len(CONV2D), unfused=[0, 2]))
def test_conv2d(target: str, case: int) -> None:
    x_shape, w_shape, kw = CONV2D[case]
    x, w, b = seeded(x_shape, case), seeded(w_shape, case + 10), seeded(w_shape[:1], case + 20)
    check_against_torch(
        target,
        lambda x, w, b: ts.nn.conv2d(x, w, b, **kw),
        lambda x, w, b: F.conv2d(x, w, b, **kw),
        x, w, b,
    )  # fmt: skip


@pytest.mark.parametrize(("target", "case"), cases(len(CONV1D), unfused=[0]))
def test_conv1d(target: str, case: int) -> None:
    x_shape, w_shape, kw = CONV1D[case]
    x, w = seeded(x_shape, case), seeded(w_shape, case + 10)
    check_against_torch(
        target, lambda x, w: ts.nn.conv1d(x, w, **kw), lambda x, w: F.conv1d(x, w, **kw), x, w
    )


def random_conv(seed: int) -> tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]:
    """A random conv1d/conv2d configuration: groups, stride, dilation, padding of every
    form, odd sizes."""
    rng = np.random.default_rng(seed)
    spatial = int(rng.integers(1, 3))
    groups, cg, fg = (int(v) for v in rng.integers(1, [4, 3, 3]))
    kernel = [int(k) for k in rng.integers(1, 4, spatial)]
    dilation = [int(d) for d in rng.integers(1, 3, spatial)]
    stride = [int(s) for s in rng.integers(1, 4, spatial)]
    form = rng.integers(0, 4)
    if form == 0 and stride == [1] * spatial:
        padding: Any = "same"
    elif form == 1:
        padding = "valid"
    elif form == 2:
        padding = int(rng.integers(0, 3))
    else:
        padding = tuple(int(p) for p in rng.integers(0, 3, spatial))
    pads = (
        [0] * spatial
        if isinstance(padding, str)
        else [int(p) for p in np.broadcast_to(padding, spatial)]
    )
    sizes = [
        max(d * (k - 1) + 1 - 2 * p, 1) + int(rng.integers(0, 5))
        for k, d, p in zip(kernel, dilation, pads, strict=True)
    ]
    x_shape = (int(rng.integers(1, 3)), groups * cg, *sizes)
    w_shape = (groups * fg, cg, *kernel)
    kw = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    return x_shape, w_shape, kw


@pytest.mark.parametrize("target", ["reference", "cpu"])
@pytest.mark.parametrize("seed", range(4))
def test_random_conv_configurations(target: str, seed: int) -> None:
    x_shape, w_shape, kw = random_conv(seed)
    name = "conv1d" if len(x_shape) == 3 else "conv2d"
    x, w, b = seeded(x_shape, seed), seeded(w_shape, seed + 1), seeded(w_shape[:1], seed + 2)
    check_against_torch(
        target,
        lambda x, w, b: getattr(ts.nn, name)(x, w, b, **kw),
        lambda x, w, b: getattr(F, name)(x, w, b, **kw),
        x, w, b,
    )  # fmt: skip


POOLS = [
    ("max_pool2d", (2, 3, 7, 6), (3, 2, 1)),
    ("avg_pool2d", (2, 3, 7, 6), (3, 2, 1)),
    ("max_pool2d", (1, 2, 4, 5), (2, None, 0)),
    ("max_pool1d", (2, 3, 9), (3, 1, 1)),
    ("avg_pool1d", (2, 3, 9), (2, 3, 0)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(POOLS)))
def test_pool(target: str, case: int) -> None:
    name, shape, (kernel, stride, padding) = POOLS[case]
    # Values on a grid of halves: windows with tied maxima, routed to the first.
    x = np.round(seeded(shape, case) * 2) / 2
    check_against_torch(
        target,
        lambda x: getattr(ts.nn, name)(x, kernel, stride, padding),
        lambda x: getattr(F, name)(x, kernel, stride, padding),
        x,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_pad(target: str) -> None:
    x = seeded((2, 3, 4), 0)
    widths = ((0, 1), (2, 0), (1, 3))
    got = ts.jit(lambda x: ts.pad(x, widths, constant_values=-1.5), target=target)(x)
    np.testing.assert_array_equal(got, np.pad(x, widths, constant_values=-1.5))
    got = ts.jit(lambda x: ts.pad(x, 1), target=target)(x)
    np.testing.assert_array_equal(got, np.pad(x, 1))
    check_against_torch(
        target,
        lambda x: ts.nn.pad(x, (1, 2, 0, 3), 0.5),
        lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
        x,
    )


def test_conv_gradients_match_central_differences() -> None:
    x, w = seeded((1, 2, 5, 4), 1), seeded((4, 1, 2, 3), 2)
    seed_out = seeded((1, 4, 3, 2), 3)

    def loss(x: Any, w: Any) -> Any:
        y = ts.nn.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 1), groups=2)
        return (ts.nn.max_pool2d(y.relu(), (1, 2), padding=(0, 1)) * seed_out[..., :2]).sum()

    value = ts.jit(loss, target="reference")
    dx, dw = ts.jit(ts.grad(loss, argnums=(0, 1)), target="cpu")(x, w)
    np.testing.assert_allclose(dx, central_difference(lambda v: value(v, w), x), atol=1e-6)
    np.testing.assert_allclose(dw, central_difference(lambda v: value(x, v), w), atol=1e-6)


def test_conv_bias_relu_pool_in_one_jit_matches_torch() -> None:
    x, w, b = seeded((2, 1, 8, 8), 0), seeded((4, 1, 3, 3), 1), seeded((4,), 2)

    def f(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.max_pool2d(ts.nn.conv2d(x, w, b, padding=1).relu(), 2)

    want = F.max_pool2d(F.relu(F.conv2d(*map(torch.tensor, (x, w, b)), padding=1)), 2)
    np.testing.assert_allclose(ts.jit(f)(x, w, b), want.numpy(), rtol=1e-12)


def test_unbatched_and_float32() -> None:
    x, w = seeded((3, 6, 6), 0).astype(np.float32), seeded((2, 3, 3, 3), 1).astype(np.float32)
    got = ts.jit(lambda x, w: ts.nn.conv2d(x, w, padding=1))(x, w)
    want = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# shape errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "kw", "message"),
    [
        (
            (1, 4, 5, 5),
            (2, 3, 3, 3),
            {},
            r"channel mismatch: input \(1,4,5,5\) and weight \(2,3,3,3\)",
        ),
        ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, r"groups = 2 does not divide"),
        ((1, 1, 2, 5), (1, 1, 3, 3), {}, r"kernel larger than the padded input: input \(1,1,2,5\)"),
        ((1, 1, 5, 5), (1, 1, 3, 3), {"padding": "same", "stride": 2}, "'same' needs stride 1"),
    ],
)
def test_conv_shape_errors(
    x: tuple[int, ...], w: tuple[int, ...], kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(TessError, match=message):
        ts.jit(lambda x, w: ts.nn.conv2d(x, w, **kw))(np.zeros(x), np.zeros(w))


def test_pool_and_pad_errors() -> None:
    with pytest.raises(TessError, match="exceeds half the kernel"):
        ts.jit(lambda x: ts.nn.max_pool2d(x, 2, padding=2))(np.zeros((1, 1, 4, 4)))
    with pytest.raises(TessError, match=r"kernel larger than the padded input"):
        ts.jit(lambda x: ts.nn.avg_pool1d(x, 5))(np.zeros((1, 1, 4)))
    with pytest.raises(TessError, match="non-negative"):
        ts.jit(lambda x: ts.pad(x, -1))(np.zeros((2, 2)))
    with pytest.raises(TessError, match="does not give a pair per dim"):
        ts.jit(lambda x: ts.pad(x, ((1, 1), (1, 1), (1, 1))))(np.zeros((2, 2)))
    with pytest.raises(TessError, match="not booleans"):
        ts.jit(lambda x: ts.pad(x > 0, 1))(np.zeros((2, 2)))


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_pad_of_integers(target: str) -> None:
    x = np.arange(6).reshape(2, 3)
    got = ts.jit(lambda x: ts.pad(x, ((1, 0), (0, 2)), constant_values=7), target=target)(x)
    np.testing.assert_array_equal(got, np.pad(x, ((1, 0), (0, 2)), constant_values=7))


def test_shape_rules() -> None:
    assert conv_shape((2, 4, 7, 6), (6, 2, 3, 2), (2, 2), (1, 1), (1, 1), (1, 1), 2) == (2, 6, 4, 4)
    assert pool_shape((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1)) == (2, 3, 4, 3)


def test_tess_language_spelling_prints_the_same_ir() -> None:
    source = (
        "def f(x: f64[1, 2, 6, 6], w: f64[4, 2, 3, 3]) -> f64[1, 4, 1, 1]:\n"
        "    return max_pool2d(conv2d(x, w, padding=1, stride=2), 2)\n"
    )
    module = ts.parse_tess(source, "conv.tess")
    text = str(module)
    assert "tess.conv" in text and 'kind = "max"' in text
    x, w = seeded((1, 2, 6, 6), 0), seeded((4, 2, 3, 3), 1)
    (got,) = interpret(parse_module(text), "f", [x, w])
    want = F.max_pool2d(F.conv2d(torch.tensor(x), torch.tensor(w), padding=1, stride=2), 2)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12)


def test_both_frontends_print_the_same_ops() -> None:
    def features(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.max_pool2d(ts.nn.conv2d(x, w, b, padding=1).relu(), 2)

    x, w, b = np.zeros((2, 1, 8, 8)), np.zeros((4, 1, 3, 3)), np.zeros(4)
    source = (
        "def features(x: f64[2, 1, 8, 8], w: f64[4, 1, 3, 3], b: f64[4]) -> f64[2, 4, 4, 4]:\n"
        "    return max_pool2d(relu(conv2d(x, w, b, padding=1)), 2)\n"
    )

    def ops(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if "tess." in line]

    traced = ts.jit(features).ir(x, w, b, stage="tess")
    assert ops(str(traced)) == ops(str(ts.parse_tess(source, "f.tess")))
    assert any("tess.conv" in line for line in ops(str(traced)))


def test_second_derivative_of_max_pooling_is_refused() -> None:
    def f(x: Any) -> Any:
        return (ts.nn.max_pool1d(x, 2) ** 2).sum()

    def g(x: Any) -> Any:
        return (ts.grad(f)(x) ** 2).sum()

    with pytest.raises(PassFailedException, match="max pooling's gradient"):
        ts.jit(ts.grad(g), target="reference")(np.arange(8.0).reshape(1, 1, 8))
