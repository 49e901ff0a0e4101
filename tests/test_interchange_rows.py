"""`tess-interchange-rows` on what it was made for: the softmax after a packed product's
rows (the MLP step's forward kernel), across row counts, class counts and dtypes, against
the reference interpreter; and the rows it must leave alone."""

from __future__ import annotations

import pytest

from tessc.compiler import lower
from tessc.reference import parse_module

from helpers import assert_compiles_like_reference


def forward(n: int, k: int, hidden: int, classes: int, dtype: str = "f32") -> str:
    """log_softmax(relu(x @ w1 + b1) @ w2 + b2) over the classes, as `tess` ops."""

    def t(*shape: int) -> str:
        return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"

    x, w1, b1, h = t(n, k), t(k, hidden), t(hidden), t(n, hidden)
    w2, b2, z, col = t(hidden, classes), t(classes), t(n, classes), t(n, 1)
    return f"""
func.func @f(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}, %b2: {b2}) -> {z} {{
  %0 = tess.matmul %x, %w1 : {x}, {w1} -> {h}
  %1 = tess.add %0, %b1 : {h}, {b1} -> {h}
  %2 = tess.relu %1 : {h}
  %3 = tess.matmul %2, %w2 : {h}, {w2} -> {z}
  %4 = tess.add %3, %b2 : {z}, {b2} -> {z}
  %5 = tess.reduce_max %4 dims = [1] keepdim : {z} -> {col}
  %6 = tess.sub %4, %5 : {z}, {col} -> {z}
  %7 = tess.exp %6 : {z}
  %8 = tess.sum %7 dims = [1] keepdim : {z} -> {col}
  %9 = tess.log %8 : {col}
  %10 = tess.sub %6, %9 : {z}, {col} -> {z}
  func.return %10 : {z}
}}
"""


def interchanged_nests(text: str) -> int:
    """Loops whose body starts with a loop over a block's rows (`%ii...`)."""
    loops = lower(parse_module(text), "loops", pipeline="cpu")
    lines = loops.splitlines()
    return sum(
        1
        for line, after in zip(lines, lines[1:], strict=False)
        if "scf.for" in line and "scf.for %ii" in after
    )


@pytest.mark.parametrize(
    ("n", "k", "hidden", "classes", "dtype"),
    [
        (128, 64, 128, 10, "f32"),  # the digits MLP's forward kernel
        (37, 48, 96, 3, "f32"),  # rows not a multiple of the block, 3 classes
        (64, 32, 128, 15, "f32"),
        (40, 24, 160, 10, "f64"),
    ],
)
def test_short_rows_interchanged_match_reference(
    n: int, k: int, hidden: int, classes: int, dtype: str
) -> None:
    text = forward(n, k, hidden, classes, dtype)
    assert interchanged_nests(text) >= 2  # the max and the exp-and-sum at least
    assert_compiles_like_reference(text, seed=n + classes)


def test_sixteen_classes_are_not_short() -> None:
    """A row of 16 f32 fills an AVX-512 vector: its loops stay inside the row loop."""
    text = forward(64, 32, 128, 16)
    assert interchanged_nests(text) == 0
    assert_compiles_like_reference(text, seed=3)
