"""
`tess-tile`: tiled contraction kernels compute what the untiled ones and the reference do.

Programs run through the `cpu` pipeline with `tess-tile{...}` after `tess-linalg-to-loops`,
compiled by Numba, and are compared with `tessc.reference.interpret`: matmuls (2-D,
batched, odd sizes, sizes the tiles do not divide, k or rows of extent 1), the seed's
zip+reduce with and without keepdim, f32 and f64. Without fast-math the tiled kernels are
bit-identical to the untiled ones (every output element sums its k terms in the same
order). Structural tests pin the tiles chosen, the loops counting from 0, and the nests
the pass must leave alone.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from tessc.compiler import print_module
from tessc.context import make_context
from tessc.dialects import contract
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.lowering.loops.tile import TessTilePass
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret
from tessc.runtime import Executable, load_source

from helpers import assert_results_match, random_inputs, random_program

SMALL_TILES = "tess-tile{tile-sizes=4,4,4 register-tile=2,3}"


UNGROUPED = "tess-to-linalg,tess-fuse,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops"
"""Contractions alone in their kernels (no `tess-fuse-epilogue` groups): perfect nests."""


def ungated(tile: str) -> str:
    """`tile` (a `tess-tile{...}` spec) with its size gate off: the programs here are small
    (the gate is FileCheck'd in tests/filecheck/loops/tess-tile.mlir)."""
    options = tile.removeprefix("tess-tile").strip("{}")
    return f"tess-tile{{{options} min-macs=0 short-depth=0}}".replace("{ ", "{")


def pipeline(tile: str | None, base: str = "cpu") -> str:
    """`base` (the `cpu` pipeline, or `UNGROUPED`) without its own `tess-tile`, with `tile`
    (ungated) right after `tess-linalg-to-loops`."""
    spec = get_pipeline("cpu").spec if base == "cpu" else f"{UNGROUPED},canonicalize,cse"
    spec = re.sub(r",tess-tile(?!-)(\{[^}]*\})?", "", spec)
    return (
        spec
        if tile is None
        else spec.replace("tess-linalg-to-loops", f"tess-linalg-to-loops,{ungated(tile)}")
    )


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def lowered(module: ModuleOp, tile: str | None, base: str = "cpu") -> ModuleOp:
    result = module.clone()
    run_passes(result, pipeline(tile, base))
    result.verify()
    return result


def compiled(
    module: ModuleOp, entry: str, tile: str | None, base: str = "cpu", **codegen: object
) -> Executable:
    source = emit_numba(lowered(module, tile, base), **codegen)  # type: ignore[arg-type]
    return Executable(load_source(source), entry)


def matmul(lhs: tuple[int, ...], rhs: tuple[int, ...], dtype: str = "f32") -> str:
    from tessc.dialects.tess import matmul_shape

    out = matmul_shape(lhs, rhs)

    def t(shape: tuple[int, ...]) -> str:
        return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"

    return (
        f"func.func @main(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(out)} {{\n"
        f"  %c = tess.matmul %a, %b : {t(lhs)}, {t(rhs)} -> {t(out)}\n"
        f"  func.return %c : {t(out)}\n}}\n"
    )


def seed(n: int, k: int, m: int, *, keepdim: bool = False) -> str:
    out = f"{n}x1x{m}" if keepdim else f"{n}x{m}"
    keep = " keepdim" if keepdim else ""
    return f"""
func.func @main(%a: tensor<{n}x{k}x1xf32>, %b: tensor<1x{k}x{m}xf32>) -> tensor<{out}xf32> {{
  %z = tess.mul %a, %b : tensor<{n}x{k}x1xf32>, tensor<1x{k}x{m}xf32> -> tensor<{n}x{k}x{m}xf32>
  %s = tess.sum %z dims = [1]{keep} : tensor<{n}x{k}x{m}xf32> -> tensor<{out}xf32>
  func.return %s : tensor<{out}xf32>
}}
"""


MATMUL_BIAS_RELU = """
func.func @main(%x: tensor<9x7xf32>, %w: tensor<7x11xf32>, %b: tensor<11xf32>) -> tensor<9x11xf32> {
  %m = tess.matmul %x, %w : tensor<9x7xf32>, tensor<7x11xf32> -> tensor<9x11xf32>
  %y = tess.add %m, %b : tensor<9x11xf32>, tensor<11xf32> -> tensor<9x11xf32>
  %r = tess.relu %y : tensor<9x11xf32>
  func.return %r : tensor<9x11xf32>
}
"""

# Two layers: with epilogue groups, one kernel holding two contractions, a fill and an
# epilogue per row.
MLP = """
func.func @main(%x: tensor<9x7xf32>, %w: tensor<7x11xf32>, %b: tensor<11xf32>,
                %w2: tensor<11x5xf32>) -> tensor<9x5xf32> {
  %m = tess.matmul %x, %w : tensor<9x7xf32>, tensor<7x11xf32> -> tensor<9x11xf32>
  %y = tess.add %m, %b : tensor<9x11xf32>, tensor<11xf32> -> tensor<9x11xf32>
  %r = tess.relu %y : tensor<9x11xf32>
  %m2 = tess.matmul %r, %w2 : tensor<9x11xf32>, tensor<11x5xf32> -> tensor<9x5xf32>
  func.return %m2 : tensor<9x5xf32>
}
"""

# Summed over two dims: the outer reduction loop stays outside the k blocks.
SEED_TWO_REDUCTIONS = """
func.func @main(%a: tensor<6x3x4x1xf32>, %b: tensor<1x3x4x5xf32>) -> tensor<6x5xf32> {
  %z = tess.mul %a, %b : tensor<6x3x4x1xf32>, tensor<1x3x4x5xf32> -> tensor<6x3x4x5xf32>
  %s = tess.sum %z dims = [1, 2] : tensor<6x3x4x5xf32> -> tensor<6x5xf32>
  func.return %s : tensor<6x5xf32>
}
"""

CASES: dict[str, tuple[str, str]] = {
    "matmul-7x13x5-small-tiles": (matmul((7, 13), (13, 5)), SMALL_TILES),
    "matmul-37x29x41-not-divisible": (
        matmul((37, 29), (29, 41)),
        "tess-tile{tile-sizes=16,8,16 register-tile=4,4}",
    ),
    "matmul-64x48x80-defaults": (matmul((64, 48), (48, 80)), "tess-tile"),
    "matmul-f64-9x11x13": (
        matmul((9, 11), (11, 13), "f64"),
        "tess-tile{tile-sizes=4,8,8 register-tile=3,2}",
    ),
    "batched-3x10x7-7x9": (matmul((3, 10, 7), (7, 9)), SMALL_TILES),
    "batched-broadcast-2x1x5x6-3x6x4": (matmul((2, 1, 5, 6), (3, 6, 4)), SMALL_TILES),
    "outer-product-k1": (matmul((6, 1), (1, 10)), SMALL_TILES),
    "vector-matrix-n1": (matmul((1, 9), (9, 10)), SMALL_TILES),
    "matrix-vector-m1": (matmul((10, 9), (9, 1)), SMALL_TILES),
    "seed-7x13x5": (seed(7, 13, 5), SMALL_TILES),
    "seed-keepdim-10x6x9": (seed(10, 6, 9, keepdim=True), "tess-tile{register-tile=4,4}"),
    "matmul-bias-relu": (MATMUL_BIAS_RELU, SMALL_TILES),
    "mlp-two-layers": (MLP, "tess-tile{tile-sizes=4,4,4 register-tile=2,2}"),
    "seed-two-reduction-dims": (
        SEED_TWO_REDUCTIONS,
        "tess-tile{tile-sizes=4,2,4 register-tile=2,2}",
    ),
}


RUNS = [(case, "cpu") for case in CASES] + [
    (case, "ungrouped")
    for case in (
        "matmul-37x29x41-not-divisible",
        "batched-broadcast-2x1x5x6-3x6x4",
        "seed-7x13x5",
        "seed-two-reduction-dims",
        "matmul-bias-relu",
    )
]


@pytest.mark.parametrize(("case", "base"), RUNS)
def test_tiled_program_matches_reference(case: str, base: str) -> None:
    """Through the `cpu` pipeline (contractions grouped with their inits and epilogues by
    `tess-fuse-epilogue`) and without groups (perfect nests)."""
    text, tile = CASES[case]
    module = parse(text)
    fn = next(iter(module.ops))
    inputs = random_inputs(fn, seed=3)  # type: ignore[arg-type]
    actual = compiled(module, "main", tile, base)(*inputs)
    assert_results_match(actual, interpret(module, "main", inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("text", "base"),
    [
        (matmul((37, 29), (29, 41)), "ungrouped"),
        (seed(13, 30, 21, keepdim=True), "cpu"),
        (MLP, "cpu"),
    ],
    ids=["matmul", "seed", "mlp"],
)
def test_tiled_is_bit_identical_to_untiled_without_fastmath(text: str, base: str) -> None:
    module = parse(text)
    fn = next(iter(module.ops))
    inputs = random_inputs(fn, seed=5)  # type: ignore[arg-type]
    tile = "tess-tile{tile-sizes=8,8,16 register-tile=4,4}"
    tiled = compiled(module, "main", tile, base, fastmath=())(*inputs)
    untiled = compiled(module, "main", None, base, fastmath=())(*inputs)
    for t, u in zip(tiled, untiled, strict=True):
        np.testing.assert_array_equal(t, u)


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(program=random_program(kinds=("matmul", "binary", "reduce", "unary"), max_ops=4))
def test_random_programs_with_small_tiles(program: tuple[ModuleOp, str]) -> None:
    """Random programs (derandomized, so the kernel cache hits on reruns) with tiles that
    split every dim."""
    module, entry = program
    fn = next(op for op in module.ops)
    inputs = random_inputs(fn, seed=0)  # type: ignore[arg-type]
    tile = "tess-tile{tile-sizes=2,3,2 register-tile=2,2}"
    actual = compiled(module, entry, tile)(*inputs)
    assert_results_match(actual, interpret(module, entry, inputs))


# Two outputs accumulated in one nest (as a multi-result fused generic lowers), at the loop
# level: each output is forwarded along its own chain.
TWO_OUTPUTS = """
func.func @main(%a: memref<11x9xf32>, %b: memref<9x13xf32>,
                %o0: memref<11x13xf32>, %o1: memref<11x13xf32>)
    attributes {tess.num_outputs = 2 : i64} {
  func.call @fill(%o0, %o1) : (memref<11x13xf32>, memref<11x13xf32>) -> ()
  func.call @two(%a, %b, %o0, %o1)
      : (memref<11x9xf32>, memref<9x13xf32>, memref<11x13xf32>, memref<11x13xf32>) -> ()
  func.return
}
func.func private @fill(%o0: memref<11x13xf32>, %o1: memref<11x13xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c11 = arith.constant 11 : index
  %c13 = arith.constant 13 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.0e38 : f32
  "scf.parallel"(%c0, %c0, %c11, %c13, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    memref.store %zero, %o0[%i, %j] : memref<11x13xf32>
    memref.store %ninf, %o1[%i, %j] : memref<11x13xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
func.func private @two(%a: memref<11x9xf32>, %b: memref<9x13xf32>,
                       %o0: memref<11x13xf32>, %o1: memref<11x13xf32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c9 = arith.constant 9 : index
  %c11 = arith.constant 11 : index
  %c13 = arith.constant 13 : index
  "scf.parallel"(%c0, %c11, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    scf.for %k = %c0 to %c9 step %c1 {
      scf.for %j = %c0 to %c13 step %c1 {
        %l = memref.load %a[%i, %k] : memref<11x9xf32>
        %r = memref.load %b[%k, %j] : memref<9x13xf32>
        %s0 = memref.load %o0[%i, %j] : memref<11x13xf32>
        %m0 = memref.load %o1[%i, %j] : memref<11x13xf32>
        %p = arith.mulf %l, %r : f32
        %s1 = arith.addf %s0, %p : f32
        %m1 = arith.maximumf %m0, %p : f32
        memref.store %s1, %o0[%i, %j] : memref<11x13xf32>
        memref.store %m1, %o1[%i, %j] : memref<11x13xf32>
      }
    }
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}
"""


def test_two_outputs_at_loop_level() -> None:
    module = parse(TWO_OUTPUTS)
    tiled = module.clone()
    run_passes(
        tiled, ungated("tess-tile{tile-sizes=4,4,8 register-tile=2,3 min-parallel-blocks=1}")
    )
    tiled.verify()
    assert len(tiled_loops(tiled)) == 1
    rng = np.random.default_rng(1)
    a = rng.standard_normal((11, 9), dtype=np.float32)
    b = rng.standard_normal((9, 13), dtype=np.float32)
    product = a[:, :, None] * b[None, :, :]
    for program in (module, tiled):
        total, largest = Executable(load_source(emit_numba(program)), "main")(a, b)
        np.testing.assert_allclose(total, product.sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(largest, product.max(axis=1))


# ---------------------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------------------


def tiled_loops(module: ModuleOp) -> list[scf.ParallelOp]:
    return [
        op for op in module.walk() if isinstance(op, scf.ParallelOp) and contract.TILE_SIZES.has(op)
    ]


def attribute_values(op: scf.ParallelOp, attr: contract.IntArray) -> tuple[int, ...]:
    values = attr.get(op)
    assert values is not None
    return values


@pytest.mark.parametrize(
    ("lhs", "rhs", "tile", "expected"),
    [
        # 256 rows give 4 blocks of 64: the defaults stand (k and j clamp to the extents).
        ((256, 100), (100, 300), "tess-tile", ((64, 100, 256), (4, 6))),
        # 64 rows: the i tile shrinks to 16 so that there are 4 parallel blocks.
        ((64, 48), (48, 80), "tess-tile", ((16, 48, 80), (4, 6))),
        # A batch of 4 already gives 4 blocks; tiles are rounded to multiples of R and U.
        (
            (4, 64, 48),
            (48, 80),
            "tess-tile{tile-sizes=30,10,32 register-tile=4,4}",
            ((28, 8, 32), (4, 4)),
        ),
        ((7, 13), (13, 5), "tess-tile{min-parallel-blocks=1}", ((7, 13, 5), (4, 6))),
    ],
)
def test_tile_sizes_chosen(
    lhs: tuple[int, ...], rhs: tuple[int, ...], tile: str, expected: tuple[tuple[int, ...], ...]
) -> None:
    (loop,) = tiled_loops(lowered(parse(matmul(lhs, rhs)), tile))
    assert (
        attribute_values(loop, contract.TILE_SIZES),
        attribute_values(loop, contract.REGISTER_TILE),
    ) == expected


def test_tiled_nest_shape() -> None:
    """One flat parallel dim over all blocks; every scf.for counts from 0 by 1; the zero
    fill kernel (no groups here) is left alone."""
    matmul_text = matmul((2, 37, 29), (29, 41))
    module = lowered(parse(matmul_text), "tess-tile{tile-sizes=16,8,16}", "ungrouped")
    (loop,) = tiled_loops(module)
    assert len(loop.body.block.args) == 1
    assert loop.upperBound[0].owner.value.value.data == 2 * 3  # type: ignore[union-attr]
    for op in loop.walk():
        if isinstance(op, scf.ForOp):
            assert op.lb.owner.value.value.data == 0  # type: ignore[union-attr]
            assert op.step.owner.value.value.data == 1  # type: ignore[union-attr]
    untiled = [op for op in module.walk() if isinstance(op, scf.ParallelOp) and op is not loop]
    assert len(untiled) == 1 and len(untiled[0].body.block.args) == 3


def test_grouped_kernel_runs_each_member_over_the_block() -> None:
    """A two-layer group: the block's rows are filled, multiplied (k blocks), put through
    the epilogue (and the second fill), multiplied again, in that order."""
    module = lowered(parse(MLP), "tess-tile{tile-sizes=4,4,4 register-tile=2,2}")
    (loop,) = tiled_loops(module)
    top = [
        op.body.block.args[0].name_hint for op in loop.body.block.ops if isinstance(op, scf.ForOp)
    ]
    assert [hint.split("_")[0] for hint in top if hint] == ["ii", "kb", "ii", "kb"]
    assert attribute_values(loop, contract.TILE_SIZES) == (2, 4, 4, 4, 4)


def test_generated_point_loops_count_from_zero() -> None:
    """The Numba source of a tiled kernel has only `range(n)` loops (so Numba proves its
    indices non-negative) and `min` for the partial blocks. The one exception is a
    threaded kernel's share of its parallel loop, `range(lo, hi)` (runtime/threads.py)."""
    module = lowered(parse(matmul((37, 29), (29, 41))), "tess-tile{tile-sizes=16,8,16}")
    source = emit_numba(module)
    (kernel,) = (f for f in source.split("\n\n\n") if "blk" in f)
    ranges = re.findall(r"\brange\(([^)]*)\)", kernel)
    if ranges and ranges[0] == "lo, hi":
        ranges = ranges[1:]
    assert ranges and all("," not in args for args in ranges), ranges
    assert "min(16, " in kernel and "min(8, " in kernel


def test_pass_is_deterministic() -> None:
    module = lowered(parse(seed(13, 30, 21)), None)
    texts = set()
    for _ in range(2):
        copy = module.clone()
        TessTilePass().apply(make_context(), copy)
        texts.add(print_module(copy))
    assert len(texts) == 1


UNTILED_NESTS = {
    # reduction innermost (i-k): nothing unit-stride to block
    "row-sum": """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8xf32> {
  %s = tess.sum %x dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  func.return %s : tensor<8xf32>
}""",
    # reduction outermost, no scf.parallel
    "column-sum": """
func.func @main(%x: tensor<8x16xf32>) -> tensor<16xf32> {
  %s = tess.sum %x dims = [0] : tensor<8x16xf32> -> tensor<16xf32>
  func.return %s : tensor<16xf32>
}""",
    "elementwise": """
func.func @main(%x: tensor<8x16xf32>, %y: tensor<16xf32>) -> tensor<8x16xf32> {
  %s = tess.mul %x, %y : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  func.return %s : tensor<8x16xf32>
}""",
    "matrix-vector": matmul((10, 9), (9, 1)),
}


@pytest.mark.parametrize("case", UNTILED_NESTS)
def test_other_nests_are_left_alone(case: str) -> None:
    module = lowered(parse(UNTILED_NESTS[case]), None)
    before = print_module(module)
    TessTilePass().apply(make_context(), module)
    assert print_module(module) == before


@pytest.mark.parametrize(
    "options",
    [
        {"tile_sizes": (0, 4, 4)},
        {"tile_sizes": (4, 4)},
        {"register_tile": (4,)},
        {"register_tile": (4, -1)},
    ],
)
def test_bad_options_fail(options: dict[str, tuple[int, ...]]) -> None:
    module = lowered(parse(matmul((7, 13), (13, 5))), None)
    with pytest.raises(PassFailedException, match="tess-tile"):
        TessTilePass(**options).apply(make_context(), module)  # type: ignore[arg-type]


GATED = [
    # (n, k, m), tiled by the default gate: 2^12 multiply-adds, not short (k < 20) and wide
    ((12, 12, 12), False),  # 1,728: under min-macs
    ((16, 16, 16), True),  # 4,096
    ((64, 16, 64), False),  # short and wide: the plain j loop vectorises and is faster
    ((64, 20, 64), True),
    ((128, 10, 32), True),  # short, but narrower than wide-cols: tiling wins (15.7 -> 9.1 us)
]


@pytest.mark.parametrize(("shape", "tiled"), GATED, ids=[f"{n}x{k}x{m}" for (n, k, m), _ in GATED])
def test_the_size_gate_in_the_cpu_pipeline(shape: tuple[int, int, int], tiled: bool) -> None:
    n, k, m = shape
    module = parse(matmul((n, k), (k, m)))
    result = module.clone()
    run_passes(result, get_pipeline("cpu").spec)
    assert len(tiled_loops(result)) == int(tiled)
    fn = next(iter(module.ops))
    inputs = random_inputs(fn, seed=2)  # type: ignore[arg-type]
    actual = Executable(load_source(emit_numba(result)), "main")(*inputs)
    assert_results_match(actual, interpret(module, "main", inputs), rtol=1e-5, atol=1e-5)
