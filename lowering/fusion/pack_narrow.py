"""
`tess-pack-narrow`: a contraction with a narrow right-hand side reads a transposed copy of
it, so it runs as dot products (level 3).

i-k-j is the fast order while `B` has many columns; with few (an MLP's 10-class last
layer) the `j` loop is shorter than two vectors. This pass gives the contraction the
operand `Bt[j, k] = B[k, j]` (a new copy `tess-fuse` would fuse back, hence it runs after
it), so `k` walks the last dim of both operands and becomes the innermost, vectorised loop.
When the other operand is itself a transposing copy (`h.T @ dz`) the product is computed
transposed instead, from the copy's source, and no copy of `B` is made. Matching, the
narrow-columns and minimum-depth gates and the measured figures are in
lowering/fusion/README.md. The sum over `k` keeps its order.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import tensor
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.dialects import contract
from tessc.dialects.dynamic_dims import is_dynamic
from tessc.dialects.tess import PatternKind
from tessc.lowering.linalg.generic_analysis import generic_maps, pattern_kind

DEFAULT_NARROW_COLS = 16
"""Fewer columns than this: two AVX2 vectors of f32; one j loop is shorter than that."""
DEFAULT_MIN_DEPTH = 32
"""At least this many terms per dot product (four AVX2 vectors of f32)."""


@dataclass(frozen=True)
class NarrowContraction:
    """A contraction whose input `rhs` (read at `(.., k, j)`) is worth packing."""

    op: GenericOp
    rhs: int


def match_narrow(op: GenericOp, narrow_cols: int, min_depth: int) -> NarrowContraction | None:
    if pattern_kind(op) != PatternKind.MATMUL or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    reductions = [d for d, it in enumerate(op.iterator_types) if it.data == IteratorType.REDUCTION]
    if len(reductions) != 1:
        return None
    (k,) = reductions
    maps = generic_maps(op)
    out_last = maps[2].results[-1] if maps[2].results else None
    if not isinstance(out_last, AffineDimExpr):
        return None
    j = out_last.position

    def last_two(index: int) -> tuple[int | None, int | None]:
        results = maps[index].results
        dims = [r.position if isinstance(r, AffineDimExpr) else None for r in results[-2:]]
        return (None, None) if len(dims) < 2 else (dims[0], dims[1])

    for rhs, lhs in ((1, 0), (0, 1)):
        operand = op.inputs[rhs].type
        if not isinstance(operand, TensorType) or last_two(rhs) != (k, j):
            continue
        if last_two(lhs)[1] != k:
            continue
        *_, depth, cols = operand.get_shape()
        # A `?` depth (the batch N of a weight gradient, `dialects/dynamic_dims.py`)
        # counts as deep: a generic program serves the large batches too.
        if 0 < cols < narrow_cols and (depth >= min_depth or is_dynamic(depth)):
            return NarrowContraction(op, rhs)
    return None


def _swap_last_two(m: AffineMap) -> AffineMap:
    *rest, a, b = m.results
    return AffineMap(m.num_dims, m.num_symbols, (*rest, b, a))


def _swap_dims(m: AffineMap) -> AffineMap:
    """`m` reading loop r-2 where it read loop r-1 and back (r = `m.num_dims`)."""
    rank = m.num_dims
    dims = [AffineExpr.dimension(d) for d in range(rank)]
    dims[-2], dims[-1] = dims[-1], dims[-2]
    return m.replace_dims_and_symbols(dims, [], rank, m.num_symbols)


def _transposing_copy(value: SSAValue) -> GenericOp | None:
    """The all-parallel generic of rank >= 2 that computes `value` with an identity output
    map, reads some input transposed (last result = its second-to-last loop) and has no
    other user, else None."""
    op = value.owner
    if not isinstance(op, GenericOp) or len(op.outputs) != 1 or value.uses.get_length() != 1:
        return None
    if any(it.data != IteratorType.PARALLEL for it in op.iterator_types):
        return None
    maps = generic_maps(op)
    rank = maps[-1].num_dims
    if rank < 2 or maps[-1] != AffineMap.identity(rank) or op.body.block.args[-1].uses:
        return None
    # A real transposed read (last two results the last two loops swapped), and no
    # `linalg.index` in the body, whose loop numbers the swap would not follow.
    swapped = (AffineExpr.dimension(rank - 1), AffineExpr.dimension(rank - 2))
    if not any(tuple(m.results[-2:]) == swapped for m in maps[:-1]):
        return None
    if any(isinstance(inner, IndexOp) for inner in op.body.walk()):
        return None
    return op


def _fill(value: SSAValue) -> GenericOp | None:
    """The generic filling `value` with a constant (no inputs, out argument unused)."""
    op = value.owner
    if not isinstance(op, GenericOp) or op.inputs or len(op.outputs) != 1:
        return None
    if op.body.block.args[0].uses or not isinstance(op.outputs[0].owner, tensor.EmptyOp):
        return None
    return op


def _swapped_type(t: TensorType) -> TensorType:
    *batch, rows, cols = t.get_shape()
    return TensorType(t.element_type, [*batch, cols, rows])


@dataclass
class TransposedProduct(RewritePattern):
    """A narrow contraction of a transposing copy, computed transposed (module docstring)."""

    narrow_cols: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GenericOp, rewriter: PatternRewriter) -> None:
        found = match_narrow(op, self.narrow_cols, 1)
        if found is None or (fill := _fill(op.outputs[0])) is None:
            return
        lhs = 1 - found.rhs
        copy = _transposing_copy(op.inputs[lhs])
        if copy is None:
            return
        result_type = op.res[0].type
        assert isinstance(result_type, TensorType)
        # Q: the copy with its last two loops swapped, so it computes A transposed.
        copy_type = copy.res[0].type
        assert isinstance(copy_type, TensorType)
        q_type = _swapped_type(copy_type)
        q_empty = tensor.EmptyOp([], q_type)
        copy_maps = generic_maps(copy)
        q = GenericOp(
            list(copy.inputs),
            [q_empty.tensor],
            rewriter.move_region_contents_to_new_regions(copy.body),
            [AffineMapAttr(_swap_dims(m)) for m in copy_maps[:-1]] + [AffineMapAttr(copy_maps[-1])],
            copy.iterator_types,
            [q_type],
        )
        q.attributes.update(copy.attributes)
        if contract.ORIGIN.has(q):  # it computes what the copy read, transposed: no permute
            del q.attributes[contract.ORIGIN.name]
        # The init, filled transposed.
        init_type = _swapped_type(result_type)
        init_empty = tensor.EmptyOp([], init_type)
        init = GenericOp(
            [],
            [init_empty.tensor],
            fill.body.clone(),
            fill.indexing_maps,
            fill.iterator_types,
            [init_type],
        )
        init.attributes.update(fill.attributes)
        # Ct[.., j, i]: A's and the output's last two results swapped.
        maps = generic_maps(op)
        maps[lhs] = _swap_last_two(maps[lhs])
        maps[-1] = _swap_last_two(maps[-1])
        inputs: list[SSAValue] = list(op.inputs)
        inputs[lhs] = q.res[0]
        product = GenericOp(
            inputs,
            [init.res[0]],
            rewriter.move_region_contents_to_new_regions(op.body),
            [AffineMapAttr(m) for m in maps],
            op.iterator_types,
            [init_type],
        )
        product.attributes.update(op.attributes)
        back = _permute_last_two(product.res[0], result_type)
        rewriter.replace(op, [q_empty, q, init_empty, init, product, *back])
        rewriter.erase(copy)
        if not fill.res[0].uses:
            rewriter.erase(fill)


def _permute_last_two(source: SSAValue, result_type: TensorType) -> list[Operation]:
    """An empty tensor of `result_type` and the generic copying `source` into it with its
    last two dims exchanged (origin `tess.permute`)."""
    empty = tensor.EmptyOp([], result_type)
    rank = len(result_type.get_shape())
    identity = AffineMap.identity(rank)
    body = Block(arg_types=[result_type.element_type] * 2)
    body.add_op(YieldOp(body.args[0]))
    permute = GenericOp(
        [source],
        [empty.tensor],
        Region(body),
        [AffineMapAttr(_swap_dims(identity)), AffineMapAttr(identity)],
        [IteratorTypeAttr.parallel()] * rank,
        [result_type],
    )
    contract.ORIGIN.set(permute, "tess.permute")
    return [empty, permute]


@dataclass
class PackNarrowRhs(RewritePattern):
    """Give one narrow contraction a packed, transposed right-hand side."""

    narrow_cols: int
    min_depth: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GenericOp, rewriter: PatternRewriter) -> None:
        found = match_narrow(op, self.narrow_cols, self.min_depth)
        if found is None:
            return
        source = op.inputs[found.rhs]
        source_type = source.type
        assert isinstance(source_type, TensorType)
        *batch, depth, cols = source_type.get_shape()
        packed_type = TensorType(source_type.element_type, [*batch, cols, depth])
        empty, pack = _permute_last_two(source, packed_type)
        assert isinstance(pack, GenericOp)
        maps = generic_maps(op)
        maps[found.rhs] = _swap_last_two(maps[found.rhs])
        inputs: list[SSAValue] = list(op.inputs)
        inputs[found.rhs] = pack.res[0]
        packed = GenericOp(
            inputs,
            list(op.outputs),
            rewriter.move_region_contents_to_new_regions(op.body),
            [AffineMapAttr(m) for m in maps],
            op.iterator_types,
            [r.type for r in op.res],
        )
        packed.attributes.update(op.attributes)
        rewriter.replace(op, [empty, pack, packed])


@dataclass(frozen=True)
class TessPackNarrowPass(ModulePass):
    """Pack the narrow right-hand sides of contractions transposed; see the module docstring."""

    name = "tess-pack-narrow"

    narrow_cols: int = DEFAULT_NARROW_COLS
    min_depth: int = DEFAULT_MIN_DEPTH

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = GreedyRewritePatternApplier(
            [TransposedProduct(self.narrow_cols), PackNarrowRhs(self.narrow_cols, self.min_depth)]
        )
        PatternRewriteWalker(patterns, apply_recursively=False).rewrite_module(op)


__all__ = ["NarrowContraction", "TessPackNarrowPass", "match_narrow"]
