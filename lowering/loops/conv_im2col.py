"""
`tess-conv-tiles`' im2col form (level 5, loops): a conv row kernel as, per tile of output
pixels, a gathered patch matrix times the weight in `micro.mma` register tiles.

The output's pixels `(o_1.., o_s)` of one image are cut into tiles of whole output rows
(`P` pixels). Each thread owns one patch buffer of `C * K` rows by `P` columns (K taps), a
slot of one `memref.alloc` at the kernel's top (`tess-hoist-scratch` makes it a view of the
workspace, so no patch outlives the kernel and none is image-sized). Per tile: gather
`patch[(c, k), p] = x[n, c, o(p) * s + k * d]` (strides and dilations handled here, so
every product reads unit-stride columns), run the zero fill, then per block of MR filters
and column tile one `micro.mma` of depth `C * K` where the weight's `(c, k)` flatten to one
stride (the forward conv's OIHW), else one of depth C per tap (a transposed conv's flipped,
channel-swapped view: the patch is then tap-major), then the epilogue (bias, relu).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    Float32Type,
    IndexType,
    IntegerAttr,
    i1,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.loops.contraction_match import without_zero_fill
from tessc.lowering.loops.conv_match import ConvNest, column_tiles, output_rows
from tessc.lowering.loops.index_emitter import Emitter, IndexValue, emit_loop, make_extent, static
from tessc.lowering.loops.index_values import IndexConstants
from tessc.lowering.loops.register_tiles import register_tile

PATCH_BYTES = 256 * 1024
"""A patch (one thread's) fills at most this much (an L2's share) unless one row needs more."""
PATCH_COLUMNS = 256
"""A tile takes whole output rows up to this many pixels."""


def flat_weight_stride(nest: ConvNest) -> int | None:
    """The one element stride of the weight's `(c, k...)` flattened, if there is one."""
    layout = nest.weight
    dims = [(nest.depth, layout.channel_stride)]
    dims += [(t, s) for t, s in zip(nest.taps, layout.tap_steps, strict=True) if t > 1]
    unit = dims[-1][1]
    if unit < 1:
        return None
    inner = 1
    for extent, stride in reversed(dims):
        if stride != unit * inner:
            return None
        inner *= extent
    return unit


def rows_per_patch(rows: int, columns_per_row: int, depth: int, element_bytes: int) -> int:
    """The most of `rows` (a divisor of it, at least one) whose patch, `depth` values per
    column, fits the column and byte budgets."""
    fits = [
        r
        for r in range(1, rows + 1)
        if rows % r == 0
        and r * columns_per_row <= PATCH_COLUMNS
        and depth * r * columns_per_row * element_bytes <= PATCH_BYTES
    ]
    return max(fits, default=1)


def tile_rows(nest: ConvNest, element_bytes: int) -> int:
    """Output rows per tile: the most that divide the rows and fit the column and byte
    budgets (at least one)."""
    shape = nest.out_shape
    depth = nest.depth * math.prod(nest.taps)
    return rows_per_patch(math.prod(shape[2:-1]), shape[-1], depth, element_bytes)


def gather_columns(
    e: Emitter,
    x: SSAValue,
    outer: Sequence[IndexValue],
    offset: IndexValue,
    stride: int,
    patch: SSAValue,
    start: IndexValue,
    cols: int,
) -> None:
    """One patch row: `patch[start + col] = x[*outer, col * stride + offset]` for each of
    `cols` output columns (the im2col gather both conv kernels share)."""

    def per_column(eo: Emitter, col: IndexValue) -> None:
        spot = eo.add(eo.mul(col, stride), offset)
        index = [eo.value(v) for v in (*outer, spot)]
        eo.block.add_op(load := memref.LoadOp.get(x, index))
        at = [eo.value(eo.add(start, col))]
        eo.block.add_op(memref.StoreOp.get(load.res, patch, at))

    emit_loop(e, static(cols), "col", per_column)


def build_im2col(
    nest: ConvNest, vector_bits: int, threads: int, constant: IndexConstants
) -> list[Operation]:
    """The kernel body replacing `nest.parallel` (module docstring)."""
    out_shape, layout = nest.out_shape, nest.weight
    element = nest.out.type.element_type  # type: ignore[attr-defined]
    element_bytes = 4 if isinstance(element, Float32Type) else 8
    most_rows, width, lanes = register_tile(vector_bits, element_bytes * 8)
    batch, features, depth = out_shape[0], out_shape[1], nest.depth
    mr = max(r for r in range(1, most_rows + 1) if features % r == 0)
    spatial = len(out_shape) - 2
    outer_dims, cols = out_shape[2:-1], out_shape[-1]
    taps = math.prod(nest.taps)
    rb = tile_rows(nest, element_bytes)
    pixels = rb * cols
    patch_size = depth * taps * pixels
    tiles_per_image = math.prod(outer_dims) // rb
    items = batch * tiles_per_image
    unit = flat_weight_stride(nest)
    before: Sequence[Operation] = nest.before
    filled = False
    if unit is not None:  # one product per tile: it stores, so the zero fill goes
        row_index = list(nest.store.indices)[-2]
        before, filled = without_zero_fill(nest.before, nest.store, row_index, None, cols)

    top = Block()
    e = Emitter(top, constant)
    threads = max(1, min(threads, items))
    top.add_op(alloc := memref.AllocOp.get(element, 64, [threads * patch_size]))
    alloc.memref.name_hint = "patch"
    patch = alloc.memref
    groups: IndexValue = 1
    if threads > 1:
        top.add_op(running := NumThreadsOp())
        running.result.name_hint = "threads"
        groups = e.apply(arith.MinSIOp, running.result, threads, "groups")
    yes = arith.ConstantOp(IntegerAttr(0 if filled else 1, i1))
    top.add_op(yes)
    old_n, old_f, *old_outer = nest.rows

    def group(eg: Emitter, g: SSAValue) -> None:
        view, acc = output_rows(nest)  # in the body: see output_rows
        for op in view:
            eg.block.add_op(op)
        values: dict[SSAValue, SSAValue] = {}
        for invariant in nest.invariant_ops:
            eg.block.add_op(invariant.clone(values))
        slot = eg.mul(g, patch_size, "slot")
        lo = eg.apply(arith.DivUIOp, eg.mul(g, items), groups, "lo")
        hi = eg.apply(arith.DivUIOp, eg.mul(eg.add(g, 1), items), groups, "hi")
        count = make_extent(eg.apply(arith.SubiOp, hi, lo), set() if threads > 1 else {items})

        def item(ei: Emitter, i: IndexValue) -> None:
            flat_item = ei.add(lo, i, "item")
            n = ei.apply(arith.DivUIOp, flat_item, tiles_per_image, "n")
            r0 = ei.mul(ei.apply(arith.RemUIOp, flat_item, tiles_per_image), rb, "r0")

            def outer_of(er: Emitter, row: IndexValue) -> list[IndexValue]:
                """(o_1.., o_{s-1}) of output row `row` of the image."""
                found: list[IndexValue] = []
                rest = row
                for extent in reversed(outer_dims):
                    found.append(er.apply(arith.RemUIOp, rest, extent))
                    rest = er.apply(arith.DivUIOp, rest, extent)
                return found[::-1]

            gather(ei, n, r0, outer_of, slot)
            segments(ei, before, n, r0, outer_of)
            products(ei, n, r0, slot, acc)
            segments(ei, nest.after, n, r0, outer_of)

        def segments(es: Emitter, ops: Sequence[Operation], n: IndexValue, r0: IndexValue,
                     outer_of: object) -> None:  # fmt: skip
            if not ops:
                return

            def per_filter(ef: Emitter, f: IndexValue) -> None:
                def per_row(er: Emitter, rr: IndexValue) -> None:
                    mapping = dict(values)
                    if old_n is not None:
                        mapping[old_n] = er.value(n)
                    if old_f is not None:
                        mapping[old_f] = er.value(f)
                    outer = outer_of(er, er.add(r0, rr))  # type: ignore[operator]
                    for old, new in zip(old_outer, outer, strict=True):
                        if old is not None:
                            mapping[old] = er.value(new)
                    for o in ops:
                        er.block.add_op(o.clone(mapping))

                emit_loop(ef, static(rb), "rr", per_row)

            emit_loop(es, static(features), "f", per_filter)

        emit_loop(eg, count, "it", item)

    def gather(
        e: Emitter, n: IndexValue, r0: IndexValue, outer_of: object, slot: IndexValue
    ) -> None:
        """patch[slot + row(c, k) * P + rr * cols + col] = x[n, c, o * s + k * d]."""

        def per_row(er: Emitter, rr: IndexValue) -> None:
            outer = outer_of(er, er.add(r0, rr))  # type: ignore[operator]
            column0 = er.add(slot, er.mul(rr, cols))

            def per_channel(ec: Emitter, c: IndexValue) -> None:
                def per_tap(et: Emitter, level: int, k: list[IndexValue]) -> None:
                    if level < spatial:
                        emit_loop(
                            et,
                            static(nest.taps[level]),
                            f"k{level}",
                            lambda el, kk: per_tap(el, level + 1, [*k, kk]),
                        )
                        return
                    kflat: IndexValue = 0
                    for extent, kk in zip(nest.taps, k, strict=True):
                        kflat = et.add(et.mul(kflat, extent), kk)
                    if unit is not None:
                        prow = et.add(et.mul(c, taps), kflat)
                    else:
                        prow = et.add(et.mul(kflat, depth), c)
                    start = et.add(column0, et.mul(prow, pixels))
                    spots = [
                        et.add(et.mul(o, nest.strides[i]), et.mul(k[i], nest.dilations[i]))
                        for i, o in enumerate(outer)
                    ]
                    last = et.mul(k[-1], nest.dilations[-1])

                    gather_columns(et, nest.x, (n, c, *spots), last, nest.strides[-1],
                                   patch, start, cols)  # fmt: skip

                per_tap(ec, 0, [])

            emit_loop(er, static(depth), "c", per_channel)

        emit_loop(e, static(rb), "rr", per_row)

    def products(
        e: Emitter, n: IndexValue, r0: IndexValue, slot: IndexValue, acc: SSAValue
    ) -> None:
        """Per filter block and column tile, the weight times the patch."""

        def per_block(ef: Emitter, fb: IndexValue) -> None:
            f0 = ef.mul(fb, mr, "f0")
            a_base = ef.add(ef.mul(f0, layout.filter_stride), layout.origin)
            for start, tile_cols, tile_lanes in column_tiles(pixels, width, lanes):
                column = ef.add(ef.mul(r0, cols), start)
                indices = [ef.value(v) for v in (n, f0, column)]
                shape = (mr, tile_cols, tile_lanes)
                if unit is not None:  # one product of depth C * K
                    strides = (layout.filter_stride, unit, pixels)
                    b_base = ef.add(slot, start)
                    product(ef, a_base, b_base, depth * taps, indices, shape, strides, acc)
                    continue
                per_tap_products(ef, a_base, ef.add(slot, start), indices, shape, acc)

        emit_loop(e, static(features // mr), "fb", per_block)

    def product(
        e: Emitter, a: IndexValue, b: IndexValue, k: IndexValue, indices: list[SSAValue],
        shape: tuple[int, int, int], strides: tuple[int, ...], acc: SSAValue,
    ) -> None:  # fmt: skip
        """`acc += w[a..] @ patch[b..]` over depth `k`: one `micro.mma`."""
        values = [e.value(v) for v in (a, b, k)]
        op = MmaOp(nest.w, values[0], patch, values[1], values[2], acc, indices, yes.result,
                   shape, strides)  # fmt: skip
        e.block.add_op(op)

    def per_tap_products(
        e: Emitter, a_base: IndexValue, b_base: IndexValue, indices: list[SSAValue],
        shape: tuple[int, int, int], acc: SSAValue,
    ) -> None:  # fmt: skip
        """One product of depth C per tap (the patch tap-major)."""
        strides = (layout.filter_stride, layout.channel_stride, pixels)

        def per_tap(et: Emitter, level: int, a: IndexValue, kflat: IndexValue) -> None:
            if level == spatial:
                b = et.add(b_base, et.mul(kflat, depth * pixels))
                product(et, a, b, depth, indices, shape, strides, acc)
                return
            extent, step = nest.taps[level], layout.tap_steps[level]

            def body(el: Emitter, k: IndexValue) -> None:
                per_tap(el, level + 1, el.add(a, el.mul(k, step)), el.add(el.mul(kflat, extent), k))

            emit_loop(et, static(extent), f"k{level}", body)

        per_tap(e, 0, a_base, 0)

    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = "g"
    group(Emitter(block, constant), block.args[0])
    block.add_op(scf.ReduceOp())
    loop = scf.ParallelOp([e.value(0)], [e.value(groups)], [e.value(1)], Region(block))
    contract.TILE_SIZES.set(loop, [mr, pixels])
    contract.REGISTER_TILE.set(loop, [mr, width])
    top.add_op(loop)
    ops = list(top.ops)
    for op in ops:
        op.detach()
    return ops


__all__ = [
    "PATCH_BYTES",
    "PATCH_COLUMNS",
    "build_im2col",
    "flat_weight_stride",
    "gather_columns",
    "rows_per_patch",
    "tile_rows",
]
