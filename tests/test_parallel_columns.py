"""`tess-parallel-columns`: reductions over leading dims become parallel over column blocks,
with the reference's results (and the kernel structure FileCheck'd in
tests/filecheck/loops/tess-parallel-columns.mlir)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func, scf

import tessc as ts
from tessc.compiler import lower_module
from tessc.reference import parse_module

from helpers import assert_compiles_like_reference

SUM = """
func.func @f(%x: {x}) -> {out} {{
  %0 = tess.{op} %x dims = [{dims}]{keep} : {x} -> {out}
  func.return %0 : {out}
}}
"""


def tensor(shape: list[int], t: str) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{t}>"


def program(shape: tuple[int, ...], dims: tuple[int, ...], op: str, keep: bool, t: str) -> str:
    out = [1 if d in dims else n for d, n in enumerate(shape) if keep or d not in dims]
    return SUM.format(
        x=tensor(list(shape), t),
        out=tensor(out, t),
        dims=", ".join(map(str, dims)),
        keep=" keepdim" if keep else "",
        op=op,
    )


def parallel_kernels(text: str) -> list[str]:
    """Names of the kernels whose outermost loop is an `scf.parallel` over `jb` blocks."""
    lowered = lower_module(parse_module(text), "loops")
    names = []
    for fn in lowered.ops:
        if not isinstance(fn, func.FuncOp):
            continue
        for op in fn.body.block.ops:
            if isinstance(op, scf.ParallelOp) and op.body.block.args[0].name_hint == "jb":
                names.append(fn.sym_name.data)
    return names


CASES = [
    ((300, 100), (0,), "sum", False, "f32"),  # 100 columns: blocks of 32, the last of 4
    ((37, 128), (0,), "mean", False, "f64"),
    ((5, 7, 96), (0, 1), "sum", False, "f32"),
    ((9, 40), (0,), "sum", True, "f64"),  # keepdim: the column index is the second
    ((64, 33), (0,), "reduce_max", False, "f32"),
]


@pytest.mark.parametrize(("shape", "dims", "op", "keep", "t"), CASES)
def test_column_reductions_match_the_reference(
    shape: tuple[int, ...], dims: tuple[int, ...], op: str, keep: bool, t: str
) -> None:
    text = program(shape, dims, op, keep, t)
    assert parallel_kernels(text), "the column nest was not split"
    assert_compiles_like_reference(text, 3, parallel_threshold=0)


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((64, 512), (1,)), ((4096, 16), (0,)), ((30, 40), (0, 1))],
    ids=["row sum: parallel already", "16 columns: too narrow", "full sum: no column"],
)
def test_other_reductions_are_left_alone(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    assert parallel_kernels(program(shape, dims, "sum", False, "f32")) == []


def test_jit_column_sum_is_a_prange() -> None:
    @ts.jit
    def colsum(x):
        return x.sum(dim=0)

    x = np.random.default_rng(0).standard_normal((4096, 512)).astype(np.float32)
    source = colsum.ir(x, stage="numba")
    assert "for jb in prange(8):" in source
    np.testing.assert_allclose(colsum(x), x.sum(0, dtype=np.float64), rtol=1e-4, atol=1e-3)
