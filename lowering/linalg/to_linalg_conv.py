"""
The `tess-to-linalg` patterns of the convolution ops (`tessc.dialects.tess_conv`).

Part of the `tess-to-linalg` pass (`to_linalg.py`), one pattern per op. A conv is MLIR's
`linalg.conv_2d_nchw_fchw` written as a generic over N spatial dims: loops `(n, f, o...,
c, k...)`, output dims parallel, `(c, k...)` reductions, the input read at `(n, c, o*s +
k*d)` and the weight at `(f, c, k...)`; with groups the channels are split into views, as
`linalg.conv_2d_ngchw_gfchw`: loops `(n, g, f, o..., c, k...)`. Padding is a separate
generic writing the padded input (a `select` of the value on in-bounds indices, an
extracted element inside): the conv keeps affine maps only, so loop lowering and fusion
read it as a contraction rather than an opaque gather. Pooling is a reduction over the
window loops with the same maps (argmax yields value and first index, as `argmax` does);
`unpool` reads the windows that hold each input element with guarded `tensor.extract`s,
every tap unrolled in its body.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, TensorType, i64
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tessc.dialects import tess_conv
from tessc.dialects.tess import tensor_shape
from tessc.lowering.linalg.builders import (
    build_elementwise,
    build_fill,
    build_from_indices,
    build_generic,
    empty_like,
    float_constant,
    parallel_iterators,
    result_type_of,
)
from tessc.lowering.linalg.to_linalg_index import all_of, clamp, extract, index_constant, loop_index


def _dim(d: int) -> AffineExpr:
    return AffineExpr.dimension(d)


def _window_expr(out: int, tap: int, stride: int, dilation: int) -> AffineExpr:
    """`o * stride + k * dilation` over the loops `out` and `tap`."""
    return _dim(out) * stride + _dim(tap) * dilation


def _view(
    rewriter: PatternRewriter, source: SSAValue, shape: Sequence[int], groups: list[list[int]]
) -> SSAValue:
    """`source` expanded (more dims) or collapsed (fewer) to `shape` by `groups`."""
    assert isinstance(source.type, TensorType)
    result_type = TensorType(source.type.element_type, list(shape))
    attr = ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in g]) for g in groups])
    if len(shape) > len(tensor_shape(source)):
        op = tensor.ExpandShapeOp(source, [], attr, list(shape), result_type)
    else:
        op = tensor.CollapseShapeOp(
            operands=[source], result_types=[result_type], properties={"reassociation": attr}
        )
    return rewriter.insert(op).result


def padded(
    rewriter: PatternRewriter,
    source: SSAValue,
    low: Sequence[int],
    high: Sequence[int],
    value: float,
    origin: str,
) -> SSAValue:
    """`source` padded on its last `len(low)` dims: one parallel generic over the padded
    shape selecting `value` outside the source (or `source` itself with no padding)."""
    shape = tensor_shape(source)
    lead = len(shape) - len(low)
    low, high = (0,) * lead + tuple(low), (0,) * lead + tuple(high)
    if not any(low) and not any(high):
        return source
    full = [n + lo + hi for n, lo, hi in zip(shape, low, high, strict=True)]
    assert isinstance(source.type, TensorType)
    result_type = TensorType(source.type.element_type, full)

    def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
        positions: list[SSAValue] = []
        inside: list[SSAValue] = []
        for d, (n, lo, hi) in enumerate(zip(shape, low, high, strict=True)):
            i = loop_index(b, d)
            if lo == hi == 0:
                positions.append(i)
                continue
            q = b.insert(arith.SubiOp(i, index_constant(b, lo))).result if lo else i
            if lo:
                inside.append(b.insert(arith.CmpiOp(q, index_constant(b, 0), "sge")).result)
            if hi:
                inside.append(b.insert(arith.CmpiOp(q, index_constant(b, n), "slt")).result)
            positions.append(clamp(b, q, 0, n - 1))
        element = extract(b, source, positions)
        flag = all_of(b, inside)
        assert flag is not None
        fill = float_constant(b, value, element.type)
        return b.insert(arith.SelectOp(flag, element, fill)).result

    generic = build_generic(
        rewriter,
        [],
        empty_like(rewriter, result_type),
        [AffineMap.identity(len(full))],
        parallel_iterators(len(full)),
        body,
        origin,
    )
    return generic.res[0]


class PadToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_conv.PadOp, rewriter: PatternRewriter) -> None:
        result = padded(rewriter, op.input, op.static_low, op.static_high, op.pad_value, op.name)
        rewriter.replace(op, [], [result])


def _multiply_add(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
    product = b.insert(arith.MulfOp(args[0], args[1])).result
    return b.insert(arith.AddfOp(args[2], product)).result


class ConvToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_conv.ConvOp, rewriter: PatternRewriter) -> None:
        source = padded(rewriter, op.input, op.static_low, op.static_high, 0.0, "tess.pad")
        weight = op.weight
        result_type = result_type_of(op)
        out_shape = tensor_shape(result_type)
        spatial = len(out_shape) - 2
        groups = op.group_count
        strides, dilations = op.static_strides, op.static_dilations
        grouped = groups > 1
        # Loops: n, [g,] f, o..., c, k...
        g = 1 if grouped else None
        f = 2 if grouped else 1
        outs = [f + 1 + i for i in range(spatial)]
        c = f + 1 + spatial
        taps = [c + 1 + i for i in range(spatial)]
        num_loops = c + 1 + spatial
        windows = [
            _window_expr(o, k, s, d)
            for o, k, s, d in zip(outs, taps, strides, dilations, strict=True)
        ]
        group_dims = [_dim(g)] if g is not None else []
        input_map = AffineMap(num_loops, 0, (_dim(0), *group_dims, _dim(c), *windows))
        weight_map = AffineMap(
            num_loops, 0, (*group_dims, _dim(f), _dim(c), *(_dim(k) for k in taps))
        )
        output_map = AffineMap(
            num_loops, 0, (_dim(0), *group_dims, _dim(f), *(_dim(o) for o in outs))
        )
        init_type = result_type
        if grouped:
            in_shape, w_shape = tensor_shape(source), tensor_shape(weight)
            rest = [[d + 1] for d in range(2, len(in_shape))]
            source = _view(
                rewriter, source,
                (in_shape[0], groups, in_shape[1] // groups, *in_shape[2:]),
                [[0], [1, 2], *rest],
            )  # fmt: skip
            weight = _view(
                rewriter, weight,
                (groups, w_shape[0] // groups, *w_shape[1:]),
                [[0, 1], *[[d + 1] for d in range(1, len(w_shape))]],
            )  # fmt: skip
            init_type = TensorType(
                result_type.element_type,
                [out_shape[0], groups, out_shape[1] // groups, *out_shape[2:]],
            )
        generic = build_generic(
            rewriter,
            [source, weight],
            build_fill(rewriter, init_type, 0.0),
            [input_map, weight_map, output_map],
            [
                *parallel_iterators(num_loops - spatial - 1),
                *[IteratorTypeAttr.reduction()] * (spatial + 1),
            ],
            _multiply_add,
            op.name,
        )
        result = generic.res[0]
        if grouped:
            rest = [[d + 1] for d in range(2, len(out_shape))]
            result = _view(rewriter, result, out_shape, [[0], [1, 2], *rest])
        rewriter.replace(op, [], [result])


class PoolToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_conv.PoolOp, rewriter: PatternRewriter) -> None:
        kind = op.pool_kind
        fill = 0.0 if kind == "avg" else float("-inf")
        source = padded(
            rewriter, op.input, op.static_low, op.static_high, fill, "tess.pad"
        )  # fmt: skip
        result_type = result_type_of(op)
        out_shape = tensor_shape(result_type)
        kernel = op.static_kernel
        spatial, rank = len(kernel), len(out_shape)
        lead = rank - spatial
        taps = [rank + i for i in range(spatial)]
        num_loops = rank + spatial
        windows = [_window_expr(lead + i, taps[i], s, 1) for i, s in enumerate(op.static_strides)]
        input_map = AffineMap(num_loops, 0, (*(_dim(d) for d in range(lead)), *windows))
        output_map = AffineMap(num_loops, 0, tuple(_dim(d) for d in range(rank)))
        iterators = [*parallel_iterators(rank), *[IteratorTypeAttr.reduction()] * spatial]
        assert isinstance(op.input.type, TensorType)
        element_type = op.input.type.element_type
        value_type = TensorType(element_type, out_shape)
        # The window operand of MLIR's pooling ops: only its shape is read, as the extent
        # of the tap loops, which no other operand has.
        window = empty_like(rewriter, TensorType(element_type, list(kernel)))
        window_map = AffineMap(num_loops, 0, tuple(_dim(k) for k in taps))

        if kind == "argmax":

            def first_max(b: Builder, args: Sequence[SSAValue]) -> Sequence[SSAValue]:
                x, _, best, best_index = args
                better = b.insert(arith.CmpfOp(x, best, "ogt")).result  # strictly: the first
                offset = None
                for i, k in enumerate(taps):
                    term = loop_index(b, k)
                    if offset is not None:
                        scaled = b.insert(arith.MuliOp(offset, index_constant(b, kernel[i]))).result
                        term = b.insert(arith.AddiOp(scaled, term)).result
                    offset = term
                assert offset is not None
                position = b.insert(arith.IndexCastOp(offset, i64)).result
                return (
                    b.insert(arith.SelectOp(better, x, best)).result,
                    b.insert(arith.SelectOp(better, position, best_index)).result,
                )

            generic = build_generic(
                rewriter, [source, window], build_fill(rewriter, value_type, fill),
                [input_map, window_map, output_map, output_map], iterators, first_max, op.name,
                extra_inits=[build_fill(rewriter, result_type, 0.0)],
            )  # fmt: skip
            rewriter.replace(op, [], [generic.res[1]])
            return

        def combine(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            if kind == "max":
                return b.insert(arith.MaximumfOp(args[2], args[0])).result
            return b.insert(arith.AddfOp(args[2], args[0])).result

        generic = build_generic(
            rewriter, [source, window], build_fill(rewriter, value_type, fill),
            [input_map, window_map, output_map], iterators, combine, op.name,
        )  # fmt: skip
        result = generic.res[0]
        if kind == "avg":
            count = 1
            for k in kernel:
                count *= k

            def scale(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
                divisor = float_constant(b, float(count), element_type)
                return b.insert(arith.DivfOp(args[0], divisor)).result

            result = build_elementwise(rewriter, [result], result_type, scale, op.name)
        rewriter.replace(op, [], [result])


class UnpoolToLinalg(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tess_conv.UnpoolOp, rewriter: PatternRewriter) -> None:
        result_type = result_type_of(op)
        full, pooled = tensor_shape(result_type), tensor_shape(op.grad)
        kernel, strides, low = op.static_kernel, op.static_strides, op.static_low
        spatial, rank = len(kernel), len(full)
        lead = rank - spatial
        indices = op.indices

        def tap_value(b: Builder, tap: Sequence[int], offset: int) -> SSAValue:
            """What tap `tap` (flat `offset`) of the window holding this element adds."""
            positions = [loop_index(b, d) for d in range(lead)]
            inside: list[SSAValue] = []
            zero = index_constant(b, 0)
            for i, k in enumerate(tap):
                # Input element x is tap k of window o where o * s + k = x + low.
                t = loop_index(b, lead + i)
                if low[i] - k:
                    t = b.insert(arith.AddiOp(t, index_constant(b, low[i] - k))).result
                inside.append(b.insert(arith.CmpiOp(t, zero, "sge")).result)
                if strides[i] != 1:
                    step = index_constant(b, strides[i])
                    remainder = b.insert(arith.RemSIOp(t, step)).result
                    inside.append(b.insert(arith.CmpiOp(remainder, zero, "eq")).result)
                    t = b.insert(arith.DivSIOp(t, step)).result
                limit = index_constant(b, pooled[lead + i])
                inside.append(b.insert(arith.CmpiOp(t, limit, "slt")).result)
                positions.append(clamp(b, t, 0, pooled[lead + i] - 1))
            value = extract(b, op.grad, positions)
            if indices is not None:
                routed = extract(b, indices, positions)
                wanted = float_constant(b, float(offset), routed.type)
                inside.append(b.insert(arith.CmpiOp(routed, wanted, "eq")).result)
            flag = all_of(b, inside)
            assert flag is not None
            nothing = float_constant(b, 0.0, value.type)
            return b.insert(arith.SelectOp(flag, value, nothing)).result

        def body(b: Builder, args: Sequence[SSAValue]) -> SSAValue:
            # Every tap unrolled (kernels are small): no loop extent to infer for them.
            total: SSAValue | None = None
            for offset, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
                value = tap_value(b, tap, offset)
                total = value if total is None else b.insert(arith.AddfOp(total, value)).result
            assert total is not None
            return total

        result = build_from_indices(rewriter, result_type, body, op.name)
        rewriter.replace(op, [], [result])


def conv_patterns() -> list[RewritePattern]:
    return [PadToLinalg(), ConvToLinalg(), PoolToLinalg(), UnpoolToLinalg()]


__all__ = ["conv_patterns", "padded"]
