"""
`tess-pack-matmul`: large contractions as packed panels and a register-tile micro-kernel,
GotoBLAS/BLIS style (level 5, loops).

For a row kernel (or dot nest) holding one contraction `out += x * y` above `min-work`
multiply-adds, this pass builds one parallel loop with an iteration per thread
(`micro.num_threads`), each packing its own A and B panels for its share of the row
blocks and running `micro.mma` register tiles sized for the vector width; operands of at
most `in-place-bytes` are read where they lie. The row segments before and after the
product run on each block's rows while they are in cache. The nest, its legality and the
measured choices (per-thread B packing, in-place operands) are in
lowering/loops/README.md; the match, tile and blocks in `pack_matmul_plan.py`, the nest in
`pack_matmul_build.py`. Its loop carries `tess.tile_sizes` and `tess.register_tile`, so
`tess-tile` leaves it alone.
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
    nominal,
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
        n, depth, cols = match.shape
        # A `?` extent (N, read at run time) is planned (gate, blocks) as NOMINAL_SIZE;
        # the nest runs full tiles and remainder loops up to N itself.
        shape = (nominal(n), nominal(depth), cols)
        tile = mr, nr, lanes = self.tile[match.element_bits]
        a, b = self.in_place(match)
        if b is not None and cols % nr:
            b = None  # a partial panel would read past B's rows
        if not isinstance(n, int):
            a = None  # a partial tile of `?` rows would read past A's rows
        elif n < self.min_rows:
            if b is None or n > max_tile_rows(self.vector_bits, tile):
                return  # a vector-matrix product: B once, unpacked (`tess-tile`)
            # One tile as tall as the product (`dz.T @ h` of the MLP step: 10 rows), B
            # read in place: nothing is copied for its few rows.
            mr, tile = n, (n, nr, lanes)
        if a is not None and isinstance(n, int) and n % mr:
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
