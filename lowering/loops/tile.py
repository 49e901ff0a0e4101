"""
`tess-tile`: cache-block and register-tile contraction loop nests (level 5, loops).

`tess-linalg-to-loops` leaves a contraction as a row kernel: an `scf.parallel` over rows
holding, per row, an i-k-j nest between other row-wise nests (its fill, its epilogue).
This pass blocks it for the caches (TK x TJ blocks of the right-hand side reused by TI
rows), unrolls and jams R rows and U steps of k so the output is loaded and stored once per
U multiply-adds, and flattens batch and row blocks into one parallel dim. Each output gets
its k terms in order, so results are bit-identical. A static cost model gates it
(`min-macs`, `short-depth`, `wide-cols`, measured by `bench/bench_loop_gates.py`). The
algorithm, its legality and the figures are in lowering/loops/README.md. Matching is in
`contraction_match.py`, the loop builders in `index_emitter.py`. xDSL's
`scf-parallel-loop-tiling` neither blocks `scf.for` loops nor unrolls and jams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import is_side_effect_free
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.lowering.loops.contraction_match import (
    Contraction,
    RowKernel,
    RowSegment,
    match_row_kernel,
)
from tessc.lowering.loops.index_emitter import (
    Emitter,
    Extent,
    IndexValue,
    block_extent,
    emit_loop,
    in_groups,
    static,
)
from tessc.lowering.loops.index_values import IndexConstants, constant_int
from tessc.lowering.loops.trip_counts import trip_count

DEFAULT_TILE_SIZES: tuple[int, int, int] = (64, 128, 256)
"""(TI, TK, TJ), measured with bench/bench_matmul.py on the 2-core AVX-512 machine."""
DEFAULT_REGISTER_TILE: tuple[int, int] = (4, 6)
"""(R rows, U k steps): 24 multiply-adds per loaded and stored output vector. 4 x 6 beat 4 x 4
by 4-13% in every same-run comparison by thread CPU time on the AVX-512 machine, one thread
(512/1024 f32, 512 f64); 4 x 8, 3 x 8, 5 x 4, 6 x 4, 8 x 4 did not (bench/bench_matmul.py)."""
DEFAULT_MIN_PARALLEL_BLOCKS = 4
DEFAULT_MIN_MACS = 1 << 12
"""Multiply-adds from which a contraction is tiled (module docstring: where it pays)."""
DEFAULT_SHORT_DEPTH = 20
DEFAULT_WIDE_COLS = 48
"""A contraction of fewer than `DEFAULT_SHORT_DEPTH` k steps over at least this many
columns stays plain."""


def effective_tile(extent: int, tile: int, multiple: int, max_size: int = 0) -> int:
    """`tile` clamped to `extent` (and `max_size`), rounded down to a multiple of
    `multiple` (the register tile) when it still splits the extent."""
    size = max(1, min(tile, extent, max_size or extent))
    return size - size % multiple if multiple <= size < extent else size


def hoist_invariants(loop: scf.ForOp, written: frozenset[SSAValue]) -> None:
    """Move the ops of `loop`'s body that do not depend on it in front of it: pure ops and
    loads of memrefs the nest does not write."""
    inside: set[SSAValue] = set(loop.body.block.args)
    for op in list(loop.body.block.ops)[:-1]:
        if (
            not op.regions
            and inside.isdisjoint(op.operands)
            and (is_side_effect_free(op) or isinstance(op, memref.LoadOp))
            and not (isinstance(op, memref.LoadOp) and op.memref in written)
        ):
            op.detach()
            loop.parent_block().insert_op_before(op, loop)  # type: ignore[union-attr]
        else:
            inside.update(op.results)


# -- the tiled kernel -------------------------------------------------------------------


@dataclass(frozen=True)
class TileOrigin:
    """Where a TI x TK x TJ tile starts in i, k and j, and its extents."""

    i0: IndexValue
    ni: Extent
    k0: IndexValue
    nk: Extent
    j0: IndexValue
    nj: Extent


@dataclass
class RowKernelTiler:
    """Builds the tiled replacement of one `RowKernel` (module docstring)."""

    kernel: RowKernel
    row_tile: int  # TI
    register_tile: tuple[int, int]  # R, U
    constant: IndexConstants
    blocks: dict[Contraction, tuple[int, int]]  # TK, TJ
    mapping: dict[SSAValue, IndexValue] = field(default_factory=dict[SSAValue, IndexValue])
    """New values of the old loop indices."""
    invariants: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """New values of the old row-invariant ops' results."""

    def values(self, e: Emitter) -> dict[SSAValue, SSAValue]:
        """A value map to clone old ops with at `e`."""
        return {**self.invariants, **{iv: e.value(v) for iv, v in self.mapping.items()}}

    def build(self) -> scf.ParallelOp:
        kernel, ti = self.kernel, self.row_tile
        counts = [*kernel.batch_extents, -(-kernel.rows // ti)]
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = "blk"
        e = Emitter(block, self.constant)
        old_args = kernel.parallel.body.block.args
        for d, (count, arg) in enumerate(zip(counts, old_args, strict=True)):
            hint = arg.name_hint if arg is not kernel.i else "ib"
            self.mapping[arg] = 0
            if count > 1:
                inner = math.prod(counts[d + 1 :])
                index = e.apply(arith.DivUIOp, block.args[0], inner, None if d else hint)
                self.mapping[arg] = e.apply(arith.RemUIOp, index, count, hint) if d else index
        i0 = e.mul(self.mapping.pop(kernel.i), ti, "i0")
        ni = block_extent(e, kernel.rows, ti, i0, "ni")
        for op in kernel.invariant_ops:
            block.add_op(op.clone(self.invariants))
        for member in kernel.members:
            if isinstance(member, Contraction):
                self.outer_loops(e, member, list(member.outer_loops), i0, ni)
            else:
                self.segment(e, member, i0, ni)
        block.add_op(scf.ReduceOp())
        total = self.constant(math.prod(counts))
        parallel = scf.ParallelOp([self.constant(0)], [total], [self.constant(1)], Region(block))
        sizes = [ti, *(size for c in kernel.contractions for size in self.blocks[c])]
        contract.TILE_SIZES.set(parallel, sizes)
        contract.REGISTER_TILE.set(parallel, self.register_tile)
        return parallel

    def segment(self, e: Emitter, segment: RowSegment, i0: IndexValue, ni: Extent) -> None:
        """The segment for each row of the block in turn."""

        def row(er: Emitter, ii: IndexValue) -> None:
            self.mapping[self.kernel.i] = er.add(i0, ii, "i")
            values = self.values(er)
            for op in segment.ops:
                er.block.add_op(op.clone(values))

        emit_loop(e, ni, "ii", row)

    def outer_loops(
        self, e: Emitter, nest: Contraction, loops: list[scf.ForOp], i0: IndexValue, ni: Extent
    ) -> None:
        """The loops around k, as they were, then the k and j blocks."""
        if loops:
            iv, extent = loops[0].body.block.args[0], constant_int(loops[0].ub) or 0

            def body(inner: Emitter, index: IndexValue) -> None:
                self.mapping[iv] = index
                self.outer_loops(inner, nest, loops[1:], i0, ni)

            emit_loop(e, static(extent), iv.name_hint or "r", body)
            return
        tk, tj = self.blocks[nest]

        def k_block(ek: Emitter, kb: IndexValue) -> None:
            k0 = ek.mul(kb, tk, "k0")
            nk = block_extent(ek, nest.depth, tk, k0, "nk")

            def j_block(ej: Emitter, jb: IndexValue) -> None:
                j0 = ej.mul(jb, tj, "j0")
                nj = block_extent(ej, nest.cols, tj, j0, "nj")
                self.rows(ej, nest, TileOrigin(i0, ni, k0, nk, j0, nj))

            emit_loop(ek, static(-(-nest.cols // tj)), "jb", j_block)

        emit_loop(e, static(-(-nest.depth // tk)), "kb", k_block)

    def rows(self, e: Emitter, nest: Contraction, tile: TileOrigin) -> None:
        """R rows at a time, each U steps of k at a time, around the jammed `jj` loops."""
        r, u = self.register_tile

        def steps(er: Emitter, rows: list[IndexValue]) -> None:
            def cols(ek: Emitter, ks: list[IndexValue]) -> None:
                def body(ej: Emitter, jj: IndexValue) -> None:
                    self.jam(ej, nest, rows, ks, ej.add(tile.j0, jj, "j"))

                if (loop := emit_loop(ek, tile.nj, "jj", body)) is not None:
                    hoist_invariants(loop, nest.stored)

            in_groups(er, tile.nk, tile.k0, u, ("k", "ku", "kt"), cols)

        in_groups(e, tile.ni, tile.i0, r, ("i", "ir", "it"), steps)

    def jam(
        self,
        e: Emitter,
        nest: Contraction,
        rows: Sequence[IndexValue],
        steps: Sequence[IndexValue],
        j: IndexValue,
    ) -> None:
        """The body cloned per (row, k step), row-major; the output forwarded from one k
        step to the next and stored after the last."""
        forwarded: dict[tuple[int, SSAValue], SSAValue] = {}
        loaded: dict[tuple[SSAValue, tuple[SSAValue, ...]], SSAValue] = {}
        k_iv, j_iv = nest.k_loop.body.block.args[0], nest.j_loop.body.block.args[0]
        for r, row in enumerate(rows):
            for u, step in enumerate(steps):
                self.mapping.update({self.kernel.i: row, k_iv: step, j_iv: j})
                values = self.values(e)
                for op in list(nest.j_loop.body.block.ops)[:-1]:
                    if isinstance(op, memref.LoadOp) and op.memref in nest.stored:
                        if (r, op.memref) in forwarded:
                            values[op.res] = forwarded[(r, op.memref)]
                            continue
                    elif isinstance(op, memref.LoadOp):
                        key = (op.memref, tuple(values.get(x, x) for x in op.indices))
                        if key not in loaded:
                            e.block.add_op(op.clone(values))
                            loaded[key] = values[op.res]
                        values[op.res] = loaded[key]
                        continue
                    elif isinstance(op, memref.StoreOp):
                        forwarded[(r, op.memref)] = values.get(op.value, op.value)
                        if u < len(steps) - 1:
                            continue
                    e.block.add_op(op.clone(values))


# -- the pass ---------------------------------------------------------------------------


@dataclass
class TileRowKernel(RewritePattern):
    """Replace a row kernel's `scf.parallel` by its tiled nest."""

    tile_sizes: tuple[int, int, int]
    register_tile: tuple[int, int]
    min_parallel_blocks: int
    min_macs: int = 0
    short_depth: int = 0
    wide_cols: int = DEFAULT_WIDE_COLS

    def pays(self, kernel: RowKernel, c: Contraction) -> bool:
        """Whether tiling `c` pays for its compile time (module docstring)."""
        if c.depth < self.short_depth and c.cols >= self.wide_cols:
            return False
        macs = kernel.rows * c.depth * c.cols * math.prod(kernel.batch_extents)
        for loop in c.outer_loops:
            if (count := trip_count(loop.lb, loop.ub, loop.step)) is None:
                return True  # no static extent: counts as large
            macs *= count
        return macs >= self.min_macs

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ParallelOp, rewriter: PatternRewriter) -> None:
        if (kernel := match_row_kernel(op)) is None:
            return
        if not any(self.pays(kernel, c) for c in kernel.contractions):
            return
        (r, u), (ti, tk, tj) = self.register_tile, self.tile_sizes
        blocks_needed = -(-self.min_parallel_blocks // math.prod(kernel.batch_extents))
        row_tile = effective_tile(kernel.rows, ti, r, -(-kernel.rows // blocks_needed))
        blocks = {
            c: (effective_tile(c.depth, tk, u), effective_tile(c.cols, tj, 1))
            for c in kernel.contractions
        }
        constant = IndexConstants.before(op)
        tiled = RowKernelTiler(kernel, row_tile, (r, u), constant, blocks).build()
        bounds = {*op.operands}
        for loop in (inner for inner in op.walk() if isinstance(inner, scf.ForOp)):
            bounds.update((loop.lb, loop.ub, loop.step))
        rewriter.replace(op, [*constant.ops, tiled], [])
        for value in bounds:
            if isinstance(value.owner, arith.ConstantOp) and not value.uses:
                rewriter.erase(value.owner)


def _positive_ints(values: Sequence[int], count: int, option: str) -> tuple[int, ...]:
    if len(values) != count or any(not isinstance(v, int) or v < 1 for v in values):
        raise PassFailedException(
            f"tess-tile: {option} takes {count} positive integers, got {list(values)}"
        )
    return tuple(values)


@dataclass(frozen=True)
class TessTilePass(ModulePass):
    """Cache-block (TI x TK x TJ) and register-tile (R rows x U k steps) the contractions
    of row kernels; see the module docstring."""

    name = "tess-tile"

    tile_sizes: tuple[int, ...] = DEFAULT_TILE_SIZES
    register_tile: tuple[int, ...] = DEFAULT_REGISTER_TILE
    min_parallel_blocks: int = DEFAULT_MIN_PARALLEL_BLOCKS
    min_macs: int = DEFAULT_MIN_MACS
    """Tile a row kernel only from this many multiply-adds in one contraction."""
    short_depth: int = DEFAULT_SHORT_DEPTH
    wide_cols: int = DEFAULT_WIDE_COLS
    """A contraction of fewer than `short-depth` k steps over at least `wide-cols` columns
    is not tiled."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ti, tk, tj = _positive_ints(self.tile_sizes, 3, "tile-sizes")
        r, u = _positive_ints(self.register_tile, 2, "register-tile")
        pattern = TileRowKernel(
            (ti, tk, tj),
            (r, u),
            max(1, self.min_parallel_blocks),
            self.min_macs,
            self.short_depth,
            self.wide_cols,
        )
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["DEFAULT_REGISTER_TILE", "DEFAULT_TILE_SIZES", "TessTilePass"]
