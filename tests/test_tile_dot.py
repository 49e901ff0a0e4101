"""`tess-tile-dot`: dot-product nests (zip+reduce over the last dim, with a bias + relu
epilogue) register-tiled with
loop-carried accumulators, with the reference's results (kernel structure FileCheck'd in
tests/filecheck/loops/tess-tile-dot.mlir). The tiling tests take the pass's size gate
off (`ungated`: the cases are small programs); the gate's own tests run the `cpu`
pipeline as it is."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects import func, scf

import tessc as ts
from tessc import pipelines
from tessc.compiler import lower_module
from tessc.dialects import contract
from tessc.reference import parse_module

from helpers import assert_compiles_like_reference

DOT = """
func.func @f(%a: {a}, %b: {b}) -> {out} {{
  %p = tess.mul %a, %b : {a}, {b} -> {prod}
  %s = tess.sum %p dims = [{last}] : {prod} -> {out}
  func.return %s : {out}
}}
"""

LINEAR = """
func.func @f(%x: tensor<{n}x1x{k}xf64>, %w: tensor<1x{m}x{k}xf64>, %c: tensor<{m}xf64>)
    -> tensor<{n}x{m}xf64> {{
  %p = tess.mul %x, %w : tensor<{n}x1x{k}xf64>, tensor<1x{m}x{k}xf64> -> tensor<{n}x{m}x{k}xf64>
  %y = tess.sum %p dims = [2] : tensor<{n}x{m}x{k}xf64> -> tensor<{n}x{m}xf64>
  %z = tess.add %y, %c : tensor<{n}x{m}xf64>, tensor<{m}xf64> -> tensor<{n}x{m}xf64>
  %r = tess.relu %z : tensor<{n}x{m}xf64>
  func.return %r : tensor<{n}x{m}xf64>
}}
"""


@pytest.fixture
def ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `cpu` pipeline with `tess-tile-dot` tiling every dot nest (no size gate)."""
    cpu = pipelines.PIPELINES["cpu"]
    loops = cpu.passes[2].replace("tess-tile-dot,", "tess-tile-dot{min-macs=0 min-macs-long=0},")
    assert loops != cpu.passes[2]
    monkeypatch.setitem(pipelines.PIPELINES, "cpu", replace(cpu, passes=(*cpu.passes[:2], loops)))


def tensor(shape: tuple[int, ...], t: str) -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{t}>"


def dot(batch: tuple[int, ...], n: int, k: int, m: int, t: str) -> str:
    """`(a[..., :, None, :] * b[..., None, :, :]).sum(-1)`: `a @ b.T` as a zip+reduce."""
    return DOT.format(
        a=tensor((*batch, n, 1, k), t),
        b=tensor((*batch, 1, m, k), t),
        prod=tensor((*batch, n, m, k), t),
        out=tensor((*batch, n, m), t),
        last=len(batch) + 2,
    )


def tiled_nests(text: str) -> list[tuple[int, ...]]:
    """The `tess.register_tile` of each `scf.parallel` `tess-tile-dot` made."""
    lowered = lower_module(parse_module(text), "loops")
    tiles = []
    for fn in lowered.ops:
        for op in fn.walk() if isinstance(fn, func.FuncOp) else ():
            if isinstance(op, scf.ParallelOp) and op.body.block.args[-1].name_hint == "ib":
                tiles.append(contract.REGISTER_TILE.get(op))
    return tiles


CASES = [
    ((), 45, 33, 40, "f32"),  # leftover rows (45 = 11 * 4 + 1), all columns tiled
    # leftover rows and columns; 32 column tiles: blocks of 16 (below 2^17 multiply-adds:
    # larger dot nests are tess-pack-matmul's, tests/test_pack_matmul.py)
    ((), 61, 15, 130, "f32"),
    ((), 4, 2, 4, "f64"),  # one tile, k of 2
    ((), 8, 50, 300, "f64"),  # 75 column tiles: 5 blocks of 16, the last of 11
    ((3,), 6, 9, 7, "f32"),  # batched; leftover columns
]


@pytest.mark.usefixtures("ungated")
@pytest.mark.parametrize(("batch", "n", "k", "m", "t"), CASES)
def test_dot_nests_match_the_reference(
    batch: tuple[int, ...], n: int, k: int, m: int, t: str
) -> None:
    text = dot(batch, n, k, m, t)
    assert tiled_nests(text) == [(4, 4)], "the dot nest was not tiled"
    assert_compiles_like_reference(text, 5, parallel_threshold=0)


@pytest.mark.usefixtures("ungated")
def test_batched_dot_against_a_broadcast_operand() -> None:
    text = """
func.func @f(%a: tensor<2x6x1x9xf32>, %b: tensor<1x7x9xf32>) -> tensor<2x6x7xf32> {
  %p = tess.mul %a, %b : tensor<2x6x1x9xf32>, tensor<1x7x9xf32> -> tensor<2x6x7x9xf32>
  %s = tess.sum %p dims = [3] : tensor<2x6x7x9xf32> -> tensor<2x6x7xf32>
  func.return %s : tensor<2x6x7xf32>
}
"""
    assert tiled_nests(text) == [(4, 4)]
    assert_compiles_like_reference(text, 8, parallel_threshold=0)


@pytest.mark.usefixtures("ungated")
def test_linear_layer_epilogue_is_tiled_with_the_dot() -> None:
    text = LINEAR.format(n=10, k=13, m=9)
    assert tiled_nests(text) == [(4, 4)]
    assert_compiles_like_reference(text, 6, parallel_threshold=0)


@pytest.mark.parametrize(
    ("n", "k", "m"), [(1, 1, 1), (3, 8, 40), (40, 8, 3)], ids=["1x1", "3 rows", "3 columns"]
)
def test_nests_smaller_than_a_tile_are_left_alone(n: int, k: int, m: int) -> None:
    text = dot((), n, k, m, "f32")
    assert tiled_nests(text) == []
    assert_compiles_like_reference(text, 7)


def test_row_sums_are_not_dot_nests() -> None:
    text = """
func.func @f(%x: tensor<8x16x32xf32>) -> tensor<8x16xf32> {
  %0 = tess.sum %x dims = [2] : tensor<8x16x32xf32> -> tensor<8x16xf32>
  func.return %0 : tensor<8x16xf32>
}
"""
    assert tiled_nests(text) == []


@pytest.mark.usefixtures("ungated")
def test_jit_zip_reduce_over_the_last_dim_is_jammed() -> None:
    @ts.jit
    def f(a, b):
        return (a[:, None, :] * b[None, :, :]).sum(dim=-1)

    rng = np.random.default_rng(0)  # below 2^17 multiply-adds, which tess-pack-matmul takes
    a = rng.standard_normal((101, 12)).astype(np.float32)
    b = rng.standard_normal((101, 12)).astype(np.float32)
    source = f.ir(a, b, stage="numba")
    assert source.count("acc_14 = ") >= 1  # 16 accumulators carried by the k loop
    np.testing.assert_allclose(f(a, b), a @ b.T, rtol=1e-4, atol=1e-4)


GATED = [
    # (n, k, m), tiled by the default gate: 2^12 multiply-adds, 2^18 for a dot of >= 64;
    # 7 columns are narrow for tess-pack-matmul on AVX2 and AVX-512, so it leaves them
    ((15, 16, 16), False),  # 3,840: under min-macs
    ((16, 16, 16), True),  # 4,096
    ((128, 48, 10), True),  # a short dot: the plain k loop does not vectorise
    ((128, 128, 7), False),  # like the MLP step's h.T @ dz: 114,688 of a dot of 128
    ((147, 256, 7), True),  # 263,424 of a dot of 256
]


@pytest.mark.parametrize(("shape", "tiled"), GATED, ids=[f"{n}x{k}x{m}" for (n, k, m), _ in GATED])
def test_the_size_gate_tiles_only_where_it_pays(shape: tuple[int, int, int], tiled: bool) -> None:
    n, k, m = shape
    text = dot((), n, k, m, "f32")
    assert tiled_nests(text) == ([(4, 4)] if tiled else [])
    assert_compiles_like_reference(text, 3, parallel_threshold=0)
