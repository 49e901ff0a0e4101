"""
`tess-row-dots`: the dot products of a packed kernel's row loop as register-tile
micro-kernels over its rows (level 5, loops).

When a row segment after a packed product is itself a narrow product (an MLP's 10-class
logits, dot products after `tess-pack-narrow`), each row runs one dot per output column,
each ending in a horizontal reduction. This pass strip-mines the row loop by R and runs
the dots as `micro.mma` tiles over R rows (`a` read in place, `b` packed once per call
before the nest, a tile slot per thread), splitting the row loop around them; the rows
left over keep their dots. Legality (independent rows, the dot nest's exact form, `b`
unwritten, recomputable values) is checked in the IR. Nests of fewer than `min-cols`
columns stay (measured). The algorithm and figures are in lowering/loops/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    i1,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract
from tessc.dialects.micro import MmaOp
from tessc.lowering.loops.index_emitter import Emitter, IndexValue, emit_loop, make_extent, static
from tessc.lowering.loops.index_values import IndexConstants, constant_int
from tessc.lowering.loops.register_tiles import (
    InPlace,
    accumulator_registers,
    host_vector_bits,
    in_place_operand,
)
from tessc.lowering.loops.row_analysis import (
    defined_in,
    moves_by_one,
    recomputable_ops,
    rows_independent,
)
from tessc.lowering.loops.trip_counts import trip_bound, unit_loop_bound

MAX_ROWS = 16
"""Rows of a tile at most. Each k step loads a broadcast per row and one vector per panel
column, so the loads bound it; 16 x 16 beat 8 x 16 in the MLP step's forward kernel
(16.5 against 17.0 us, same process)."""
MAX_VECTORS = 4
"""Vectors of a panel's columns at most (wider products take several panels)."""
DEFAULT_MIN_COLS = 0
"""Columns from which a dot nest is tiled; 0: half a vector (module docstring)."""

# -- matching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RowDot:
    """A dot nest in a packed kernel's row loop (module docstring)."""

    loop: scf.ForOp  # the row loop, `0 to n step 1`
    packed: scf.ParallelOp  # the packed nest around it
    top: Operation  # the op of the function's entry block that holds it
    row: SSAValue  # i: the loop variable plus values defined outside the loop
    nest: scf.ForOp  # the dot nest's outer loop, an op of the row loop's body
    j: SSAValue
    k: SSAValue
    cols: int  # M
    depth: int  # K
    lhs: InPlace  # a, read where it lies
    rhs: memref.LoadOp  # b(k, j)
    acc: memref.StoreOp  # c[.., i, .., j]

    @property
    def before(self) -> list[Operation]:
        ops = list(self.loop.body.block.ops)
        return ops[: ops.index(self.nest)]

    @property
    def after(self) -> list[Operation]:
        ops = list(self.loop.body.block.ops)
        return [op for op in ops[ops.index(self.nest) + 1 :] if not op.has_trait(IsTerminator)]


def _writes(op: Operation, memory: SSAValue) -> bool:
    """Whether anything in `op` stores to `memory` or accumulates into it."""
    return any(
        (isinstance(inner, memref.StoreOp) and inner.memref is memory)
        or (isinstance(inner, MmaOp) and inner.acc is memory)
        for inner in op.walk()
    )


def _dot_body(
    nest: scf.ForOp,
) -> tuple[scf.ForOp, memref.LoadOp, memref.LoadOp, memref.StoreOp] | None:
    """The inner loop, the two multiplied loads and the store of `c = c + x * y`, if `nest`
    is a perfect two-loop nest of static extents with that body alone."""
    outer_ops = list(nest.body.block.ops)
    if len(outer_ops) != 2 or not isinstance(inner := outer_ops[0], scf.ForOp):
        return None
    if any(lp.iter_args or not unit_loop_bound(lp.lb, lp.ub, lp.step) for lp in (nest, inner)):
        return None
    *body, _ = inner.body.block.ops
    if len(body) != 6 or not isinstance(store := body[-1], memref.StoreOp):
        return None
    total = store.value.owner
    if not isinstance(total, arith.AddfOp) or total not in body:
        return None
    loads = [o for o in body if isinstance(o, memref.LoadOp)]
    old = [o for o in loads if o.memref is store.memref]
    if len(loads) != 3 or len(old) != 1 or list(old[0].indices) != list(store.indices):
        return None
    product = total.rhs if total.lhs is old[0].res else total.lhs
    if old[0].res not in (total.lhs, total.rhs) or not isinstance(
        mul := product.owner, arith.MulfOp
    ):
        return None
    factors = [o for o in loads if o is not old[0]]
    if {mul.lhs, mul.rhs} != {f.res for f in factors} or mul.lhs is mul.rhs:
        return None
    return inner, factors[0], factors[1], store


def match_row_dot(loop: scf.ForOp) -> RowDot | None:
    """The first dot nest of `loop` this pass may tile, if `loop` is a packed kernel's
    row loop (module docstring: legality)."""
    if loop.iter_args or contract.REGISTER_TILE.has(loop):
        return None
    if constant_int(loop.lb) != 0 or constant_int(loop.step) != 1:
        return None
    packed = loop.parent_op()
    while packed is not None and not isinstance(packed, scf.ParallelOp):
        packed = packed.parent_op()
    if packed is None or not contract.REGISTER_TILE.has(packed) or len(packed.lowerBound) != 1:
        return None
    top: Operation = packed
    while not isinstance(parent := top.parent_op(), func.FuncOp):
        if parent is None:
            return None
        top = parent
    for nest in loop.body.block.ops:
        if isinstance(nest, scf.ForOp) and (found := _match_nest(loop, packed, top, nest)):
            return found
    return None


def _match_nest(
    loop: scf.ForOp, packed: scf.ParallelOp, top: Operation, nest: scf.ForOp
) -> RowDot | None:
    if (parts := _dot_body(nest)) is None:
        return None
    inner, x, y, store = parts
    outer_iv, inner_iv = nest.body.block.args[0], inner.body.block.args[0]
    indices = list(store.indices)
    if indices[-1] not in (outer_iv, inner_iv):
        return None
    j = indices[-1]
    k = inner_iv if j is outer_iv else outer_iv
    rows = [v for v in indices if defined_in(v, loop) and v is not j]
    if len(rows) != 1 or not moves_by_one(row := rows[0], loop) or k in indices:
        return None
    if any(v is not j and v is not row and defined_in(v, loop) for v in indices):
        return None
    lhs_load, rhs_load = (x, y) if row in x.indices else (y, x)
    ivs = (loop.body.block.args[0], j, k)
    lhs = in_place_operand([lhs_load], lhs_load.res, row, k, ivs)
    if lhs is None or any(
        v is not row and v is not k and defined_in(v, loop) for v in lhs_load.indices
    ):
        return None
    if any(v is not j and v is not k and defined_in(v, top) for v in rhs_load.indices):
        return None
    c, b = store.memref, rhs_load.memref
    if c in (lhs.memref, b) or defined_in(b, top) or _writes(top, b):
        return None
    types = {v.type for v in (lhs_load.res, rhs_load.res, store.value)}
    if len(types) != 1 or not isinstance(next(iter(types)), Float32Type | Float64Type):
        return None
    if not isinstance(c.type, MemRefType):
        return None
    if not rows_independent(loop.body.walk(), {row}):
        return None
    body = list(loop.body.block.ops)
    before = body[: body.index(nest)]
    recomputable = set(recomputable_ops(loop, before))
    for op in before:  # what later phases use of the first, they recompute
        if op not in recomputable and any(
            loop.body.block.find_ancestor_op_in_block(use.operation) not in before
            for result in op.results
            for use in result.uses
        ):
            return None
    for inner_op in nest.walk():
        for operand in inner_op.operands:
            if defined_in(operand, loop) and not defined_in(operand, nest) and operand is not row:
                return None
    if isinstance(row.owner, Operation) and row.owner not in recomputable:
        return None
    cols = unit_loop_bound(
        *((nest.lb, nest.ub, nest.step) if j is outer_iv else (inner.lb, inner.ub, inner.step))
    )
    depth = unit_loop_bound(
        *((inner.lb, inner.ub, inner.step) if j is outer_iv else (nest.lb, nest.ub, nest.step))
    )
    assert cols and depth
    return RowDot(loop, packed, top, row, nest, j, k, cols, depth, lhs, rhs_load, store)


# -- building ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Tile:
    rows: int  # R
    width: int  # W
    lanes: int
    panels: int  # P

    @property
    def mma(self) -> tuple[int, int, int]:
        return self.rows, self.width, self.lanes


def choose_tile(
    cols: int, vector_bits: int, element_bits: int, row_count: int | None = None
) -> Tile:
    """R x W for `cols` columns on the target, R at most `row_count` (the row loop's most
    trips) and dividing it where one down to half the register bound does (module
    docstring)."""
    lanes = max(1, vector_bits // element_bits)
    vectors = min(-(-cols // lanes), MAX_VECTORS)
    registers = accumulator_registers(vector_bits)
    rows = max(1, min(MAX_ROWS, (registers - vectors - 1) // vectors))
    if row_count:
        rows = min(rows, row_count)
        rows = next((r for r in range(rows, rows // 2, -1) if row_count % r == 0), rows)
    width = vectors * lanes
    return Tile(rows, width, lanes, -(-cols // width))


@dataclass
class RowDotTiler:
    """Builds the packing of `b` and the tiled row loop of one `RowDot`."""

    match: RowDot
    tile: Tile
    threads: int  # the packed nest's iterations at most (one `dt` slot each)
    constant: IndexConstants
    recomputable: set[Operation] = field(init=False)  # what the after phase clones

    def __post_init__(self) -> None:
        self.recomputable = set(recomputable_ops(self.match.loop, self.match.before))

    def prologue(self) -> list[Operation]:
        """The scratch and `b` packed, for before the kernel's packed nest."""
        m, t = self.match, self.tile
        element = m.acc.value.type
        block = Block()
        e = Emitter(block, self.constant)
        # b row-major, [K, M], then the columns the last panel's last k step reads past
        # M: zeros (they only reach the tile's discarded columns).
        pad = t.panels * t.width - m.cols
        block.add_op(panel := memref.AllocOp.get(element, 64, [m.depth * m.cols + pad]))
        shape = [self.threads * t.rows, t.panels * t.width]
        block.add_op(scratch := memref.AllocOp.get(element, 64, shape))
        panel.memref.name_hint, scratch.memref.name_hint = "bq", "dt"
        self.bq, self.dt = panel.memref, scratch.memref

        def element_at(ec: Emitter, j: IndexValue, kk: IndexValue) -> None:
            load = m.rhs.clone({m.j: ec.value(j), m.k: ec.value(kk)})
            ec.block.add_op(load)
            at = ec.add(ec.mul(kk, m.cols), j)
            ec.block.add_op(memref.StoreOp.get(load.res, self.bq, [ec.value(at)]))

        # k innermost where it walks b's unit-stride dim (b = w.T read at (j, k)).
        if m.rhs.indices[-1] is m.k:
            emit_loop(
                e,
                static(m.cols),
                "j",
                lambda ej, j: emit_loop(
                    ej, static(m.depth), "kk", lambda ek, kk: element_at(ek, j, kk)
                ),
            )
        else:
            emit_loop(
                e,
                static(m.depth),
                "kk",
                lambda ek, kk: emit_loop(
                    ek, static(m.cols), "j", lambda ej, j: element_at(ej, j, kk)
                ),
            )
        if pad:
            zero = arith.ConstantOp(FloatAttr(0.0, element))  # type: ignore[arg-type]
            block.add_op(zero)

            def clear(ec: Emitter, c: IndexValue) -> None:
                at = ec.value(ec.add(c, m.depth * m.cols))
                ec.block.add_op(memref.StoreOp.get(zero.result, self.bq, [at]))

            emit_loop(e, static(pad), "c", clear)
        return _detached(block)

    def rows(self) -> list[Operation]:
        """The replacement of the row loop."""
        m, t = self.match, self.tile
        loop = m.loop
        block = Block()
        e = Emitter(block, self.constant)
        n: IndexValue = constant_int(loop.ub) if constant_int(loop.ub) is not None else loop.ub
        full = e.apply(arith.DivUIOp, n, t.rows, "nrt")
        sizes = {full} if isinstance(full, int) else set[int]()
        slot = e.mul(m.packed.body.block.args[0], t.rows, "dslot")
        tiled = emit_loop(
            e, make_extent(full, sizes), "rt", lambda et, rt: self.row_tile(et, rt, slot)
        )
        if tiled is not None:
            contract.REGISTER_TILE.set(tiled, [t.rows, t.width])
        done = e.mul(full, t.rows)
        if not (isinstance(n, int) and n == done):
            left = e.apply(arith.SubiOp, n, done)
            rest = Block(arg_types=[IndexType()])
            rest.args[0].name_hint = "ii"
            er = Emitter(rest, self.constant)
            ii = er.add(done, rest.args[0])
            values = {loop.body.block.args[0]: er.value(ii)}
            for op in loop.body.block.ops:
                rest.add_op(op.clone(values))
            remainder = scf.ForOp(e.value(0), e.value(left), e.value(1), [], rest)
            contract.REGISTER_TILE.set(remainder, [1, 1])
            block.add_op(remainder)
        return _detached(block)

    def row_tile(self, e: Emitter, rt: IndexValue, slot: IndexValue) -> None:
        m, t = self.match, self.tile
        iv = m.loop.body.block.args[0]
        t0 = e.mul(rt, t.rows, "t0")

        def before(er: Emitter, r: IndexValue) -> None:
            values = {iv: er.value(er.add(t0, r, "ii"))}
            for op in m.before:
                er.block.add_op(op.clone(values))

        emit_loop(e, static(t.rows), "r", before)
        start = self.row_value(e, {iv: e.value(t0)})
        offset = m.lhs.offset(e, {m.row: start, m.k: 0})
        e.block.add_op(false := arith.ConstantOp(IntegerAttr(0, i1)))
        strides = (m.lhs.outer_stride, m.lhs.inner_stride, m.cols)
        for jp in range(t.panels):
            e.block.add_op(
                MmaOp(
                    m.lhs.memref,
                    e.value(offset),
                    self.bq,
                    e.value(jp * t.width),
                    e.value(m.depth),
                    self.dt,
                    [e.value(slot), e.value(jp * t.width)],
                    false.result,
                    t.mma,
                    strides,
                )
            )

        def after(er: Emitter, r: IndexValue) -> None:
            values = {iv: er.value(er.add(t0, r, "ii"))}
            for op in m.before:
                if op in self.recomputable:
                    er.block.add_op(op.clone(values))
            row = self.row_value(er, values)

            def add(ej: Emitter, jj: IndexValue) -> None:
                index = [
                    ej.value(jj) if v is m.j else row if v is m.row else v for v in m.acc.indices
                ]
                ej.block.add_op(old := memref.LoadOp.get(m.acc.memref, index))
                tile_index = [ej.value(ej.add(slot, r)), ej.value(jj)]
                ej.block.add_op(part := memref.LoadOp.get(self.dt, tile_index))
                ej.block.add_op(total := arith.AddfOp(old.res, part.res))
                ej.block.add_op(memref.StoreOp.get(total.result, m.acc.memref, index))

            emit_loop(er, static(m.cols), "jj", add)
            for op in m.after:
                er.block.add_op(op.clone(values))

        emit_loop(e, static(t.rows), "r", after)

    def row_value(self, e: Emitter, values: dict[SSAValue, SSAValue]) -> SSAValue:
        """The row value `i` at the loop variable `values` gives, cloned into `e` where the
        ops computing it were not (the pure chain of `moves_by_one`)."""
        row = self.match.row
        if row in values:
            return values[row]
        owner = row.owner
        chain: list[Operation] = []
        pending = [owner] if isinstance(owner, Operation) else []
        while pending:
            op = pending.pop()
            if not defined_in(op.results[0], self.match.loop) or op in chain:
                continue
            chain.append(op)
            pending.extend(v.owner for v in op.operands if isinstance(v.owner, Operation))
        for op in reversed(chain):
            e.block.add_op(op.clone(values))
        return values.get(row, row)


def _detached(block: Block) -> list[Operation]:
    ops = list(block.ops)
    for op in ops:
        op.detach()
    return ops


# -- the pass ---------------------------------------------------------------------------


@dataclass
class TileRowDots(RewritePattern):
    """Run the first dot nest of a packed kernel's row loop as micro-kernel tiles."""

    vector_bits: int
    min_cols: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        if (match := match_row_dot(op)) is None:
            return
        bits = match.acc.value.type.bitwidth  # type: ignore[attr-defined]
        if match.cols < (self.min_cols or self.vector_bits // bits // 2):
            return  # most of each vector would multiply padding
        loop = match.loop
        rows = trip_bound(loop.lb, loop.ub, loop.step)
        tile = choose_tile(match.cols, self.vector_bits, bits, rows)
        threads = trip_bound(
            match.packed.lowerBound[0], match.packed.upperBound[0], match.packed.step[0]
        )
        if threads is None or threads < 1:
            return
        constant = IndexConstants.before(match.top)
        tiler = RowDotTiler(match, tile, threads, constant)
        prologue = tiler.prologue()
        rows = tiler.rows()
        for new in [*constant.ops, *prologue]:
            rewriter.insert(new, InsertPoint.before(match.top))
        rewriter.replace(op, rows, [])


@dataclass(frozen=True)
class TessRowDotsPass(ModulePass):
    """Tile the dot products of packed kernels' row loops; see the module docstring.
    `min-cols`: the fewest columns tiled; `vector-bits`: 0 for the host's."""

    name = "tess-row-dots"

    vector_bits: int = 0
    min_cols: int = DEFAULT_MIN_COLS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        bits = self.vector_bits or host_vector_bits()
        if bits not in (128, 256, 512):
            raise PassFailedException(
                f"tess-row-dots: vector-bits must be 128, 256 or 512, got {bits}"
            )
        pattern = TileRowDots(bits, max(0, self.min_cols))
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["TessRowDotsPass", "choose_tile", "match_row_dot"]
