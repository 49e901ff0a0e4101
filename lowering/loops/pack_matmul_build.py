"""
The packed loop nest `tess-pack-matmul` builds for one matched contraction (`Packer`):
packing of A and B into per-thread panels (or reading them where they lie), the blocks'
loops, the `micro.mma` calls with their edge tiles, and the row segments before and after
the product. The algorithm, its legality and the choices behind it are in
lowering/loops/README.md (`tess-pack-matmul`); what is matched and the tile and blocks in
`pack_matmul_plan.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, i1
from xdsl.ir import Block, Operation, Region, SSAValue

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp, NumThreadsOp
from tessc.lowering.linalg.generic_analysis import depends_on
from tessc.lowering.loops.index_emitter import (
    Emitter,
    Extent,
    IndexValue,
    block_count,
    block_extent,
    emit_loop,
    make_extent,
    static,
)
from tessc.lowering.loops.index_values import IndexConstants
from tessc.lowering.loops.pack_matmul_plan import PackedMatmul
from tessc.lowering.loops.register_tiles import InPlace


def reads_along(ops: Sequence[Operation], inner: SSAValue, outer: SSAValue) -> bool:
    """Whether some load of `ops` has its last (unit-stride) index move with `inner` and
    not with `outer`."""
    return any(
        isinstance(op, memref.LoadOp)
        and op.indices
        and depends_on(op.indices[-1], inner)
        and not depends_on(op.indices[-1], outer)
        for op in ops
    )


@dataclass
class Packer:
    """Builds the packed replacement of one `PackedMatmul` (module docstring)."""

    match: PackedMatmul
    tile: tuple[int, int, int]  # MR, NR, lanes
    blocks: tuple[int, int, int]  # MC, KC, NC (clamped to the shape)
    constant: IndexConstants
    threads: int  # the most threads (parallel iterations), each with its own panels
    a_in_place: InPlace | None = None  # the left-hand side read where it lies, not packed
    b_in_place: InPlace | None = None
    mapping: dict[SSAValue, IndexValue] = field(default_factory=dict[SSAValue, IndexValue])
    invariants: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    row_block_count: IndexValue = 0  # the row blocks (of one batch), set by `build`

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.match.shape

    def values(self, e: Emitter) -> dict[SSAValue, SSAValue]:
        return {**self.invariants, **{iv: e.value(v) for iv, v in self.mapping.items()}}

    def clone(
        self, e: Emitter, ops: Sequence[Operation], extra: dict[SSAValue, SSAValue]
    ) -> dict[SSAValue, SSAValue]:
        values = {**self.values(e), **extra}
        for op in ops:
            e.block.add_op(op.clone(values))
        return values

    def build(self) -> list[Operation]:
        (mr, nr, _), (mc, kc, nc) = self.tile, self.blocks
        n, _, cols = self.shape
        element = self.match.x.type
        threads = self.threads
        top = Block()
        e = Emitter(top, self.constant)
        # The row blocks: a count read at run time where the rows are a `?` dim's N.
        row_blocks = self.row_block_count = block_count(e, n, mc, "row_blocks").value
        for op in self.match.invariant_ops:
            top.add_op(op.clone(self.invariants))
        sizes = {"ap": [threads * mc * kc], "bp": [threads * kc * nc], "ct": [threads * mr, nr]}
        sources = {"ap": self.a_in_place, "bp": self.b_in_place, "ct": None}
        edges = not isinstance(n, int) or n % mr or cols % nr
        buffers: dict[str, SSAValue] = {}
        for hint, shape in sizes.items():
            if (source := sources[hint]) is not None:
                buffers[hint] = source.memref
                continue
            if hint == "ct" and not edges:
                continue  # every tile is whole: `mma` never takes the edge path
            top.add_op(alloc := memref.AllocOp.get(element, 64, shape))
            alloc.memref.name_hint = hint
            buffers[hint] = alloc.memref
        self.ap, self.bp = buffers["ap"], buffers["bp"]
        self.ct = buffers.get("ct")
        groups: IndexValue = 1
        if threads > 1:
            top.add_op(running := NumThreadsOp())
            running.result.name_hint = "threads"
            groups = e.apply(arith.MinSIOp, running.result, threads, "groups")

        batches = math.prod(extent for extent, _ in self.match.batch)
        # The row blocks of every batch, shared out together (`?` rows: one batch).
        items = row_blocks if batches == 1 else batches * row_blocks  # type: ignore[operator]

        def group(eg: Emitter, g: SSAValue) -> None:
            # Thread g's share of the items, as `largest_share` counted them.
            self.group = g
            self.b_slot = eg.mul(g, kc * nc, "bslot")
            lo = eg.apply(arith.DivUIOp, eg.apply(arith.MuliOp, g, items), groups, "lo")
            hi = eg.apply(arith.DivUIOp, eg.apply(arith.MuliOp, eg.add(g, 1), items), groups, "hi")
            if batches == 1:
                self.lo, self.hi = lo, hi
                for _, arg in self.match.batch:
                    self.mapping[arg] = 0
                self.column_blocks(eg)
                return
            # The batches the share touches, each with the part of its row blocks in it.
            first = eg.apply(arith.DivUIOp, lo, row_blocks, "first")
            end = eg.apply(arith.DivUIOp, eg.add(hi, row_blocks - 1), row_blocks)
            touched = eg.apply(arith.MinSIOp, eg.apply(arith.SubiOp, end, first), batches)

            def one(eb: Emitter, bt: IndexValue) -> None:
                flat = eb.add(first, bt, "batch")
                rest: IndexValue = flat
                for extent, arg in reversed(self.match.batch):
                    self.mapping[arg] = eb.apply(arith.RemUIOp, rest, extent, arg.name_hint)
                    rest = eb.apply(arith.DivUIOp, rest, extent)
                start = eb.mul(flat, row_blocks)
                eb.block.add_op(
                    after := arith.MaxSIOp(eb.value(eb.apply(arith.SubiOp, lo, start)), eb.value(0))
                )
                self.lo = after.result
                self.hi = eb.apply(arith.MinSIOp, eb.apply(arith.SubiOp, hi, start), row_blocks)
                self.column_blocks(eb)

            emit_loop(eg, make_extent(touched, set()), "bt", one)

        self.parallel(e, groups, "g", group)
        ops = list(top.ops)
        for op in ops:
            op.detach()
        return ops

    def column_blocks(self, e: Emitter) -> None:
        n, depth, cols = self.shape
        (_, _, _), (_, kc, nc) = self.tile, self.blocks
        col_blocks = -(-cols // nc)
        depth_blocks = block_count(e, depth, kc, "depth_blocks")  # run time for `?` K
        last_depth_block = e.apply(arith.SubiOp, depth_blocks.value, 1)

        def j_block(ej: Emitter, jc: IndexValue) -> None:
            j0 = ej.mul(jc, nc, "j0")
            nj = block_extent(ej, cols, nc, j0, "nc")

            def k_block(ek: Emitter, pc: IndexValue) -> None:
                k0 = ek.mul(pc, kc, "k0")
                nk = block_extent(ek, depth, kc, k0, "kc")
                m = self.match
                first = self.is_index(ek, [(jc, 0), (pc, 0)]) if m.before else False
                last = (
                    self.is_index(ek, [(jc, col_blocks - 1), (pc, last_depth_block)])
                    if m.after
                    else False
                )
                accumulate: SSAValue | bool = True
                if m.zero_filled:  # the fill is gone: the first k block stores
                    later = self.is_index(ek, [(pc, 0)])
                    if isinstance(later, bool):
                        accumulate = not later
                    else:
                        ek.block.add_op(xor := arith.XOrIOp(later, self.flag(ek, True)))
                        accumulate = xor.result
                if self.b_in_place is None:
                    self.pack_b(ek, j0, nj, k0, nk)
                self.row_blocks(ek, j0, nj, k0, nk, first, last, accumulate)

            emit_loop(ej, depth_blocks, "pc", k_block)

        emit_loop(e, static(col_blocks), "jc", j_block)

    def is_index(self, e: Emitter, pairs: list[tuple[IndexValue, IndexValue]]) -> SSAValue | bool:
        """Whether every index equals its value: True, or an i1 value."""
        conditions: list[SSAValue] = []
        for index, value in pairs:
            if isinstance(index, int) and isinstance(value, int):
                if index != value:
                    return False
                continue
            e.block.add_op(cmp := arith.CmpiOp(e.value(index), e.value(value), "eq"))
            conditions.append(cmp.result)
        if not conditions:
            return True
        result = conditions[0]
        for other in conditions[1:]:
            e.block.add_op(both := arith.AndIOp(result, other))
            result = both.result
        return result

    def parallel(
        self, e: Emitter, count: IndexValue, hint: str, body: Callable[[Emitter, SSAValue], None]
    ) -> None:
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = hint
        body(Emitter(block, e.constant), block.args[0])
        block.add_op(scf.ReduceOp())
        zero, one = e.value(0), e.value(1)
        loop = scf.ParallelOp([zero], [e.value(count)], [one], Region(block))
        contract.TILE_SIZES.set(loop, list(self.blocks))
        contract.REGISTER_TILE.set(loop, list(self.tile[:2]))
        e.block.add_op(loop)

    def guarded(
        self, e: Emitter, condition: SSAValue | bool, body: Callable[[Emitter], None]
    ) -> None:
        if condition is False:
            return
        if condition is True:
            body(e)
            return
        block = Block()
        body(Emitter(block, e.constant))
        block.add_op(scf.YieldOp())
        e.block.add_op(scf.IfOp(condition, [], Region(block)))

    def clamp(
        self, e: Emitter, index: IndexValue, extent: IndexValue, tile: int, hint: str
    ) -> IndexValue:
        """`min(index, extent - 1)` where tiles of `tile` can run past `extent`."""
        if isinstance(extent, int) and extent % tile == 0:
            return index
        return e.apply(arith.MinSIOp, index, e.apply(arith.SubiOp, extent, 1), hint)

    def pack_b(self, e: Emitter, j0: IndexValue, nj: Extent, k0: IndexValue, nk: Extent) -> None:
        m = self.match
        (_, nr, _), (_, _, cols) = self.tile, self.shape

        # Row by row of B (k outer) where B's rows are contiguous: each k step reads one
        # run of `nj` columns and scatters it into the micro-panels (panel by panel read
        # runs of NR columns a row stride apart, which share a few L1 sets: 2048 f32 took
        # 4% longer). Panel by panel (k inner) where its columns are (`a @ w.T` reads
        # w[j, k]): NR rows of w stay in L1 over a panel, where row by row touched `nj`.
        panels = make_extent(
            e.apply(arith.DivUIOp, e.add(nj.value, nr - 1), nr, "njr"),
            {-(-s // nr) for s in nj.sizes},
        )

        def pack(ep: Emitter, jr: IndexValue, kk: IndexValue) -> None:
            k = ep.add(k0, kk, "k")
            jt = ep.add(j0, ep.mul(jr, nr), "jt")
            row = ep.mul(ep.add(ep.apply(arith.MuliOp, jr, nk.value), kk), nr)
            row = ep.add(self.b_slot, row)

            def column(ec: Emitter, c: IndexValue) -> None:
                j = self.clamp(ec, ec.add(jt, c), cols, nr, "j")
                values = self.clone(ec, m.y_ops, {m.k: ec.value(k), m.j: ec.value(j)})
                value = values.get(m.y, m.y)
                ec.block.add_op(memref.StoreOp.get(value, self.bp, [ec.value(ec.add(row, c))]))

            emit_loop(ep, static(nr), "c", column)

        if reads_along(m.y_ops, m.k, m.j):
            emit_loop(
                e,
                panels,
                "jr",
                lambda ej, jr: emit_loop(ej, nk, "kk", lambda ek, kk: pack(ek, jr, kk)),
            )
            return
        emit_loop(
            e, nk, "kk", lambda ek, kk: emit_loop(ek, panels, "jr", lambda ej, jr: pack(ej, jr, kk))
        )

    def row_blocks(
        self,
        e: Emitter,
        j0: IndexValue,
        nj: Extent,
        k0: IndexValue,
        nk: Extent,
        first: SSAValue | bool,
        last: SSAValue | bool,
        accumulate: SSAValue | bool,
    ) -> None:
        m = self.match
        (mr, nr, _), (mc, kc, _) = self.tile, self.blocks
        n, _, cols = self.shape

        def block(eb: Emitter, t: IndexValue) -> None:
            ib = eb.add(self.lo, t, "ib")
            i0 = eb.mul(ib, mc, "i0")
            ni = block_extent(eb, n, mc, i0, "mi")
            self.guarded(eb, first, lambda eg: self.segments(eg, m.before, i0, ni))
            slot = eb.mul(self.group, mc * kc, "slot")
            tiles_i = make_extent(
                eb.apply(arith.DivUIOp, eb.add(ni.value, mr - 1), mr, "nir"),
                {-(-s // mr) for s in ni.sizes},
            )
            tiles_j = make_extent(
                eb.apply(arith.DivUIOp, eb.add(nj.value, nr - 1), nr, "njr"),
                {-(-s // nr) for s in nj.sizes},
            )

            def pack_a(ea: Emitter, ir: IndexValue) -> None:
                def step(ek: Emitter, kk: IndexValue) -> None:
                    k = ek.add(k0, kk, "k")
                    row = ek.add(slot, ek.mul(ek.add(ek.apply(arith.MuliOp, ir, nk.value), kk), mr))

                    def lane(er: Emitter, r: IndexValue) -> None:
                        i = self.clamp(er, er.add(er.add(i0, er.mul(ir, mr)), r), n, mr, "i")
                        self.mapping[m.i] = i
                        values = self.clone(er, m.x_ops, {m.k: er.value(k)})
                        value = values.get(m.x, m.x)
                        er.block.add_op(
                            memref.StoreOp.get(value, self.ap, [er.value(er.add(row, r))])
                        )

                    emit_loop(ek, static(mr), "r", lane)

                emit_loop(ea, nk, "kk", step)

            if self.a_in_place is None:
                emit_loop(eb, tiles_i, "ir", pack_a)

            def panel(ej: Emitter, jr: IndexValue) -> None:
                jt = ej.add(j0, ej.mul(jr, nr), "jt")
                if self.b_in_place is None:
                    panel_start = ej.mul(ej.apply(arith.MuliOp, jr, nk.value), nr)
                    b_off = ej.add(self.b_slot, panel_start, "boff")
                else:
                    b_off = self.offset(ej, self.b_in_place, k0, jt)

                def micro(ei: Emitter, ir: IndexValue) -> None:
                    it = ei.add(i0, ei.mul(ir, mr), "it")
                    if self.a_in_place is None:
                        a_off = ei.mul(ei.apply(arith.MuliOp, ir, nk.value), mr)
                        a_off = ei.add(slot, a_off, "aoff")
                    else:
                        a_off = self.offset(ei, self.a_in_place, it, k0)
                    self.mma(ei, it, jt, a_off, b_off, nk, accumulate)

                emit_loop(ej, tiles_i, "ir", micro)

            emit_loop(eb, tiles_j, "jr", panel)
            self.guarded(eb, last, lambda eg: self.segments(eg, m.after, i0, ni))

        # At most all the blocks (one thread): a bound codegen reads as the loop's work.
        count = e.apply(arith.SubiOp, self.hi, self.lo)
        share = make_extent(e.apply(arith.MinSIOp, count, self.row_block_count, "blocks"), set())
        emit_loop(e, share, "t", block)

    def offset(
        self, e: Emitter, source: InPlace, outer: IndexValue, inner: IndexValue
    ) -> IndexValue:
        """The element offset in `source`'s memref of its entry at (`outer`, `inner`)."""
        m = self.match
        outer_index, inner_index = (m.i, m.k) if source is self.a_in_place else (m.k, m.j)
        return source.offset(e, {**self.values(e), outer_index: outer, inner_index: inner})

    def strides(self) -> tuple[int, int, int] | None:
        """`micro.mma`'s operand strides: None for packed panels on both sides."""
        if self.a_in_place is None and self.b_in_place is None:
            return None
        mr, nr, _ = self.tile
        a, b = self.a_in_place, self.b_in_place
        return ((1, mr) if a is None else (a.outer_stride, a.inner_stride)) + (
            nr if b is None else b.outer_stride,
        )

    def mma(
        self,
        e: Emitter,
        it: IndexValue,
        jt: IndexValue,
        a_off: IndexValue,
        b_off: IndexValue,
        nk: Extent,
        accumulate: SSAValue | bool,
    ) -> None:
        """One micro-kernel call at tile (it, jt); through `ct` where the tile is partial.
        `accumulate`: whether the tile adds to `out` (false in the first k block where the
        zero fill was dropped)."""
        m = self.match
        mr, nr, _ = self.tile
        n, _, cols = self.shape
        prefix = [self.values(e).get(v, v) for v in list(m.store.indices)[:-2]]
        args = (self.ap, e.value(a_off), self.bp, e.value(b_off), e.value(nk.value))
        flag = self.flag(e, accumulate)
        full: list[SSAValue] = []
        for start, extent, size in ((it, n, mr), (jt, cols, nr)):
            if not isinstance(extent, int) or extent % size:
                last = e.value(e.apply(arith.SubiOp, extent, size))
                e.block.add_op(cmp := arith.CmpiOp(e.value(start), last, "sle"))
                full.append(cmp.result)
        index = [*prefix, e.value(it), e.value(jt)]
        direct = MmaOp(*args, m.store.memref, index, flag, self.tile, self.strides())
        if not full:
            e.block.add_op(direct)
            return
        condition = full[0]
        if len(full) == 2:
            e.block.add_op(both := arith.AndIOp(full[0], full[1]))
            condition = both.result
        assert self.ct is not None  # allocated where the tiles have edges
        inside, edge = Block(), Block()
        inside.add_op(direct)
        inside.add_op(scf.YieldOp())
        ee = Emitter(edge, e.constant)
        c0 = ee.mul(self.group, mr, "c0")
        edge.add_op(
            MmaOp(
                *args,
                self.ct,
                [ee.value(c0), ee.value(0)],
                self.flag(ee, False),
                self.tile,
                self.strides(),
            )
        )
        rows = make_extent(
            ee.apply(arith.MinSIOp, mr, ee.apply(arith.SubiOp, n, it)), set(range(1, mr + 1))
        )
        columns = make_extent(
            ee.apply(arith.MinSIOp, nr, ee.apply(arith.SubiOp, cols, jt)), set(range(1, nr + 1))
        )

        def add_row(er: Emitter, r: IndexValue) -> None:
            def add(ec: Emitter, c: IndexValue) -> None:
                index = [*prefix, ec.value(ec.add(it, r)), ec.value(ec.add(jt, c))]
                tile_index = [ec.value(ec.add(c0, r)), ec.value(c)]
                ec.block.add_op(part := memref.LoadOp.get(self.ct, tile_index))
                value = part.res
                if accumulate is not False:
                    ec.block.add_op(old := memref.LoadOp.get(m.store.memref, index))
                    previous = old.res
                    if accumulate is not True:
                        zero = arith.ConstantOp(FloatAttr(0.0, m.x.type))  # type: ignore[arg-type]
                        ec.block.add_op(zero)
                        ec.block.add_op(kept := arith.SelectOp(accumulate, old.res, zero.result))
                        previous = kept.result
                    ec.block.add_op(total := arith.AddfOp(previous, part.res))
                    value = total.result
                ec.block.add_op(memref.StoreOp.get(value, m.store.memref, index))

            emit_loop(er, columns, "c", add)

        emit_loop(ee, rows, "r", add_row)
        edge.add_op(scf.YieldOp())
        e.block.add_op(scf.IfOp(condition, [], Region(inside), Region(edge)))

    def flag(self, e: Emitter, value: SSAValue | bool) -> SSAValue:
        """`value` as an i1 value."""
        if not isinstance(value, bool):
            return value
        e.block.add_op(constant := arith.ConstantOp(IntegerAttr(int(value), i1)))
        return constant.result

    def segments(self, e: Emitter, ops: Sequence[Operation], i0: IndexValue, ni: Extent) -> None:
        """`ops` (the work before or after the contraction) for each row of the block in
        turn, and for each column of it where they run per element."""
        m = self.match

        def row(er: Emitter, ii: IndexValue) -> None:
            self.mapping[m.i] = er.add(i0, ii, "i")
            if not m.per_element:
                self.clone(er, ops, {})
                return

            def element(ej: Emitter, jj: IndexValue) -> None:
                self.mapping[m.j] = jj
                self.clone(ej, ops, {})

            emit_loop(er, static(self.shape[2]), "jj", element)

        if ops:
            emit_loop(e, ni, "ii", row)


__all__ = ["Packer", "reads_along"]
