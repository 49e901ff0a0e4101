"""
`tess-parallel-columns`: a reduction over leading dims runs parallel over blocks of its
output columns (level 5, loops).

`tess-linalg-to-loops` orders a column sum `(i, j) -> (j)` as i-j: unit stride and
vectorised, but the outer loop is a reduction, so one thread runs it. Interchanging would
read with a stride of a row; this pass strip-mines the column loop instead and makes its
blocks (`block` columns, at least `min-blocks` of them) the outermost parallel loop, each
block reading consecutive floats of every row. Legal when every access to a written memref
has the column index at one position; results are bit-identical. Match and legality in
lowering/loops/README.md. xDSL has no interchange or strip-mining of `scf.for` nests.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import IsTerminator

from tessc.dialects import contract
from tessc.lowering.loops.trip_counts import unit_loop_bound

MIN_BLOCK = 16


def _only_loop(loop: scf.ForOp) -> scf.ForOp | None:
    """The single `scf.for` that makes up `loop`'s body (besides its yield), if any."""
    ops = [op for op in loop.body.block.ops if not op.has_trait(IsTerminator)]
    return ops[0] if len(ops) == 1 and isinstance(ops[0], scf.ForOp) else None


def _column_position(column: scf.ForOp) -> bool:
    """Whether distinct iterations of `column` touch distinct elements of every memref its
    body stores to (`column`'s iv at one common index position of every access)."""
    iv = column.body.block.args[0]
    accesses: dict[SSAValue, list[tuple[SSAValue, ...]]] = {}
    stored: set[SSAValue] = set()
    for op in column.body.walk():
        if isinstance(op, memref.StoreOp):
            stored.add(op.memref)
            accesses.setdefault(op.memref, []).append(tuple(op.indices))
        elif isinstance(op, memref.LoadOp):
            accesses.setdefault(op.memref, []).append(tuple(op.indices))
        elif isinstance(op, func.CallOp) or (
            not isinstance(op, scf.ForOp | scf.YieldOp | scf.IfOp | arith.ConstantOp)
            and op.dialect_name() not in ("arith", "math")
        ):
            return False  # an effect this pass does not reason about
    if not stored:
        return False
    for target in stored:
        positions = None
        for indices in accesses[target]:
            here = {p for p, index in enumerate(indices) if index == iv}
            positions = here if positions is None else positions & here
        if not positions:
            return False
    return True


@dataclass(frozen=True)
class ColumnNest:
    """A nest of `reductions...` (the loops outside the column loop, which run in order
    inside each block) around `column`, split into blocks of `block` columns."""

    reductions: tuple[scf.ForOp, ...]
    column: scf.ForOp
    extent: int
    block: int


def match_column_nest(loop: scf.ForOp, block: int, min_blocks: int) -> ColumnNest | None:
    """`loop` as outer loops around the outermost column loop wide enough for
    `min_blocks` blocks, or None."""
    reductions = [loop]
    inner = _only_loop(loop)
    while inner is not None:
        if inner.iter_args or any(r.iter_args for r in reductions):
            return None
        extent = unit_loop_bound(inner.lb, inner.ub, inner.step)
        size = None if extent is None else _block_size(extent, block, min_blocks)
        if size is not None and _column_position(inner) and not _bounds_inside(reductions, inner):
            return ColumnNest(tuple(reductions), inner, extent or 0, size)
        reductions.append(inner)
        inner = _only_loop(inner)
    return None


def _bounds_inside(reductions: list[scf.ForOp], column: scf.ForOp) -> bool:
    """Whether a reduction loop's bounds are computed inside the nest (then the nest is
    not a plain rectangle: left alone)."""
    nest = {op for r in reductions for op in r.walk()}
    for r in reductions[1:]:
        for bound in (r.lb, r.ub, r.step):
            if bound.owner in nest:
                return True
    return any(b.owner in nest for b in (column.lb, column.ub, column.step))


def _block_size(extent: int, block: int, min_blocks: int) -> int | None:
    size = block
    while -(-extent // size) < min_blocks and size > MIN_BLOCK:
        size //= 2
    return size if -(-extent // size) >= min_blocks else None


class ParallelColumns(RewritePattern):
    """One column nest in a kernel, as `scf.parallel` over column blocks."""

    def __init__(self, block: int, min_blocks: int):
        self.block = block
        self.min_blocks = min_blocks

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        parent = op.parent_op()
        if not isinstance(parent, func.FuncOp) or not contract.KERNEL.has(parent):
            return
        nest = match_column_nest(op, self.block, self.min_blocks)
        if nest is not None:
            rewriter.replace(op, _split(nest))


def _index(value: int, ops: list[Operation]) -> SSAValue:
    constant = arith.ConstantOp(IntegerAttr(value, IndexType()))
    ops.append(constant)
    return constant.result


def _split(nest: ColumnNest) -> list[Operation]:
    """`scf.parallel` over blocks of columns, the outer loops inside each."""
    size = nest.block
    outer: list[Operation] = []
    zero, one = _index(0, outer), _index(1, outer)
    blocks = _index(-(-nest.extent // size), outer)

    block_body = Block(arg_types=[IndexType()])
    (jb,) = block_body.args
    jb.name_hint = "jb"
    ops: list[Operation] = []
    width = _index(size, ops)
    start = arith.MuliOp(jb, width)
    start.result.name_hint = "j0"
    ops.append(start)
    if nest.extent % size == 0:
        count = width
    else:
        rest = arith.SubiOp(_index(nest.extent, ops), start.result)
        smaller = arith.MinSIOp(width, rest.result)
        smaller.result.name_hint = "nb"
        ops += [rest, smaller]
        count = smaller.result
    block_body.add_ops(ops)

    # The reduction loops, rebuilt around the point loop, each with its own bounds.
    mapping: dict[SSAValue, SSAValue] = {}
    current = block_body
    for reduction in nest.reductions:
        body = Block(arg_types=[IndexType()])
        body.args[0].name_hint = reduction.body.block.args[0].name_hint
        mapping[reduction.body.block.args[0]] = body.args[0]
        loop = scf.ForOp(reduction.lb, reduction.ub, reduction.step, [], Region(body))
        current.add_op(loop)
        current = body

    point = Block(arg_types=[IndexType()])
    (jj,) = point.args
    jj.name_hint = "jj"
    column = arith.AddiOp(start.result, jj)
    column.result.name_hint = nest.column.body.block.args[0].name_hint
    point.add_op(column)
    mapping[nest.column.body.block.args[0]] = column.result
    for inner in nest.column.body.block.ops:
        point.add_op(inner.clone(value_mapper=mapping))
    current.add_op(scf.ForOp(zero, count, one, [], Region(point)))
    for block in _blocks_inside_out(block_body, len(nest.reductions)):
        block.add_op(scf.YieldOp())
    block_body.add_op(scf.ReduceOp())
    parallel = scf.ParallelOp([zero], [blocks], [one], Region(block_body))
    return [*outer, parallel]


def _blocks_inside_out(root: Block, depth: int) -> list[Block]:
    """The bodies of the `depth` nested loops under `root`, innermost first."""
    blocks: list[Block] = []
    block = root
    for _ in range(depth):
        loop = block.last_op
        assert isinstance(loop, scf.ForOp)
        block = loop.body.block
        blocks.append(block)
    return blocks[::-1]


@dataclass(frozen=True)
class TessParallelColumnsPass(ModulePass):
    """Reductions over leading dims as `scf.parallel` over blocks of output columns; see
    the module docstring."""

    name = "tess-parallel-columns"

    block: int = 64
    min_blocks: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = ParallelColumns(max(MIN_BLOCK, self.block), max(2, self.min_blocks))
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["ColumnNest", "TessParallelColumnsPass", "match_column_nest"]
