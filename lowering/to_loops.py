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

A rank-0 op (no loops) becomes its body between the loads and stores. Afterwards no linalg
op is left; an op still on tensors fails the pass (run `tess-bufferize` first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, TensorType
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


@dataclass
class IndexConstants:
    """`arith.constant` indices, made once per loop nest, before it."""

    rewriter: PatternRewriter
    at: InsertPoint
    made: dict[int, SSAValue] = field(default_factory=dict)

    def __call__(self, value: int) -> SSAValue:
        if value not in self.made:
            constant = arith.ConstantOp(IntegerAttr.from_index_int_value(value))
            self.made[value] = self.rewriter.insert(constant, self.at).result
        return self.made[value]


def build_loop_nest(
    rewriter: PatternRewriter,
    plan: LoopNestPlan,
    ranges: Sequence[int],
    constant: IndexConstants,
    at: InsertPoint,
) -> tuple[list[SSAValue], InsertPoint]:
    """Insert the loops at `at`; return the induction variables by loop dim and the
    insertion point inside the innermost loop."""
    induction: dict[int, SSAValue] = {}
    if not plan.order:
        return [], at
    zero, one = constant(0), constant(1)
    bounds = {d: constant(ranges[d]) for d in plan.order}

    parallel_dims = plan.order[: plan.num_parallel]
    if parallel_dims:
        block = Block([scf.ReduceOp()], arg_types=[IndexType()] * len(parallel_dims))
        loop = scf.ParallelOp(
            [zero] * len(parallel_dims),
            [bounds[d] for d in parallel_dims],
            [one] * len(parallel_dims),
            Region(block),
        )
        rewriter.insert(loop, at)
        for d, arg in zip(parallel_dims, block.args, strict=True):
            arg.name_hint = f"i{d}"
            induction[d] = arg
        at = InsertPoint.before(block.last_op)  # the scf.reduce terminator
    for d in plan.order[plan.num_parallel :]:
        block = Block([scf.YieldOp()], arg_types=[IndexType()])
        rewriter.insert(scf.ForOp(zero, bounds[d], one, [], Region(block)), at)
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


class LinalgToLoops(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LinalgStructuredOperation, rewriter: PatternRewriter) -> None:
        if op.res or any(isinstance(v.type, TensorType) for v in op.operands):
            raise PassFailedException(
                f"tess-linalg-to-loops expects '{op.name}' on memrefs; run tess-bufferize first"
            )
        maps = [m.data for m in op.get_indexing_maps()]
        iterator_types = [t.data for t in op.get_iterator_types()]
        num_inputs = len(op.inputs)
        ranges = op.get_static_loop_ranges() if iterator_types else ()
        shapes = [v.type.get_shape() if isinstance(v.type, MemRefType) else () for v in op.operands]
        plan = plan_loop_nest(iterator_types, maps, shapes, num_inputs, ranges)
        constant = IndexConstants(rewriter, InsertPoint.before(op))
        induction, at = build_loop_nest(rewriter, plan, ranges, constant, InsertPoint.before(op))

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


@dataclass(frozen=True)
class TessLinalgToLoopsPass(ModulePass):
    """Lower linalg ops on memrefs to one scf.parallel plus nested scf.for loops."""

    name = "tess-linalg-to-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(LinalgToLoops(), apply_recursively=False).rewrite_module(op)


__all__ = ["LoopNestPlan", "TessLinalgToLoopsPass", "plan_loop_nest"]
