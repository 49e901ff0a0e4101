"""
`tess-tile-dot`: register-tile dot-product nests, where the reduction is the unit-stride
dim of both operands (level 5, loops).

A zip+reduce over the last dim (`a @ w.T` written out, attention scores) leaves one `k`
loop per output element, which loads and stores its output every step and does not
vectorise. This pass jams R x C outputs into one `k` loop with loop-carried accumulators
(`iter_args`), so R + C vector loads feed R x C multiply-adds and nothing is stored in the
loop; a thread sweeps its row tiles over a block of `column-block` columns. Each output
keeps its k order. Gated by a static cost model (`min-macs`, `min-macs-long` from
`long-depth`); the match, the legality and the measured figures are in
lowering/loops/README.md. The new loop carries `tess.register_tile`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.lowering.loops.contraction_match import DotNest, match_dot
from tessc.lowering.loops.index_values import IndexConstants
from tessc.lowering.loops.trip_counts import trip_count

DEFAULT_DOT_TILE: tuple[int, int] = (4, 4)
DEFAULT_COLUMN_BLOCK = 64
"""Output columns (rows of the right-hand side) one thread sweeps all its row tiles over."""
DEFAULT_MIN_MACS = 1 << 12
"""Multiply-adds from which a dot nest is tiled (module docstring: where it pays)."""
DEFAULT_LONG_DEPTH = 64
"""The dot length from which LLVM vectorises the plain nest's k loop."""
DEFAULT_MIN_MACS_LONG = 1 << 18
"""Multiply-adds from which a nest of a long dot (K >= `DEFAULT_LONG_DEPTH`) is tiled."""


@dataclass
class DotTiler:
    """Builds the register-tiled replacement of one `DotNest`."""

    nest: DotNest
    rows: int  # R
    cols: int  # C
    column_block: int  # TJ
    constant: IndexConstants

    def build(self) -> scf.ParallelOp:
        nest, r_count, c_count = self.nest, self.rows, self.cols
        old = nest.parallel.body.block.args
        *batch, n, m = nest.extents
        tiles_j = m // c_count
        per_block = max(1, min(self.column_block // c_count, tiles_j))
        blocks_j = -(-tiles_j // per_block)
        outer = Block(arg_types=[IndexType()] * len(old))
        for new_arg, old_arg in zip(outer.args[:-2], old[:-2], strict=True):
            new_arg.name_hint = old_arg.name_hint
        jo, ib = outer.args[-2:]
        jo.name_hint, ib.name_hint = "jo", "ib"
        outer.add_op(first := arith.MuliOp(jo, self.constant(per_block)))
        count: SSAValue = self.constant(per_block)
        if tiles_j % per_block:
            outer.add_op(rest := arith.SubiOp(self.constant(tiles_j), first.result))
            outer.add_op(least := arith.MinSIOp(count, rest.result))
            count = least.result
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = "ji"
        block.add_op(jb := arith.AddiOp(first.result, block.args[0]))
        jb.result.name_hint = "jb"

        def offset(base: SSAValue, size: int, index: int, hint: str) -> SSAValue:
            block.add_op(start := arith.MuliOp(base, self.constant(size)))
            if index == 0:
                start.result.name_hint = hint
                return start.result
            block.add_op(moved := arith.AddiOp(start.result, self.constant(index)))
            moved.result.name_hint = hint
            return moved.result

        rows = [offset(ib, r_count, r, "i") for r in range(r_count)]
        cols = [offset(jb.result, c_count, c, "j") for c in range(c_count)]
        maps: list[dict[SSAValue, SSAValue]] = [
            {**dict(zip(old[:-2], outer.args[:-2], strict=True)), old[-2]: row, old[-1]: col}
            for row in rows
            for col in cols
        ]
        self.tile(block, maps)
        block.add_op(scf.YieldOp())
        zero, one = self.constant(0), self.constant(1)
        outer.add_op(scf.ForOp(zero, count, one, [], block))
        outer.add_op(scf.ReduceOp())
        uppers = [self.constant(e) for e in (*batch, blocks_j, n // r_count)]
        dims = len(uppers)
        parallel = scf.ParallelOp([zero] * dims, uppers, [one] * dims, Region(outer))
        contract.REGISTER_TILE.set(parallel, (r_count, c_count))
        return parallel

    def tile(self, block: Block, maps: list[dict[SSAValue, SSAValue]]) -> None:
        """The nest's body for R x C output elements (`maps`: their index values), the k
        loop jammed with one accumulator each."""
        nest = self.nest
        for values in maps:
            for op in nest.before:
                block.add_op(op.clone(values))
        inits: list[SSAValue] = []
        for values in maps:
            block.add_op(init := nest.acc_load.clone(values))
            inits.append(init.res)
        k_old = nest.k_loop.body.block.args[0]
        body = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        body.args[0].name_hint = k_old.name_hint or "k"
        loaded: dict[tuple[SSAValue, tuple[SSAValue, ...]], SSAValue] = {}
        yielded: list[SSAValue] = []
        for values, acc in zip(maps, body.args[1:], strict=True):
            acc.name_hint = "acc"
            values = {**values, k_old: body.args[0], nest.acc_load.res: acc}
            for op in list(nest.k_loop.body.block.ops)[:-1]:
                if op is nest.acc_load:
                    continue
                if op is nest.acc_store:
                    yielded.append(values.get(op.value, op.value))
                    continue
                if isinstance(op, memref.LoadOp):
                    key = (op.memref, tuple(values.get(x, x) for x in op.indices))
                    if key not in loaded:
                        body.add_op(op.clone(values))
                        loaded[key] = values[op.res]
                    values[op.res] = loaded[key]
                    continue
                body.add_op(op.clone(values))
        body.add_op(scf.YieldOp(*yielded))
        k_loop = nest.k_loop
        block.add_op(loop := scf.ForOp(k_loop.lb, k_loop.ub, k_loop.step, inits, body))
        for values, result in zip(maps, loop.res, strict=True):
            block.add_op(nest.acc_store.clone({**values, nest.acc_store.value: result}))
        for values in maps:
            for op in nest.after:
                block.add_op(op.clone(values))

    def leftover(self, rows: tuple[int, int], cols: tuple[int, int]) -> scf.ParallelOp:
        """The original nest on rows [rows) x cols [cols), marked so it is not tiled again."""
        nest = self.nest
        *batch, _, _ = nest.extents
        lowers = [self.constant(v) for v in (*(0 for _ in batch), rows[0], cols[0])]
        uppers = [self.constant(v) for v in (*batch, rows[1], cols[1])]
        steps = [self.constant(1)] * len(uppers)
        region = nest.parallel.body.clone()
        rest = scf.ParallelOp(lowers, uppers, steps, region)
        contract.REGISTER_TILE.set(rest, (1, 1))
        return rest


@dataclass
class TileDotNest(RewritePattern):
    """Replace a dot-product nest by its register-tiled form and its leftovers."""

    tile: tuple[int, int]
    column_block: int
    min_macs: int = 0
    long_depth: int = DEFAULT_LONG_DEPTH
    min_macs_long: int = 0

    def pays(self, nest: DotNest) -> bool:
        """Whether the nest is large enough for its tile to pay for its compile time."""
        k_loop = nest.k_loop
        depth = trip_count(k_loop.lb, k_loop.ub, k_loop.step)
        if depth is None:
            return True
        macs = math.prod(nest.extents) * depth
        return macs >= (self.min_macs_long if depth >= self.long_depth else self.min_macs)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ParallelOp, rewriter: PatternRewriter) -> None:
        if (nest := match_dot(op)) is None:
            return
        r_count, c_count = self.tile
        *_, n, m = nest.extents
        if n < r_count or m < c_count or not self.pays(nest):
            return
        constant = IndexConstants.before(op)
        tiler = DotTiler(nest, r_count, c_count, self.column_block, constant)
        new_ops: list[Operation] = [tiler.build()]
        n_full, m_full = n - n % r_count, m - m % c_count
        if n_full < n:
            new_ops.append(tiler.leftover((n_full, n), (0, m)))
        if m_full < m:
            new_ops.append(tiler.leftover((0, n_full), (m_full, m)))
        rewriter.replace(op, [*constant.ops, *new_ops], [])


def _tile(values: Sequence[int]) -> tuple[int, int]:
    if len(values) != 2 or any(not isinstance(v, int) or v < 1 for v in values):
        raise PassFailedException(
            f"tess-tile-dot: register-tile takes 2 positive integers, got {list(values)}"
        )
    return values[0], values[1]


@dataclass(frozen=True)
class TessTileDotPass(ModulePass):
    """Register-tile dot-product nests (R rows x C columns); see the module docstring."""

    name = "tess-tile-dot"

    register_tile: tuple[int, ...] = DEFAULT_DOT_TILE
    column_block: int = DEFAULT_COLUMN_BLOCK
    min_macs: int = DEFAULT_MIN_MACS
    """Tile a nest only from this many multiply-adds."""
    long_depth: int = DEFAULT_LONG_DEPTH
    """A dot at least this long vectorises untiled: `min-macs-long` applies to it."""
    min_macs_long: int = DEFAULT_MIN_MACS_LONG
    """Tile a nest of a long dot only from this many multiply-adds."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = TileDotNest(
            _tile(self.register_tile),
            max(1, self.column_block),
            self.min_macs,
            self.long_depth,
            self.min_macs_long,
        )
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["DEFAULT_DOT_TILE", "TessTileDotPass"]
