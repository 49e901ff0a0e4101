"""
`tess-conv-tiles`' pool epilogue (level 5, loops): the nest `tess-fuse` makes of a conv
(+ bias, relu) computed inside the non-overlapping windows of its pool (`pool-windows`,
a window as wide as its stride) as im2col tiles with the pool as their epilogue.

The fused nest runs the pool's loops `(n, f, p..)`, the window's `(i..)`, then the conv's
reductions `(c, k..)`, its innermost body summing the conv (`total`) and, at the last
reduction step, applying the epilogue and the pool's combine. Here, per tile of whole
pool rows of one image (its conv rows `p * W + i`, the conv columns the pool reads): the
input patch gathered into a per-thread slot (`C * K` rows by the tile's pixels), one
`micro.mma` of depth `C * K` per block of MR filters and column tile into a per-thread
tile of conv values (every filter), then per filter and pool output the fused nest's
ops around its window loops and, per window element, its epilogue ops, cloned with
`total` read from the tile. No buffer of the conv's
output exists; the partial-sum output of the fused op is no longer written. Matched for
1-D and 2-D convs with an OIHW (row-major) weight and a row-major input; else the fused
nest stays as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import Float32Type, IndexType, IntegerAttr, MemRefType, NoneAttr, i1
from xdsl.ir import Block, Operation, Region, SSAValue

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.loops.conv_im2col import gather_columns, rows_per_patch
from tessc.lowering.loops.conv_match import column_tiles, linear
from tessc.lowering.loops.index_emitter import Emitter, IndexValue, emit_loop, make_extent, static
from tessc.lowering.loops.index_values import IndexConstants, constant_int
from tessc.lowering.loops.register_tiles import register_tile
from tessc.lowering.loops.trip_counts import unit_loop_bound


@dataclass(frozen=True)
class PoolNest:
    """A matched fused conv + pool nest (module docstring). `pooled`: the parallel
    indices `(n, f, p..)` in the pool output's order; `prologue`, `after`: the ops around
    the window loops (the pool's fill; an average's division); `windows`, `taps`: the window and tap
    loop indices per spatial dim; `epilogue`: the innermost ops the pool's store needs,
    `total` (the conv's sum) excluded, and the pools' stores."""

    parallel: scf.ParallelOp
    pooled: tuple[SSAValue, ...]
    prologue: tuple[Operation, ...]
    after: tuple[Operation, ...]
    windows: tuple[SSAValue, ...]
    channel: SSAValue
    taps: tuple[SSAValue, ...]
    trips: dict[SSAValue, int]
    epilogue: tuple[Operation, ...]
    total: SSAValue
    x: SSAValue
    w: SSAValue
    out_shape: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]

    @property
    def spatial(self) -> int:
        return len(self.out_shape) - 2

    @property
    def window(self) -> tuple[int, ...]:
        return tuple(self.trips[i] for i in self.windows)

    @property
    def kernel(self) -> tuple[int, ...]:
        return tuple(self.trips[k] for k in self.taps)

    @property
    def depth(self) -> int:
        return self.trips[self.channel]


def _row_major(value: SSAValue) -> tuple[int, ...] | None:
    typ = value.type
    if not isinstance(typ, MemRefType) or not isinstance(typ.layout, NoneAttr):
        return None
    return tuple(typ.get_shape())


def _slice(store: memref.StoreOp, body: Block, stop: SSAValue) -> list[Operation] | None:
    """The ops of `body` that `store`'s value depends on, not looking past `stop`."""
    needed: set[Operation] = set()
    work = [store.value]
    while work:
        value = work.pop()
        owner = value.owner
        if value is stop or not isinstance(owner, Operation) or owner.parent_block() is not body:
            continue
        if owner in needed:
            continue
        if owner.regions:
            return None
        needed.add(owner)
        work.extend(owner.operands)
    return [op for op in body.ops if op in needed]


def match_conv_pool(op: scf.ParallelOp) -> PoolNest | None:
    """The fused conv + pool nest rooted at `op`, if it is one (module docstring)."""
    if contract.REGISTER_TILE.has(op) or any(constant_int(v) != 0 for v in op.lowerBound):
        return None
    if any(constant_int(v) != 1 for v in op.step):
        return None
    ivs = tuple(op.body.block.args)
    ops = list(op.body.block.ops)[:-1]
    fors = [i for i, o in enumerate(ops) if isinstance(o, scf.ForOp)]
    if len(fors) != 1 or any(o.regions for o in ops if not isinstance(o, scf.ForOp)):
        return None
    prologue, after = tuple(ops[: fors[0]]), tuple(ops[fors[0] + 1 :])
    trips: dict[SSAValue, int] = {}
    loop = ops[fors[0]]
    assert isinstance(loop, scf.ForOp)
    chain: list[SSAValue] = []
    while True:
        trip = unit_loop_bound(loop.lb, loop.ub, loop.step)
        if trip is None or trip < 1:
            return None
        iv = loop.body.block.args[0]
        trips[iv] = trip
        chain.append(iv)
        inner = list(loop.body.block.ops)[:-1]
        if len(inner) == 1 and isinstance(inner[0], scf.ForOp):
            loop = inner[0]
            continue
        if any(o.regions for o in inner):
            return None
        body = loop.body.block
        break
    stores = [o for o in body.ops if isinstance(o, memref.StoreOp)]
    found = _conv_sum(stores)
    if found is None:
        return None
    total, partial, x_load, w_load = found
    pool_stores = [o for o in stores if o is not partial]
    out_shape = _row_major(pool_stores[0].memref)
    x_shape, w_shape = _row_major(x_load.memref), _row_major(w_load.memref)
    if out_shape is None or x_shape is None or w_shape is None:
        return None
    if len(ivs) != len(out_shape) or any(
        tuple(o.indices) != ivs or _row_major(o.memref) != out_shape for o in pool_stores
    ):
        return None
    spatial = len(out_shape) - 2
    if spatial not in (1, 2) or len(x_shape) != len(out_shape) or len(w_shape) != len(out_shape):
        return None
    n, f, *pooled = ivs
    w_ivs = list(w_load.indices)
    x_ivs = list(x_load.indices)
    channel, taps = w_ivs[1], tuple(w_ivs[2:])
    if w_ivs[0] is not f or x_ivs[0] is not n or x_ivs[1] is not channel:
        return None
    if len({channel, *taps}) != 1 + spatial or not {channel, *taps} <= set(chain):
        return None
    windows: list[SSAValue] = []
    strides: list[int] = []
    dilations: list[int] = []
    for d in range(spatial):
        form = linear(x_ivs[2 + d])
        if form is None or form.pop(None, 0) != 0:
            return None
        p, k = pooled[d], taps[d]
        rest = [v for v in form if v not in (p, k)]
        if len(rest) != 1 or rest[0] not in chain or rest[0] in windows:
            return None
        i = rest[0]
        stride, dilation = form[i], form.get(k, 0) if trips[k] > 1 else 1
        # A window as wide as its stride: conv row p * W + i, each read once.
        if stride < 1 or dilation < 1 or form.get(p, 0) != trips[i] * stride:
            return None
        windows.append(i)
        strides.append(stride)
        dilations.append(dilation)
    if set(chain) != {*windows, channel, *taps}:
        return None
    if w_shape != (out_shape[1], trips[channel], *(trips[k] for k in taps)):
        return None
    if x_shape[:2] != (out_shape[0], trips[channel]):
        return None
    needed: set[Operation] = set()
    for store in pool_stores:
        if (ops := _slice(store, body, total)) is None:
            return None
        needed.update(ops, [store])
    epilogue = [o for o in body.ops if o in needed]
    if any(
        isinstance(o, memref.LoadOp) and o.memref in (x_load.memref, w_load.memref, partial.memref)
        for o in epilogue
    ):
        return None
    if not {u.operation for u in total.uses} <= {*epilogue, partial}:
        return None
    return PoolNest(
        op, ivs, prologue, after, tuple(windows), channel, taps, trips, tuple(epilogue),
        total, x_load.memref, w_load.memref, out_shape, tuple(strides), tuple(dilations),
    )  # fmt: skip


def _conv_sum(
    stores: Sequence[memref.StoreOp],
) -> tuple[SSAValue, memref.StoreOp, memref.LoadOp, memref.LoadOp] | None:
    """(total, its store, the x and w loads): the one store of `total = previous + x * w`
    (the conv's partial sum); the others store the pools' values."""
    for partial in stores:
        total = partial.value.owner
        if not isinstance(total, arith.AddfOp) or len(stores) < 2:
            continue
        for product in (total.lhs.owner, total.rhs.owner):
            if not isinstance(product, arith.MulfOp):
                continue
            loads = [v.owner for v in (product.lhs, product.rhs)]
            if not all(isinstance(o, memref.LoadOp) for o in loads):
                continue
            a, b = loads
            assert isinstance(a, memref.LoadOp) and isinstance(b, memref.LoadOp)
            # The input is read through window expressions, the weight by loop indices.
            if all(isinstance(v.owner, Block) for v in a.indices):
                a, b = b, a
            if not all(isinstance(v.owner, Block) for v in b.indices):
                continue
            return partial.value, partial, a, b
    return None


def tile_pool_rows(nest: PoolNest, element_bytes: int) -> int:
    """Pool rows (2-D: of the first pooled dim; 1-D: 1) per tile: the most that divide
    them and fit the patch's column and byte budgets (at least one)."""
    if nest.spatial == 1:
        return 1
    per_row = nest.window[0] * nest.out_shape[3] * nest.window[1]
    depth = nest.depth * math.prod(nest.kernel)
    return rows_per_patch(nest.out_shape[2], per_row, depth, element_bytes)


def build_conv_pool(
    nest: PoolNest, vector_bits: int, threads: int, constant: IndexConstants
) -> list[Operation]:
    """The ops replacing `nest.parallel` (module docstring)."""
    element = nest.x.type.element_type  # type: ignore[attr-defined]
    element_bytes = 4 if isinstance(element, Float32Type) else 8
    most_rows, width, lanes = register_tile(vector_bits, element_bytes * 8)
    batch, features = nest.out_shape[:2]
    mr = max(r for r in range(1, most_rows + 1) if features % r == 0)
    spatial, window = nest.spatial, nest.window
    pool_cols = nest.out_shape[-1]
    cols = pool_cols * window[-1]  # the conv columns the pool reads
    pool_rows = nest.out_shape[2] if spatial == 2 else 1
    window_rows = window[0] if spatial == 2 else 1
    pr = tile_pool_rows(nest, element_bytes)
    conv_rows = pr * window_rows  # conv rows per tile
    pixels = conv_rows * cols
    depth = nest.depth * math.prod(nest.kernel)
    patch_size = depth * pixels
    tiles_per_image = pool_rows // pr
    items = batch * tiles_per_image

    top = Block()
    e = Emitter(top, constant)
    threads = max(1, min(threads, items))
    top.add_op(alloc := memref.AllocOp.get(element, 64, [threads * patch_size]))
    alloc.memref.name_hint = "patch"
    patch = alloc.memref
    top.add_op(tile_alloc := memref.AllocOp.get(element, 64, [threads, features, pixels]))
    tile_alloc.memref.name_hint = "conv_tile"
    tile = tile_alloc.memref
    groups: IndexValue = 1
    if threads > 1:
        top.add_op(running := NumThreadsOp())
        running.result.name_hint = "threads"
        groups = e.apply(arith.MinSIOp, running.result, threads, "groups")
    overwrite = arith.ConstantOp(IntegerAttr(0, i1))
    top.add_op(overwrite)
    n_iv, f_iv, *pooled_ivs = nest.pooled

    def group(eg: Emitter, g: IndexValue) -> None:
        slot = eg.mul(g, patch_size, "slot")
        lo = eg.apply(arith.DivUIOp, eg.mul(g, items), groups, "lo")
        hi = eg.apply(arith.DivUIOp, eg.mul(eg.add(g, 1), items), groups, "hi")
        count = make_extent(eg.apply(arith.SubiOp, hi, lo), set() if threads > 1 else {items})

        def item(ei: Emitter, it: IndexValue) -> None:
            flat = ei.add(lo, it, "item")
            n = ei.apply(arith.DivUIOp, flat, tiles_per_image, "n")
            p0: IndexValue = 0
            if tiles_per_image > 1:
                p0 = ei.mul(ei.apply(arith.RemUIOp, flat, tiles_per_image), pr, "p0")
            gather(ei, n, ei.mul(p0, window_rows, "r0"), slot)
            products(ei, g, slot)
            epilogue(ei, g, n, p0)

        emit_loop(eg, count, "it", item)

    def gather(e: Emitter, n: IndexValue, r0: IndexValue, slot: IndexValue) -> None:
        """patch[slot + (c, k) * pixels + rr * cols + col] = x[n, c, row * s + k * d, ..]."""

        def per_row(er: Emitter, rr: IndexValue) -> None:
            start_row = er.add(slot, er.mul(rr, cols))
            row = er.add(r0, rr)

            def per_channel(ec: Emitter, c: IndexValue) -> None:
                def per_tap(et: Emitter, level: int, k: list[IndexValue]) -> None:
                    if level < spatial:
                        emit_loop(et, static(nest.kernel[level]), f"k{level}",
                                  lambda el, kk: per_tap(el, level + 1, [*k, kk]))  # fmt: skip
                        return
                    prow: IndexValue = c
                    for extent, kk in zip(nest.kernel, k, strict=True):
                        prow = et.add(et.mul(prow, extent), kk)
                    start = et.add(start_row, et.mul(prow, pixels))
                    spots = []
                    if spatial == 2:
                        spots.append(
                            et.add(et.mul(row, nest.strides[0]), et.mul(k[0], nest.dilations[0]))
                        )
                    last = et.mul(k[-1], nest.dilations[-1])

                    gather_columns(et, nest.x, (n, c, *spots), last, nest.strides[-1],
                                   patch, start, cols)  # fmt: skip

                per_tap(ec, 0, [])

            emit_loop(er, static(nest.depth), "c", per_channel)

        emit_loop(e, static(conv_rows), "rr", per_row)

    def products(e: Emitter, g: IndexValue, slot: IndexValue) -> None:
        """tile[g, f0 + r, p] = sum over (c, k) of w[f0 + r, (c, k)] * patch[(c, k), p]."""

        def per_block(ef: Emitter, fb: IndexValue) -> None:
            f0 = ef.mul(fb, mr, "f0")
            a = ef.value(ef.mul(f0, depth))
            for start, tile_cols, tile_lanes in column_tiles(pixels, width, lanes):
                indices = [ef.value(v) for v in (g, f0, start)]
                b = ef.value(ef.add(slot, start))
                shape = (mr, tile_cols, tile_lanes)
                mma = MmaOp(nest.w, a, patch, b, ef.value(depth), tile, indices,
                            overwrite.result, shape, (depth, 1, pixels))  # fmt: skip
                ef.block.add_op(mma)

        emit_loop(e, static(features // mr), "fb", per_block)

    def epilogue(e: Emitter, g: IndexValue, n: IndexValue, p0: IndexValue) -> None:
        """Per filter and pool output, the fused nest's prologue, then per window element
        its epilogue with the conv's sum read from the tile."""
        last = {k: e.value(nest.trips[k] - 1) for k in (nest.channel, *nest.taps)}

        def per_filter(ef: Emitter, f: IndexValue) -> None:
            def per_row(er: Emitter, pr_: IndexValue) -> None:
                def per_col(eq: Emitter, q: IndexValue) -> None:
                    mapping: dict[SSAValue, SSAValue] = dict(last)
                    mapping[n_iv] = eq.value(n)
                    mapping[f_iv] = eq.value(f)
                    if spatial == 2:
                        mapping[pooled_ivs[0]] = eq.value(eq.add(p0, pr_))
                    mapping[pooled_ivs[-1]] = eq.value(q)
                    for o in nest.prologue:
                        eq.block.add_op(o.clone(mapping))

                    def per_window(ew: Emitter, level: int, at: list[IndexValue]) -> None:
                        if level < spatial:
                            deeper = lambda el, i: per_window(el, level + 1, [*at, i])  # noqa: E731
                            emit_loop(ew, static(window[level]), f"i{level}", deeper)
                            return
                        inner = dict(mapping)
                        for iv, i in zip(nest.windows, at, strict=True):
                            inner[iv] = ew.value(i)
                        column = ew.add(ew.mul(q, window[-1]), at[-1])
                        if spatial == 2:
                            row = ew.add(ew.mul(pr_, window[0]), at[0])
                            column = ew.add(ew.mul(row, cols), column)
                        where = [ew.value(v) for v in (g, f, column)]
                        ew.block.add_op(load := memref.LoadOp.get(tile, where))
                        inner[nest.total] = load.res
                        for o in nest.epilogue:
                            ew.block.add_op(o.clone(inner))

                    per_window(eq, 0, [])
                    for o in nest.after:
                        eq.block.add_op(o.clone(mapping))

                emit_loop(er, static(pool_cols), "q", per_col)

            emit_loop(ef, static(pr), "pr", per_row)

        emit_loop(e, static(features), "f", per_filter)

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


__all__ = ["PoolNest", "build_conv_pool", "match_conv_pool", "tile_pool_rows"]
