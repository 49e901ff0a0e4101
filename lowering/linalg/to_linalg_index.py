"""
The `tess-to-linalg` patterns of the indexing ops (`tessc.dialects.tess_index`).

Part of the `tess-to-linalg` pass (`to_linalg.py`), one pattern per op. An affine map
cannot read at a data-dependent position, so a gather reads its source as MLIR's
`index_select`/`embedding` lowerings do: inside the generic's body, with `tensor.extract` of
a captured tensor at indices computed from `linalg.index` and the loaded index values
(normalised and clamped, so every read is in range). Fusion treats such a generic as
opaque. `slice` is an upstream `tensor.extract_slice` (a view once bufferized) plus a
reversing copy for negative steps; the form of each op is in lowering/linalg/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, TensorType, i64
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, IndexOp
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tessc.dialects import tess, tess_index
from tessc.dialects.tess import tensor_shape
from tessc.lowering.linalg.builders import (
    build_elementwise,
    build_fill,
    build_from_indices,
    build_generic,
    convert,
    copied_view,
    empty_like,
    float_constant,
    is_float_type,
    parallel_iterators,
    result_type_of,
    unit_dims_map,
)
from tessc.lowering.linalg.generic_analysis import reads_backwards, reversed_dim

# ---------------------------------------------------------------------------------------
# index arithmetic in the body
# ---------------------------------------------------------------------------------------


def index_constant(b: Builder, value: int) -> SSAValue:
    return b.insert(arith.ConstantOp(IntegerAttr.from_index_int_value(value))).result


def loop_index(b: Builder, dim: int) -> SSAValue:
    return b.insert(IndexOp(dim)).result


def as_index(b: Builder, value: SSAValue) -> SSAValue:
    return b.insert(arith.IndexCastOp(value, IndexType())).result


def clamp(b: Builder, value: SSAValue, low: int, high: int) -> SSAValue:
    """`value` clamped into [low, high] (index arithmetic)."""
    above = b.insert(arith.MaxSIOp(value, index_constant(b, low))).result
    return b.insert(arith.MinSIOp(above, index_constant(b, high))).result


def normalized_index(b: Builder, raw: SSAValue, size: int) -> SSAValue:
    """An index into a dim of `size` from an integer: + size if negative, then clamped."""
    value = as_index(b, raw)
    zero = index_constant(b, 0)
    negative = b.insert(arith.CmpiOp(value, zero, "slt")).result
    wrapped = b.insert(arith.AddiOp(value, index_constant(b, size))).result
    chosen = b.insert(arith.SelectOp(negative, wrapped, value)).result
    return clamp(b, chosen, 0, size - 1)


def extract(b: Builder, source: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
    assert isinstance(source.type, TensorType)
    return b.insert(tensor.ExtractOp(source, list(indices), source.type.element_type)).result


def dims_map(num_loops: int, loops: Sequence[int]) -> AffineMap:
    return AffineMap(num_loops, 0, tuple(AffineExpr.dimension(d) for d in loops))


def all_of(b: Builder, flags: Sequence[SSAValue]) -> SSAValue | None:
    result = None
    for flag in flags:
        result = flag if result is None else b.insert(arith.AndIOp(result, flag)).result
    return result


# ---------------------------------------------------------------------------------------
# patterns
# ---------------------------------------------------------------------------------------


class TakeToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.TakeOp, rewriter: PatternRewriter) -> None:
        source = tensor_shape(op.input)
        dim, index_rank = op.axis, len(tensor_shape(op.indices))
        result_type = result_type_of(op)
        rank = result_type.get_num_dims()
        index_loops = list(range(dim, dim + index_rank))

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            position = normalized_index(b, args[0], source[dim])
            before = [loop_index(b, d) for d in range(dim)]
            after = [loop_index(b, d) for d in range(dim + index_rank, rank)]
            return extract(b, op.input, [*before, position, *after])

        generic = build_generic(
            rewriter,
            [op.indices],
            empty_like(rewriter, result_type),
            [dims_map(rank, index_loops), AffineMap.identity(rank)],
            parallel_iterators(rank),
            body,
            op.name,
        )
        rewriter.replace(op, [], [generic.res[0]])


class ScatterAddToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.ScatterAddOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        target = tensor_shape(result_type)
        rank, dim = len(target), op.axis
        index_rank = len(tensor_shape(op.indices))
        # Loops: the result's dims, then one reduction loop per index dim.
        index_loops = list(range(rank, rank + index_rank))
        num_loops = rank + index_rank
        grad_loops = [*range(dim), *index_loops, *range(dim + 1, rank)]

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            grad, raw, accumulator = args
            position = normalized_index(b, raw, target[dim])
            hit = b.insert(arith.CmpiOp(position, loop_index(b, dim), "eq")).result
            zero = float_constant(b, 0.0, grad.type)
            taken = b.insert(arith.SelectOp(hit, grad, zero)).result
            add = arith.AddfOp if is_float_type(grad.type) else arith.AddiOp
            return b.insert(add(accumulator, taken)).result

        generic = build_generic(
            rewriter,
            [op.input, op.indices],
            build_fill(rewriter, result_type, 0.0),
            [
                dims_map(num_loops, grad_loops),
                dims_map(num_loops, index_loops),
                dims_map(num_loops, range(rank)),
            ],
            [*parallel_iterators(rank), *[IteratorTypeAttr.reduction()] * index_rank],
            body,
            op.name,
        )
        rewriter.replace(op, [], [generic.res[0]])


class OneHotToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.OneHotOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        rank = result_type.get_num_dims()
        element_type = result_type.element_type

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            label = as_index(b, args[0])
            hit = b.insert(arith.CmpiOp(label, loop_index(b, rank - 1), "eq")).result
            return convert(b, hit, element_type)

        generic = build_generic(
            rewriter,
            [op.input],
            empty_like(rewriter, result_type),
            [dims_map(rank, range(rank - 1)), AffineMap.identity(rank)],
            parallel_iterators(rank),
            body,
            op.name,
        )
        rewriter.replace(op, [], [generic.res[0]])


class ArgReduceToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.ArgReduceOp, rewriter: PatternRewriter) -> None:
        is_max = isinstance(op, tess_index.ArgMaxOp)
        source = tensor_shape(op.input)
        rank, dim = len(source), op.axis
        assert isinstance(op.input.type, TensorType)
        element_type = op.input.type.element_type
        index_type = result_type_of(op)
        value_type = TensorType(element_type, index_type.get_shape())
        output_exprs = [
            AffineExpr.constant(0) if d == dim else AffineExpr.dimension(d)
            for d in range(rank)
            if d != dim or op.keeps_dims
        ]
        output_map = AffineMap(rank, 0, tuple(output_exprs))

        def body(b: Builder, args: Sequence[SSAValue]) -> Sequence[SSAValue]:
            x, best, best_index = args
            if is_float_type(x.type):
                # Strictly better, or NaN while the best so far is not (NumPy: NaN wins).
                better = b.insert(arith.CmpfOp(x, best, "ugt" if is_max else "ult")).result
                ordered = b.insert(arith.CmpfOp(best, best, "ord")).result
                better = b.insert(arith.AndIOp(better, ordered)).result
            else:
                better = b.insert(arith.CmpiOp(x, best, "sgt" if is_max else "slt")).result
            position = b.insert(arith.IndexCastOp(loop_index(b, dim), i64)).result
            return (
                b.insert(arith.SelectOp(better, x, best)).result,
                b.insert(arith.SelectOp(better, position, best_index)).result,
            )

        generic = build_generic(
            rewriter,
            [op.input],
            build_fill(rewriter, value_type, float("-inf") if is_max else float("inf")),
            [AffineMap.identity(rank), output_map, output_map],
            [
                IteratorTypeAttr.reduction() if d == dim else IteratorTypeAttr.parallel()
                for d in range(rank)
            ],
            body,
            op.name,
            extra_inits=[build_fill(rewriter, index_type, 0.0)],
        )
        rewriter.replace(op, [], [generic.res[1]])


def _erase_unused_copies(rewriter: PatternRewriter, value: SSAValue) -> None:
    """Erase the view copy defining `value` once nothing reads it (a slice of it was
    composed into a slice of what it reads), its `tensor.empty`, and so on up the chain."""
    while (view := copied_view(value)) is not None and not value.uses:
        owner = value.owner
        assert isinstance(owner, GenericOp)
        inits = list(owner.outputs)
        rewriter.erase(owner)
        for init in inits:
            if isinstance(init.owner, tensor.EmptyOp) and not init.uses:
                rewriter.erase(init.owner)
        value = view[0]


def lower_slice(
    rewriter: PatternRewriter,
    source: SSAValue,
    offsets: Sequence[int],
    strides: Sequence[int],
    sizes: Sequence[int],
) -> SSAValue:
    """`source[offsets + i * strides]` of shape `sizes` as views: an `extract_slice` with
    positive steps, then a copy reversing the dims with negative ones, which tess-fuse
    fuses into the consumers. A slice of such a view copy (`x[::-1][2]`) is composed into
    one slice of what the copy reads, so that the copy does not stay behind a slice."""
    if (view := copied_view(source)) is not None:
        inner, read = view
        inner_shape = tensor_shape(inner)
        inner_offsets, inner_strides, inner_sizes = [], [], []
        for r, expr in enumerate(read.results):
            if isinstance(expr, AffineDimExpr):
                d, backwards = expr.position, False
            elif (d := reversed_dim(expr)) is not None:
                backwards = True
            else:  # a dim of size 1 the copy drops
                inner_offsets.append(0)
                inner_strides.append(1)
                inner_sizes.append(1)
                continue
            start = inner_shape[r] - 1 - offsets[d] if backwards else offsets[d]
            inner_offsets.append(start)
            inner_strides.append(-strides[d] if backwards else strides[d])
            inner_sizes.append(sizes[d])
        result = lower_slice(rewriter, inner, inner_offsets, inner_strides, inner_sizes)
        read = unit_dims_map(tuple(inner_sizes), tuple(sizes))
        assert read is not None, "a view copy keeps its dims of size > 1 in order"
        if tuple(inner_sizes) != tuple(sizes):
            result = _view_copy(rewriter, result, read, sizes, "tess.reshape")
        return result
    full = tensor_shape(source)
    # A dim of one element reads the same forwards and backwards.
    strides = [1 if n == 1 else s for s, n in zip(strides, sizes, strict=True)]
    # The view with positive steps: a reversed dim starts at its last element read.
    starts = [
        o + (n - 1) * s if s < 0 else o for o, s, n in zip(offsets, strides, sizes, strict=True)
    ]
    steps = [abs(s) for s in strides]
    result = source
    if (tuple(starts), tuple(steps), tuple(sizes)) != ((0,) * len(full), (1,) * len(full), full):
        view = tensor.ExtractSliceOp.from_static_parameters(source, starts, sizes, steps)
        result = rewriter.insert(view).result
    if any(s < 0 for s in strides):
        # Reversed dims: a copy reading index `n - 1 - i` of the whole view (so every
        # plain loop dim spans its operand dim, from which loop extents are inferred).
        rank = len(sizes)
        flip = AffineMap(
            rank,
            0,
            tuple(
                AffineExpr.dimension(d) * -1 + (sizes[d] - 1)
                if strides[d] < 0
                else AffineExpr.dimension(d)
                for d in range(rank)
            ),
        )
        result = _view_copy(rewriter, result, flip, sizes, "tess.slice")
    return result


def _view_copy(
    rewriter: PatternRewriter, source: SSAValue, read: AffineMap, sizes: Sequence[int], origin: str
) -> SSAValue:
    """A copy generic of shape `sizes` reading `source` through `read`. If `read` reverses
    a dim, `source` is also an unused operand read through the identity map: it keeps the
    extent of the reversed loop wherever tess-fuse fuses the copy, also into a reduction
    over that loop (`x[:, ::-1].sum(1)`), where no other operand has it."""
    assert isinstance(source.type, TensorType)
    rank = len(sizes)
    inputs, maps = [source], [read]
    if reads_backwards(read):
        inputs.append(source)
        maps.append(AffineMap.identity(rank))
    generic = build_generic(
        rewriter,
        inputs,
        empty_like(rewriter, TensorType(source.type.element_type, sizes)),
        [*maps, AffineMap.identity(rank)],
        parallel_iterators(rank),
        lambda b, args: args[0],
        origin,
    )
    return generic.res[0]


class SliceToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.SliceOp, rewriter: PatternRewriter) -> None:
        sizes, source = tensor_shape(result_type_of(op)), op.input
        result = lower_slice(rewriter, source, op.static_offsets, op.static_strides, sizes)
        rewriter.replace(op, [], [result])
        _erase_unused_copies(rewriter, source)


class UnsliceToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.UnsliceOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        full, part = tensor_shape(result_type), tensor_shape(op.input)

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            positions: list[SSAValue] = []
            inside: list[SSAValue] = []
            for d, (offset, stride) in enumerate(
                zip(op.static_offsets, op.static_strides, strict=True)
            ):
                i = loop_index(b, d)
                if (offset, stride, part[d]) == (0, 1, full[d]):
                    positions.append(i)  # the whole dim: read where we are
                    continue
                shifted = b.insert(arith.SubiOp(i, index_constant(b, offset))).result
                step = index_constant(b, stride)
                remainder = b.insert(arith.RemSIOp(shifted, step)).result
                zero = index_constant(b, 0)
                inside.append(b.insert(arith.CmpiOp(remainder, zero, "eq")).result)
                q = b.insert(arith.DivSIOp(shifted, step)).result
                inside.append(b.insert(arith.CmpiOp(q, zero, "sge")).result)
                limit = index_constant(b, part[d])
                inside.append(b.insert(arith.CmpiOp(q, limit, "slt")).result)
                positions.append(clamp(b, q, 0, part[d] - 1))
            value = extract(b, op.input, positions)
            flag = all_of(b, inside)
            if flag is None:
                return value
            zero_value = float_constant(b, 0.0, value.type)
            return b.insert(arith.SelectOp(flag, value, zero_value)).result

        result = build_from_indices(rewriter, result_type, body, op.name)
        rewriter.replace(op, [], [result])


class ConcatToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_index.ConcatOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        rank, dim = result_type.get_num_dims(), op.axis
        sizes = [tensor_shape(v)[dim] for v in op.inputs]
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        if not any(sizes):  # empty operands, an empty result: nothing to read
            rewriter.replace(op, tensor.EmptyOp([], result_type))
            return

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            indices = [loop_index(b, d) for d in range(rank)]
            p = indices[dim]
            value: SSAValue | None = None
            # From the last operand back: an operand's range starts at `start`.
            for k in reversed(range(len(sizes))):
                if sizes[k] == 0:
                    continue
                local = b.insert(arith.SubiOp(p, index_constant(b, starts[k]))).result
                local = clamp(b, local, 0, sizes[k] - 1)
                read = extract(b, op.inputs[k], [*indices[:dim], local, *indices[dim + 1 :]])
                if value is None:
                    value = read
                else:
                    limit = index_constant(b, starts[k] + sizes[k])
                    before = b.insert(arith.CmpiOp(p, limit, "slt")).result
                    value = b.insert(arith.SelectOp(before, read, value)).result
            assert value is not None, "a concat with a non-empty result has a non-empty operand"
            return value

        result = build_from_indices(rewriter, result_type, body, op.name)
        rewriter.replace(op, [], [result])


class IotaToLinalg(RewritePattern):
    """`tess.iota`: a generic without inputs whose body folds the loop indices into the
    row-major linear index, so the counter never exists as a buffer."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess.IotaOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        shape = tensor_shape(result_type)

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            linear = loop_index(b, 0) if shape else index_constant(b, 0)
            for dim in range(1, len(shape)):
                scaled = b.insert(arith.MuliOp(linear, index_constant(b, shape[dim]))).result
                linear = b.insert(arith.AddiOp(scaled, loop_index(b, dim))).result
            return b.insert(arith.IndexCastOp(linear, result_type.element_type)).result

        result = build_elementwise(rewriter, [], result_type, body, op.name)
        rewriter.replace(op, [], [result])


def index_patterns() -> list[RewritePattern]:
    return [
        IotaToLinalg(),
        TakeToLinalg(),
        ScatterAddToLinalg(),
        OneHotToLinalg(),
        ArgReduceToLinalg(),
        SliceToLinalg(),
        UnsliceToLinalg(),
        ConcatToLinalg(),
    ]


__all__ = ["index_patterns"]
