"""`tess-fuse`'s pool windows (lowering/fusion/fuse_pool.py): conv (+ bias) (+ relu) then a
max or average pool over non-overlapping windows is one kernel on `cpu`, with no buffer of
the conv's output; values against the reference interpreter on `cpu` and `cpu-unfused`
(odd sizes the pool floor-drops, conv stride and padding, 1-D), the refusals (overlapping
windows, a conv output also returned), a conv deep enough for `tess-conv-tiles` run as its
tiles with the pool as their epilogue (lowering/loops/conv_pool.py), and the gradients (the
backward saves the conv output: not fused)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tessc as ts


def arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def kernel_calls(ir: str) -> int:
    host = ir.split("func.func private", 1)[0]
    return len(re.findall(r"func\.call @", host))


def buffer_shapes(ir: str) -> list[str]:
    """The shape of every buffer the memory plan carves out of the arena or workspace."""
    return re.findall(r"memref\.view [^:]*: memref<\d+xi8> to memref<([\dx]+)x[fi]\d+>", ir)


def random_case(seed: int) -> tuple[Any, list[np.ndarray], tuple[int, ...]]:
    """A random conv (+ bias) (+ relu) + pool with stride == window, and the conv's shape."""
    rng = np.random.default_rng(seed)
    spatial = int(rng.integers(1, 3))
    window = int(rng.integers(2, 4))
    stride, padding = int(rng.integers(1, 3)), int(rng.integers(0, 2))
    taps = int(rng.integers(1, 4))
    # Two or more filters and images: a pool of one output row per image and filter has
    # no outer loop to share with its init's fill (a second kernel, fused or not).
    channels, filters, batch = (int(v) for v in rng.integers((1, 2, 2), 5, size=3))
    size = [int(v) for v in rng.integers(2 * window + taps, 3 * window + taps + 2, size=spatial)]
    kind = ("max", "avg")[seed % 2]
    bias, relu = seed % 3 != 0, seed % 4 != 1
    conv = ts.nn.conv1d if spatial == 1 else ts.nn.conv2d
    pool = getattr(ts.nn, f"{kind}_pool{spatial}d")

    def f(x: Any, w: Any, b: Any) -> Any:
        y = conv(x, w, b if bias else None, stride=stride, padding=padding)
        return pool(y.relu() if relu else y, window)

    x, w, b = arrays(
        seed, (batch, channels, *size), (filters, channels, *[taps] * spatial), (filters,)
    )
    out = [(n + 2 * padding - taps) // stride + 1 for n in size]
    return f, [x, w, b], (batch, filters, *out)


# The fused pool windows exist on `cpu` only: every seed runs there. `cpu-unfused` (conv and
# pool as separate kernels, the slowest to compile) is the control on one max and one avg
# seed; its conv and pool kernels are tested on every keyword by test_conv.py.
RANDOM_RUNS = [(s, "cpu") for s in range(6)] + [(s, "cpu-unfused") for s in (0, 1)]


@pytest.mark.parametrize(("seed", "target"), RANDOM_RUNS)
def test_random_conv_pools_match_reference(target: str, seed: int) -> None:
    f, args, conv_shape = random_case(seed)
    want = ts.jit(f, target="reference")(*args)
    np.testing.assert_allclose(ts.jit(f, target=target)(*args), want, rtol=1e-10, atol=1e-10)
    if target == "cpu":
        ir = ts.jit(f, target=target).ir(*args, stage="loops")
        padded = "tess.pad" in ts.jit(f, target=target).ir(*args, stage="fused")
        assert kernel_calls(ir) == 1 + padded
        assert "x".join(map(str, conv_shape)) not in buffer_shapes(ir)


def test_conv_bias_relu_max_pool_is_one_kernel_without_the_conv_buffer() -> None:
    x, w, b = arrays(0, (2, 3, 9, 9), (4, 3, 3, 3), (4,))

    def f(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.max_pool2d(ts.nn.conv2d(x, w, b).relu(), 2)

    ir = ts.jit(f).ir(x, w, b, stage="loops")
    assert kernel_calls(ir) == 1
    # The window operand and the partial sums (the pool's size); no 2x4x7x7 conv output.
    assert sorted(buffer_shapes(ir)) == ["2x2", "2x4x3x3"]
    np.testing.assert_allclose(ts.jit(f)(x, w, b), ts.jit(f, target="reference")(x, w, b))


@pytest.mark.parametrize(
    "name, f",
    [
        ("overlapping", lambda x, w: ts.nn.max_pool2d(ts.nn.conv2d(x, w).relu(), 3, 2)),
        ("returned", lambda x, w: (y := ts.nn.conv2d(x, w), ts.nn.avg_pool2d(y, 2))),
    ],
)
def test_refused_pools_keep_the_conv_kernel(name: str, f: Any) -> None:
    x, w = arrays(1, (1, 2, 9, 9), (3, 2, 3, 3))
    ir = ts.jit(f).ir(x, w, stage="loops")
    assert kernel_calls(ir) == 2, name
    want, got = ts.jit(f, target="reference")(x, w), ts.jit(f)(x, w)
    for expected, value in zip(
        *(r if isinstance(r, tuple) else (r,) for r in (want, got)), strict=True
    ):
        np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-10)


DEEP_CASES = {
    # name: (x, w, conv padding, conv stride, pool window, kind, dtype)
    "lenet2": ((64, 16, 4, 4), (32, 16, 3, 3), 1, 1, 2, "max", np.float32),
    "odd": ((3, 16, 9, 7), (12, 16, 3, 3), 1, 1, 2, "max", np.float64),
    "odd-avg": ((3, 16, 9, 7), (12, 16, 3, 3), 0, 1, 2, "avg", np.float64),
    # 5 tiles of 3 pool rows per image, 180 pixels: a partial column tile
    "tiles": ((2, 16, 30, 30), (8, 16, 3, 3), 1, 1, 2, "max", np.float64),
    "window3": ((2, 17, 11, 13), (5, 17, 2, 3), 1, 1, 3, "max", np.float64),
    "strided": ((2, 16, 11, 13), (6, 16, 3, 3), 1, 2, 2, "max", np.float32),
    "conv1d": ((2, 16, 23), (6, 16, 3), 1, 1, 2, "avg", np.float64),
}


def deep_case(name: str, seed: int = 0, ties: bool = False) -> tuple[Any, list[np.ndarray]]:
    x_shape, w_shape, padding, stride, window, kind, dtype = DEEP_CASES[name]
    conv = ts.nn.conv1d if len(x_shape) == 3 else ts.nn.conv2d
    pool = getattr(ts.nn, f"{kind}_pool{len(x_shape) - 2}d")

    def f(x: Any, w: Any, b: Any) -> Any:
        return pool(conv(x, w, b, stride=stride, padding=padding).relu(), window)

    x, w, b = arrays(seed, x_shape, w_shape, (w_shape[0],))
    if ties:  # small integers: equal maxima within windows
        x, w, b = np.round(x), np.round(w), np.round(b)
    return f, [a.astype(dtype) for a in (x, w, b)]


# Every deep case on `cpu` (the fused tiles); on `cpu-unfused` (conv tiles, then the pool)
# a float32 2-D max pool and a 1-D avg pool, as the control.
DEEP_RUNS = [(n, "cpu") for n in DEEP_CASES] + [(n, "cpu-unfused") for n in ("lenet2", "conv1d")]


@pytest.mark.parametrize(("name", "target"), DEEP_RUNS)
def test_a_deep_conv_pool_is_one_tiled_kernel(target: str, name: str) -> None:
    """From 16 channels the fused nest runs as im2col tiles with the pool as their
    epilogue (lowering/loops/conv_pool.py): one kernel (and the padding's), `micro.mma`,
    no buffer of the conv's output."""
    f, args = deep_case(name)
    want = ts.jit(f, target="reference")(*args)
    tol = 1e-4 if args[0].dtype == np.float32 else 1e-10
    np.testing.assert_allclose(ts.jit(f, target=target)(*args), want, rtol=tol, atol=tol)
    if target == "cpu":
        ir = ts.jit(f).ir(*args, stage="loops")
        padded = "tess.pad" in ts.jit(f).ir(*args, stage="fused")
        assert "micro.mma" in ir and kernel_calls(ir) == 1 + padded
        assert "conv_tile" in ir
        x_shape, w_shape, padding, stride = DEEP_CASES[name][:4]
        conv = [
            (n + 2 * padding - k) // stride + 1
            for n, k in zip(x_shape[2:], w_shape[2:], strict=True)
        ]
        conv_shape = "x".join(map(str, (x_shape[0], w_shape[0], *conv)))
        assert conv_shape not in buffer_shapes(ir)


def test_a_deep_conv_whose_pool_skips_columns_is_left_to_conv_tiles() -> None:
    x, w = arrays(2, (1, 16, 8, 8), (4, 16, 3, 3))

    def f(x: Any, w: Any) -> Any:
        return ts.nn.max_pool2d(ts.nn.conv2d(x, w).relu(), 2, 3)

    ir = ts.jit(f).ir(x, w, stage="loops")
    assert "micro.mma" in ir and kernel_calls(ir) == 2
    np.testing.assert_allclose(ts.jit(f)(x, w), ts.jit(f, target="reference")(x, w), rtol=1e-10)


@pytest.mark.parametrize(
    ("name", "targets"), [("window3", ("cpu",)), ("conv1d", ("cpu", "cpu-unfused"))]
)
def test_gradients_through_a_deep_conv_pool(name: str, targets: tuple[str, ...]) -> None:
    """Gradients (max pool's to the first maximum of each window: small-integer data has
    ties) against the reference interpreter. The "odd" case (the same program, ties and
    none) is test_gradients_of_conv_relu_max_pool_match_torch's, against PyTorch."""
    f, args = deep_case(name, seed=5, ties=True)
    seed = arrays(6, ts.jit(f, target="reference")(*args).shape)[0]

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (f(x, w, b) * seed).sum()

    grad = ts.grad(loss, argnums=(0, 1, 2))
    want = ts.jit(grad, target="reference")(*args)
    for target in targets:
        for got, expected in zip(ts.jit(grad, target=target)(*args), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_gradients_through_a_fusable_conv_pool() -> None:
    x, w, b = arrays(3, (2, 2, 7, 7), (3, 2, 2, 2), (3,))
    seed = arrays(4, (2, 3, 3, 3))[0]

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (ts.nn.max_pool2d(ts.nn.conv2d(x, w, b).relu(), 2) * seed).sum()

    grad = ts.grad(loss, argnums=(0, 1, 2))
    want = ts.jit(grad, target="reference")(x, w, b)
    for target in ("cpu", "cpu-unfused"):
        for got, expected in zip(ts.jit(grad, target=target)(x, w, b), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("ties", [False, True])
def test_gradients_of_conv_relu_max_pool_match_torch(ties: bool) -> None:
    """relu's gradient under a max pool is masked on the pooled values (autodiff's
    `routed_relu_grad`, so the forward conv writes no output): against PyTorch in float64,
    ties (small integers, and all-negative windows after relu) routed to the first maximum.
    On `cpu` (the fused forward) and the reference; the unfused pipeline's routing is
    test_gradients_through_a_fusable_conv_pool's."""
    torch = pytest.importorskip("torch")
    f, args = deep_case("odd", seed=7, ties=ties)
    seed = arrays(8, (3, 12, 4, 3))[0]

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (f(x, w, b) * seed).sum()

    tensors = [torch.tensor(a, requires_grad=True) for a in args]
    y = torch.nn.functional.conv2d(tensors[0], tensors[1], tensors[2], padding=1)
    (torch.nn.functional.max_pool2d(y.relu(), 2) * torch.tensor(seed)).sum().backward()
    grad = ts.grad(loss, argnums=(0, 1, 2))
    for target in ("cpu", "reference"):
        for got, t in zip(ts.jit(grad, target=target)(*args), tensors, strict=True):
            np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_cnn_train_step_fuses_each_conv_with_its_pools() -> None:
    """examples/train_cnn.py's step: each conv + bias + relu computes inside the windows of
    its max pool and of that pool's argmax (the backward's routing): no forward conv output
    is written, conv2 (16 channels) runs as conv tiles with the pools as their epilogue; 37
    kernels (42 with both conv outputs written and the pools apart)."""
    from helpers.examples import load_example

    example = load_example("train_cnn")
    optimizer = ts.optim.SGD(lr=0.05, momentum=0.9)
    step = example.make_train_step(optimizer, "cpu")
    params = example.init_params()
    rng = np.random.default_rng(0)
    x = rng.random((200, 1, 8, 8), dtype=np.float32)
    y = rng.integers(0, 10, 200)
    ir = step.ir(params, optimizer.init(params), x, y, np.arange(64), stage="loops")
    # 42 before the pools fused into the tiles, 37 after, 35 with the bias gradients'
    # column sums taking their zero fill into their kernels (tess-fuse-epilogue).
    assert kernel_calls(ir) == 35
    assert re.search(r"micro\.mma %params_w2\[[^]]*\], %patch\[%slot\], [^,]*, %conv_tile\[", ir)
