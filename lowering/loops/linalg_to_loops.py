"""
`tess-linalg-to-loops`: linalg ops on memrefs become `scf` loop nests (level 5, loops).

xDSL's `convert-linalg-to-loops` emits one `scf.for` per iterator in iterator order, with
`affine.apply` indices. Kernels want more, and this pass gives it for every linalg
structured op: 1. a loop order that makes the innermost loop unit-stride (a stride cost
model; results stay bit-identical), 2. the parallel prefix as ONE outermost `scf.parallel`,
3. loads, the inlined body and stores, with `arith` index arithmetic (no `affine`), 4. nest
fusion: consecutive nests of a kernel share their outer parallel loops (a `kernel.group`'s
rows), 5. a scatter (take's adjoint) as one pass over its indices. `tess.row_ranges`
generics become a loop over rows with an inner loop over each row's range. The steps are
in lowering/loops/README.md; the analysis of 1, 2 and 4 is `linalg/loop_nests.py`, shared
with `tess-fuse-epilogue`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineMap
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
from tessc.dialects.dynamic_dims import entry_dynamic_size, function_entry, is_dynamic
from tessc.lowering.linalg.loop_nests import (
    LoopNestPlan,
    NestSummary,
    Scatter,
    match_scatter,
    plan_loop_nest,
    shared_by_chain,
    single_user,
    summarize_nest,
)

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
        if is_dynamic(value):  # a `?` loop range: N, read at the function's entry
            size = entry_dynamic_size(function_entry(self.at.block))
            assert size is not None, "a `?` loop range in a function without `?` arguments"
            return size
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
    inline_body(op, rewriter, constant, at, induction)


def row_table(
    rows: Sequence[int], module: ModuleOp, rewriter: PatternRewriter, at: InsertPoint
) -> SSAValue:
    """A `memref<R x 2 x i64>` of the row ranges: a `memref.global` of `module` (one per
    distinct table), read by `memref.get_global` at `at`."""
    table_type = MemRefType(i64, [len(rows) // 2, 2])
    value = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [len(rows) // 2, 2]), list(rows))
    globals_ = [op for op in module.ops if isinstance(op, memref.GlobalOp)]
    found = next((g for g in globals_ if g.initial_value == value), None)
    if found is None:
        name = f"tess_row_ranges_{len(globals_)}"
        found = memref.GlobalOp.get(
            StringAttr(name), table_type, value, StringAttr("private"), UnitAttr()
        )
        after = InsertPoint.after(globals_[-1]) if globals_ else None
        rewriter.insert(found, after or InsertPoint.at_start(module.body.block))
    table = memref.GetGlobalOp(found.sym_name.data, table_type)
    rewriter.insert(table, at)
    return table.memref


def lower_ranged_op(
    op: LinalgStructuredOperation,
    rewriter: PatternRewriter,
    constant: IndexConstants,
    at: InsertPoint,
) -> None:
    """A 2-D op `(r, i)` with `tess.row_ranges` (`contract.ROW_RANGES`): an `scf.parallel`
    over its rows (they write disjoint outputs: a reduction's rows are its outputs' rows,
    an elementwise op's rows cover disjoint ranges), each an `scf.for` over the row's
    range, whose bounds it loads from a constant table. What a row reads whole (operands
    not indexed by `i`) is loaded before its loop, and a reduction accumulates in values
    the loop carries, stored after it: a row's loop then only streams the arenas (loads
    and stores of memory that may alias the arenas would keep it from vectorising). The
    parallel loop carries the ranges (codegen counts the work)."""
    check_on_memrefs(op)
    rows = contract.ROW_RANGES.get(op)
    assert rows is not None
    ranges = op.get_static_loop_ranges()
    module = op.get_toplevel_object()
    assert isinstance(module, ModuleOp)
    table = row_table(rows, module, rewriter, at)
    induction, at = build_parallel_loop(rewriter, [0], ranges, constant, at)
    row = induction[0]
    loop = at.block.parent_op()
    assert isinstance(loop, scf.ParallelOp)
    contract.ROW_RANGES.copy(op, loop)
    bounds: list[SSAValue] = []
    for end in (0, 1):
        load = memref.LoadOp.get(table, [row, constant(end)])
        cast = arith.IndexCastOp(load.res, IndexType())
        rewriter.insert([load, cast], at)
        bounds.append(cast.result)

    maps = [m.data for m in op.get_indexing_maps()]
    num_inputs = len(op.inputs)
    reduction = op.get_iterator_types().data[1].data == IteratorType.REDUCTION
    body = op.body.block
    whole: dict[int, SSAValue] = {}  # operand index -> its value for the row
    for k, (arg, operand, affine_map) in enumerate(zip(body.args, op.operands, maps, strict=True)):
        is_output = k >= num_inputs
        if not isinstance(operand.type, MemRefType) or 1 in affine_map.used_dims():
            continue
        if (is_output and reduction) or (not is_output and arg.uses):
            load = memref.LoadOp.get(
                operand, indices(rewriter, affine_map, [row, row], constant, at)
            )
            rewriter.insert(load, at)
            whole[k] = load.res
    carried = [whole[k] for k in range(num_inputs, len(maps))] if reduction else []
    block = Block(arg_types=[IndexType(), *(v.type for v in carried)])
    block.args[0].name_hint = "i1"
    inner = scf.ForOp(bounds[0], bounds[1], constant(1), carried, Region(block))
    rewriter.insert(inner, at)
    point = InsertPoint.at_end(block)
    position = [row, block.args[0]]
    for k, (arg, operand, affine_map) in enumerate(zip(body.args, op.operands, maps, strict=True)):
        if not isinstance(operand.type, MemRefType):
            arg.replace_all_uses_with(operand)
        elif reduction and k >= num_inputs:
            arg.replace_all_uses_with(block.args[1 + k - num_inputs])
        elif k in whole:
            arg.replace_all_uses_with(whole[k])
        elif arg.uses:
            load = memref.LoadOp.get(
                operand, indices(rewriter, affine_map, position, constant, point)
            )
            rewriter.insert(load, point)
            arg.replace_all_uses_with(load.res)
    yielded = splice_body(op, rewriter, point, position)
    outputs = zip(yielded, op.outputs, maps[num_inputs:], strict=True)
    if reduction:
        rewriter.insert(scf.YieldOp(*yielded), InsertPoint.at_end(block))
        stores = [
            memref.StoreOp.get(result, output, [row])  # a reduction's outputs: (r, i) -> (r)
            for result, (_, output, _) in zip(inner.results, outputs, strict=True)
        ]
        rewriter.insert(stores, InsertPoint.after(inner))
    else:
        for value, output, affine_map in outputs:
            where = indices(rewriter, affine_map, position, constant, InsertPoint.at_end(block))
            rewriter.insert(memref.StoreOp.get(value, output, where), InsertPoint.at_end(block))
        rewriter.insert(scf.YieldOp(), InsertPoint.at_end(block))
    rewriter.erase(op)


def splice_body(
    op: LinalgStructuredOperation,
    rewriter: PatternRewriter,
    at: InsertPoint,
    induction: Sequence[SSAValue],
) -> tuple[SSAValue, ...]:
    """`op`'s body moved to `at`, its `linalg.index` ops replaced by `induction`; what it
    yielded. The caller has already replaced every use of the body's arguments."""
    body = op.body.block
    for index_op in [o for o in body.ops if isinstance(o, IndexOp)]:
        rewriter.replace(index_op, [], [induction[index_op.dim.value.data]])
    yield_op = body.last_op
    assert isinstance(yield_op, Operation)
    yielded = tuple(yield_op.operands)
    rewriter.erase(yield_op, safe_erase=False)
    while body.args:
        rewriter.erase_block_argument(body.args[0])
    rewriter.inline_block(body, at)
    return yielded


def inline_body(
    op: LinalgStructuredOperation,
    rewriter: PatternRewriter,
    constant: IndexConstants,
    at: InsertPoint,
    induction: Sequence[SSAValue],
) -> None:
    """`op`'s body at `at` for the loop indices `induction`: loads, the body, stores; then
    `op` is gone."""
    maps = [m.data for m in op.get_indexing_maps()]
    num_inputs = len(op.inputs)
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

    yielded = splice_body(op, rewriter, at, induction)

    for value, output, affine_map in zip(yielded, op.outputs, maps[num_inputs:], strict=True):
        store = memref.StoreOp.get(
            value, output, indices(rewriter, affine_map, induction, constant, at)
        )
        rewriter.insert(store, at)
    rewriter.erase(op)


# ---------------------------------------------------------------------------------------
# Scatters (step 5)
# ---------------------------------------------------------------------------------------


def lower_scatter(
    op: GenericOp,
    scatter: Scatter,
    rewriter: PatternRewriter,
    constant: IndexConstants,
    at: InsertPoint,
) -> None:
    """Replace the scatter-shaped `op` by one pass over its indices (step 5)."""
    check_on_memrefs(op)
    maps = [m.data for m in op.get_indexing_maps()]
    ranges = op.get_static_loop_ranges()
    rows = [d for d in maps[-1].used_dims() if d != scatter.dim]
    before = sorted(d for d in rows if d < scatter.dim)
    after = sorted(d for d in rows if d > scatter.dim)
    scattered = [d for d in range(len(ranges)) if d not in rows and d != scatter.dim]
    bound: dict[int, SSAValue] = {scatter.dim: constant(0)}  # never read: see match_scatter
    for extent in (1, *ranges):
        constant(extent)  # before the loops, which later constants must also precede
    if before:
        parallel, at = build_parallel_loop(rewriter, before, ranges, constant, at)
        bound.update(parallel)
        loop = at.block.parent_op()
        assert loop is not None
        constant.at = InsertPoint.before(loop)
    plan = LoopNestPlan((*before, *scattered, *after), 0)
    induction, at = build_loop_nest(rewriter, plan, ranges, constant, at, bound)

    body = op.body.block
    mapping: dict[SSAValue, SSAValue] = {}
    num_inputs = len(op.inputs)
    for arg, operand, affine_map in zip(
        body.args[:num_inputs], op.inputs, maps[:num_inputs], strict=True
    ):
        if arg.uses:
            load = memref.LoadOp.get(
                operand, indices(rewriter, affine_map, induction, constant, at)
            )
            rewriter.insert(load, at)
            mapping[arg] = load.res
    output, accumulator = op.outputs[0], body.args[-1]
    target: list[SSAValue] = []
    skipped = [scatter.index, scatter.compare, scatter.select]
    if single_user(scatter.select.rhs) is scatter.select:
        skipped.append(scatter.select.rhs.owner)  # the 0 it selected otherwise
    for body_op in body.ops:
        if body_op is body.last_op:
            break
        if body_op in skipped:
            continue
        if accumulator in body_op.operands and accumulator not in mapping:
            # The row the index names: the position, computed by now (it comes first).
            # Outside the scattered dim it names no row (an unclamped one-hot label).
            position = mapping.get(scatter.position, scatter.position)
            low = arith.CmpiOp(position, constant(0), "sge")
            high = arith.CmpiOp(position, constant(ranges[scatter.dim]), "slt")
            inside = arith.AndIOp(low, high)
            rewriter.insert([low, high, inside], at)
            then = Block([scf.YieldOp()])
            rewriter.insert(scf.IfOp(inside, [], Region(then)), at)
            at = InsertPoint.before(then.last_op)
            place = list(induction)
            place[scatter.dim] = position
            target = indices(rewriter, maps[-1], place, constant, at)
            load = rewriter.insert(memref.LoadOp.get(output, target), at)
            mapping[accumulator] = load.res
            mapping[scatter.select.result] = mapping.get(scatter.value, scatter.value)
        clone = rewriter.insert(body_op.clone(mapping), at)
        mapping.update(zip(body_op.results, clone.results, strict=True))
    assert body.last_op is not None
    result = body.last_op.operands[0]
    rewriter.insert(memref.StoreOp.get(mapping.get(result, result), output, target), at)
    rewriter.erase(op)


# ---------------------------------------------------------------------------------------
# Patterns and pass
# ---------------------------------------------------------------------------------------


class LinalgToLoops(RewritePattern):
    """One linalg op on memrefs -> its own loop nest."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LinalgStructuredOperation, rewriter: PatternRewriter) -> None:
        at = InsertPoint.before(op)
        if (scatter := match_scatter(op)) is not None:
            assert isinstance(op, GenericOp)
            lower_scatter(op, scatter, rewriter, IndexConstants(rewriter, at), at)
            return
        lower = lower_ranged_op if contract.ROW_RANGES.has(op) else lower_structured_op
        lower(op, rewriter, IndexConstants(rewriter, at), at)


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
            skip = contract.ROW_RANGES.has(op) or match_scatter(op) is not None
            nest = None if skip else summarize_nest(op)
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


__all__ = ["TessLinalgToLoopsPass"]
