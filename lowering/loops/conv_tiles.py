"""
`tess-conv-tiles`: a convolution's row kernel as register-tiled `micro.mma` products, in
one of two forms (level 5, loops). Direct: per (n, block of MR filters, outer output rows),
per tile of NR output columns and tap, one `micro.mma` of depth C reading the weight and
the input row segments in place (the input's column stride 1, C >= `min-depth`, 16; a
weight gradient, with more than `max-taps` (49) taps, takes the last tap as the depth).
Im2col (conv_im2col.py): per tile of whole output rows, a gathered C*K x P patch in a
per-thread scratch slot times the weight. `algorithm=direct|im2col|auto`; `auto`, measured
with bench/bench_conv_tiles.py (lowering/loops/README.md): direct where it applies, unless
its rows are under a vector wide or K = 1 and F >= 32 (LeNet's 4x4 layer, a 1x1: im2col
1.6x); im2col where it does not and the column stride is not 1 (14x over the plain nest)
or C*K >= 32; else the plain nest (a 3-channel 3x3 layer ran no faster gathered). The
weight may be a static-strided view, read where it lies (a strided conv's per-phase input
gradient). The weight gradient keeps the direct form; grouped convs are not matched. The
row segments (zero fill, bias, relu) run per filter and row, around the products.
`tess-fuse`'s conv-in-pool-windows nest (conv_pool.py): im2col tiles, the pools their epilogue.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    ModuleOp,
    i1,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import DiagnosticException

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp
from tessc.lowering.loops.conv_im2col import build_im2col
from tessc.lowering.loops.conv_match import (
    ConvNest,
    column_tiles,
    match_conv,
    output_rows,
    strides_of,
)
from tessc.lowering.loops.conv_pool import build_conv_pool, match_conv_pool
from tessc.lowering.loops.index_emitter import Emitter, IndexValue, emit_loop, static
from tessc.lowering.loops.index_values import IndexConstants
from tessc.lowering.loops.register_tiles import host_vector_bits, register_tile

DEFAULT_MIN_DEPTH = 16
DEFAULT_MAX_TAPS = 49


ALGORITHMS = ("auto", "direct", "im2col")
IM2COL_MIN_DEPTH = 32
"""`auto` gathers a unit-stride conv the direct form leaves from this product depth (C*K)."""
IM2COL_MIN_FILTERS = 32
"""`auto` gathers a conv with output rows under a vector wide, or one tap, from this many
filters."""


def choose_algorithm(
    nest: ConvNest, algorithm: str, min_depth: int, max_taps: int, lanes: int
) -> str | None:
    """ "direct", "im2col" or None (the plain nest) for `nest`, `lanes` elements a vector
    (module docstring's rule)."""
    tap_depth = math.prod(nest.taps) > max_taps
    if tap_depth:  # a weight gradient: only the direct form is written for it
        deep = nest.taps[-1] >= min_depth and nest.weight.tap_steps[-1] >= 1
        return "direct" if deep and nest.strides[-1] == 1 else None
    direct = nest.strides[-1] == 1 and nest.depth >= min_depth
    if algorithm == "direct":
        return "direct" if direct else None
    if algorithm == "im2col":
        return "im2col"
    if direct:
        # Output rows narrower than a vector make the direct form's tiles partial vectors,
        # and one tap makes the gather a plain copy; im2col's tiles span whole rows
        # (LeNet's 4x4 layer: 0.232 ms direct, 0.136 im2col; a 1x1 64->64: 4.43, 2.78),
        # if enough filters share each gathered value (LeNet's 1-filter input gradient:
        # 0.051 direct, 0.217 im2col).
        shape = nest.out_shape[-1] < lanes or math.prod(nest.taps) == 1
        gather = shape and nest.out_shape[1] >= IM2COL_MIN_FILTERS
        return "im2col" if gather else "direct"
    # The plain nest reads strided columns element by element; unit-stride shallow convs
    # run it well (a 3-channel 3x3 layer: plain 1.70 ms, im2col 1.91, README).
    strided = nest.strides[-1] != 1
    deep = nest.depth * math.prod(nest.taps) >= IM2COL_MIN_DEPTH
    return "im2col" if strided or deep else None


@dataclass
class ConvTiles(RewritePattern):
    """Replace a conv row kernel by its register-tiled form, direct or im2col."""

    vector_bits: int
    min_depth: int
    max_taps: int
    algorithm: str
    threads: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ParallelOp, rewriter: PatternRewriter) -> None:
        if (nest := match_conv(op)) is None:
            pooled = match_conv_pool(op)
            if pooled is None or pooled.depth < self.min_depth or self.algorithm == "direct":
                return
            constant = IndexConstants.before(op)
            ops = build_conv_pool(pooled, self.vector_bits, self.threads, constant)
            rewriter.replace(op, [*constant.ops, *ops], [])
            return
        element = nest.out.type.element_type  # type: ignore[attr-defined]
        lanes = register_tile(self.vector_bits, 32 if isinstance(element, Float32Type) else 64)[2]
        form = choose_algorithm(nest, self.algorithm, self.min_depth, self.max_taps, lanes)
        if form is None:
            return
        constant = IndexConstants.before(op)
        if form == "im2col":
            ops = build_im2col(nest, self.vector_bits, self.threads, constant)
        else:
            # Many taps (a weight gradient: the taps are the output's extent): the last
            # tap is the depth of each call, read forward by both operands.
            tap_depth = math.prod(nest.taps) > self.max_taps
            ops = _build(nest, self.vector_bits, constant, tap_depth)
        rewriter.replace(op, [*constant.ops, *ops], [])


def _build(
    nest: ConvNest, vector_bits: int, constant: IndexConstants, tap_depth: bool
) -> list[Operation]:
    out_shape, layout = nest.out_shape, nest.weight
    x_strides = strides_of(nest.x)
    element = nest.out.type.element_type  # type: ignore[attr-defined]
    bits = 32 if isinstance(element, Float32Type) else 64
    most_rows, width, lanes = register_tile(vector_bits, bits)
    features, depth = out_shape[1], nest.depth
    rows = max(r for r in range(1, most_rows + 1) if features % r == 0)
    spatial = len(out_shape) - 2
    extents = [out_shape[0], features // rows, *out_shape[2:-1]]
    block = Block(arg_types=[IndexType()] * len(extents))
    args = block.args
    e = Emitter(block, constant)
    view, acc = output_rows(nest)  # in the body: see output_rows
    for op in view:
        block.add_op(op)
    values: dict[SSAValue, SSAValue] = {}
    for invariant in nest.invariant_ops:
        block.add_op(invariant.clone(values))
    n, fb, outer = args[0], args[1], args[2:]
    f0 = e.mul(fb, rows, "f0")
    old_n, old_f, *old_outer = nest.rows
    for old, new in ((old_n, n), *zip(old_outer, outer, strict=True)):
        if old is not None:
            values[old] = new

    def segments(ops: Sequence[Operation]) -> None:
        def row(er: Emitter, r: IndexValue) -> None:
            mapping = dict(values)
            if old_f is not None:
                mapping[old_f] = er.value(er.add(f0, r, "f"))
            for o in ops:
                er.block.add_op(o.clone(mapping))

        if ops:
            emit_loop(e, static(rows), "r", row)

    segments(nest.before)
    yes = arith.ConstantOp(IntegerAttr(1, i1))
    block.add_op(yes)
    cols = out_shape[-1]
    # The first element of this block's output rows, in the (N, F, O) view.
    position: IndexValue = 0
    for i, o in enumerate(outer):
        position = e.add(position, e.mul(o, math.prod(out_shape[3 + i :])))
    a_base = e.add(e.mul(f0, layout.filter_stride), layout.origin)
    b_base: IndexValue = e.mul(n, x_strides[0])
    for i, o in enumerate(outer):
        b_base = e.add(b_base, e.mul(o, nest.strides[i] * x_strides[2 + i]))
    tap_strides = [nest.dilations[i] * x_strides[2 + i] for i in range(spatial)]
    # (extent, weight step, input step) of each loop around the calls, and of the depth.
    axes = [(k, layout.tap_steps[i], tap_strides[i]) for i, k in enumerate(nest.taps)]
    channel = (depth, layout.channel_stride, x_strides[1])
    if tap_depth:  # the last tap is the depth, the channels a loop
        axes, inner = [channel, *axes[:-1]], axes[-1]
    else:
        inner = channel

    Tile = tuple[IndexValue, tuple[int, int, int]]  # output column, (rows, cols, lanes)

    def tap(et: Emitter, level: int, a: IndexValue, b: IndexValue, tile: Tile) -> None:
        """The loops from `level` on, a `micro.mma` of the depth in each."""
        if level == len(axes):
            column, shape = tile
            indices = [et.value(v) for v in (n, f0, column)]
            strides = (layout.filter_stride, inner[1], inner[2])
            values = (et.value(a), et.value(b), et.value(inner[0]))
            mma = MmaOp(
                nest.w, values[0], nest.x, *values[1:], acc, indices, yes.result, shape, strides
            )
            et.block.add_op(mma)
            return
        extent, a_step, b_step = axes[level]

        def step(es: Emitter, k: IndexValue) -> None:
            tap(es, level + 1, es.add(a, es.mul(k, a_step)), es.add(b, es.mul(k, b_step)), tile)

        emit_loop(et, static(extent), f"k{level}", step)

    for start, tile_cols, tile_lanes in column_tiles(cols, width, lanes):
        tile = (e.add(position, start), (rows, tile_cols, tile_lanes))
        tap(e, 0, a_base, e.add(b_base, start), tile)
    segments(nest.after)
    block.add_op(scf.ReduceOp())
    zero, one = e.value(0), e.value(1)
    loop = scf.ParallelOp(
        [zero] * len(extents), [e.value(x) for x in extents], [one] * len(extents), Region(block)
    )
    contract.TILE_SIZES.set(loop, [rows, width])
    contract.REGISTER_TILE.set(loop, [rows, width])
    return [loop]


@dataclass(frozen=True)
class TessConvTilesPass(ModulePass):
    """Run convolutions' row kernels as register-tiled direct convolutions; see the
    module docstring. `min-depth`: the fewest channels, `max-taps`: the most kernel
    taps for which a conv is tiled."""

    name = "tess-conv-tiles"

    vector_bits: int = 0
    min_depth: int = DEFAULT_MIN_DEPTH
    max_taps: int = DEFAULT_MAX_TAPS
    algorithm: str = "auto"
    threads: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.algorithm not in ALGORITHMS:
            raise DiagnosticException(
                f"tess-conv-tiles: algorithm must be one of {', '.join(ALGORITHMS)}, "
                f"not {self.algorithm!r}"
            )
        bits = self.vector_bits or host_vector_bits()
        threads = self.threads or os.cpu_count() or 1
        pattern = ConvTiles(bits, self.min_depth, self.max_taps, self.algorithm, threads)
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["ALGORITHMS", "TessConvTilesPass", "choose_algorithm"]
