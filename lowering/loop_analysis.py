"""
Loop-nest analysis of linalg structured ops: the loop order, the parallel prefix, and which
outer loops consecutive nests can share. No IR is changed here.

Two passes at two levels ask the same questions about a linalg op's future loop nest:
`tess-linalg-to-loops` (level 5) builds the nest and fuses the nests of a kernel that share
outer loops; `tess-fuse-epilogue` (level 3, on tensors) groups ops into a `kernel.group`
only when their nests will share those loops. Both use this module, so the decision made
on tensors is the one the loop level carries out. The algorithm (see `tess-linalg-to-loops`'
module docstring, steps 1, 2 and 4):

- `plan_loop_nest`: the innermost loop is the one that makes the accesses cheapest (0 if
  it does not move an access, 1 for a unit-stride one, `STRIDED_ACCESS_COST` otherwise;
  ties to the loop indexing the first output's last dim, then the later loop), only where
  legal (a parallel loop that indexes every output, or the last reduction). The other
  loops keep iterator order, parallel ones first. The leading loops that are parallel and
  index every output form the parallel prefix (one `scf.parallel`).
- `summarize_nest`: an op's plan, static loop extents and memory accesses (`NestSummary`),
  on tensors or memrefs (`buffer_of` names the memory an operand touches).
- `shared_outer_loops` / `shared_by_chain`: how many leading outer loops (the parallel
  prefix without loops of extent 1) a later nest can share with earlier ones: same
  extents, and every element one writes and another touches indexed by the same outer
  loops at the same positions, so distinct outer iterations touch disjoint elements.

- `match_scatter`: whether a generic is a scatter (`out[.., r, ..] += position == r ?
  value : 0`, take's adjoint), which `tess-linalg-to-loops` lowers as one pass over the
  indices (its step 5) and leaves out of nest fusion.

At the loop level itself (`scf`), the passes that rewrite loop nests after
`tess-linalg-to-loops` (`tess-tile`, `tess-tile-dot`, `tess-parallel-columns`) and the
code generators read index values the same way: `constant_int` (a constant's value),
`unit_loop_bound` (the extent of a loop `0 to N step 1`), `same_index` (two indices
provably equal) and `depends_on` (an index computed from a loop variable); the optional
rewrites gate themselves on a kernel's size through `trip_count` (a loop's static trip
count) and `enclosing_trips` (how often an op runs per call, and the trip count of the
loop around it that LLVM would vectorise); and the
rewrites that build new nests take their index constants from one `IndexConstants` (reusing
those defined before the nest; the new ones it makes, the caller inserts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, ShapedType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.traits import IsTerminator, is_side_effect_free

from tessc.dialects import contract
from tessc.dialects.micro import NumThreadsOp

PARALLEL_WORK = 1 << 18
"""Static loop iterations from which codegen runs a kernel in parallel (its default
`parallel_threshold`); below, serially (`static_work`)."""
PACKED_MIN_WORK = 128**3 + 1
"""Multiply-adds (N * K * M) from which `tess-pack-matmul` packs a contraction's operands
(128^3 and below stay with `tess-tile`); `tess-fuse` fuses a transposed operand into those."""


@dataclass(frozen=True)
class LoopNestPlan:
    """The order of an op's loops (outermost first) and how many lead as scf.parallel."""

    order: tuple[int, ...]
    num_parallel: int


def dims_of(affine_map: AffineMap) -> set[int]:
    return {e.position for e in affine_map.results if isinstance(e, AffineDimExpr)}


STRIDED_ACCESS_COST = 8
"""What a strided access in the innermost loop costs, against 1 for a unit-stride one and 0
for one the innermost loop does not move (a register, after LLVM hoists it)."""


def access_cost(loop: int, affine_map: AffineMap, shape: Sequence[int]) -> int:
    """The cost of accessing an operand of `shape` through `affine_map` when `loop` is the
    innermost loop: 0 if the loop does not move the access, 1 if it walks the operand's
    last dim of size > 1 (unit stride), `STRIDED_ACCESS_COST` otherwise."""
    if loop not in dims_of(affine_map):
        return 0
    results = list(affine_map.results)
    while results and shape[len(results) - 1] == 1:
        results.pop()  # size-1 trailing dims do not change the stride
    if results and results[-1] == AffineDimExpr(loop):
        return 1
    return STRIDED_ACCESS_COST


def plan_loop_nest(
    iterator_types: Sequence[IteratorType],
    indexing_maps: Sequence[AffineMap],
    shapes: Sequence[Sequence[int]],
    num_inputs: int,
    ranges: Sequence[int],
) -> LoopNestPlan:
    """
    The loop order and parallel prefix of the module docstring, steps 1 and 2, for an op
    with these iterators and maps over operands of `shapes` (`()` for a scalar) whose first
    `num_inputs` are inputs, and loops of extents `ranges`.
    """
    num_loops = len(iterator_types)
    parallel = [d for d, t in enumerate(iterator_types) if t == IteratorType.PARALLEL]
    sequential = [d for d, t in enumerate(iterator_types) if t != IteratorType.PARALLEL]
    output_maps = indexing_maps[num_inputs:]
    writes_distinct = set(range(num_loops))
    for output_map in output_maps:
        writes_distinct &= dims_of(output_map)

    def legal_innermost(d: int) -> bool:
        # A parallel loop may sink below the reductions if its iterations write disjoint
        # outputs; a reduction loop only if it is the last one (summation order unchanged).
        return d in writes_distinct if d in parallel else d == sequential[-1]

    candidates = [d for d in range(num_loops) if ranges[d] != 1] or list(range(num_loops))
    candidates = [d for d in candidates if legal_innermost(d)]
    output_last: int | None = None
    if output_maps and output_maps[0].results:
        last = output_maps[0].results[-1]
        output_last = last.position if isinstance(last, AffineDimExpr) else None

    def score(d: int) -> tuple[int, bool, int]:
        cost = sum(access_cost(d, m, shape) for m, shape in zip(indexing_maps, shapes, strict=True))
        return (cost, d != output_last, -d)

    innermost = min(candidates, key=score) if candidates else None
    if innermost is not None and innermost in parallel:
        order = (*(d for d in parallel if d != innermost), *sequential, innermost)
    else:
        order = (*parallel, *sequential)

    num_parallel = 0
    for d in order:
        if d not in parallel or d not in writes_distinct:
            break
        num_parallel += 1
    return LoopNestPlan(order, num_parallel)


# ---------------------------------------------------------------------------------------
# Sharing outer loops between nests (step 4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """One operand of a nest: the memory it touches (`buffer`: anything hashable that
    names it), through which map, and whether the nest writes it."""

    buffer: Hashable
    map: AffineMap
    writes: bool


@dataclass(frozen=True)
class NestSummary:
    """What nest fusion needs to know about one linalg op."""

    plan: LoopNestPlan
    ranges: tuple[int, ...]
    accesses: tuple[Access, ...]

    @property
    def outer_loops(self) -> tuple[int, ...]:
        """The loops this nest can share, outermost first: its parallel prefix (which
        indexes every output), without loops of extent 1 (they go anywhere)."""
        prefix = self.plan.order[: self.plan.num_parallel]
        return tuple(d for d in prefix if self.ranges[d] != 1)


BufferOf = Callable[[LinalgStructuredOperation, int], Hashable]
"""The memory operand `index` of an op touches (for memrefs: the memref value itself)."""


def operand_buffer(op: LinalgStructuredOperation, index: int) -> Hashable:
    return op.operands[index]


def summarize_nest(
    op: LinalgStructuredOperation, buffer_of: BufferOf = operand_buffer
) -> NestSummary | None:
    """The loop plan and accesses of `op` (on tensors or memrefs), or None without static
    loop extents."""
    maps = [m.data for m in op.get_indexing_maps()]
    iterator_types = [t.data for t in op.get_iterator_types()]
    try:
        ranges = tuple(op.get_static_loop_ranges()) if iterator_types else ()
    except (NotImplementedError, ValueError):
        return None
    if any(r < 0 for r in ranges):
        return None
    shapes = [v.type.get_shape() if isinstance(v.type, ShapedType) else () for v in op.operands]
    num_inputs = len(op.inputs)
    plan = plan_loop_nest(iterator_types, maps, shapes, num_inputs, ranges)
    accesses = tuple(
        Access(buffer_of(op, index), affine_map, index >= num_inputs)
        for index, (operand, affine_map) in enumerate(zip(op.operands, maps, strict=True))
        if isinstance(operand.type, ShapedType)
    )
    return NestSummary(plan, ranges, accesses)


def _same_rows(
    writer: Access, writer_loops: Sequence[int], other: Access, other_loops: Sequence[int]
) -> int:
    """How many leading outer loops index `writer`'s and `other`'s elements alike: at the
    memref position where the writer's map has its p-th outer loop, the other map has its
    own p-th outer loop."""
    for p, (w, o) in enumerate(zip(writer_loops, other_loops, strict=True)):
        results = list(writer.map.results)
        if AffineDimExpr(w) not in results:
            return p
        position = results.index(AffineDimExpr(w))
        if other.map.results[position] != AffineDimExpr(o):
            return p
    return len(writer_loops)


def shared_outer_loops(before: NestSummary, after: NestSummary, limit: int) -> int:
    """How many leading outer loops (at most `limit`) `before` and the later nest `after`
    can share: same extents, and each element one writes and the other touches is indexed
    by the same outer loops (so distinct outer iterations touch disjoint elements)."""
    count = min(limit, len(before.outer_loops), len(after.outer_loops))
    first, second = before.outer_loops[:count], after.outer_loops[:count]
    for p, (a, b) in enumerate(zip(first, second, strict=True)):
        if before.ranges[a] != after.ranges[b]:
            count = p
            break
    for x in before.accesses:
        for y in after.accesses:
            if count == 0:
                return 0
            if x.buffer != y.buffer or not (x.writes or y.writes):
                continue
            if x.writes:
                count = min(count, _same_rows(x, first[:count], y, second[:count]))
            if y.writes:
                count = min(count, _same_rows(y, second[:count], x, first[:count]))
    return count


def shared_by_chain(chain: Sequence[NestSummary], nest: NestSummary, limit: int) -> int:
    """How many outer loops `nest` can share with every nest of `chain` (at most `limit`)."""
    for member in chain:
        limit = shared_outer_loops(member, nest, limit)
    return limit


# ---------------------------------------------------------------------------------------
# Scatters (tess-linalg-to-loops, step 5)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scatter:
    """A scatter-shaped reduction: `out[.., r, ..] += position == r ? value : 0`."""

    dim: int
    """The scattered loop `r`, read only by `index`."""
    index: IndexOp
    compare: arith.CmpiOp
    select: arith.SelectOp
    value: SSAValue
    """What is added where the position is `r` (the other select operand is 0)."""
    position: SSAValue


def single_user(value: SSAValue) -> Operation | None:
    """The one op using `value` once, else None."""
    uses = list(value.uses)
    return uses[0].operation if len(uses) == 1 else None


def _is_zero(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr | FloatAttr)
        and owner.value.value.data == 0
    )


def match_scatter(op: LinalgStructuredOperation) -> Scatter | None:
    """The scatter shape of step 5 in a single-output generic on memrefs, else None."""
    if not isinstance(op, GenericOp) or len(op.outputs) != 1 or op.res:
        return None
    body = op.body.block
    index_ops = [o for o in body.ops if isinstance(o, IndexOp)]
    yielded = body.last_op
    if len(index_ops) != 1 or yielded is None or len(yielded.operands) != 1:
        return None
    index = index_ops[0]
    dim = index.dim.value.data
    maps = [m.data for m in op.get_indexing_maps()]
    if op.iterator_types.data[dim].data != IteratorType.PARALLEL:
        return None
    if any(dim in m.used_dims() for m in maps[: len(op.inputs)]):
        return None
    if AffineDimExpr(dim) not in maps[-1].results or len(maps[-1].used_dims()) != len(
        maps[-1].results
    ):
        return None  # the output is indexed by plain loop dims, `r` among them
    compare = single_user(index.result)
    if not isinstance(compare, arith.CmpiOp) or compare.predicate.value.data != 0:  # eq
        return None
    position = compare.lhs if compare.rhs is index.result else compare.rhs
    select = single_user(compare.result)
    if not isinstance(select, arith.SelectOp) or select.cond is not compare.result:
        return None
    if not _is_zero(select.rhs) or single_user(select.result) is None:
        return None
    add = yielded.operands[0].owner
    accumulator = body.args[-1]
    if not isinstance(add, arith.AddfOp | arith.AddiOp) or set(add.operands) != {
        accumulator,
        select.result,
    }:
        return None
    if single_user(accumulator) is None or depends_on(position, accumulator):
        return None
    return Scatter(dim, index, compare, select, select.lhs, position)


# ---------------------------------------------------------------------------------------
# Index values at the loop level (scf)
# ---------------------------------------------------------------------------------------


def constant_int(value: SSAValue) -> int | None:
    """The value of an integer or index `arith.constant`, None for any other value."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return int(owner.value.value.data)
    return None


def unit_loop_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The extent of a loop `0 to ub step 1` with a constant `ub`, else None."""
    if constant_int(lb) != 0 or constant_int(step) != 1:
        return None
    return constant_int(ub)


def trip_count(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """The trip count of a loop `lb to ub step step` with constant bounds, else None."""
    low, high, stride = constant_int(lb), constant_int(ub), constant_int(step)
    if low is None or high is None or stride is None or stride < 1:
        return None
    return max(0, -(-(high - low) // stride))


def trip_bound(lb: SSAValue, ub: SSAValue, step: SSAValue) -> int | None:
    """`trip_count`, or where the upper bound is `min(c, x)` with a constant `c` (an edge
    tile's extent: `tess-pack-matmul`), the count up to `c`: at most that many trips."""
    trips = trip_count(lb, ub, step)
    if trips is not None or not isinstance(owner := ub.owner, arith.MinSIOp | arith.MinUIOp):
        return trips
    bounds = [b for v in owner.operands if (b := trip_count(lb, v, step)) is not None]
    return min(bounds) if bounds else None


def _per_thread(bound: SSAValue) -> bool:
    """Whether `bound` is the thread count, or its minimum with a constant."""
    owner = bound.owner
    if isinstance(owner, arith.MinSIOp | arith.MinUIOp):
        return any(isinstance(v.owner, NumThreadsOp) for v in owner.operands)
    return isinstance(owner, NumThreadsOp)


def static_work(block: Block) -> float:
    """Iterations of the loop nests in `block` when their trip counts are constants."""
    return sum(static_work_of(op) for op in block.ops)


def static_work_of(op: Operation) -> float:
    """Iterations of the loop nest `op` (0 if it is no loop)."""
    if isinstance(op, scf.ForOp):
        trips = trip_bound(op.lb, op.ub, op.step)
        return (math.inf if trips is None else trips) * max(1.0, static_work(op.body.block))
    if (rows := contract.ROW_RANGES.get(op)) is not None:  # rows of varying ranges
        return float(sum(rows[1::2]) - sum(rows[::2]))
    if isinstance(op, scf.ParallelOp):
        bounds = zip(op.lowerBound, op.upperBound, op.step, strict=True)
        # A loop over the threads (`micro.num_threads`) splits its body's work: once.
        counts = [1 if _per_thread(ub) else trip_count(lb, ub, st) for lb, ub, st in bounds]
        trips = math.inf if None in counts else math.prod(c or 0 for c in counts)
        return trips * max(1.0, static_work(op.body.block))
    if isinstance(op, scf.IfOp):
        return max(static_work(r.block) for r in op.regions if r.blocks)
    return 0.0


@dataclass(frozen=True)
class EnclosingTrips:
    """How often an op runs per call of its function, by its enclosing loops."""

    total: int | None
    """The product of the enclosing loops' trip counts (1 outside loops), None when one is
    not static."""
    innermost: int | None
    """The trip count of the innermost enclosing loop (of an `scf.parallel`, its last dim,
    the loop the code generator emits innermost): the loop LLVM vectorises. 1 outside
    loops, None when not static."""


def enclosing_trips(op: Operation) -> EnclosingTrips:
    """`op`'s `EnclosingTrips`, from the `scf.for`/`scf.parallel` loops around it (other
    region ops count once: an `scf.if` may run its region or not, so this is the most)."""
    total: int | None = 1
    innermost: int | None = 1
    first = True
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, scf.ForOp):
            counts = [trip_count(parent.lb, parent.ub, parent.step)]
        elif isinstance(parent, scf.ParallelOp):
            counts = [
                trip_count(lb, ub, step)
                for lb, ub, step in zip(
                    parent.lowerBound, parent.upperBound, parent.step, strict=True
                )
            ]
        elif isinstance(parent, scf.WhileOp):
            counts = [None]
        else:
            parent = parent.parent_op()
            continue
        if first:
            innermost, first = counts[-1], False
        for count in counts:
            total = None if total is None or count is None else total * count
        parent = parent.parent_op()
    return EnclosingTrips(total, innermost)


def same_index(a: SSAValue, b: SSAValue) -> bool:
    """Whether two index values are provably equal: one value, equal constants, or one
    pure op on equal operands."""
    if a is b or (constant_int(a) is not None and constant_int(a) == constant_int(b)):
        return True
    oa, ob = a.owner, b.owner
    return (
        isinstance(oa, Operation)
        and isinstance(ob, Operation)
        and oa.name == ob.name
        and is_side_effect_free(oa)
        and not oa.regions
        and (oa.attributes, oa.properties) == (ob.attributes, ob.properties)
        and len(oa.operands) == len(ob.operands)
        and all(same_index(x, y) for x, y in zip(oa.operands, ob.operands, strict=True))
    )


def defined_in(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined by `op` or inside its regions."""
    owner = value.owner
    holder = owner.parent_op() if isinstance(owner, Block) else owner
    return holder is not None and op.is_ancestor(holder)


def moves_by_one(value: SSAValue, loop: scf.ForOp) -> bool:
    """Whether `value` is `loop`'s variable plus values defined outside the loop (a row
    index: a block's first row plus a tile's first row plus the row within it), so that
    consecutive iterations give consecutive values."""
    if value is loop.body.block.args[0]:
        return True
    owner = value.owner
    if not isinstance(owner, arith.AddiOp):
        return False
    a, b = owner.lhs, owner.rhs
    return (moves_by_one(a, loop) and not defined_in(b, loop)) or (
        moves_by_one(b, loop) and not defined_in(a, loop)
    )


def recomputable_ops(loop: scf.ForOp, ops: Sequence[Operation]) -> list[Operation]:
    """The ops of `ops` (the loop body's, in order) that a loop split out of `loop` can
    clone: pure, without regions, their operands defined outside the loop, the loop's
    variable or results of such ops (index arithmetic, constants)."""
    iv = loop.body.block.args[0]
    found: list[Operation] = []
    for op in ops:
        if (
            not op.regions
            and is_side_effect_free(op)
            and all(v is iv or not defined_in(v, loop) or v.owner in found for v in op.operands)
        ):
            found.append(op)
    return found


def rows_independent(ops: Iterable[Operation], rows: Collection[SSAValue]) -> bool:
    """Whether no row reads or writes what another row writes, for the ops of a loop over
    rows (`ops`: everything in its body, nested ops included) and the values that name a
    row (`rows`): memory is touched only by loads and stores, and every access to a memref
    the ops write has one and the same row value at one common index position. (Distinct
    memrefs of a kernel do not overlap where one is written: `tess-outline-kernels` and
    `tess-memory-plan` guarantee it.) `tess-tile`'s row kernels, `tess-row-dots` and
    `tess-interchange-rows` split or reorder the rows of loops this holds for."""
    accesses: dict[SSAValue, list[tuple[SSAValue, ...]]] = {}
    written: set[SSAValue] = set()
    for op in ops:
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            accesses.setdefault(op.memref, []).append(tuple(op.indices))
            if isinstance(op, memref.StoreOp):
                written.add(op.memref)
        elif not (op.regions or is_side_effect_free(op) or op.has_trait(IsTerminator)):
            return False
    for memory in written:
        first, *others = accesses[memory]
        if not any(
            value in rows and all(len(o) == len(first) and o[d] is value for o in others)
            for d, value in enumerate(first)
        ):
            return False
    return True


def depends_on(value: SSAValue, root: SSAValue) -> bool:
    """Whether `value` is computed from `root` (through ops without regions)."""
    owner = value.owner
    return value is root or (
        isinstance(owner, Operation) and any(depends_on(v, root) for v in owner.operands)
    )


@dataclass
class IndexConstants:
    """Index constants for a new loop nest: `made` by value (those defined before the
    nest in its block, reused, and new ones), and the new ones in `ops`, for the caller to
    insert before the nest."""

    made: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    ops: list[Operation] = field(default_factory=list[Operation])

    @classmethod
    def before(cls, op: Operation) -> IndexConstants:
        """The index constants defined before `op` in its block."""
        constants = cls()
        block = op.parent_block()
        assert block is not None
        for existing in block.ops:
            if existing is op:
                break
            if existing.results and isinstance(existing.results[0].type, IndexType):
                if (value := constant_int(existing.results[0])) is not None:
                    constants.made.setdefault(value, existing.results[0])
        return constants

    def __call__(self, value: int) -> SSAValue:
        if value not in self.made:
            self.ops.append(constant := arith.ConstantOp(IntegerAttr.from_index_int_value(value)))
            self.made[value] = constant.result
        return self.made[value]


__all__ = [
    "PACKED_MIN_WORK",
    "STRIDED_ACCESS_COST",
    "Access",
    "BufferOf",
    "IndexConstants",
    "LoopNestPlan",
    "NestSummary",
    "access_cost",
    "EnclosingTrips",
    "constant_int",
    "enclosing_trips",
    "depends_on",
    "dims_of",
    "operand_buffer",
    "plan_loop_nest",
    "Scatter",
    "match_scatter",
    "same_index",
    "single_user",
    "shared_by_chain",
    "shared_outer_loops",
    "summarize_nest",
    "trip_count",
    "trip_bound",
    "static_work",
    "static_work_of",
    "PARALLEL_WORK",
    "defined_in",
    "moves_by_one",
    "recomputable_ops",
    "rows_independent",
    "unit_loop_bound",
]
