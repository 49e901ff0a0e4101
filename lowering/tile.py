"""
`tess-tile`: cache-block and register-tile contraction loop nests (level 5, loops).

`tess-linalg-to-loops` leaves a contraction (a matmul, a batched matmul, the seed's fused
`(N,K,1) * (1,K,M)` then sum over K) as the loop nest i-k-j:

    scf.parallel (b..., i)          parallel dims, the last one `i` indexes the output
      scf.for r...                  any further loops (kept as they are)
        scf.for k                   the reduction right above the innermost loop
          scf.for j                 unit stride: `j` is the output's last index
            loads, arith, `out[.., i, .., j] = out[.., i, .., j] + f(..)`

Run as it is, each step of `j` loads and stores `out` once per multiply-add, and for large
shapes every `i` streams all of the right-hand side from memory. This pass rewrites such a
nest in place of the `scf.parallel`:

    scf.parallel (blk)                        one dim: (b..., i-block) flattened
      i0 = ib * TI, ni = min(TI, N - i0)       (a constant when TI divides N)
      scf.for r...
        scf.for kb: k0 = kb * TK, nk = min(TK, K - k0)
          scf.for jb: j0 = jb * TJ, nj = min(TJ, M - j0)
            scf.for ir < ni / R:               R rows at a time (register tile)
              scf.for ku < nk / U:             U steps of k at a time
                a[i + r, k + u] loads          hoisted: they do not depend on j
                scf.for jj < nj:
                  j = j0 + jj
                  acc_r = out[i + r, j]; acc_r += a_ru * b[k + u, j] for u < U;
                  out[i + r, j] = acc_r        (one load and one store per U steps)
              k remainder (nk mod U steps), R rows
            row remainder (ni mod R rows), one at a time, the same k steps

1. Cache blocking. The TK x TJ block of the right-hand side is reused by all TI rows of
   an i-block while it sits in L2, and an `R x TJ` strip of the output stays in L1 across
   the k steps. Block loops count blocks (`kb`, step 1) and the point loops count from 0
   with `block_start + offset` indices: Numba then proves every index non-negative and
   drops its wraparound checks (with `range(k0, k1)` it cannot, and the inner loop does not
   vectorise). Partial blocks use `arith.minsi` (Python's `min`); every extent is static
   here, so the pass knows which extents a block can have and leaves out the remainder
   loops that never run and the `min` of dims the tile divides.
2. Register tiling (unroll-and-jam). The body is cloned for R rows (`i + r`) and U steps of
   k (`k + u`) inside one `jj` loop. A clone's load of the output reads what the clone
   before it (same row, previous k step) stored: the pass forwards that value instead
   (scalar replacement) and keeps only the last store. The output is then loaded and
   stored once per U multiply-adds instead of once per multiply-add (i-k-j is bound by
   that store), and each loaded right-hand-side vector feeds R rows. Loads that do not
   depend on `jj` (the left-hand side) are hoisted above the `jj` loop, and identical
   loads of read-only memrefs are made once.
3. Parallelism. The batch dims and the i-blocks become ONE parallel dim (their product,
   decomposed with `divui`/`remui`), so the code generator's `prange` sees every block;
   the i tile shrinks (to a multiple of R) until there are at least `min_parallel_blocks`
   blocks, so small matrices still use every thread.

Legality. Every output element receives its k contributions in the original order (the
reduction loops and the k blocks keep their order, and the jammed body chains its U steps
in order), so results are bit-identical to the untiled nest up to the code generator's
fast-math reassociation. The rewrite needs: distinct `(i, j)` write distinct elements
(`i` and `j` are store indices, `j` the last one), `k` does not index any store (it is a
reduction), every load of a stored memref reads the element that is stored, and the
memrefs the nest reads are not the ones it writes. The last holds for kernels from
`tess-outline-kernels`: `tess-bufferize` gives every result its own buffer, and
`tess-memory-plan` only lets an output share an input's bytes in a kernel with parallel
iterators only, never in a contraction.

Nests that do not match (elementwise kernels, row reductions with the reduction
innermost, column sums with no parallel loop) are left unchanged. The tiled
`scf.parallel` carries `tess.tile_sizes` (TI, TK, TJ as used) and `tess.register_tile`
(R, U) so the decision is visible in the IR.

xDSL's `scf-parallel-loop-tiling` tiles an `scf.parallel` into an outer and an inner
`scf.parallel` with `affine.min` bounds; it does not block `scf.for` loops, nor move the
point loops below the k and j block loops, nor unroll and jam, and a nested `scf.parallel`
would be a nested `prange` in Numba. Hence a pass of our own, on `arith` index ops only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import IsTerminator, is_side_effect_free
from xdsl.utils.exceptions import PassFailedException

TILE_SIZES_ATTR = "tess.tile_sizes"
REGISTER_TILE_ATTR = "tess.register_tile"

DEFAULT_TILE_SIZES: tuple[int, int, int] = (64, 128, 256)
"""(TI, TK, TJ), measured with bench/bench_matmul.py: see the report in that file."""
DEFAULT_REGISTER_TILE: tuple[int, int] = (4, 4)
"""(R rows, U k steps): 16 multiply-adds per loaded output vector."""
DEFAULT_MIN_PARALLEL_BLOCKS = 4


# ---------------------------------------------------------------------------------------
# matching
# ---------------------------------------------------------------------------------------


def constant_index(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return int(owner.value.value.data)
    return None


def same_index(a: SSAValue, b: SSAValue) -> bool:
    """Whether two index values are provably equal: the same value, equal constants, or
    the same pure op applied to equal operands."""
    if a is b:
        return True
    ca, cb = constant_index(a), constant_index(b)
    if ca is not None or cb is not None:
        return ca == cb
    oa, ob = a.owner, b.owner
    if not isinstance(oa, Operation) or not isinstance(ob, Operation):
        return False
    return (
        oa.name == ob.name
        and is_side_effect_free(oa)
        and not oa.regions
        and oa.attributes == ob.attributes
        and oa.properties == ob.properties
        and len(oa.operands) == len(ob.operands)
        and all(same_index(x, y) for x, y in zip(oa.operands, ob.operands, strict=True))
    )


def depends_on(value: SSAValue, roots: set[SSAValue]) -> bool:
    """Whether `value` is computed from any of `roots` (through ops without regions)."""
    if value in roots:
        return True
    owner = value.owner
    return isinstance(owner, Operation) and any(depends_on(v, roots) for v in owner.operands)


def unit_loop_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The extent of a loop `0 to ub step 1` with a constant `ub`, else None."""
    if constant_index(lb) != 0 or constant_index(step) != 1:
        return None
    return constant_index(ub)


@dataclass(frozen=True)
class Contraction:
    """An i-k-j nest in a row kernel: `outer_loops`, then `k_loop` around `j_loop`."""

    outer_loops: tuple[scf.ForOp, ...]
    k_loop: scf.ForOp
    j_loop: scf.ForOp
    depth: int  # K
    cols: int  # M
    stored: frozenset[SSAValue]

    @property
    def body(self) -> Block:
        return self.j_loop.body.block


@dataclass(frozen=True)
class RowSegment:
    """Consecutive ops of a row kernel that are no contraction (a fill, an epilogue): they
    run for one row at a time, as they did."""

    ops: tuple[Operation, ...]


@dataclass(frozen=True)
class RowKernel:
    """An `scf.parallel` over (batch..., i) whose body runs, for each row `i`, its
    members in order: contractions and row segments, after ops that do not depend on the
    row (`invariant_ops`). A lone contraction nest is a row kernel of one member."""

    parallel: scf.ParallelOp
    batch_extents: tuple[int, ...]
    rows: int  # N: the extent of i
    invariant_ops: tuple[Operation, ...]
    members: tuple[Contraction | RowSegment, ...]

    @property
    def i(self) -> SSAValue:
        return self.parallel.body.block.args[-1]

    @property
    def contractions(self) -> tuple[Contraction, ...]:
        return tuple(m for m in self.members if isinstance(m, Contraction))


def match_contraction(loop: scf.ForOp, i: SSAValue) -> Contraction | None:
    """The nest rooted at `loop` if it is an i-k-j contraction (module docstring) in a row
    kernel over `i`."""
    loops: list[scf.ForOp] = [loop]
    while True:
        ops = list(loops[-1].body.block.ops)
        if len(ops) != 2 or not isinstance(ops[0], scf.ForOp):
            break
        loops.append(ops[0])
    if len(loops) < 2 or any(
        lp.iter_args or unit_loop_bound(lp.lb, lp.ub, lp.step) is None for lp in loops
    ):
        return None
    *outer, k_loop, j_loop = loops
    body_ops = list(j_loop.body.block.ops)
    terminator = body_ops.pop()
    if not isinstance(terminator, scf.YieldOp) or terminator.operands:
        return None
    stores = [o for o in body_ops if isinstance(o, memref.StoreOp)]
    loads = [o for o in body_ops if isinstance(o, memref.LoadOp)]
    if not stores or any(
        o.regions or not (isinstance(o, memref.LoadOp | memref.StoreOp) or is_side_effect_free(o))
        for o in body_ops
    ):
        return None
    k, j = k_loop.body.block.args[0], j_loop.body.block.args[0]
    stored: dict[SSAValue, memref.StoreOp] = {}
    for store in stores:
        indices = list(store.indices)
        if (
            store.memref in stored
            or not indices
            or indices[-1] is not j
            or not any(index is i for index in indices)
            or any(depends_on(index, {k}) for index in indices)
        ):
            return None
        stored[store.memref] = store
    for load in loads:
        store = stored.get(load.memref)
        if store is not None and not all(
            same_index(a, b) for a, b in zip(load.indices, store.indices, strict=True)
        ):
            return None
    return Contraction(
        outer_loops=tuple(outer),
        k_loop=k_loop,
        j_loop=j_loop,
        depth=unit_loop_bound(k_loop.lb, k_loop.ub, k_loop.step) or 0,
        cols=unit_loop_bound(j_loop.lb, j_loop.ub, j_loop.step) or 0,
        stored=frozenset(stored),
    )


def rows_are_disjoint(op: scf.ParallelOp, i: SSAValue) -> bool:
    """Whether distinct rows touch distinct elements of every memref the body writes:
    every access to such a memref has `i` itself at one common index position. The body
    may only touch memory through `memref.load` and `memref.store`."""
    accesses: dict[SSAValue, list[Sequence[SSAValue]]] = {}
    written: set[SSAValue] = set()
    for inner in op.body.walk():
        if isinstance(inner, memref.LoadOp | memref.StoreOp):
            accesses.setdefault(inner.memref, []).append(list(inner.indices))
            if isinstance(inner, memref.StoreOp):
                written.add(inner.memref)
        elif not (inner.regions or is_side_effect_free(inner) or inner.has_trait(IsTerminator)):
            return False
    for memory in written:
        positions = [{p for p, index in enumerate(idx) if index is i} for idx in accesses[memory]]
        if not set.intersection(*positions):
            return False
    return True


def match_row_kernel(op: scf.ParallelOp) -> RowKernel | None:
    """The row kernel rooted at `op`, if it holds at least one contraction to tile."""
    if (
        op.initVals
        or TILE_SIZES_ATTR in op.attributes
        or not isinstance(op.parent_op(), func.FuncOp)
    ):
        return None
    extents = [unit_loop_bound(*b) for b in zip(op.lowerBound, op.upperBound, op.step, strict=True)]
    if not extents or any(e is None or e < 1 for e in extents):
        return None
    i = op.body.block.args[-1]
    invariant: list[Operation] = []
    members: list[Contraction | RowSegment] = []
    segment: list[Operation] = []
    inside: set[SSAValue] = set(op.body.block.args)
    for inner in list(op.body.block.ops)[:-1]:
        if (
            is_side_effect_free(inner)
            and not inner.regions
            and not any(v in inside for v in inner.operands)
        ):
            invariant.append(inner)
            continue
        inside.update(inner.results)
        contraction = match_contraction(inner, i) if isinstance(inner, scf.ForOp) else None
        if contraction is None:
            segment.append(inner)
            continue
        if segment:
            members.append(RowSegment(tuple(segment)))
            segment = []
        members.append(contraction)
    if segment:
        members.append(RowSegment(tuple(segment)))
    if not any(isinstance(m, Contraction) for m in members) or not rows_are_disjoint(op, i):
        return None
    for member in members:  # a segment's values must not be needed outside it
        if isinstance(member, RowSegment) and any(
            op.body.block.find_ancestor_op_in_block(use.operation) not in member.ops
            for inner in member.ops
            for result in inner.results
            for use in result.uses
        ):
            return None
    return RowKernel(
        parallel=op,
        batch_extents=tuple(e or 0 for e in extents[:-1]),
        rows=extents[-1] or 0,
        invariant_ops=tuple(invariant),
        members=tuple(members),
    )


# ---------------------------------------------------------------------------------------
# index arithmetic, folded where static
# ---------------------------------------------------------------------------------------

IndexValue = int | SSAValue
"""An index: a Python int when static (folded, made an `arith.constant` when used)."""


@dataclass(frozen=True)
class Extent:
    """A loop's trip count and every value it can take (one value: `value` is that int)."""

    value: IndexValue
    sizes: frozenset[int]


def make_extent(value: IndexValue, sizes: set[int] | frozenset[int]) -> Extent:
    if len(sizes) == 1:
        return Extent(next(iter(sizes)), frozenset(sizes))
    return Extent(value, frozenset(sizes))


@dataclass
class IndexConstants:
    """`arith.constant` indices: the function's existing ones, and new ones collected in
    `ops` for insertion before the tiled loop."""

    made: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    ops: list[Operation] = field(default_factory=list[Operation])

    def __call__(self, value: int) -> SSAValue:
        if value not in self.made:
            constant = arith.ConstantOp(IntegerAttr.from_index_int_value(value))
            self.ops.append(constant)
            self.made[value] = constant.result
        return self.made[value]


@dataclass
class Emitter:
    """Appends index arithmetic to `block`, folding static operands."""

    block: Block
    constant: IndexConstants

    def value(self, v: IndexValue) -> SSAValue:
        return self.constant(v) if isinstance(v, int) else v

    def emit(self, op: Operation, hint: str | None) -> SSAValue:
        self.block.add_op(op)
        result = op.results[0]
        if hint:
            result.name_hint = hint
        return result

    def add(self, a: IndexValue, b: IndexValue, hint: str | None = None) -> IndexValue:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if b == 0 or a == 0:
            return a if b == 0 else b
        return self.emit(arith.AddiOp(self.value(a), self.value(b)), hint)

    def sub(self, a: IndexValue, b: IndexValue, hint: str | None = None) -> IndexValue:
        if isinstance(a, int) and isinstance(b, int):
            return a - b
        if b == 0:
            return a
        return self.emit(arith.SubiOp(self.value(a), self.value(b)), hint)

    def mul(self, a: IndexValue, c: int, hint: str | None = None) -> IndexValue:
        if isinstance(a, int):
            return a * c
        if c in (0, 1):
            return 0 if c == 0 else a
        return self.emit(arith.MuliOp(a, self.constant(c)), hint)

    def min(self, c: int, a: IndexValue, hint: str | None = None) -> IndexValue:
        if isinstance(a, int):
            return min(c, a)
        return self.emit(arith.MinSIOp(self.constant(c), a), hint)

    def div(self, a: IndexValue, c: int, hint: str | None = None) -> IndexValue:
        if isinstance(a, int):
            return a // c
        if c == 1:
            return a
        return self.emit(arith.DivUIOp(a, self.constant(c)), hint)

    def rem(self, a: IndexValue, c: int, hint: str | None = None) -> IndexValue:
        if isinstance(a, int):
            return a % c
        return self.emit(arith.RemUIOp(a, self.constant(c)), hint)


def emit_loop(
    e: Emitter, count: Extent, hint: str, body: Callable[[Emitter, IndexValue], None]
) -> scf.ForOp | None:
    """`scf.for` from 0 to `count` step 1 around what `body` emits; no loop at all when
    the count is 0 (nothing) or 1 (the body with index 0)."""
    if count.sizes == frozenset({0}):
        return None
    if count.sizes == frozenset({1}):
        body(e, 0)
        return None
    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = hint
    body(Emitter(block, e.constant), block.args[0])
    block.add_op(scf.YieldOp())
    loop = scf.ForOp(e.value(0), e.value(count.value), e.value(1), [], block)
    e.block.add_op(loop)
    return loop


def hoist_invariants(loop: scf.ForOp, written: frozenset[SSAValue]) -> None:
    """Move the ops of `loop`'s body that do not depend on the loop in front of it: pure
    ops and loads of memrefs the nest does not write."""
    body = loop.body.block
    inside: set[SSAValue] = set(body.args)
    for op in list(body.ops):
        movable = (
            op is not body.last_op
            and not op.regions
            and not any(v in inside for v in op.operands)
            and (
                (isinstance(op, memref.LoadOp) and op.memref not in written)
                or is_side_effect_free(op)
            )
        )
        if movable:
            op.detach()
            parent = loop.parent_block()
            assert parent is not None
            parent.insert_op_before(op, loop)
        else:
            inside.update(op.results)


# ---------------------------------------------------------------------------------------
# the tiled nest
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TileOrigin:
    """Where a (TI x TK x TJ) tile starts and how far it extends in i, k and j."""

    i0: IndexValue
    ni: Extent
    k0: IndexValue
    nk: Extent
    j0: IndexValue
    nj: Extent


def block_extent(e: Emitter, extent: int, tile: int, start: IndexValue, hint: str) -> Extent:
    """`min(tile, extent - start)`: the size of the block at `start`."""
    if extent % tile == 0:
        return make_extent(tile, {tile})
    return make_extent(e.min(tile, e.sub(extent, start), hint), {tile, extent % tile})


def effective_tile(extent: int, tile: int, multiple: int, *, max_size: int | None = None) -> int:
    """`tile` clamped to the extent (and `max_size`), then rounded down to a multiple of
    `multiple` (the register tile) when it still splits the extent."""
    size = max(1, min(tile, extent, max_size or extent))
    if size < extent and size >= multiple:
        size -= size % multiple
    return size


@dataclass
class RowKernelTiler:
    """Builds the tiled replacement of one `RowKernel` (module docstring)."""

    kernel: RowKernel
    row_tile: int
    register_tile: tuple[int, int]
    constant: IndexConstants
    blocks: dict[Contraction, tuple[int, int]]
    """(TK, TJ) of each contraction."""
    mapping: dict[SSAValue, IndexValue] = field(default_factory=dict[SSAValue, IndexValue])
    """The new values of the old nest's loop indices."""
    invariants: dict[SSAValue, SSAValue] = field(default_factory=dict[SSAValue, SSAValue])
    """The new values of the old row-invariant ops' results."""

    def values(self, e: Emitter) -> dict[SSAValue, SSAValue]:
        """A value map for cloning old ops at `e`."""
        return {**self.invariants, **{iv: e.value(v) for iv, v in self.mapping.items()}}

    def build(self) -> scf.ParallelOp:
        kernel, ti = self.kernel, self.row_tile
        counts = [*kernel.batch_extents, -(-kernel.rows // ti)]
        block = Block(arg_types=[IndexType()])
        flat = block.args[0]
        flat.name_hint = "blk"
        e = Emitter(block, self.constant)
        old_args = kernel.parallel.body.block.args
        hints = [arg.name_hint for arg in old_args[:-1]] + ["ib"]
        ivs: list[IndexValue] = []
        for d, (count, hint) in enumerate(zip(counts, hints, strict=True)):
            if count == 1:
                ivs.append(0)
                continue
            index = e.div(flat, math.prod(counts[d + 1 :]), None if d else hint)
            ivs.append(e.rem(index, count, hint) if d > 0 else index)
        for arg, iv in zip(old_args[:-1], ivs[:-1], strict=True):
            self.mapping[arg] = iv
        i0 = e.mul(ivs[-1], ti, "i0")
        ni = block_extent(e, kernel.rows, ti, i0, "ni")
        for op in kernel.invariant_ops:
            clone = op.clone(self.invariants)
            block.add_op(clone)
        for member in kernel.members:
            if isinstance(member, Contraction):
                self.outer_loops(e, member, list(member.outer_loops), i0, ni)
            else:
                self.segment(e, member, i0, ni)
        block.add_op(scf.ReduceOp())
        zero, one = self.constant(0), self.constant(1)
        parallel = scf.ParallelOp([zero], [self.constant(math.prod(counts))], [one], Region(block))
        sizes = [ti, *(size for c in kernel.contractions for size in self.blocks[c])]
        parallel.attributes[TILE_SIZES_ATTR] = DenseArrayBase.from_list(i64, sizes)
        parallel.attributes[REGISTER_TILE_ATTR] = DenseArrayBase.from_list(i64, self.register_tile)
        return parallel

    def segment(self, e: Emitter, segment: RowSegment, i0: IndexValue, ni: Extent) -> None:
        """The segment's ops for each row of the block in turn."""

        def row(er: Emitter, ii: IndexValue) -> None:
            self.mapping[self.kernel.i] = er.add(i0, ii, "i")
            values = self.values(er)
            for op in segment.ops:
                er.block.add_op(op.clone(values))

        emit_loop(e, ni, "ii", row)

    def outer_loops(
        self,
        e: Emitter,
        nest: Contraction,
        loops: list[scf.ForOp],
        i0: IndexValue,
        ni: Extent,
    ) -> None:
        """The loops around k, unchanged, then the k blocks."""
        if not loops:
            self.k_blocks(e, nest, i0, ni)
            return
        loop, *rest = loops
        iv = loop.body.block.args[0]
        extent = constant_index(loop.ub) or 0

        def body(inner: Emitter, index: IndexValue) -> None:
            self.mapping[iv] = index
            self.outer_loops(inner, nest, rest, i0, ni)

        emit_loop(e, make_extent(extent, {extent}), iv.name_hint or "r", body)

    def k_blocks(self, e: Emitter, nest: Contraction, i0: IndexValue, ni: Extent) -> None:
        tk, tj = self.blocks[nest]

        def k_block(ek: Emitter, kb: IndexValue) -> None:
            k0 = ek.mul(kb, tk, "k0")
            nk = block_extent(ek, nest.depth, tk, k0, "nk")

            def j_block(ej: Emitter, jb: IndexValue) -> None:
                j0 = ej.mul(jb, tj, "j0")
                nj = block_extent(ej, nest.cols, tj, j0, "nj")
                self.rows(ej, nest, TileOrigin(i0, ni, k0, nk, j0, nj))

            blocks = -(-nest.cols // tj)
            emit_loop(ek, make_extent(blocks, {blocks}), "jb", j_block)

        blocks = -(-nest.depth // tk)
        emit_loop(e, make_extent(blocks, {blocks}), "kb", k_block)

    def rows(self, e: Emitter, nest: Contraction, tile: TileOrigin) -> None:
        """Groups of R rows, then the rows left over one at a time."""
        r = self.register_tile[0]

        def group(eg: Emitter, ir: IndexValue) -> None:
            first = eg.add(tile.i0, eg.mul(ir, r), "i")
            self.depth(eg, nest, tile, [eg.add(first, row) for row in range(r)])

        groups = make_extent(e.div(tile.ni.value, r, "nir"), {s // r for s in tile.ni.sizes})
        emit_loop(e, groups, "ir", group)
        leftover = {s % r for s in tile.ni.sizes}
        if leftover != {0}:
            done = e.mul(groups.value, r)
            count = make_extent(e.sub(tile.ni.value, done, "nit"), leftover)
            start = e.add(tile.i0, done)
            emit_loop(
                e, count, "it", lambda et, it: self.depth(et, nest, tile, [et.add(start, it)])
            )

    def depth(
        self, e: Emitter, nest: Contraction, tile: TileOrigin, rows: Sequence[IndexValue]
    ) -> None:
        """Groups of U steps of k, then the steps left over one at a time."""
        u = self.register_tile[1]

        def group(eg: Emitter, ku: IndexValue) -> None:
            first = eg.add(tile.k0, eg.mul(ku, u), "k")
            self.cols(eg, nest, tile, rows, [eg.add(first, step) for step in range(u)])

        groups = make_extent(e.div(tile.nk.value, u, "nku"), {s // u for s in tile.nk.sizes})
        emit_loop(e, groups, "ku", group)
        leftover = {s % u for s in tile.nk.sizes}
        if leftover != {0}:
            done = e.mul(groups.value, u)
            count = make_extent(e.sub(tile.nk.value, done, "nkt"), leftover)
            start = e.add(tile.k0, done)
            emit_loop(
                e, count, "kt", lambda et, kt: self.cols(et, nest, tile, rows, [et.add(start, kt)])
            )

    def cols(
        self,
        e: Emitter,
        nest: Contraction,
        tile: TileOrigin,
        rows: Sequence[IndexValue],
        steps: Sequence[IndexValue],
    ) -> None:
        """The unit-stride `jj` loop around the jammed body; invariants hoisted above it."""

        def body(ej: Emitter, jj: IndexValue) -> None:
            self.jam(ej, nest, rows, steps, ej.add(tile.j0, jj, "j"))

        loop = emit_loop(e, tile.nj, "jj", body)
        if loop is not None:
            hoist_invariants(loop, nest.stored)

    def jam(
        self,
        e: Emitter,
        nest: Contraction,
        rows: Sequence[IndexValue],
        steps: Sequence[IndexValue],
        j: IndexValue,
    ) -> None:
        """The body cloned for each (row, k step), row-major, with the output forwarded
        from one k step to the next and stored after the last one."""
        body_ops = list(nest.body.ops)[:-1]
        forwarded: dict[tuple[int, SSAValue], SSAValue] = {}
        loaded: dict[tuple[SSAValue, tuple[SSAValue, ...]], SSAValue] = {}
        k_iv, j_iv = nest.k_loop.body.block.args[0], nest.j_loop.body.block.args[0]
        for r, row in enumerate(rows):
            for u, step in enumerate(steps):
                self.mapping.update({self.kernel.i: row, k_iv: step, j_iv: j})
                values = self.values(e)
                for op in body_ops:
                    if isinstance(op, memref.LoadOp) and op.memref in nest.stored:
                        if (r, op.memref) in forwarded:
                            values[op.res] = forwarded[(r, op.memref)]
                            continue
                    elif isinstance(op, memref.LoadOp):
                        key = (op.memref, tuple(values.get(x, x) for x in op.indices))
                        if key in loaded:
                            values[op.res] = loaded[key]
                            continue
                        e.block.add_op(op.clone(values))
                        loaded[key] = values[op.res]
                        continue
                    elif isinstance(op, memref.StoreOp):
                        forwarded[(r, op.memref)] = values.get(op.value, op.value)
                        if u < len(steps) - 1:
                            continue
                    e.block.add_op(op.clone(values))


# ---------------------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------------------


@dataclass
class TileRowKernel(RewritePattern):
    """Replace a row kernel's `scf.parallel` by its tiled nest."""

    tile_sizes: tuple[int, int, int]
    register_tile: tuple[int, int]
    min_parallel_blocks: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ParallelOp, rewriter: PatternRewriter) -> None:
        kernel = match_row_kernel(op)
        if kernel is None:
            return
        r, u = self.register_tile
        ti, tk, tj = self.tile_sizes
        blocks_needed = -(-self.min_parallel_blocks // math.prod(kernel.batch_extents))
        row_tile = effective_tile(
            kernel.rows, ti, r, max_size=-(-kernel.rows // max(1, blocks_needed))
        )
        blocks = {
            c: (effective_tile(c.depth, tk, u), effective_tile(c.cols, tj, 1))
            for c in kernel.contractions
        }
        constant = IndexConstants()
        parent = op.parent_block()
        assert parent is not None
        for existing in parent.ops:
            if existing is op:
                break
            value = constant_index(existing.results[0]) if existing.results else None
            if value is not None and isinstance(existing.results[0].type, IndexType):
                constant.made.setdefault(value, existing.results[0])
        tiled = RowKernelTiler(kernel, row_tile, (r, u), constant, blocks).build()
        bounds = {*op.operands}
        for inner in op.walk():
            if isinstance(inner, scf.ForOp):
                bounds.update((inner.lb, inner.ub, inner.step))
        rewriter.replace(op, [*constant.ops, tiled], [])
        for value in bounds:
            owner = value.owner
            if isinstance(owner, arith.ConstantOp) and not value.uses:
                rewriter.erase(owner)


def _positive_ints(values: Sequence[int], count: int, option: str) -> tuple[int, ...]:
    if len(values) != count or any(not isinstance(v, int) or v < 1 for v in values):
        raise PassFailedException(
            f"tess-tile: {option} takes {count} positive integers, got {list(values)}"
        )
    return tuple(values)


@dataclass(frozen=True)
class TessTilePass(ModulePass):
    """Cache-block (TI x TK x TJ) and register-tile (R rows x U k steps) i-k-j
    contraction nests; see the module docstring."""

    name = "tess-tile"

    tile_sizes: tuple[int, ...] = DEFAULT_TILE_SIZES
    register_tile: tuple[int, ...] = DEFAULT_REGISTER_TILE
    min_parallel_blocks: int = DEFAULT_MIN_PARALLEL_BLOCKS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        ti, tk, tj = _positive_ints(self.tile_sizes, 3, "tile-sizes")
        r, u = _positive_ints(self.register_tile, 2, "register-tile")
        pattern = TileRowKernel((ti, tk, tj), (r, u), max(1, self.min_parallel_blocks))
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = [
    "DEFAULT_REGISTER_TILE",
    "DEFAULT_TILE_SIZES",
    "REGISTER_TILE_ATTR",
    "TILE_SIZES_ATTR",
    "Contraction",
    "RowKernel",
    "TessTilePass",
    "match_contraction",
    "match_row_kernel",
]
