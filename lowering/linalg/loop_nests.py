"""
Loop-nest analysis of linalg structured ops: the loop order, the parallel prefix, and which
outer loops consecutive nests can share. No IR is changed here.

`tess-linalg-to-loops` builds the nests and fuses those of a kernel that share outer loops;
`tess-fuse-epilogue` groups ops on tensors only when their nests will share those loops.
Both ask this module, so the decision made on tensors is the one the loop level carries
out. The algorithm is in `lowering/loops/README.md` (tess-linalg-to-loops, steps 1, 2, 4);
`match_scatter` recognises take's adjoint, which that pass lowers as one pass over the
indices (step 5).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ShapedType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from tessc.dialects.dynamic_dims import is_dynamic
from tessc.lowering.linalg.generic_analysis import depends_on

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


NOMINAL_SIZE = 256
"""The extent a `?` loop is planned with (its order among the nest's loops)."""


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
    if any(r < 0 and not is_dynamic(r) for r in ranges):
        return None
    shapes = [v.type.get_shape() if isinstance(v.type, ShapedType) else () for v in op.operands]
    num_inputs = len(op.inputs)
    # A `?` extent (N, `dialects/dynamic_dims.py`) is planned as a batch of NOMINAL_SIZE;
    # the summary keeps it `?`, equal only to another `?`.
    planned = tuple(NOMINAL_SIZE if is_dynamic(r) else r for r in ranges)
    shapes = [tuple(NOMINAL_SIZE if is_dynamic(d) else d for d in shape) for shape in shapes]
    plan = plan_loop_nest(iterator_types, maps, shapes, num_inputs, planned)
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
