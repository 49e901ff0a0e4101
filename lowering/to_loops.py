"""
`tess-linalg-to-loops`: linalg ops on memrefs become `scf` loop nests (level 5, loops).

xDSL's `convert-linalg-to-loops` emits one `scf.for` per iterator, in iterator order, and
index computations as `affine.apply`. Kernels want more: parallel loops the code generator
can turn into `prange`, a loop order that keeps the innermost loop unit-stride, and no
`affine` left over. This pass does that for every `linalg` structured op (`linalg.generic`
and named ops alike, through their indexing maps and body) on memrefs:

1. Loop order. The innermost loop is the one that makes the accesses cheapest: each
   memref access costs 0 if the loop does not move it (a reduction's output, a
   broadcast input), 1 if it walks the operand's last dim of size > 1 (unit stride), and
   8 otherwise; ties go to the loop indexing the first output's last dim, then to the
   later loop. The other loops keep iterator order, parallel ones first: `P - inner`,
   then the reductions `R`, then `inner`. So a matmul `(i, j, k)` becomes `i-k-j` (j
   walks B and C with unit stride, A not at all), a row sum `(i, k) -> (i)` stays `i-k`
   (a register accumulation), a transposed copy writes its output with unit stride, and
   a column sum `(i, j) -> (j)` becomes `i-j`, unit stride but sequential (the price of
   vectorising it; `tess-tile` can add parallel blocks). This is legal: a parallel loop
   only sinks below the reductions if its iterations write disjoint output elements, and
   a reduction loop is only innermost if it is the last one, so every output element
   sees its reduction iterations in the same order and results are bit-identical to
   iterator order. Loops of extent 1 are never chosen innermost when another loop is
   larger.
2. The leading loops of that order that are parallel and index every output (so distinct
   iterations write distinct elements) become ONE `scf.parallel`, outermost; the rest are
   nested `scf.for`, 0 to the static loop range, step 1.
3. The body: a `memref.load` per input (and per output whose value the body reads, which is
   how reductions accumulate: load, combine, store into the output buffer), the op's body
   inlined, and a `memref.store` per yielded value. A non-memref operand (a scalar, as in
   `linalg.fill`) is used directly. `linalg.index` becomes the loop's induction variable.
   Indices come from the indexing maps: a dim result is the induction variable, a constant
   result (`(d0, d1, d2) -> (d0, 0, d2)` for broadcasts and `keepdim` reductions) an
   `arith.constant` index, anything else `arith` ops via xDSL's `lower_affine`
   expression helper: no `affine` op is emitted.

4. Nest fusion (`fuse-nests`, on by default). A kernel outlined from a `kernel.group`
   holds several linalg ops in a row. Consecutive ones share their outer parallel loops
   when that is legal: each nest offers its *outer loops*, the parallel prefix of its own
   order (step 2) without loops of extent 1, and a chain of nests shares the first `k` of
   them when their extents agree and every element one nest writes and another touches is
   indexed by the same outer loops at the same memref positions (the later nest reads row
   `i` of the earlier one's output only at outer index `i`). Then distinct outer
   iterations touch disjoint elements, so running all nests for row `i` before any for
   row `i + 1` computes what running each nest to completion does. The chain becomes ONE
   `scf.parallel` over those `k` loops holding each nest's remaining loops (its own order,
   as `scf.for`) in program order:

       scf.parallel (i)                       matmul + bias + relu
         scf.for k { scf.for j { C[i, j] += A[i, k] * B[k, j] } }
         scf.for j { out[i, j] = max(C[i, j] + b[j], 0) }

   A chain grows while the shared prefix stays at least one loop (it may shrink); a nest
   that shares none starts a new chain. Only `tess.kernel` functions are fused, and their
   distinct memref arguments are assumed not to overlap where one is written: true for
   kernels from `tess-outline-kernels` (a group's members write fresh buffers or
   out-params; `tess-memory-plan` never overlaps buffers live in the same call). A single
   op, or a chain of one, is lowered as in steps 1-3.

A generic's `tess.chunk_size` (from `tess-fuse-horizontal`) moves to its `scf.parallel`: a
scheduling hint for the code generator. A rank-0 op (no loops) becomes its body between the
loads and stores. Afterwards no linalg op is left; an op still on tensors fails the pass
(run `tess-bufferize` first).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    ShapedType,
    TensorType,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.transforms.lower_affine import affine_expr_ops
from xdsl.utils.exceptions import PassFailedException

from tessc.dialects import contract


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
# Building loops
# ---------------------------------------------------------------------------------------


@dataclass
class IndexConstants:
    """`arith.constant` indices, made once per loop nest, before it."""

    rewriter: PatternRewriter
    at: InsertPoint
    made: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])

    def __call__(self, value: int) -> SSAValue:
        if value not in self.made:
            constant = arith.ConstantOp(IntegerAttr.from_index_int_value(value))
            self.made[value] = self.rewriter.insert(constant, self.at).result
        return self.made[value]


def build_parallel_loop(
    rewriter: PatternRewriter,
    dims: Sequence[int],
    ranges: Sequence[int],
    constant: IndexConstants,
    at: InsertPoint,
) -> tuple[dict[int, SSAValue], InsertPoint]:
    """An `scf.parallel` over loop dims `dims` at `at`: its induction variables by dim and
    the insertion point before its terminator."""
    zero, one = constant(0), constant(1)
    bounds = [constant(ranges[d]) for d in dims]
    block = Block([scf.ReduceOp()], arg_types=[IndexType()] * len(dims))
    loop = scf.ParallelOp([zero] * len(dims), bounds, [one] * len(dims), Region(block))
    rewriter.insert(loop, at)
    induction: dict[int, SSAValue] = {}
    for d, arg in zip(dims, block.args, strict=True):
        arg.name_hint = f"i{d}"
        induction[d] = arg
    return induction, InsertPoint.before(block.last_op)  # the scf.reduce terminator


def build_loop_nest(
    rewriter: PatternRewriter,
    plan: LoopNestPlan,
    ranges: Sequence[int],
    constant: IndexConstants,
    at: InsertPoint,
    bound: Mapping[int, SSAValue] | None = None,
) -> tuple[list[SSAValue], InsertPoint]:
    """Insert the loops at `at`; return the induction variables by loop dim and the
    insertion point inside the innermost loop. Dims in `bound` already have an induction
    variable (an enclosing shared loop): the others become `scf.for` in plan order."""
    induction: dict[int, SSAValue] = dict(bound or {})
    order = [d for d in plan.order if d not in induction]
    num_parallel = 0 if bound else plan.num_parallel
    if order:  # the index constants in the order the loops use them
        zero, one = constant(0), constant(1)
        bounds = {d: constant(ranges[d]) for d in order}
    if num_parallel:
        parallel, at = build_parallel_loop(rewriter, order[:num_parallel], ranges, constant, at)
        induction.update(parallel)
    for d in order[num_parallel:]:
        block = Block([scf.YieldOp()], arg_types=[IndexType()])
        loop = scf.ForOp(zero, bounds[d], one, [], Region(block))
        rewriter.insert(loop, at)
        block.args[0].name_hint = f"i{d}"
        induction[d] = block.args[0]
        at = InsertPoint.before(block.last_op)  # the scf.yield terminator
    return [induction[d] for d in range(len(ranges))], at


def indices(
    rewriter: PatternRewriter,
    affine_map: AffineMap,
    induction: Sequence[SSAValue],
    constant: IndexConstants,
    at: InsertPoint,
) -> list[SSAValue]:
    """The memref indices `affine_map` gives at the induction variables, as arith ops."""
    values: list[SSAValue] = []
    for expr in affine_map.results:
        if isinstance(expr, AffineConstantExpr):
            values.append(constant(expr.value))
            continue
        ops, value = affine_expr_ops(expr, induction, [])
        rewriter.insert(ops, at)
        values.append(value)
    return values


def check_on_memrefs(op: LinalgStructuredOperation) -> None:
    if op.res or any(isinstance(v.type, TensorType) for v in op.operands):
        raise PassFailedException(
            f"tess-linalg-to-loops expects '{op.name}' on memrefs; run tess-bufferize first"
        )


def lower_structured_op(
    op: LinalgStructuredOperation,
    rewriter: PatternRewriter,
    constant: IndexConstants,
    at: InsertPoint,
    bound: Mapping[int, SSAValue] | None = None,
) -> None:
    """Replace `op` by its loop nest (steps 1-3) at `at`; loops in `bound` are given."""
    check_on_memrefs(op)
    maps = [m.data for m in op.get_indexing_maps()]
    iterator_types = [t.data for t in op.get_iterator_types()]
    num_inputs = len(op.inputs)
    ranges = op.get_static_loop_ranges() if iterator_types else ()
    shapes = [v.type.get_shape() if isinstance(v.type, MemRefType) else () for v in op.operands]
    plan = plan_loop_nest(iterator_types, maps, shapes, num_inputs, ranges)
    induction, at = build_loop_nest(rewriter, plan, ranges, constant, at, bound)
    loop = induction[plan.order[0]].owner.parent_op() if plan.num_parallel and not bound else None
    if isinstance(loop, scf.ParallelOp):
        contract.CHUNK_SIZE.copy(op, loop)

    body = op.body.block
    for arg, operand, affine_map in zip(body.args, op.operands, maps, strict=True):
        if not arg.uses:
            continue
        if isinstance(operand.type, MemRefType):
            load = memref.LoadOp.get(
                operand, indices(rewriter, affine_map, induction, constant, at)
            )
            rewriter.insert(load, at)
            arg.replace_all_uses_with(load.res)
        else:
            arg.replace_all_uses_with(operand)

    for index_op in [o for o in body.ops if isinstance(o, IndexOp)]:
        rewriter.replace(index_op, [], [induction[index_op.dim.value.data]])

    yield_op = body.last_op
    assert isinstance(yield_op, Operation)
    yielded = tuple(yield_op.operands)
    rewriter.erase(yield_op, safe_erase=False)
    while body.args:
        rewriter.erase_block_argument(body.args[0])
    rewriter.inline_block(body, at)

    for value, output, affine_map in zip(yielded, op.outputs, maps[num_inputs:], strict=True):
        store = memref.StoreOp.get(
            value, output, indices(rewriter, affine_map, induction, constant, at)
        )
        rewriter.insert(store, at)
    rewriter.erase(op)


# ---------------------------------------------------------------------------------------
# Patterns and pass
# ---------------------------------------------------------------------------------------


class LinalgToLoops(RewritePattern):
    """One linalg op on memrefs -> its own loop nest."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LinalgStructuredOperation, rewriter: PatternRewriter) -> None:
        at = InsertPoint.before(op)
        lower_structured_op(op, rewriter, IndexConstants(rewriter, at), at)


@dataclass(frozen=True)
class Chain:
    """Consecutive linalg ops of a kernel that share their first `shared` outer loops."""

    ops: tuple[LinalgStructuredOperation, ...]
    nests: tuple[NestSummary, ...]
    shared: int


def kernel_chains(block: Block) -> list[Chain]:
    """The chains of two or more nests in `block`, greedily in program order. Constants may
    sit between the ops of a chain; any other op ends it."""
    chains: list[Chain] = []
    ops: list[LinalgStructuredOperation] = []
    nests: list[NestSummary] = []
    shared = 0

    def close() -> None:
        if len(ops) > 1:
            chains.append(Chain(tuple(ops), tuple(nests), shared))
        ops.clear()
        nests.clear()

    for op in block.ops:
        if isinstance(op, arith.ConstantOp):
            continue
        nest = None
        if isinstance(op, LinalgStructuredOperation) and not op.res:
            nest = summarize_nest(op)
        if nest is None:
            close()
            continue
        if ops:
            count = shared_by_chain(nests, nest, shared)
            if count > 0:
                ops.append(op)
                nests.append(nest)
                shared = count
                continue
            close()
        ops.append(op)
        nests.append(nest)
        shared = len(nest.outer_loops)
    close()
    return chains


class FuseKernelNests(RewritePattern):
    """The chains of a `tess.kernel` function -> one shared `scf.parallel` each (step 4)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, function: func.FuncOp, rewriter: PatternRewriter) -> None:
        if not contract.KERNEL.has(function) or not function.body.blocks:
            return
        for chain in kernel_chains(function.body.block):
            for op in chain.ops:
                check_on_memrefs(op)
            first, nest = chain.ops[0], chain.nests[0]
            at = InsertPoint.before(first)
            constant = IndexConstants(rewriter, at)
            dims = nest.outer_loops[: chain.shared]
            induction, inside = build_parallel_loop(rewriter, dims, nest.ranges, constant, at)
            loop = inside.block.parent_op()
            assert loop is not None
            constant.at = InsertPoint.before(loop)  # the ops lowered below are erased
            shared = [induction[d] for d in dims]
            for op, nest in zip(chain.ops, chain.nests, strict=True):
                bound = dict(zip(nest.outer_loops[: chain.shared], shared, strict=True))
                lower_structured_op(op, rewriter, constant, inside, bound)


@dataclass(frozen=True)
class TessLinalgToLoopsPass(ModulePass):
    """Lower linalg ops on memrefs to one scf.parallel plus nested scf.for loops.

    `fuse-nests` (default true): consecutive nests of a kernel share their outer parallel
    loops where that is legal (module docstring, step 4)."""

    name = "tess-linalg-to-loops"

    fuse_nests: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.fuse_nests:
            PatternRewriteWalker(FuseKernelNests(), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(LinalgToLoops(), apply_recursively=False).rewrite_module(op)


__all__ = [
    "Access",
    "LoopNestPlan",
    "NestSummary",
    "TessLinalgToLoopsPass",
    "plan_loop_nest",
    "shared_by_chain",
    "shared_outer_loops",
    "summarize_nest",
]
