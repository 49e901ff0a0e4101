"""
`tess-fuse`'s horizontal step (`horizontal-fc`): products sharing their right operand run
as ONE product over the stacked left operands (a view where they are adjacent slices of
one tensor, else one copy), also in a gradient (`X.T @ dY` sharing dY); results against
NumPy on random inputs across shapes, zero-size ones included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.linalg.ops import GenericOp

import tessc
from tessc.compiler import lower_module
from tessc.dialects import contract


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def adjacent(x: Any, w: Any, split: int) -> tuple:
    return x[:split] @ w, x[split:] @ w


def apart(a: Any, b: Any, c: Any, w: Any) -> tuple:
    return a @ w, (b @ w).relu(), c @ w


def two_inputs_loss(ws: list, xa: Any, xb: Any) -> Any:
    y = xa @ ws[0] + xb @ ws[1]
    return (y * y).sum()


def shared_dy(ws: list, xa: Any, xb: Any) -> Any:
    return tessc.grad(two_inputs_loss)(ws, xa, xb)


def products(function: Any, *args: Any) -> list[GenericOp]:
    fused = lower_module(tessc.trace(function, *args).module, "fused")
    return [
        op
        for op in fused.walk()
        if isinstance(op, GenericOp) and contract.ORIGIN.get(op) == "tess.matmul"
    ]


def kernel_count(function: Any, *args: Any) -> int:
    lowered = lower_module(tessc.trace(function, *args).module, "loops")
    return sum(isinstance(op, func.FuncOp) and "tess.kernel" in op.attributes for op in lowered.ops)


def stacked_report(function: Any, *args: Any) -> list[str]:
    from tessc.context import make_context
    from tessc.pipelines import run_passes

    module = tessc.trace(function, *args).module
    run_passes(module, "dce,tess-to-linalg,tess-fuse{report=true}", make_context())
    return [
        text
        for op in module.walk()
        if isinstance(op, GenericOp) and (text := contract.FC_STACKED.get(op)) is not None
    ]


@pytest.mark.parametrize(
    ("rows", "split", "k", "n"),
    [(7, 3, 4, 5), (40, 17, 33, 9), (5, 0, 3, 2), (4, 2, 0, 3), (6, 3, 5, 0)],
)
def test_adjacent_slices_stack_without_a_copy(rows: int, split: int, k: int, n: int) -> None:
    x, w = rand(rows, k), rand(k, n, seed=1)
    if 0 < split < rows:
        assert len(products(lambda x, w: adjacent(x, w, split), x, w)) == 1
        (report,) = stacked_report(lambda x, w: adjacent(x, w, split), x, w)
        assert report == "2 products, rows a view of one tensor (no copy)"
    got = tessc.jit(lambda x, w: adjacent(x, w, split))(x, w)
    for g, want in zip(got, adjacent(x, w, split), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        ((3, 2, 4), 4, 5),
        ((20, 1, 9), 33, 17),
        ((64, 40, 24), 256, 64),
        ((0, 2, 3), 3, 2),
        ((2, 3, 1), 0, 4),
    ],
)
def test_apart_left_operands_are_copied_once(m: tuple[int, int, int], k: int, n: int) -> None:
    a, b, c = (rand(rows, k, seed=s) for s, rows in enumerate(m))
    w = rand(k, n, seed=9)
    assert len(products(apart, a, b, c, w)) == 1
    # The copy runs in the product's kernel, row by row: one kernel (and the relu).
    kernels = kernel_count(apart, a, b, c, w)
    assert kernels == (2 if m[1] else 1)
    (report,) = stacked_report(apart, a, b, c, w)
    assert report.startswith("3 products, rows copied once")
    got = tessc.jit(apart)(a, b, c, w)
    want = (a @ w, np.maximum(b @ w, 0), c @ w)
    for g, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("batch", "ka", "kb", "n"), [(6, 3, 2, 5), (16, 8, 1, 4), (0, 2, 3, 4)])
def test_weight_gradients_sharing_dy_are_one_product(batch: int, ka: int, kb: int, n: int) -> None:
    xa, xb = rand(batch, ka), rand(batch, kb, seed=1)
    ws = [rand(ka, n, seed=2), rand(kb, n, seed=3)]
    # Forward: two products (different weights); backward: the two X.T @ dY as one.
    assert len(products(shared_dy, ws, xa, xb)) == 3
    got = tessc.jit(shared_dy)(ws, xa, xb)
    dy = 2 * (xa @ ws[0] + xb @ ws[1])
    for g, want in zip(got, [xa.T @ dy, xb.T @ dy], strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


def test_a_product_read_before_the_next_is_not_stacked() -> None:
    def chained(x: Any, w: Any) -> Any:
        return (x @ w) @ w  # the second left operand is the first product

    x, w = rand(4, 4), rand(4, 4, seed=1)
    assert len(products(chained, x, w)) == 2
    np.testing.assert_allclose(tessc.jit(chained)(x, w), (x @ w) @ w, rtol=1e-5, atol=1e-5)
