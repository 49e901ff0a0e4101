"""
`tess-to-linalg`: every `tess` op becomes `linalg.generic` on tensors (level 1 -> level 3).

One rewrite pattern per op family. Each builds the op's iteration space, one affine map per
operand (broadcasting lives in the maps only: `(d0, d1, d2) -> (d0, 0, d2)`) and a scalar
body of `arith`/`math` ops picked by element type; every destination is a fresh
`tensor.empty`, so `tess-bufferize` can make each one an allocation. Reductions and matmul
are an init generic then a generic with `reduction` iterators; reshapes are tensor views;
each generic computing a tess op carries `tess.op`. The per-family forms are in
lowering/linalg/README.md; the indexing ops' patterns are in `to_linalg_index.py`, part of
this pass. Everything it emits is upstream `linalg`/`tensor`/`arith`/`math`; the pass is
ours because xDSL has no dialect with `tess`'s implicit broadcasting to lower from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import arith, math, tensor
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.dialects import tess
from tessc.dialects.tess import Shape, element_type_of, tensor_shape
from tessc.lowering.linalg.builders import (
    absolute,
    broadcast_map,
    build_elementwise,
    build_fill,
    build_generic,
    comparison,
    convert,
    empty_like,
    float_constant,
    is_bool_type,
    is_nonzero,
    is_slice_view,
    negate,
    parallel_iterators,
    reciprocal,
    relu,
    result_type_of,
    sigmoid,
    typed_body,
    unit_dims_map,
)
from tessc.lowering.linalg.to_linalg_attention import attention_patterns
from tessc.lowering.linalg.to_linalg_conv import conv_patterns
from tessc.lowering.linalg.to_linalg_index import index_patterns

# ---------------------------------------------------------------------------------------
# scalar bodies of the tess ops
# ---------------------------------------------------------------------------------------


UNARY_BODIES: dict[type[tess.UnaryOp], Callable[[Builder, SSAValue], SSAValue]] = {
    tess.NegOp: negate,
    tess.ExpOp: lambda b, x: b.insert(math.ExpOp(x)).result,
    tess.LogOp: lambda b, x: b.insert(math.LogOp(x)).result,
    tess.ReluOp: relu,
    tess.SigmoidOp: sigmoid,
    tess.TanhOp: lambda b, x: b.insert(math.TanhOp(x)).result,
    tess.SqrtOp: lambda b, x: b.insert(math.SqrtOp(x)).result,
    tess.ReciprocalOp: reciprocal,
    tess.AbsOp: absolute,
    tess.SinOp: lambda b, x: b.insert(math.SinOp(x)).result,
    tess.CosOp: lambda b, x: b.insert(math.CosOp(x)).result,
    tess.ErfOp: lambda b, x: b.insert(math.ErfOp(x)).result,
    tess.FloorOp: lambda b, x: b.insert(math.FloorOp(x)).result,
    tess.CeilOp: lambda b, x: b.insert(math.CeilOp(x)).result,
    tess.RoundOp: lambda b, x: b.insert(math.RoundEvenOp(x)).result,
}

BINARY_BODIES: dict[type[tess.BinaryOp], Callable[[Builder, SSAValue, SSAValue], SSAValue]] = {
    tess.AddOp: typed_body(arith.AddfOp, arith.AddiOp),
    tess.SubOp: typed_body(arith.SubfOp, arith.SubiOp),
    tess.MulOp: typed_body(arith.MulfOp, arith.MuliOp, arith.AndIOp),
    tess.DivOp: lambda b, x, y: b.insert(arith.DivfOp(x, y)).result,
    tess.MaxOp: typed_body(arith.MaximumfOp, arith.MaxSIOp, arith.OrIOp),
    tess.MinOp: typed_body(arith.MinimumfOp, arith.MinSIOp, arith.AndIOp),
    tess.PowOp: lambda b, x, y: b.insert(math.PowFOp(x, y)).result,
    tess.XOrOp: lambda b, x, y: b.insert(arith.XOrIOp(x, y)).result,
    tess.OrOp: lambda b, x, y: b.insert(arith.OrIOp(x, y)).result,
    tess.ShLOp: lambda b, x, y: b.insert(arith.ShLIOp(x, y)).result,
    tess.ShRUOp: lambda b, x, y: b.insert(arith.ShRUIOp(x, y)).result,
}
COMPARISONS: dict[type[tess.CompareOp], str] = {tess.LtOp: "lt", tess.GtOp: "gt", tess.EqOp: "eq"}


# ---------------------------------------------------------------------------------------
# patterns
# ---------------------------------------------------------------------------------------


class UnaryToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.UnaryOp, rewriter: PatternRewriter) -> None:
        scalar = UNARY_BODIES.get(type(op))
        if scalar is None:
            return  # stop_gradient: its own pattern
        result = build_elementwise(
            rewriter, [op.input], result_type_of(op), lambda b, args: scalar(b, args[0]), op.name
        )
        rewriter.replace(op, [], [result])


class BinaryToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.BinaryOp, rewriter: PatternRewriter) -> None:
        if isinstance(op, tess.CompareOp):
            result_type = result_type_of(op)
            mask = result_type.element_type == element_type_of(op.lhs)
            scalar = comparison(
                COMPARISONS[type(op)], mask and not is_bool_type(result_type.element_type)
            )
        else:
            scalar = BINARY_BODIES[type(op)]
        result = build_elementwise(
            rewriter,
            [op.lhs, op.rhs],
            result_type_of(op),
            lambda b, args: scalar(b, args[0], args[1]),
            op.name,
        )
        rewriter.replace(op, [], [result])


class SelectToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.SelectOp, rewriter: PatternRewriter) -> None:
        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            cond, lhs, rhs = args[0], args[1], args[2]
            return b.insert(arith.SelectOp(is_nonzero(b, cond), lhs, rhs)).result

        result = build_elementwise(
            rewriter, [op.cond, op.lhs, op.rhs], result_type_of(op), body, op.name
        )
        rewriter.replace(op, [], [result])


class StopGradientToLinalg(RewritePattern):
    """The identity: its operand replaces it (the zero gradient was autodiff's business)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.StopGradientOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, [], [op.input])


class CastToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.CastOp, rewriter: PatternRewriter) -> None:
        target = result_type_of(op).element_type
        result = build_elementwise(
            rewriter,
            [op.input],
            result_type_of(op),
            lambda b, args: convert(b, args[0], target),
            op.name,
        )
        rewriter.replace(op, [], [result])


class BitcastToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.BitcastOp, rewriter: PatternRewriter) -> None:
        target = result_type_of(op).element_type
        result = build_elementwise(
            rewriter,
            [op.input],
            result_type_of(op),
            lambda b, args: b.insert(arith.BitcastOp(args[0], target)).result,
            op.name,
        )
        rewriter.replace(op, [], [result])


class FillToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.FillOp, rewriter: PatternRewriter) -> None:
        result = build_fill(rewriter, result_type_of(op), op.fill_value, op.name)
        rewriter.replace(op, [], [result])


class BroadcastToToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.BroadcastToOp, rewriter: PatternRewriter) -> None:
        result = build_elementwise(
            rewriter, [op.input], result_type_of(op), lambda b, args: args[0], op.name
        )
        rewriter.replace(op, [], [result])


class PermuteToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.PermuteOp, rewriter: PatternRewriter) -> None:
        # Loop i runs over result dim i, which is input dim perm[i]; so input dim
        # perm[i] is read with loop i.
        perm = op.permutation
        rank = len(perm)
        loop_of_input_dim = {input_dim: loop for loop, input_dim in enumerate(perm)}
        input_map = AffineMap(
            rank, 0, tuple(AffineExpr.dimension(loop_of_input_dim[d]) for d in range(rank))
        )
        generic = build_generic(
            rewriter,
            [op.input],
            empty_like(rewriter, result_type_of(op)),
            [input_map, AffineMap.identity(rank)],
            parallel_iterators(rank),
            lambda b, args: args[0],
            op.name,
        )
        rewriter.replace(op, [], [generic.res[0]])


REDUCE_INIT: dict[type[tess.ReduceOp], float] = {
    tess.SumOp: 0.0,
    tess.MeanOp: 0.0,
    tess.ReduceMaxOp: float("-inf"),
    tess.ProdOp: 1.0,
}


class ReduceToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.ReduceOp, rewriter: PatternRewriter) -> None:
        input_shape = tensor_shape(op.input)
        rank = len(input_shape)
        reduced = set(op.reduced_dims)
        result_type = result_type_of(op)

        output_exprs: list[AffineExpr] = []
        for d in range(rank):
            if d not in reduced:
                output_exprs.append(AffineExpr.dimension(d))
            elif op.keeps_dims:
                output_exprs.append(AffineExpr.constant(0))
        iterators = [
            IteratorTypeAttr.reduction() if d in reduced else IteratorTypeAttr.parallel()
            for d in range(rank)
        ]

        def combine(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            if isinstance(op, tess.ReduceMaxOp):
                return BINARY_BODIES[tess.MaxOp](b, args[1], args[0])
            if isinstance(op, tess.ProdOp):
                return BINARY_BODIES[tess.MulOp](b, args[1], args[0])
            return BINARY_BODIES[tess.AddOp](b, args[1], args[0])

        init = build_fill(rewriter, result_type, REDUCE_INIT[type(op)])
        generic = build_generic(
            rewriter,
            [op.input],
            init,
            [AffineMap.identity(rank), AffineMap(rank, 0, tuple(output_exprs))],
            iterators,
            combine,
            op.name,
        )
        result = generic.res[0]

        if isinstance(op, tess.MeanOp):
            count = 1
            for d in reduced:
                count *= input_shape[d]
            element_type = result_type.element_type

            def scale(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
                divisor = float_constant(b, float(count), element_type)
                return b.insert(arith.DivfOp(args[0], divisor)).result

            result = build_elementwise(rewriter, [result], result_type, scale, op.name)
        rewriter.replace(op, [], [result])


class MatmulToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.MatmulOp, rewriter: PatternRewriter) -> None:
        lhs_shape, rhs_shape = tensor_shape(op.lhs), tensor_shape(op.rhs)
        result_type = result_type_of(op)
        result_shape = tensor_shape(result_type)
        batch_rank = len(result_shape) - 2
        # Loops: batch..., i, j, k.
        num_loops = batch_rank + 3
        batch_loops = list(range(batch_rank))
        batch_sizes = result_shape[:batch_rank]
        i, j, k = batch_rank, batch_rank + 1, batch_rank + 2

        def operand_map(shape: Shape, row: int, col: int) -> AffineMap:
            batch = broadcast_map(shape[:-2], batch_sizes, batch_loops, num_loops)
            rows_cols = (AffineExpr.dimension(row), AffineExpr.dimension(col))
            return AffineMap(num_loops, 0, (*batch.results, *rows_cols))

        def multiply_add(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            product = b.insert(arith.MulfOp(args[0], args[1])).result
            return b.insert(arith.AddfOp(args[2], product)).result

        init = build_fill(rewriter, result_type, 0.0)
        output_map = AffineMap(
            num_loops, 0, tuple(AffineExpr.dimension(d) for d in (*batch_loops, i, j))
        )
        generic = build_generic(
            rewriter,
            [op.lhs, op.rhs],
            init,
            [operand_map(lhs_shape, i, k), operand_map(rhs_shape, k, j), output_map],
            [*parallel_iterators(batch_rank + 2), IteratorTypeAttr.reduction()],
            multiply_add,
            op.name,
        )
        rewriter.replace(op, [], [generic.res[0]])


class SplatConstantToLinalg(RewritePattern):
    """`arith.constant dense<v> : tensor<...>` (a splat) is a fill; other dense constants
    are left alone (tess-bufferize rejects them: there is no memref.global lowering yet)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        value = op.value
        if not isinstance(op.result.type, TensorType):
            return
        if not isinstance(value, DenseIntOrFPElementsAttr) or not value.is_splat():
            return
        if not isinstance(op.result.type.element_type, AnyFloat):
            return
        splat = float(value.get_values()[0])
        fill = build_fill(rewriter, op.result.type, splat, "tess.fill")
        rewriter.replace(op, [], [fill])


# ---------------------------------------------------------------------------------------
# reshape
# ---------------------------------------------------------------------------------------


def reassociation(expanded: Shape, collapsed: Shape) -> list[list[int]] | None:
    """
    Groups of contiguous `expanded` dims whose sizes multiply to each `collapsed` dim, or
    None if there are none. Greedy: a group closes as soon as its product matches; size-1
    dims left at the end join the last group. A rank-0 `collapsed` takes no groups (every
    expanded dim must then be 1).
    """
    if len(collapsed) == 0:
        return [] if all(d == 1 for d in expanded) else None
    groups: list[list[int]] = []
    position = 0
    for size in collapsed:
        group: list[int] = []
        product = 1
        while position < len(expanded) and (not group or product != size):
            if product * expanded[position] > size and group:
                return None
            group.append(position)
            product *= expanded[position]
            position += 1
        if product != size or not group:
            return None
        groups.append(group)
    while position < len(expanded):
        if expanded[position] != 1:
            return None
        groups[-1].append(position)
        position += 1
    return groups


def reassociation_attr(groups: list[list[int]]) -> ArrayAttr[ArrayAttr[IntegerAttr]]:
    return ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in g]) for g in groups])


def collapse(
    rewriter: PatternRewriter, source: SSAValue, result_type: TensorType, groups: list[list[int]]
) -> SSAValue:
    op = tensor.CollapseShapeOp(
        operands=[source],
        result_types=[result_type],
        properties={"reassociation": reassociation_attr(groups)},
    )
    return rewriter.insert(op).result


def expand(
    rewriter: PatternRewriter, source: SSAValue, result_type: TensorType, groups: list[list[int]]
) -> SSAValue:
    op = tensor.ExpandShapeOp(
        source, [], reassociation_attr(groups), tensor_shape(result_type), result_type
    )
    return rewriter.insert(op).result


def single_element_copy(
    rewriter: PatternRewriter, source: SSAValue, result_type: TensorType
) -> SSAValue:
    """Copy the one element of `source` into a tensor of `result_type` (also one element)."""
    rank = result_type.get_num_dims()
    zeros = tuple(AffineExpr.constant(0) for _ in tensor_shape(source))
    generic = build_generic(
        rewriter,
        [source],
        empty_like(rewriter, result_type),
        [AffineMap(rank, 0, zeros), AffineMap.identity(rank)],
        parallel_iterators(rank),
        lambda b, args: args[0],
        "tess.reshape",
    )
    return generic.res[0]


def reshape_view(rewriter: PatternRewriter, source: SSAValue, result_type: TensorType) -> SSAValue:
    """Insert the collapse/expand views taking `source` to `result_type`."""
    src, dst = tensor_shape(source), tensor_shape(result_type)
    if src == dst:
        return source
    if not src or not dst:
        # To or from rank 0 (one element): MLIR views these with an empty reassociation,
        # which xDSL's verifier rejects, so copy the element with a generic instead.
        return single_element_copy(rewriter, source, result_type)
    if len(dst) <= len(src) and (groups := reassociation(src, dst)) is not None:
        return collapse(rewriter, source, result_type, groups)
    if len(dst) >= len(src) and (groups := reassociation(dst, src)) is not None:
        return expand(rewriter, source, result_type, groups)
    # Neither view alone fits (e.g. (2,3) -> (3,2)): go through the flat 1-D tensor.
    numel = 1
    for d in src:
        numel *= d
    flat_type = TensorType(result_type.element_type, [numel])
    flat = collapse(rewriter, source, flat_type, [list(range(len(src)))])
    return expand(rewriter, flat, result_type, [list(range(len(dst)))])


class ReshapeToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.ReshapeOp, rewriter: PatternRewriter) -> None:
        source = op.input
        result_type = result_type_of(op)
        if is_slice_view(source) and source.type != result_type:
            # A slice is a strided view (or a reversing copy of one): collapsing or
            # expanding it is no view of the buffer. Dropping or adding dims of size 1 (an
            # integer index, None) is a copy reading the view at 0 in the dropped dims,
            # which tess-fuse fuses into its consumers as it does the reversing copy: they
            # read the source buffer in place. Any other reshape copies the slice first.
            rank = len(tensor_shape(source))
            read = unit_dims_map(tensor_shape(source), tensor_shape(result_type))
            if read is None:
                source = build_generic(
                    rewriter,
                    [source],
                    empty_like(rewriter, source.type),
                    [AffineMap.identity(rank)] * 2,
                    parallel_iterators(rank),
                    lambda b, args: args[0],
                    "tess.slice",
                ).res[0]
            else:
                result_rank = result_type.get_num_dims()
                generic = build_generic(
                    rewriter,
                    [source],
                    empty_like(rewriter, result_type),
                    [read, AffineMap.identity(result_rank)],
                    parallel_iterators(result_rank),
                    lambda b, args: args[0],
                    "tess.reshape",
                )
                rewriter.replace(op, [], [generic.res[0]])
                return
        result = reshape_view(rewriter, source, result_type)
        rewriter.replace(op, [], [result])


# ---------------------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TessToLinalgPass(ModulePass):
    """Lower every `tess` op to `linalg.generic` (and tensor views) on tensors."""

    name = "tess-to-linalg"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    UnaryToLinalg(),
                    BinaryToLinalg(),
                    SelectToLinalg(),
                    CastToLinalg(),
                    BitcastToLinalg(),
                    StopGradientToLinalg(),
                    FillToLinalg(),
                    SplatConstantToLinalg(),
                    BroadcastToToLinalg(),
                    PermuteToLinalg(),
                    ReduceToLinalg(),
                    MatmulToLinalg(),
                    ReshapeToLinalg(),
                    *index_patterns(),
                    *conv_patterns(),
                    *attention_patterns(),
                ],
                dce_enabled=False,
            ),
            apply_recursively=False,
        ).rewrite_module(op)


__all__ = [
    "TessToLinalgPass",
    "broadcast_map",
    "reassociation",
]
