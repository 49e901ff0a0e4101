"""`tess-conv-tiles`' im2col form (lowering/loops/conv_im2col.py), forced on
(`algorithm=im2col`): values and gradients against the reference interpreter and PyTorch in
float64 (stride, padding, dilation, few channels, 1-D, a zero-size batch), the rule's
choice (`auto`), and the patch buffer's bound in the memory plan."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

import tessc as ts
from tessc import pipelines
from tessc.lowering.loops.conv_im2col import PATCH_BYTES
from tessc.lowering.loops.conv_tiles import TessConvTilesPass

# (input shape, weight shape, keywords): a handful, small (the suite's CI budget).
CASES = [
    ((2, 3, 7, 9), (5, 3, 3, 3), {"padding": 1}),  # few channels (the direct form's gap)
    ((2, 16, 9, 11), (8, 16, 3, 3), {"stride": 2, "padding": 1}),  # strided columns
    ((1, 4, 10, 12), (6, 4, 3, 2), {"dilation": (2, 1), "padding": (1, 0)}),
    ((2, 16, 6, 7), (16, 16, 1, 1), {}),  # 1x1: the patch is a copy of the input
]


def with_algorithm(algorithm: str, options: str = "") -> pipelines.Pipeline:
    base = pipelines.PIPELINES["cpu"]
    step = f"tess-conv-tiles{{algorithm={algorithm}{options}}},"
    return dataclasses.replace(
        base, passes=tuple(p.replace("tess-conv-tiles,", step) for p in base.passes)
    )


@pytest.fixture
def im2col(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The `cpu` pipeline with the im2col form forced on."""
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", with_algorithm("im2col"))
    yield


def arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def patched_kernels(fn: Any, *args: np.ndarray) -> int:
    """Kernels with a patch buffer (`tess-hoist-scratch` makes it a trailing argument)."""
    return len(re.findall(r"%patch: memref<", ts.jit(fn).ir(*args, stage="loops")))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_im2col_values_and_gradients_match_reference(im2col: None, case: int) -> None:
    x_shape, w_shape, kw = CASES[case]
    x, w, b = arrays(case, x_shape, w_shape, (w_shape[0],))

    def f(x: Any, w: Any, b: Any) -> Any:
        return ts.nn.conv2d(x, w, b, **kw).relu()

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (f(x, w, b) ** 2).sum()

    grad = ts.grad(loss, argnums=(0, 1, 2))
    assert patched_kernels(f, x, w, b) == 1
    assert patched_kernels(grad, x, w, b) >= 2  # the forward and the input gradient's conv
    np.testing.assert_allclose(
        ts.jit(f)(x, w, b), ts.jit(f, target="reference")(x, w, b), rtol=1e-10, atol=1e-10
    )
    got, want = ts.jit(grad)(x, w, b), ts.jit(grad, target="reference")(x, w, b)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-9)


def test_im2col_against_pytorch_float64(im2col: None) -> None:
    torch = pytest.importorskip("torch")
    x, w, b = arrays(11, (2, 6, 9, 8), (4, 6, 3, 3), (4,))
    kw = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2)}

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (ts.nn.conv2d(x, w, b, **kw).relu() ** 2).sum()

    got = ts.jit(ts.value_and_grad(loss, argnums=(0, 1, 2)))(x, w, b)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    want = (torch.nn.functional.conv2d(tx, tw, tb, **kw).relu() ** 2).sum()
    want.backward()
    np.testing.assert_allclose(got[0], want.item(), rtol=1e-10)
    for g, t in zip(got[1], (tx, tw, tb), strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_im2col_weight_gradient_compiled_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A strided, dilated conv's weight gradient gathered, its kernel a parfor (two threads
    asked for, whatever the machine has). It gave wrong values: the output's (N, F, O) view
    was made outside the parallel loop, Numba passed view and output to the loop's body as
    two arguments it marked `noalias`, and the zero fill's stores moved past the products'
    loads (conv_match.output_rows)."""
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", with_algorithm("im2col", " threads=2"))
    kw = {"stride": (2, 3), "padding": (3, 0), "dilation": (1, 2)}
    x, w, seed = arrays(2, (2, 2, 9, 7), (3, 2, 2, 3), (2, 3, 7, 1))

    def loss(x: Any, w: Any) -> Any:
        return (ts.nn.conv2d(x, w, **kw) * seed).sum()

    grad = ts.grad(loss, argnums=(0, 1))
    source = ts.jit(grad).ir(x, w, stage="numba")
    gathered = [k for k in source.split("\n\n\n") if "patch[" in k]
    assert gathered and all("prange(" in k for k in gathered)
    got, want = ts.jit(grad)(x, w), ts.jit(grad, target="reference")(x, w)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)


def test_im2col_conv1d_and_zero_batch(im2col: None) -> None:
    x, w = arrays(4, (3, 5, 30), (7, 5, 3))

    def f(x: Any, w: Any) -> Any:
        return ts.nn.conv1d(x, w, stride=2, padding=1)

    assert patched_kernels(f, x, w) == 1
    np.testing.assert_allclose(
        ts.jit(f)(x, w), ts.jit(f, target="reference")(x, w), rtol=1e-10, atol=1e-10
    )
    empty = np.zeros((0, 5, 30))
    assert ts.jit(f)(empty, w).shape == (0, 7, 15)


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kw", "form"),
    [
        ((2, 16, 8, 20), (8, 16, 3, 3), {"padding": 1}, "direct"),  # deep, unit stride
        ((2, 16, 9, 21), (8, 16, 3, 3), {"stride": 2}, "im2col"),  # strided columns
        ((2, 16, 4, 4), (32, 16, 3, 3), {"padding": 1}, "im2col"),  # rows under a vector
        ((2, 16, 4, 4), (8, 16, 3, 3), {"padding": 1}, "direct"),  # ... but few filters
        ((2, 16, 6, 20), (32, 16, 1, 1), {}, "im2col"),  # one tap: the gather is a copy
        ((2, 8, 8, 20), (8, 8, 3, 3), {"padding": 1}, "im2col"),  # 8 channels, 72 deep
        ((2, 3, 8, 20), (8, 3, 3, 3), {"padding": 1}, "plain"),  # 27 deep: plain is as fast
        ((2, 4, 9, 21), (8, 4, 3, 3), {"stride": 2}, "im2col"),  # strided, 36 deep
        ((2, 3, 9, 21), (8, 3, 3, 3), {"stride": 2}, "im2col"),  # strided: plain is slow
    ],
)
def test_auto_rule_picks_per_shape(x_shape: Any, w_shape: Any, kw: Any, form: str) -> None:
    x, w = arrays(2, x_shape, w_shape)
    ir = ts.jit(lambda x, w: ts.nn.conv2d(x, w, **kw)).ir(x, w, stage="loops")
    took = "im2col" if "%patch" in ir else "direct" if "micro.mma" in ir else "plain"
    assert took == form


def byte_figures(ir: str) -> dict[str, int]:
    host = next(line for line in ir.splitlines() if "func.func @" in line)
    return {name: int(value) for name, value in re.findall(r"tess\.(\w+_bytes) = (\d+)", host)}


def test_resnet_shape_im2col_scratch_is_bounded(im2col: None) -> None:
    """The patch is one cache-sized slot per thread in the workspace, not an image's
    im2col matrix (8 x 576 x 3136 floats, 58 MB)."""
    x = np.zeros((8, 64, 56, 56), np.float32)
    w = np.zeros((64, 64, 3, 3), np.float32)
    b = np.zeros(64, np.float32)
    ir = ts.jit(lambda x, w, b: ts.nn.conv2d(x, w, b, padding=1).relu()).ir(x, w, b, stage="loops")
    patches = re.findall(r"memref\.view [^\n]*to memref<(\d+)xf32>", ir)
    padded = 8 * 64 * 58 * 58 * 4
    assert len(patches) == 1
    patch = int(patches[0]) * 4  # one slot per thread, whole output rows of 576 values
    row = 576 * 56 * 4
    slot = max(r * row for r in (1, 2, 4, 7, 8) if r * row <= PATCH_BYTES)
    assert patch % slot == 0 and 1 <= patch // slot <= 64
    assert byte_figures(ir)["workspace_bytes"] == padded + patch
    assert patch // slot * PATCH_BYTES < 8 * 576 * 3136 * 4 // 8  # vs the whole matrix


def test_patches_share_one_scratch_region_outside_the_plan() -> None:
    """Two gathered convs (strided: `auto` gathers them): each patch lives only while its
    kernel runs, both are views at the same workspace offset past the planned arena, and
    the plan's peak (the conv between them and the output) holds neither."""
    x, w1, w2 = (np.zeros(s, np.float32) for s in ((2, 16, 33, 33), (32, 16, 3, 3), (16, 32, 3, 3)))

    def f(x: Any, w1: Any, w2: Any) -> Any:
        return ts.nn.conv2d(ts.nn.conv2d(x, w1, stride=2).relu(), w2, stride=2)

    ir = ts.jit(f).ir(x, w1, w2, stage="loops")
    patches = re.findall(r"memref\.view %workspace\[(%\w+)\]\[\] : [^\n]* to memref<(\d+)xf32>", ir)
    assert len(patches) == 2 and patches[0][0] == patches[1][0]
    figures = byte_figures(ir)
    hidden, out = 2 * 32 * 16 * 16 * 4, 2 * 16 * 7 * 7 * 4
    assert figures["peak_bytes"] == figures["live_peak_bytes"] == hidden + out
    largest = max(int(size) for _, size in patches) * 4
    assert figures["workspace_bytes"] == figures["arena_bytes"] + largest


@pytest.mark.parametrize("algorithm", ["auto", "im2col"])
def test_grouped_convs_run_the_plain_nest(monkeypatch: pytest.MonkeyPatch, algorithm: str) -> None:
    """The rule for groups > 1: neither form, forced or not. Their nest is over (N, G, F/G,
    O) with a 5-D input and weight, which `match_conv` leaves (conv_tiles.py)."""
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", with_algorithm(algorithm))
    x, w = arrays(5, (2, 32, 9, 21), (32, 16, 3, 3))

    def f(x: Any, w: Any) -> Any:
        return ts.nn.conv2d(x, w, stride=(1, 2), padding=1, groups=2)

    ir = ts.jit(f).ir(x, w, stage="loops")
    assert "%patch" not in ir and "micro.mma" not in ir
    np.testing.assert_allclose(
        ts.jit(f)(x, w), ts.jit(f, target="reference")(x, w), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("algorithm", ["auto", "im2col"])
def test_strided_conv_input_gradient_phases_are_tiled(
    monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    """A stride-2 conv's input gradient is one stride-1 conv per phase of the output
    gradient with a strided, reversed view of the weight (`memref.subview` of step 2): the
    conv forms read that view where it lies (each phase a `micro.mma` kernel, not the plain
    nest: 159 ms plain at the bench's shape)."""
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", with_algorithm(algorithm, " threads=2"))
    x, w, seed = arrays(6, (2, 16, 14, 13), (32, 16, 3, 3), (2, 32, 7, 7))

    def loss(x: Any, w: Any) -> Any:
        return (ts.nn.conv2d(x, w, stride=2, padding=1) * seed).sum()

    grad = ts.grad(loss, argnums=0)
    ir = ts.jit(grad).ir(x, w, stage="loops")
    strided_mma = re.compile(r"micro\.mma [^\n]*\} : memref<[^\n]*strided<")
    tiled = [k for k in ir.split("func.func private")[1:] if strided_mma.search(k)]
    assert len(tiled) == 4  # the four phases: 2x2, 2x1, 1x2 and 1x1 taps
    np.testing.assert_allclose(
        ts.jit(grad)(x, w), ts.jit(grad, target="reference")(x, w), rtol=1e-10, atol=1e-10
    )


def test_default_cpu_pipeline_runs_the_auto_rule() -> None:
    loops = pipelines.PIPELINES["cpu"].passes[-1]
    assert "tess-conv-tiles," in loops and TessConvTilesPass().algorithm == "auto"


def test_unknown_algorithm_is_a_diagnostic() -> None:
    with pytest.raises(DiagnosticException, match="algorithm must be one of auto, direct, im2col"):
        TessConvTilesPass(algorithm="fast").apply(Context(), ModuleOp([]))
