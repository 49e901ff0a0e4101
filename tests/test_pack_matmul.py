"""
`tess-pack-matmul`: packed contractions compute what the reference interpreter does.

Programs run through the `cpu` pipeline with `tess-pack-matmul{...}` options that pack even
small shapes (`min-work=1`) with small blocks, so every edge case is a small program:
sizes the register tile and the MC/KC/NC blocks do not divide (edge tiles through the `ct`
scratch, several k blocks, several column blocks), 1 x k and k x 1 operands, batched and
broadcast-batched matmuls, transposed operands, f32 and f64, bias + relu epilogues and
fills run at the first and last k block. Most compile their kernels serially (a high
`parallel_threshold`, cheap to compile); one case runs the parallel kernel (`prange`).
Structural checks: which contractions are packed (and which are left to `tess-tile`), the
register tile per vector width, the option errors.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from tessc.context import make_context
from tessc.lowering.codegen.to_numba import emit_numba
from tessc.lowering.loops.pack_matmul_plan import clamp_blocks, largest_share
from tessc.lowering.loops.register_tiles import host_vector_bits, register_tile
from tessc.pipelines import get_pipeline, run_passes
from tessc.reference import interpret
from tessc.runtime import Executable, load_source

from helpers import assert_results_match, random_inputs

SMALL = "tess-pack-matmul{min-work=1 min-rows=1 blocks=8,8,32 register-tile=4,16 vector-bits=512}"
"""MR=4, NR=16 (f32: one 16-lane vector per row; f64: two 8-lane ones), MC=8, KC=8, NC=32."""


def pipeline(pack: str = SMALL) -> str:
    return get_pipeline("cpu").spec.replace("tess-pack-matmul", pack)


def t(shape: tuple[int, ...], dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def matmul(lhs: tuple[int, ...], rhs: tuple[int, ...], dtype: str = "f32") -> str:
    from tessc.dialects.tess import matmul_shape

    out = matmul_shape(lhs, rhs)
    return (
        f"func.func @main(%a: {t(lhs, dtype)}, %b: {t(rhs, dtype)}) -> {t(out, dtype)} {{\n"
        f"  %c = tess.matmul %a, %b : {t(lhs, dtype)}, {t(rhs, dtype)} -> {t(out, dtype)}\n"
        f"  func.return %c : {t(out, dtype)}\n}}\n"
    )


def dense_relu(n: int, k: int, m: int, dtype: str = "f32") -> str:
    a, w, b, o = t((n, k), dtype), t((k, m), dtype), t((m,), dtype), t((n, m), dtype)
    return f"""
func.func @main(%x: {a}, %w: {w}, %b: {b}) -> {o} {{
  %m = tess.matmul %x, %w : {a}, {w} -> {o}
  %y = tess.add %m, %b : {o}, {b} -> {o}
  %r = tess.relu %y : {o}
  func.return %r : {o}
}}
"""


def transposed(n: int, k: int, m: int, dtype: str, side: str) -> str:
    """`a @ w.T` (w of shape (m, k)) or `x.T @ d` (x of shape (k, n))."""
    if side == "rhs":
        a, w, wt = t((n, k), dtype), t((m, k), dtype), t((k, m), dtype)
        return f"""
func.func @main(%a: {a}, %w: {w}) -> {t((n, m), dtype)} {{
  %wt = tess.permute %w dims = [1, 0] : {w} -> {wt}
  %c = tess.matmul %a, %wt : {a}, {wt} -> {t((n, m), dtype)}
  func.return %c : {t((n, m), dtype)}
}}
"""
    x, xt, d = t((k, n), dtype), t((n, k), dtype), t((k, m), dtype)
    return f"""
func.func @main(%x: {x}, %d: {d}) -> {t((n, m), dtype)} {{
  %xt = tess.permute %x dims = [1, 0] : {x} -> {xt}
  %c = tess.matmul %xt, %d : {xt}, {d} -> {t((n, m), dtype)}
  func.return %c : {t((n, m), dtype)}
}}
"""


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def lowered(text: str, pack: str = SMALL) -> ModuleOp:
    module = parse(text)
    run_passes(module, pipeline(pack))
    module.verify()
    return module


CASES: dict[str, str] = {
    "37x29x41-f32": matmul((37, 29), (29, 41)),
    "32x16x64-divides": matmul((32, 16), (16, 64)),
    "1xk": matmul((1, 30), (30, 17)),
    "kx1-lhs": matmul((5, 1), (1, 40)),
    "f64-21x19x35": matmul((21, 19), (19, 35), "f64"),
    "batched-3x10x7-7x20": matmul((3, 10, 7), (7, 20)),
    "batched-both-2x9x13-2x13x18": matmul((2, 9, 13), (2, 13, 18)),
    "broadcast-2x1x5x6-3x6x17": matmul((2, 1, 5, 6), (3, 6, 17)),
    "dense-relu-f32": dense_relu(19, 21, 45),
    "dense-relu-f64": dense_relu(12, 9, 33, "f64"),
    "transposed-rhs": transposed(13, 11, 23, "f32", "rhs"),
    "transposed-lhs-f64": transposed(10, 17, 20, "f64", "lhs"),
}


@pytest.mark.parametrize("case", CASES)
def test_packed_program_matches_reference(case: str) -> None:
    module = parse(CASES[case])
    inputs = random_inputs(next(iter(module.ops)), seed=7)  # type: ignore[arg-type]
    source = emit_numba(lowered(CASES[case]), parallel_threshold=1 << 60)
    if case != "kx1-lhs":  # k = 1 is a product, not a reduction: tess-tile's
        assert "micro_mma_4x16x" in source
    actual = Executable(load_source(source), "main")(*inputs)
    assert_results_match(actual, interpret(module, "main", inputs), rtol=1e-5, atol=1e-5)


IN_PLACE = "tess-pack-matmul{min-work=1 vector-bits=512}"
"""The default tile (8 x 32 f32, 8 x 16 f64) and in-place limit, any work."""

IN_PLACE_CASES: dict[str, tuple[str, str, str]] = {
    # name: (program, pass options, the intrinsic the kernel must call)
    "both-in-place": (matmul((32, 16), (16, 64)), SMALL, "micro_mma_4x16x16_s16_1_64("),
    "batched-both": (matmul((2, 8, 12), (2, 12, 32)), SMALL, "micro_mma_4x16x16_s12_1_32("),
    "broadcast-batched": (
        matmul((2, 1, 8, 6), (3, 6, 16)),
        SMALL,
        "micro_mma_4x16x16_s6_1_16(",
    ),
    "transposed-lhs": (transposed(16, 9, 32, "f32", "lhs"), IN_PLACE, "_s1_16_32("),
    "dense-relu": (dense_relu(16, 24, 64), IN_PLACE, "micro_mma_8x32x16_s24_1_64("),
    # Fewer rows than `min-rows`: one tile as tall as the product, B in place.
    "ten-rows": (matmul((10, 40), (40, 64)), IN_PLACE, "micro_mma_10x32x16_s40_1_64("),
    "seven-rows-f64": (matmul((7, 9), (9, 32), "f64"), IN_PLACE, "micro_mma_7x16x8_s9_1_32("),
    "vector-matrix": (matmul((1, 30), (30, 64)), IN_PLACE, "micro_mma_1x32x16_s30_1_64("),
    # A in place, B packed (40 columns leave a partial panel); and A packed (37 rows leave
    # a partial tile), B in place.
    "a-only": (transposed(16, 11, 40, "f32", "rhs"), IN_PLACE, "micro_mma_8x32x16_s11_1_32("),
    "b-only": (matmul((37, 8), (8, 64)), IN_PLACE, "micro_mma_8x32x16_s1_8_64("),
}


@pytest.mark.parametrize("case", IN_PLACE_CASES)
def test_in_place_operands_match_reference(case: str) -> None:
    """Operands of at most `in-place-bytes` are read where they lie, through `micro.mma`'s
    strides: no panel is packed and nothing allocated, and the results match the reference;
    with `in-place-bytes=0` the same products are packed and match too."""
    text, pack, intrinsic = IN_PLACE_CASES[case]
    module = parse(text)
    inputs = random_inputs(next(iter(module.ops)), seed=5)  # type: ignore[arg-type]
    expected = interpret(module, "main", inputs)
    source = emit_numba(lowered(text, pack), parallel_threshold=1 << 60)
    assert intrinsic in source
    if case not in ("a-only", "b-only"):
        assert "np.empty" not in source
    assert_results_match(
        Executable(load_source(source), "main")(*inputs), expected, rtol=1e-5, atol=1e-5
    )
    if pack is SMALL:
        packed = emit_numba(
            lowered(text, pack.replace("}", " in-place-bytes=0}")), parallel_threshold=1 << 60
        )
        assert "_s" not in packed.partition("def main")[2].split("micro_mma_")[1][:12]
        assert_results_match(
            Executable(load_source(packed), "main")(*inputs), expected, rtol=1e-5, atol=1e-5
        )


def test_in_place_limits() -> None:
    """Above `in-place-bytes` an operand is packed; a product of fewer than `min-rows` rows
    taller than a register tile can be stays with `tess-tile` (one whose B cannot be read in
    place too: the FileCheck test's `@dot`)."""
    big = str(
        lowered(
            matmul((64, 64), (64, 64)),
            "tess-pack-matmul{min-work=1 in-place-bytes=16383 vector-bits=512}",
        )
    )
    assert "strides" not in big and "micro.mma %ap" in big
    half = str(
        lowered(
            matmul((64, 64), (64, 32)),
            "tess-pack-matmul{min-work=1 in-place-bytes=8192 vector-bits=512}",
        )
    )
    assert "strides = array<i64: 1, 8, 32>" in half  # A (16 KiB) packed, B (8 KiB) in place
    assert "micro.mma" not in str(lowered(matmul((15, 40), (40, 64)), IN_PLACE))
    assert "rows = 14" in str(lowered(matmul((14, 40), (40, 64)), IN_PLACE))


def two_layers(n: int, k: int, hidden: int, cols: int, dtype: str = "f32") -> str:
    """`relu(x @ w1 + b1) @ w2`: one row kernel holding two contractions after fusion."""
    x, w1, b1, h = (
        t((n, k), dtype),
        t((k, hidden), dtype),
        t((hidden,), dtype),
        t((n, hidden), dtype),
    )
    w2, out = t((hidden, cols), dtype), t((n, cols), dtype)
    return f"""
func.func @main(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}) -> {out} {{
  %m = tess.matmul %x, %w1 : {x}, {w1} -> {h}
  %y = tess.add %m, %b1 : {h}, {b1} -> {h}
  %r = tess.relu %y : {h}
  %o = tess.matmul %r, %w2 : {h}, {w2} -> {out}
  func.return %o : {out}
}}
"""


@pytest.mark.parametrize(
    ("n", "cols", "dtype"), [(128, 16, "f32"), (37, 32, "f32"), (64, 48, "f32"), (40, 16, "f64")]
)
def test_a_row_kernel_of_two_contractions_packs_the_larger(n: int, cols: int, dtype: str) -> None:
    """`relu(x @ w1 + b1) @ w2` with 16 or more columns (too wide for `tess-pack-narrow`)
    is one row kernel of two contractions: the larger is packed and the other runs per
    row after it (`tess-row-dots` then tiles it), where both went to `tess-tile` before
    (46.7 us against 15.9 at 128 x 64 x 128 x 16)."""
    text = two_layers(n, 64, 128, cols, dtype)
    module = parse(text)
    inputs = random_inputs(next(iter(module.ops)), seed=n)  # type: ignore[arg-type]
    lowered_module = parse(text)
    run_passes(lowered_module, get_pipeline("cpu").spec)
    assert str(lowered_module).count("micro.mma") >= 2  # the packed product, the row tiles
    source = emit_numba(lowered_module, parallel_threshold=1 << 60)
    actual = Executable(load_source(source), "main")(*inputs)
    assert_results_match(actual, interpret(module, "main", inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "text",
    [
        dense_relu(40, 24, 50),
        matmul((3, 10, 7), (7, 20)),  # 3 batches of 3 row blocks: shares split batches
        matmul((2, 1, 5, 6), (3, 6, 17)),  # broadcast batch dims, one block each
    ],
    ids=["dense-relu", "batched", "broadcast-batched"],
)
def test_parallel_packed_kernel_matches_reference(text: str) -> None:
    """One parallel loop, an iteration per thread (`micro.num_threads`, read as Numba's
    parfors read it: the kernel stays cacheable), each packing its own B panels and running
    its share of the row blocks of all batches; right on one thread and on two. Its
    scratch is the workspace's (`tess-hoist-scratch`: no allocation in the generated code),
    reused by every call: calls on new inputs, alternating thread counts, stay right."""
    import numba
    from numba.core.errors import NumbaWarning

    module = parse(text)
    pack = SMALL.replace("}", " threads=2}")
    source = emit_numba(lowered(text, pack), parallel_threshold=1)
    assert source.count("in prange(") == 1 and "threads = num_threads()" in source
    assert "np.empty" not in source and "workspace[" in source
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumbaWarning)  # "cannot cache ... dynamic globals"
        program = Executable(load_source(source), "main")
        previous = numba.get_num_threads()
        try:
            for seed in (11, 12):
                inputs = random_inputs(next(iter(module.ops)), seed=seed)  # type: ignore[arg-type]
                expected = interpret(module, "main", inputs)
                for threads in sorted(
                    {1, min(2, numba.config.NUMBA_NUM_THREADS)}, reverse=seed % 2 == 0
                ):
                    numba.set_num_threads(threads)
                    assert_results_match(program(*inputs), expected, rtol=1e-5, atol=1e-5)
        finally:
            numba.set_num_threads(previous)


def test_the_thread_loop_counts_its_work_once() -> None:
    """Codegen's parallel threshold sees the packed nest's work, not the thread count times
    it: a 128x64x128 product (below 2^18 static iterations) stays a serial kernel, which
    runs its one group on one thread."""
    source = emit_numba(lowered(matmul((128, 64), (64, 128)), "tess-pack-matmul{threads=2}"))
    assert "micro_mma_" in source and "prange" not in source
    assert "threads = 1" in source and "num_threads()" not in source


def test_small_contractions_are_left_to_tess_tile() -> None:
    """Below 2^17 multiply-adds, or 16 rows, the defaults keep `tess-tile`'s kernel."""
    small = str(lowered(matmul((64, 64), (64, 31)), "tess-pack-matmul"))
    assert "micro.mma" not in small and "tess.register_tile" in small
    large = str(lowered(matmul((128, 64), (64, 16)), "tess-pack-matmul{vector-bits=256}"))
    assert "micro.mma" in large
    # Fewer than `min-rows` (16) rows: packing would copy all of B (1 MiB: too large to be
    # read in place) for a few rows.
    few_rows = str(lowered(matmul((8, 512), (512, 512)), "tess-pack-matmul"))
    assert "micro.mma" not in few_rows and "tess.register_tile" in few_rows
    assert "micro.mma" in str(lowered(matmul((16, 512), (512, 512)), "tess-pack-matmul"))
    assert re.search(r"rows = 6 : i64, cols = 16 : i64, lanes = 8 : i64", large)


def test_register_tile_follows_the_vector_width() -> None:
    assert register_tile(512, 32) == (8, 32, 16)
    assert register_tile(512, 64) == (8, 16, 8)
    assert register_tile(256, 32) == (6, 16, 8)
    assert register_tile(256, 64) == (6, 8, 4)
    assert register_tile(128, 32) == (4, 8, 4)


@pytest.mark.parametrize(
    ("rows", "threads", "mc", "share"),
    [
        (1024, 1, 128, 1024),
        (1024, 2, 128, 512),  # 8 blocks; 11 of 96 gave one thread 576 rows
        (2048, 2, 128, 1024),
        (1000, 2, 72, 504),  # 14 blocks of 72: shares 504 and 496
        (300, 2, 80, 160),
        (37, 2, 24, 24),  # two blocks: 24 and 13 rows
    ],
)
def test_row_blocks_are_balanced_over_the_threads(
    rows: int, threads: int, mc: int, share: int
) -> None:
    """MC is a multiple of MR no larger than the option's; the largest thread share (rows
    one thread gets with contiguous shares of the blocks) is as small as block counts up
    to twice the fewest allow."""
    blocks = clamp_blocks((rows, 64, 64), (8, 32, 16), (128, 256, 4096), 1, threads)
    assert blocks[0] == mc and mc % 8 == 0
    assert largest_share(rows, mc, threads) == share


def test_vector_width_is_read_from_numba_cpu_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx,+avx2,+fma,-avx512f")
    assert host_vector_bits() == 256
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+avx2,+fma,+avx512f")
    assert host_vector_bits() == 512
    monkeypatch.setenv("NUMBA_CPU_FEATURES", "+sse4.2")
    assert host_vector_bits() == 128


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("blocks=8,8", "blocks takes 3 positive integers"),
        ("register-tile=4,12 vector-bits=512", "NR=12 needs a multiple of 16"),
        ("vector-bits=384", "vector-bits must be 128, 256 or 512"),
    ],
)
def test_bad_options_are_reported(options: str, message: str) -> None:
    with pytest.raises(PassFailedException, match=message):
        lowered(matmul((8, 8), (8, 16)), f"tess-pack-matmul{{{options}}}")


def transposed_dense_relu(n: int, k: int, m: int) -> str:
    """`relu(a @ w.T + b)`, w of shape (m, k): `nn.Linear`."""
    a, w, wt, b, o = (
        t((n, k), "f32"),
        t((m, k), "f32"),
        t((k, m), "f32"),
        t((m,), "f32"),
        t((n, m), "f32"),
    )
    return f"""
func.func @main(%a: {a}, %w: {w}, %b: {b}) -> {o} {{
  %wt = tess.permute %w dims = [1, 0] : {w} -> {wt}
  %m = tess.matmul %a, %wt : {a}, {wt} -> {o}
  %y = tess.add %m, %b : {o}, {b} -> {o}
  %r = tess.relu %y : {o}
  func.return %r : {o}
}}
"""


def test_a_large_transposed_rhs_is_fused_and_packed_from_its_dot_nest() -> None:
    """Above the packing threshold `tess-fuse` fuses `w.T` into the matmul (no copy: the
    loops are a dot nest, k innermost) and packing reads `w[j, k]`; the bias + relu run per
    element after the last k block. 3 row blocks x 2 k blocks x 2 column blocks."""
    text = transposed_dense_relu(130, 130, 131)
    module = lowered(text, "tess-pack-matmul{blocks=48,96,96 register-tile=4,16 vector-bits=512}")
    loops = str(module)
    assert loops.count("linalg") == 0 and loops.count("func.call") == 1  # one kernel
    assert re.search(r"memref.load %w\[%j, %k\]", loops)  # packed straight from w
    assert "micro.mma" in loops
    reference = parse(text)
    inputs = random_inputs(next(iter(reference.ops)), seed=2)  # type: ignore[arg-type]
    source = emit_numba(module, parallel_threshold=1 << 60)
    actual = Executable(load_source(source), "main")(*inputs)
    assert_results_match(actual, interpret(reference, "main", inputs), rtol=1e-5, atol=1e-5)


def test_packed_results_are_close_to_numpy_at_a_benchmark_like_shape() -> None:
    """Default options (the host's tile) at 136 x 200 x 144: several row blocks, edge rows."""
    text = matmul((136, 200), (200, 144))
    module = lowered(text, "tess-pack-matmul")
    assert "micro.mma" in str(module)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((136, 200), np.float32), rng.standard_normal((200, 144), np.float32)
    (result,) = Executable(load_source(emit_numba(module, parallel_threshold=1 << 60)), "main")(
        a, b
    )
    np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_large_scratch_starts_on_a_huge_page() -> None:
    """A kernel's scratch of 2 MiB or more (here B's 512 x 1024 f32 panel) starts on a 2 MiB
    boundary in huge pages: as a view at offset 0 of the host's workspace, which the
    runtime allocates 2 MiB aligned (`tess-hoist-scratch`), or, left in the kernel, cut from
    a larger buffer and advised huge pages by the generated code. Same product both ways."""
    text = matmul((24, 512), (512, 1024))
    pack = "tess-pack-matmul{blocks=8,512,1024 threads=1}"
    unhoisted = pipeline(pack).replace("tess-hoist-scratch,", "")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((24, 512), np.float32), rng.standard_normal((512, 1024), np.float32)
    for spec in (pipeline(pack), unhoisted):
        module = parse(text)
        run_passes(module, spec)
        source = emit_numba(module, parallel_threshold=1 << 60)
        program = Executable(load_source(source), "main")
        if spec == unhoisted:
            assert "huge_pages(bp)" in source and "huge_pages(ap)" not in source
            assert re.search(r"bp = raw\d*\[\(2097152 - raw\d*\.ctypes\.data % 2097152\)", source)
        else:
            assert "np.empty" not in source and "huge_pages" not in source
            assert re.search(r"= workspace\[0:2097152\]\.view\(np\.float32\)", source)
            assert program.workspace().ctypes.data % (1 << 21) == 0
        (result,) = program(a, b)
        np.testing.assert_allclose(result, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_parallel_scratch_beside_planned_buffers_across_calls() -> None:
    """Two parallel packed products (default threshold) around planned intermediates (the
    first product's, its transposed tanh): their scratch shares one region of the workspace
    past the arena, the first's 2 MiB B panel on a 2 MiB boundary; calls on new inputs, on
    one thread and two, match the reference."""
    import numba

    x, w, u = t((64, 512), "f32"), t((512, 520), "f32"), t((64, 512), "f32")
    h, ht, y = t((64, 520), "f32"), t((520, 64), "f32"), t((520, 512), "f32")
    text = f"""
func.func @main(%x: {x}, %w: {w}, %u: {u}) -> {y} {{
  %h = tess.matmul %x, %w : {x}, {w} -> {h}
  %e = tess.tanh %h : {h}
  %t = tess.permute %e dims = [1, 0] : {h} -> {ht}
  %y = tess.matmul %t, %u : {ht}, {u} -> {y}
  func.return %y : {y}
}}
"""
    module = parse(text)
    source = emit_numba(lowered(text, "tess-pack-matmul{blocks=16,512,512 threads=2}"))
    assert source.count("in prange(") == 2 and "np.empty" not in source
    assert re.search(r"= workspace\[2097152:4194304\]\.view\(np\.float32\)", source)
    program = Executable(load_source(source), "main")
    previous = numba.get_num_threads()
    try:
        for seed, threads in ((3, 2), (4, 1), (5, min(2, numba.config.NUMBA_NUM_THREADS))):
            numba.set_num_threads(threads)
            inputs = random_inputs(next(iter(module.ops)), seed=seed)  # type: ignore[arg-type]
            expected = interpret(module, "main", inputs)
            assert_results_match(program(*inputs), expected, rtol=1e-4, atol=1e-4)
    finally:
        numba.set_num_threads(previous)
    assert program.workspace().ctypes.data % (1 << 21) == 0


MMA = """
func.func @f(%ap: memref<64xf32>, %bp: {rhs}, %out: memref<8x32xf32>, %n: index) {{
  %t = arith.constant true
  micro.mma %ap[%n], %bp[%n], %n, %out[%n, %n], %t
      {{rows = 4 : i64, cols = {cols} : i64, lanes = 16 : i64}}
      : memref<64xf32>, {rhs}, memref<8x32xf32>
  func.return
}}
"""


@pytest.mark.parametrize(
    ("rhs", "cols", "message"),
    [
        ("memref<64xf32>", 32, None),
        ("memref<8x8xf32>", 32, "panels must be 1-d memrefs"),
        ("memref<64xf64>", 32, "differ in element type"),
        ("memref<64xf32>", 24, "needs cols a multiple of lanes"),
    ],
)
def test_micro_mma_verifier(rhs: str, cols: int, message: str | None) -> None:
    from xdsl.utils.exceptions import VerifyException

    module = parse(MMA.format(rhs=rhs, cols=cols))
    if message is None:
        module.verify()
        return
    with pytest.raises(VerifyException, match=message):
        module.verify()


def test_micro_kernel_assembly_uses_full_width_fmas_without_spills() -> None:
    """The k loop of `micro.mma` (default tile for this machine) is vector FMAs on zmm
    (AVX-512) or ymm (AVX2) registers, with no stack access between its label and its
    back edge: the accumulators stay in registers."""
    bits = host_vector_bits()
    if bits < 256:
        pytest.skip("no AVX2 on this machine")
    text = matmul((24, 40), (40, 64))
    source = emit_numba(lowered(text, "tess-pack-matmul{min-work=1}"), parallel_threshold=1 << 60)
    module = load_source(source.replace("cache=True, ", ""))  # compiled here: its assembly
    program = Executable(module, "main")
    a, b = np.ones((24, 40), np.float32), np.ones((40, 64), np.float32)
    (result,) = program(a, b)
    np.testing.assert_allclose(result, a @ b)
    dispatcher = module.main
    asm = dispatcher.inspect_asm(dispatcher.signatures[0])
    register = "zmm" if bits == 512 else "ymm"
    lines = asm.splitlines()
    fmas = [n for n, line in enumerate(lines) if re.search(rf"vfmadd\w+ps\s.*%{register}", line)]
    assert fmas, "no vector FMA in the kernel"
    for fma in fmas:  # its loop: from the label before it to the jump back to that label
        start = max(n for n in range(fma) if re.match(r"^\.?L\w+:", lines[n]))
        label = lines[start].rstrip(":")
        end = next(n for n in range(fma, len(lines)) if re.search(rf"\sj\w+\s+{label}$", lines[n]))
        loop = lines[start : end + 1]
        assert not any("(%rsp)" in line for line in loop), "\n".join(loop)  # no spill/reload


def seed_product(n: int) -> str:
    """The seed's zip+reduce matmul (W2): `sum(a[:, :, None] * b[None], dims=[1])`."""
    a, b, p, o = t((n, n, 1), "f32"), t((1, n, n), "f32"), t((n, n, n), "f32"), t((n, n), "f32")
    return f"""
func.func @main(%a: {a}, %b: {b}) -> {o} {{
  %0 = tess.mul %a, %b : {a}, {b} -> {p}
  %1 = tess.sum %0 dims = [1] : {p} -> {o}
  func.return %1 : {o}
}}
"""


@pytest.mark.parametrize(
    ("n", "tile", "parallel"),
    [
        (224, "micro_mma_8x32x16_s224_1_224(", False),
        (256, "micro_mma_8x32x16_s256_1_256(", True),
        (384, "micro_mma_8x32x16_s384_1_384(", True),
        (512, "micro_mma_8x32x16(", True),
    ],
)
def test_seed_product_in_place_and_threads(n: int, tile: str, parallel: bool) -> None:
    """Default limits (`in-place-bytes` 768 KiB, codegen's parallel threshold with a
    `micro.mma` counting its vector FMAs): up to 384^3 both operands are read where they lie
    (no panel copied, no workspace), 512^3 is packed; from 256^3 the kernel is a parfor,
    224^3 runs serially (its launch costs more than the second thread saves)."""
    source = emit_numba(lowered(seed_product(n), "tess-pack-matmul{vector-bits=512}"))
    body = source.partition("def main")[2]
    assert tile in body
    assert ("workspace" in body.partition("\n")[0]) is (n == 512)
    assert ("prange(" in body) is parallel
