"""
`tess-row-dots`: the dot products of a packed kernel's row loop, run as `micro.mma` tiles
over its rows, compute what the reference interpreter does.

The programs are `relu(x @ w1 + b1) @ w2` (the digits MLP's forward shape): `x @ w1` packed
(`tess-pack-matmul` with small-shape options), `@ w2` narrow (`tess-pack-narrow` with a
wider limit, so 1 to 40 columns become dot products), fused into the packed kernel's row
loop, where this pass tiles them (`min-cols=1`). Rows the tile does not divide (the rows
left over keep their dots), columns that fill part of a vector (the tile reads the next
row of packed `b`, and zeros after the last) or several panels (128-bit vectors), a batch
dim, f32 and f64, one thread and two.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tessc.lowering.codegen.to_numba import emit_numba
from tessc.lowering.loops.row_dots import choose_tile
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret, parse_module
from tessc.runtime import Executable, load_source

from helpers import assert_results_match, random_inputs

PACK = "tess-pack-matmul{min-work=1 min-rows=1 vector-bits=512}"
NARROW = "tess-pack-narrow{narrow-cols=41 min-depth=1}"
"""Products of up to 40 columns as dot products; the hidden layers (48+) stay wide."""


def t(shape: tuple[int, ...], dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def dense_then_narrow(
    n: int, k1: int, k: int, m: int, dtype: str = "f32", batch: tuple[int, ...] = ()
) -> str:
    x, w1, b1, w2 = t((*batch, n, k1), dtype), t((k1, k), dtype), t((k,), dtype), t((k, m), dtype)
    h, out = t((*batch, n, k), dtype), t((*batch, n, m), dtype)
    return f"""
func.func @main(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}) -> {out} {{
  %0 = tess.matmul %x, %w1 : {x}, {w1} -> {h}
  %1 = tess.add %0, %b1 : {h}, {b1} -> {h}
  %2 = tess.relu %1 : {h}
  %3 = tess.matmul %2, %w2 : {h}, {w2} -> {out}
  func.return %3 : {out}
}}
"""


def lowered(text: str, row_dots: str) -> ModuleOp:
    spec = get_pipeline("cpu").spec
    spec = spec.replace("tess-pack-narrow", NARROW).replace("tess-pack-matmul", PACK)
    module = parse_module(text)
    run_passes(module, spec.replace("tess-row-dots", row_dots))
    module.verify()
    return module


CASES: dict[str, tuple[str, int]] = {
    # name: (program, vector bits of the row-dots tile)
    "10-cols-37-rows": (dense_then_narrow(37, 12, 48, 10), 512),
    "1-col": (dense_then_narrow(29, 8, 50, 1), 512),
    "16-cols": (dense_then_narrow(24, 16, 64, 16), 512),
    "17-cols-two-panels": (dense_then_narrow(21, 9, 49, 17), 128),
    "10-cols-f64": (dense_then_narrow(35, 10, 52, 10, "f64"), 512),
    "40-cols-f64-three-panels": (dense_then_narrow(19, 7, 56, 40, "f64"), 256),
    "3-cols-f64-avx2": (dense_then_narrow(26, 5, 48, 3, "f64"), 256),
    "batched-3x13": (dense_then_narrow(13, 8, 48, 10, batch=(3,)), 512),
}


@pytest.mark.parametrize("case", CASES)
def test_row_dots_match_reference(case: str) -> None:
    text, bits = CASES[case]
    module = parse_module(text)
    inputs = random_inputs(next(iter(module.ops)), seed=3)  # type: ignore[arg-type]
    expected = interpret(module, "main", inputs)
    tiled = lowered(text, f"tess-row-dots{{min-cols=1 vector-bits={bits}}}")
    ir = str(tiled)
    cols = inputs[3].shape[1]
    tile = choose_tile(cols, bits, 64 if "f64" in case else 32)
    rows = re.findall(rf"rows = (\d+) : i64, cols = {tile.width} : i64, lanes = {tile.lanes} ", ir)
    assert rows and all(int(r) <= tile.rows for r in rows)
    assert ir.count("%dt[") >= tile.panels + 1  # the panels' tiles and the copy
    source = emit_numba(tiled, parallel_threshold=1 << 60)
    assert_results_match(
        Executable(load_source(source), "main")(*inputs), expected, rtol=1e-5, atol=1e-5
    )


def test_row_dots_gate_and_tile() -> None:
    """A dot nest of fewer columns than half a vector stays as it is (it lost: 4 columns of
    f32 on AVX-512, 0.92x); the tile fits the accumulators in the registers."""
    text = dense_then_narrow(32, 8, 48, 4)
    assert "%dt" not in str(lowered(text, "tess-row-dots{vector-bits=512}"))
    assert "%dt" in str(lowered(text, "tess-row-dots{vector-bits=256}"))
    assert choose_tile(10, 512, 32) == choose_tile(16, 512, 32)
    assert (choose_tile(10, 256, 32).rows, choose_tile(10, 256, 32).width) == (6, 16)
    assert choose_tile(10, 256, 32, 32).rows == 4  # dividing a 32-row block
    assert choose_tile(10, 512, 32, 32).rows == 16
    assert choose_tile(10, 512, 32, 37).rows == 16  # no divisor down to 9: rows left over
    assert choose_tile(10, 512, 32, 6).rows == 6  # a block of 6 rows: one tile
    assert (choose_tile(100, 512, 32).width, choose_tile(100, 512, 32).panels) == (64, 2)


def test_parallel_row_dots_match_reference() -> None:
    """In a parallel packed kernel each thread tiles into its own rows of the scratch."""
    import numba

    text = dense_then_narrow(48, 8, 48, 10)
    module = parse_module(text)
    inputs = random_inputs(next(iter(module.ops)), seed=4)  # type: ignore[arg-type]
    tiled = lowered(text, "tess-row-dots{vector-bits=512}")
    source = emit_numba(tiled, parallel_threshold=1)
    assert "in prange(" in source and "%dt" in str(tiled)
    program = Executable(load_source(source), "main")
    expected = interpret(module, "main", inputs)
    previous = numba.get_num_threads()
    try:
        for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(threads)
            assert_results_match(program(*inputs), expected, rtol=1e-5, atol=1e-5)
    finally:
        numba.set_num_threads(previous)
    assert np.isfinite(expected[0]).all()
