"""
`tess-pack-matmul`: large contractions as packed panels and a register-tile micro-kernel,
GotoBLAS/BLIS style (level 5, loops).

`tess-tile`'s i-k-j kernel loads and stores its output rows every few k steps and streams
the right-hand side through L2 with a stride of a row: about 0.5-0.7x of BLAS. For a row
kernel (`tess-tile`'s docstring) holding one contraction whose body is `out[.., i, j] =
out[.., i, j] + x * y` (`x` computed from `i` and `k`, `y` from `k` and `j`, both through
loads and pure ops), with N x K x M above `min-work` and N at least `min-rows`, this pass
builds (the match, the register tile and the blocks are in `pack_matmul_plan.py`, the
nest in `pack_matmul_build.py`):

    ap = alloc[T * MC * KC], bp = alloc[T * KC * NC], ct = alloc[T * MR, NR]   (once)
    groups = min(micro.num_threads, T)
    parallel g < groups:                         one iteration per thread, nothing shared
     its share of the nB * nIB row blocks (every batch's, in order):
       [nB * nIB * g / groups, nB * nIB * (g + 1) / groups)
     for each batch b the share touches:         with its part of b's row blocks
      for jc < ceil(M / NC): j0 = jc * NC, nc = min(NC, M - j0)
       for pc < ceil(K / KC): k0 = pc * KC, kc = min(KC, K - k0)
        for kk < kc: for jr < ceil(nc / NR):     pack B, the thread's copy: NR-wide
          bp[g * KC * NC + (jr * kc + kk) * NR + c] = y(k0 + kk, j0 + jr * NR + c)
                                                 micro-panels, k-major (j clamped to M - 1)
        for ib in its row blocks: i0 = ib * MC, mi = min(MC, N - i0)
         if jc == 0 and pc == 0: the row segments before the contraction (its zero fill)
         pack A: ap[g * MC * KC + (ir * kc + kk) * MR + r] = x(i0 + ir * MR + r, k0 + kk)
         for jr: for ir:                          one B micro-panel in L1, A's block in L2
           micro.mma ap[g * MC * KC + ir * kc * MR], bp[.. + jr * kc * NR], kc, out[.., it, jt]
           (an edge tile: into the thread's ct rows, then added to the rows and columns
           that exist)
         if jc and pc are the last: the row segments after it (bias, activation) on the
           block's rows, while they are in cache

T is the `threads` option (this machine's CPU count): the row blocks are sized so that T
threads get equal shares (`pack_matmul_plan.clamp_blocks`), and each thread packs the B
panels it needs itself. Packing B once and sharing it cost two barriers per k block: on
this 2-core machine shared with other jobs, a thread descheduled at a barrier stalled the
other (2048 f32 on two threads: 0.36-0.57x of BLAS against 0.89-0.95x without them,
same runs). The copy costs each thread one read of B per column block (~3% of a 2048
product); on one thread nothing changes. It grows with the threads (each packs all of B
for N / T rows): on many cores, B shared with a barrier per k block, or packed whole once
before the row blocks, would be the better form.

A dot nest (`tess-tile-dot`'s form: `scf.parallel (b.., i, j)` around a k loop, what `a @
w.T` becomes once `tess-fuse` fuses the transpose, which it does for contractions this pass
packs) is packed the same way: its ops before and after the k loop (fill, bias, activation)
run per element of the block's rows, cloned with the pure prologue ops they read.

`micro.mma` keeps its MR x NR accumulators in vector registers for all kc steps (MR + NR/W
loads per MR * NR/W FMAs, the output read and written once per kc steps): the code
generator writes it with explicit vectors of the machine's width W. The tile follows W, read
from the host CPU when the pass runs (`vector-bits`, 0 = host): 8 x 32 f32 / 8 x 16 f64 on
AVX-512 (16 zmm accumulators of 32), 6 x 16 / 6 x 8 on AVX2 (12 ymm of 16), 4 x 8 / 4 x 4
otherwise. Rows of A and columns of B past the matrix are packed from its last row or column
(clamped), so the micro-kernel always runs a full tile and nothing reads out of bounds. A
transposed or strided operand costs nothing extra: packing reads through whatever loads
and ops computed `x` and `y`.

Operands read in place. An operand of at most `in-place-bytes` (64 KiB) that is one load
of an identity-layout memref, indexed by `i` and `k` (A, any strides) or by `k` and `j`
(B, with `j` on its unit-stride last dim) is not packed: `micro.mma` reads it where it
lies through its `strides` (`pack_matmul_plan.in_place_operand`), and nothing is copied
or allocated for it. Small operands sit in L1/L2 between kernels, so packing bought them
nothing: the digits MLP step's four products spent ~8 us of ~60 copying (host 63 -> 52
us). A in place needs N a multiple of MR, B in place M a multiple of NR: a partial tile
would read past the rows or the row ends. With B in place, a product of fewer than
`min-rows` rows is packed after all, as one tile as tall as it where its accumulators fit
the registers (`max_tile_rows`: 14 rows of 2 zmm; the step's `dz.T @ h`, 10 rows: 5 ->
1.7 us): nothing of B is copied for its few rows.

Legality: `tess-tile`'s (a row kernel's rows touch disjoint elements of what it writes, so
the row blocks run in parallel and each segment may run over a block of rows at once), plus:
the segments before the contraction run, for a block of rows, before any of its products;
those after it, after the last. B is packed by each thread before its row blocks: it does
not depend on `i`, and memrefs a row kernel writes are indexed by `i`, so no segment
writes it. Each output element receives its k terms in k order within each KC block
(fast-math reassociation aside). Smaller contractions are left to `tess-tile`: packing costs a copy
of both operands and a scratch allocation per call, which small products do not win back.
The new nest's parallel loop carries `tess.tile_sizes` (MC, KC, NC) and
`tess.register_tile` (MR, NR), so `tess-tile` leaves it alone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.lowering.linalg.loop_nests import PACKED_MIN_WORK
from tessc.lowering.loops.index_values import IndexConstants
from tessc.lowering.loops.pack_matmul_build import Packer
from tessc.lowering.loops.pack_matmul_plan import (
    DEFAULT_BLOCKS,
    DEFAULT_IN_PLACE_BYTES,
    DEFAULT_MIN_ROW_BLOCKS,
    DEFAULT_MIN_ROWS,
    DEFAULT_MIN_WORK,
    PackedMatmul,
    clamp_blocks,
    match_packed,
)
from tessc.lowering.loops.register_tiles import (
    InPlace,
    host_vector_bits,
    in_place_operand,
    max_tile_rows,
    register_tile,
)


@dataclass
class PackMatmul(RewritePattern):
    """Replace a large contraction's row kernel by its packed form."""

    tile: dict[int, tuple[int, int, int]]  # element bits -> (MR, NR, lanes)
    vector_bits: int
    blocks: tuple[int, int, int]
    min_work: int
    min_rows: int
    min_row_blocks: int
    threads: int
    in_place_bytes: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ParallelOp, rewriter: PatternRewriter) -> None:
        if contract.REGISTER_TILE.has(op) or (match := match_packed(op)) is None:
            return
        shape = n, _, cols = match.shape
        tile = mr, nr, lanes = self.tile[match.element_bits]
        a, b = self.in_place(match)
        if b is not None and cols % nr:
            b = None  # a partial panel would read past B's rows
        if n < self.min_rows:
            if b is None or n > max_tile_rows(self.vector_bits, tile):
                return  # a vector-matrix product: B once, unpacked (`tess-tile`)
            # One tile as tall as the product (`dz.T @ h` of the MLP step: 10 rows), B
            # read in place: nothing is copied for its few rows.
            mr, tile = n, (n, nr, lanes)
        if a is not None and n % mr:
            a = None  # a partial tile would read past A's rows
        if math.prod(shape) < self.min_work or (
            # A narrow product (M under half a tile) wastes most of each micro-kernel
            # call; `tess-pack-narrow` runs it as dot products, up to the old threshold.
            2 * cols < nr and math.prod(shape) < PACKED_MIN_WORK
        ):
            return
        batches = math.prod(extent for extent, _ in match.batch)
        blocks = clamp_blocks(shape, tile, self.blocks, self.min_row_blocks, self.threads, batches)
        constant = IndexConstants.before(op)
        ops = Packer(match, tile, blocks, constant, self.threads, a, b).build()
        rewriter.replace(op, [*constant.ops, *ops], [])

    def in_place(self, match: PackedMatmul) -> tuple[InPlace | None, InPlace | None]:
        """The operands small enough to read where they lie, and laid out for it: A any
        way, B with its columns unit-stride (the micro-kernel's vector loads)."""
        loops = (match.i, match.j, match.k)
        a = in_place_operand(match.x_ops, match.x, match.i, match.k, loops)
        b = in_place_operand(match.y_ops, match.y, match.k, match.j, loops)
        if a is not None and a.bytes > self.in_place_bytes:
            a = None
        if b is not None and (b.bytes > self.in_place_bytes or b.inner_stride != 1):
            b = None
        return a, b


def _positive(values: Sequence[int], count: int, option: str) -> tuple[int, ...]:
    if len(values) != count or any(not isinstance(v, int) or v < 1 for v in values):
        raise PassFailedException(
            f"tess-pack-matmul: {option} takes {count} positive integers, got {list(values)}"
        )
    return tuple(values)


@dataclass(frozen=True)
class TessPackMatmulPass(ModulePass):
    """Pack large contractions into panels for a register-tile micro-kernel; see the module
    docstring. `register-tile` (MR, NR) overrides the tile the vector width gives (NR a
    multiple of the lanes); row blocks are balanced over `threads` (0: this machine's CPU
    count); products of fewer than `min-rows` rows are left to `tess-tile`."""

    name = "tess-pack-matmul"

    blocks: tuple[int, ...] = DEFAULT_BLOCKS
    register_tile: tuple[int, ...] = ()
    vector_bits: int = 0
    min_work: int = DEFAULT_MIN_WORK
    min_rows: int = DEFAULT_MIN_ROWS
    min_row_blocks: int = DEFAULT_MIN_ROW_BLOCKS
    threads: int = 0
    in_place_bytes: int = DEFAULT_IN_PLACE_BYTES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        blocks = _positive(self.blocks, 3, "blocks")
        bits = self.vector_bits or host_vector_bits()
        if bits not in (128, 256, 512):
            raise PassFailedException(
                f"tess-pack-matmul: vector-bits must be 128, 256 or 512, got {bits}"
            )
        tiles = {width: register_tile(bits, width) for width in (32, 64)}
        if self.register_tile:
            mr, nr = _positive(self.register_tile, 2, "register-tile")
            for width, (_, _, lanes) in list(tiles.items()):
                if nr % lanes:
                    raise PassFailedException(
                        f"tess-pack-matmul: register-tile NR={nr} needs a multiple of {lanes}"
                    )
                tiles[width] = (mr, nr, lanes)
        threads = self.threads or os.cpu_count() or 1
        pattern = PackMatmul(
            tiles,
            bits,
            blocks,
            self.min_work,
            self.min_rows,
            max(1, self.min_row_blocks),
            max(1, threads),
            self.in_place_bytes,
        )
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["TessPackMatmulPass"]
