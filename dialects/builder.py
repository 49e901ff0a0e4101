"""
The one builder of `tess` IR: a thin layer over xDSL's `Builder`.

`TessBuilder` inserts `tess` ops at an `InsertPoint` and returns the result `SSAValue` of
each, so a program reads like the math it builds:

    def body(b: TessBuilder, x: SSAValue, w: SSAValue) -> SSAValue:
        return b.sum(b.relu(b.matmul(x, w)), dims=1)

    module = build_module(build_function("f", [tensor_type((4, 3)), tensor_type((3, 2))], body))

Every client builds `tess` through this class: both frontends (the `Tensor` tracer and the
`.tess` language, which is why they print identical IR for the same program) and the
autodiff pass, whose VJP rules build through `GradEmitter`
(`tessc.lowering.autodiff.grad_emitter`), a subclass that also folds trivial gradient
terms as it builds them. It lives with the dialect, below both, because it needs only xDSL
and `tess`.

Every method checks shapes and dtypes *before* building the op and raises `TessError` in
the user's terms ("cannot broadcast (3,4,1) with (3,5)"); the frontends add where it
happened. A Python number where a tensor is expected becomes a `tess.fill` of the other
operand's dtype (`scalar`: rank 0 here), which the op then broadcasts.

Every op goes through one of a few primitives — `insert`, `unary`, `binary`, `select`,
`reshape`, `broadcast_to`, `permute`, `sum` — so a subclass that overrides those (as
`GradEmitter` does to fold) sees every op built, including the ones inside composites.
Composite operations that `tess` has no op for (`le`, `ge`, `ne`, `reduce_min`,
`unsqueeze`, `transpose`, `sum_to_shape`, ...) live here too, so every client lowers them
the same way.

The dtype and shape rules (`TessError`, `element_type`, `promote_types`, `shape_of`, ...)
are in `builder_types.py`, which the frontends use on their own; the methods that build
`tess_index` ops are the mixin `IndexBuilder` (`builder_index.py`), those that build
`tess_conv` ops the mixin `ConvBuilder` (`builder_conv.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Self, TypeAlias

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, f64, i1, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from tessc.dialects import tess
from tessc.dialects.builder_attention import AttentionBuilder
from tessc.dialects.builder_conv import ConvBuilder
from tessc.dialects.builder_index import IndexBuilder
from tessc.dialects.builder_types import (
    DimsLike,
    DTypeLike,
    ElementType,
    Operand,
    Shape,
    TessError,
    describe,
    dtype_name,
    element_type,
    infer_shape,
    is_float_value,
    normalize_dims,
    numel,
    promote_types,
    shape_of,
    tensor_type,
)
from tessc.dialects.dynamic_dims import traced_dim, type_dim
from tessc.dialects.tess_base import (
    broadcast_shapes,
    element_type_of,
    format_shape,
    is_bool,
    is_float,
    matmul_shape,
)
from tessc.dialects.tess_elementwise import element_width as bit_width


class TessBuilder(IndexBuilder, ConvBuilder, AttentionBuilder):
    """Emits `tess` ops at an insertion point; every method returns the new SSAValue."""

    def __init__(self, at: InsertPoint | Builder):
        """Build at `at`, or through `at` when it is a `Builder` (sharing its insertion
        point with the code that owns it)."""
        self.builder = at if isinstance(at, Builder) else Builder(at)

    @classmethod
    def at_end(cls, block: Block) -> Self:
        return cls(InsertPoint.at_end(block))

    @classmethod
    def before(cls, op: Operation) -> Self:
        return cls(InsertPoint.before(op))

    @property
    def insertion_point(self) -> InsertPoint:
        return self.builder.insertion_point

    @insertion_point.setter
    def insertion_point(self, point: InsertPoint) -> None:
        self.builder.insertion_point = point

    def insert(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    # -- constants ------------------------------------------------------------------------

    def fill(self, value: float, shape: Sequence[int] = (), dtype: DTypeLike = "f32") -> SSAValue:
        """A tensor of `shape` with every element `value` (`tess.fill`)."""
        return self.insert(tess.FillOp(float(value), tensor_type(shape, dtype)))

    def full_like(
        self, like: SSAValue, value: float, shape: Sequence[int] | None = None
    ) -> SSAValue:
        """A `tess.fill` of `value` in `like`'s element type, of `shape` (default: `like`'s)."""
        typ = like.type
        assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
        dims = typ.get_shape() if shape is None else shape
        return self.insert(
            tess.FillOp(float(value), TensorType(typ.element_type, [type_dim(d) for d in dims]))
        )

    def zeros_like(self, like: SSAValue) -> SSAValue:
        return self.full_like(like, 0.0)

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A splat of `value` in `like`'s dtype that broadcasts against `like`: here a rank-0
        tensor. (Numbers given as operands become these.)"""
        return self.fill(value, (), element_type_of(like))

    def _operands(self, *operands: Operand, floating: bool = False) -> list[SSAValue]:
        """SSAValues for `operands` in one dtype (`promote_types`; f32 at least when
        `floating`): tensors of another dtype are cast, numbers become rank-0 fills."""
        tensors = [v for v in operands if isinstance(v, SSAValue)]
        if not tensors:
            raise TessError("at least one operand must be a tensor")
        numbers = [v for v in operands if not isinstance(v, SSAValue)]
        dtype = promote_types([element_type_of(v) for v in tensors], numbers, self.default_float)
        if floating and not is_float(dtype):
            dtype = self.default_float
        cast = {v: self.cast(v, dtype) for v in tensors}
        like = cast[tensors[0]]
        # Numbers through `scalar` (a subclass may shape them, as GradEmitter does).
        return [
            cast[v] if isinstance(v, SSAValue) else self.scalar(_number(v), like) for v in operands
        ]

    def cast(self, x: SSAValue, dtype: DTypeLike) -> SSAValue:
        """`x` converted to `dtype` (`tess.cast`; NumPy's `astype`), or `x` if it has it."""
        target = element_type(dtype)
        if element_type_of(x) == target:
            return x
        return self.insert(tess.CastOp(x, target))

    astype = cast

    def bitcast(self, x: SSAValue, dtype: DTypeLike) -> SSAValue:
        """`x`'s bits reinterpreted as `dtype`, of the same width (`tess.bitcast`; NumPy's
        `view(dtype)`, `jax.lax.bitcast_convert_type`), or `x` if it has it."""
        source, target = element_type_of(x), element_type(dtype)
        if source == target:
            return x
        if is_bool(source) or is_bool(target) or bit_width(source) != bit_width(target):
            raise TessError(
                f"cannot reinterpret {dtype_name(source)} as {dtype_name(target)}: bitcast "
                "takes a float or integer dtype of the same width (32: float32/int32, 64: "
                "float64/int64, 16: bfloat16/float16/int16)"
            )
        return self.insert(tess.BitcastOp(x, target))

    def floating(self, x: SSAValue) -> SSAValue:
        """`x` as a float tensor: integers and bools become `default_float`."""
        return x if is_float_value(x) else self.cast(x, self.default_float)

    @property
    def default_float(self) -> ElementType:
        """The float type integers and bools become in float arithmetic: f64 in a function
        with an f64 argument, else f32 (so an f64 program stays f64, an f32 one f32)."""
        for arg in self.insertion_point.block.args:
            if isinstance(arg.type, TensorType) and arg.type.element_type == f64:
                return f64
        return f32

    # -- map: unary elementwise ------------------------------------------------------------

    def unary(self, op: type[tess.UnaryOp], x: SSAValue) -> SSAValue:
        """`op(x)`: every map is built here (integers become floats for float-only maps)."""
        if op.ELEMENTS is tess.Elements.FLOAT:
            x = self.floating(x)
        elif not is_float_value(x) and element_type_of(x) == i1:
            x = self.cast(x, i64)  # arithmetic on bools counts them, as NumPy's does
        return self.insert(op(x))

    def neg(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.NegOp, x)

    def exp(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.ExpOp, x)

    def log(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.LogOp, x)

    def relu(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.ReluOp, x)

    def sigmoid(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.SigmoidOp, x)

    def tanh(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.TanhOp, x)

    def sqrt(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.SqrtOp, x)

    def sin(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.SinOp, x)

    def cos(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.CosOp, x)

    def erf(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.ErfOp, x)

    def floor(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.FloorOp, x)

    def ceil(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.CeilOp, x)

    def round(self, x: SSAValue) -> SSAValue:
        """Halves to even (NumPy's `round`, PyTorch's `round`)."""
        return self.unary(tess.RoundOp, x)

    def reciprocal(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.ReciprocalOp, x)

    def abs(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.AbsOp, x)

    # -- zip: binary elementwise with broadcasting -----------------------------------------

    def binary(self, op: type[tess.BinaryOp], lhs: Operand, rhs: Operand) -> SSAValue:
        """`op(lhs, rhs)`, broadcasting: every zip is built here (a comparison gives a 0/1
        mask in the operands' dtype; `lt`/`gt`/`eq` give bools)."""
        floating = op.ELEMENTS is tess.Elements.FLOAT
        lhs_value, rhs_value = self._operands(lhs, rhs, floating=floating)
        self.check_broadcast(lhs_value, rhs_value)
        if element_type_of(lhs_value) == i1 and op.ELEMENTS is not tess.Elements.ANY:
            lhs_value, rhs_value = self.cast(lhs_value, i64), self.cast(rhs_value, i64)
        return self.insert(op(lhs_value, rhs_value))

    def _compare(self, op: type[tess.CompareOp], lhs: Operand, rhs: Operand) -> SSAValue:
        """A bool (`i1`) tensor: where `lhs <op> rhs` holds."""
        lhs_value, rhs_value = self._operands(lhs, rhs)
        self.check_broadcast(lhs_value, rhs_value)
        if element_type_of(lhs_value) == i1 and op.ELEMENTS is not tess.Elements.ANY:
            lhs_value, rhs_value = self.cast(lhs_value, i32), self.cast(rhs_value, i32)
        return self.insert(op(lhs_value, rhs_value, bool_result=True))

    @staticmethod
    def check_broadcast(*values: SSAValue) -> Shape:
        """The broadcast shape of `values`, or a TessError naming the first misfit pair."""
        shape: Shape = ()
        for i, value in enumerate(values):
            try:
                shape = broadcast_shapes(shape, shape_of(value))
            except ValueError:
                others = " with ".join(format_shape(shape_of(v)) for v in values[: i + 1])
                raise TessError(f"cannot broadcast {others}") from None
        return shape

    def add(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.AddOp, lhs, rhs)

    def sub(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.SubOp, lhs, rhs)

    def mul(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.MulOp, lhs, rhs)

    def div(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.DivOp, lhs, rhs)

    def pow(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.PowOp, lhs, rhs)

    def maximum(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """Elementwise max (`tess.max`); the reduction is `reduce_max`."""
        return self.binary(tess.MaxOp, lhs, rhs)

    def minimum(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """Elementwise min (`tess.min`)."""
        return self.binary(tess.MinOp, lhs, rhs)

    # `max`/`min` are the tess op names of the elementwise ops; kept as aliases.
    max = maximum
    min = minimum

    def lt(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self._compare(tess.LtOp, lhs, rhs)

    def gt(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self._compare(tess.GtOp, lhs, rhs)

    def eq(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self._compare(tess.EqOp, lhs, rhs)

    def le(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """`lt or eq`: unlike `not gt` it is false when an operand is NaN."""
        lhs_value, rhs_value = self._operands(lhs, rhs)
        return self.logical_or(self.lt(lhs_value, rhs_value), self.eq(lhs_value, rhs_value))

    def ge(self, lhs: Operand, rhs: Operand) -> SSAValue:
        lhs_value, rhs_value = self._operands(lhs, rhs)
        return self.logical_or(self.gt(lhs_value, rhs_value), self.eq(lhs_value, rhs_value))

    def ne(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """`not eq`, which is true for NaN as IEEE `!=` is."""
        return self.logical_not(self.eq(lhs, rhs))

    def _bool(self, x: Operand) -> SSAValue | bool:
        return self.cast(x, i1) if isinstance(x, SSAValue) else bool(x)

    def logical_and(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """Elementwise `and` of truth values (`tess.mul` on bools)."""
        return self.binary(tess.MulOp, self._bool(lhs), self._bool(rhs))

    def logical_or(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """Elementwise `or` of truth values (`tess.max` on bools)."""
        return self.binary(tess.MaxOp, self._bool(lhs), self._bool(rhs))

    def logical_not(self, x: SSAValue) -> SSAValue:
        return self.insert(tess.EqOp(self.cast(x, i1), self.fill(0.0, (), i1), bool_result=True))

    def logical_xor(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.insert(
            tess.EqOp(
                *self._operands(self._bool(lhs), self.logical_not(self._bool(rhs))),
                bool_result=True,
            )
        )

    # -- select, matmul --------------------------------------------------------------------

    def select(self, cond: Operand, lhs: Operand, rhs: Operand) -> SSAValue:
        """`where(cond != 0, lhs, rhs)`, broadcasting all three; `cond` may have any dtype."""
        if not isinstance(lhs, SSAValue) and not isinstance(rhs, SSAValue):
            if not isinstance(cond, SSAValue):
                raise TessError("at least one operand must be a tensor")
            lhs, rhs = self._operands(lhs, rhs, cond)[:2]  # numbers in cond's dtype
        values = self._operands(lhs, rhs)
        condition = cond if isinstance(cond, SSAValue) else self.fill(_number(cond), (), i1)
        self.check_broadcast(condition, *values)
        return self.insert(tess.SelectOp(condition, *values))

    where = select

    def matmul(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        """`lhs @ rhs` as NumPy's `matmul`: a rank-1 operand is a row (left) or a column
        (right) vector whose dim the result drops; batch dims broadcast."""
        lhs_value, rhs_value = self._operands(lhs, rhs, floating=True)
        lhs_shape, rhs_shape = shape_of(lhs_value), shape_of(rhs_value)
        if not lhs_shape or not rhs_shape:
            raise TessError(
                f"matmul needs operands of rank >= 1, got {format_shape(lhs_shape)} and "
                f"{format_shape(rhs_shape)} (use * for a scalar)"
            )
        row, column = len(lhs_shape) == 1, len(rhs_shape) == 1
        if row:
            lhs_value = self.reshape(lhs_value, (1, *lhs_shape))
        if column:
            rhs_value = self.reshape(rhs_value, (*rhs_shape, 1))
        try:
            shape = matmul_shape(shape_of(lhs_value), shape_of(rhs_value))
        except ValueError as e:
            message = str(e)
            if row or column:  # name the shapes as written
                k_lhs, k_rhs = lhs_shape[-1], rhs_shape[0 if column else -2]
                message = (
                    f"matmul contraction mismatch: {format_shape(lhs_shape)} and "
                    f"{format_shape(rhs_shape)} ({k_lhs} != {k_rhs})"
                )
            raise TessError(message) from None
        result = self.insert(tess.MatmulOp(lhs_value, rhs_value))
        if row or column:
            kept = shape[:-2] + shape[-2:-1] * (not row) + shape[-1:] * (not column)
            result = self.reshape(result, kept)
        return result

    # -- reductions ------------------------------------------------------------------------

    def reduce(
        self, op: type[tess.ReduceOp], x: SSAValue, dims: DimsLike, keepdim: bool
    ) -> SSAValue:
        """`op` over `dims` of `x`: every reduction is built here."""
        if op.ELEMENTS is tess.Elements.FLOAT:
            x = self.floating(x)  # the mean of integers is a float
        elif element_type_of(x) == i1:
            x = self.cast(x, i64)  # a sum of bools counts them
        return self.insert(op(x, normalize_dims(dims, len(shape_of(x))), bool(keepdim)))

    def sum(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """Sum over `dims` (an int, a sequence, or None for all; negative dims count back)."""
        return self.reduce(tess.SumOp, x, dims, keepdim)

    def mean(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        return self.reduce(tess.MeanOp, x, dims, keepdim)

    def prod(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """The product over `dims`."""
        return self.reduce(tess.ProdOp, x, dims, keepdim)

    def reduce_max(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        return self.reduce(tess.ReduceMaxOp, x, dims, keepdim)

    def max_over(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """The user's max over `dims`: over an empty dim a TessError, as NumPy raises
        (`reduce_max` itself gives its identity there, -inf)."""
        self.check_nonempty("max", x, dims)
        return self.reduce_max(x, dims, keepdim)

    def min_over(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        self.check_nonempty("min", x, dims)
        return self.reduce_min(x, dims, keepdim)

    def check_nonempty(self, name: str, x: SSAValue, dims: DimsLike) -> None:
        shape = shape_of(x)
        if any(shape[d] == 0 for d in normalize_dims(dims, len(shape))):
            raise TessError(f"{name} of an empty dim has no identity: {describe(x)}")

    def reduce_min(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """`-reduce_max(-x)`: tess has no min reduction."""
        if element_type_of(x) == i1:
            x = self.cast(x, i64)
        return self.neg(self.reduce_max(self.neg(x), dims, keepdim))

    def sum_to_shape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """Undo broadcasting (a broadcast's gradient): sum `x` over the dims that a broadcast
        from `shape` added.

        Those are the leading dims `x` has in excess and the dims where `shape` has a 1 that
        was stretched. One `tess.sum` over all of them keeps them only when a stretched 1 is
        among them, and a reshape then drops the leading ones.
        """
        source, target = shape_of(x), tuple(traced_dim(type_dim(d)) for d in shape)
        try:
            fits = broadcast_shapes(source, target) == source
        except ValueError:
            fits = False
        if not fits:
            raise TessError(f"{format_shape(target)} does not broadcast to {format_shape(source)}")
        lead = len(source) - len(target)
        stretched = [lead + i for i, d in enumerate(target) if d == 1 and source[lead + i] != 1]
        dims = [*range(lead), *stretched]
        if not dims:
            return x
        summed = self.sum(x, dims, keepdim=bool(stretched))
        return summed if shape_of(summed) == target else self.reshape(summed, target)

    # -- shape ops -------------------------------------------------------------------------

    def reshape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """A view with the same elements in row-major order; one dim may be -1."""
        source = shape_of(x)
        target = infer_shape(shape, numel(source), source)
        return self.insert(tess.ReshapeOp(x, target))

    def unsqueeze(self, x: SSAValue, dim: int) -> SSAValue:
        """Insert a size-1 dim at `dim` (a reshape)."""
        shape = list(shape_of(x))
        if not -len(shape) - 1 <= dim <= len(shape):
            raise TessError(f"dim {dim} is out of range for unsqueezing {format_shape(shape)}")
        shape.insert(dim % (len(shape) + 1), 1)
        return self.reshape(x, shape)

    def permute(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        """Result dim i is input dim `dims[i]` (negative dims count back)."""
        shape = shape_of(x)
        rank = len(shape)
        perm = [int(d) % rank if rank and -rank <= d < rank else int(d) for d in dims]
        if sorted(perm) != list(range(rank)):
            raise TessError(
                f"dims {list(dims)} are not a permutation of the {rank} dims of "
                f"{format_shape(shape)}"
            )
        return self.insert(tess.PermuteOp(x, perm))

    def transpose(self, x: SSAValue, dim0: int = -2, dim1: int = -1) -> SSAValue:
        """Swap two dims (the last two by default)."""
        rank = len(shape_of(x))
        for d in (dim0, dim1):
            if not -rank <= d < rank:
                raise TessError(f"dim {d} is out of range for a tensor of rank {rank}")
        perm = list(range(rank))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(x, perm)

    def broadcast_to(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        source, target = shape_of(x), tuple(traced_dim(type_dim(d)) for d in shape)
        try:
            fits = broadcast_shapes(source, target) == target
        except ValueError:
            fits = False
        if not fits:
            raise TessError(f"cannot broadcast {format_shape(source)} to {format_shape(target)}")
        return self.insert(tess.BroadcastToOp(x, target))

    def squeeze(self, x: SSAValue, dims: DimsLike = None) -> SSAValue:
        """`x` without its size-1 dims (`dims`: only those, each of size 1)."""
        shape = shape_of(x)
        if dims is None:
            drop = {d for d, n in enumerate(shape) if n == 1}
        else:
            drop = set(normalize_dims(dims, len(shape)))
            for d in drop:
                if shape[d] != 1:
                    raise TessError(f"cannot squeeze dim {d} of size {shape[d]} in {describe(x)}")
        return self.reshape(x, [n for d, n in enumerate(shape) if d not in drop])

    def flatten(self, x: SSAValue, start: int = 0, end: int = -1) -> SSAValue:
        """`x` with dims `start..end` (inclusive) merged into one (all of them by default)."""
        shape = shape_of(x)
        if not shape:
            return self.reshape(x, (1,))
        first, last = self._dim(start, len(shape)), self._dim(end, len(shape))
        if first > last:
            raise TessError(f"flatten: start dim {start} comes after end dim {end}")
        merged = numel(shape[first : last + 1])
        return self.reshape(x, (*shape[:first], merged, *shape[last + 1 :]))

    def _dim(self, dim: int, rank: int) -> int:
        if not isinstance(dim, int | np.integer) or isinstance(dim, bool):
            raise TessError(f"dim must be an int, got {dim!r}")
        if not -rank <= dim < rank:
            raise TessError(f"dim {dim} is out of range for a tensor of rank {rank}")
        return int(dim) % rank

    def stop_gradient(self, x: SSAValue) -> SSAValue:
        """`x`, treated as a constant by `tess-autodiff` (JAX's `stop_gradient`)."""
        return self.insert(tess.StopGradientOp(x))

    # -- functions -------------------------------------------------------------------------

    def ret(self, *values: SSAValue) -> func.ReturnOp:
        op = func.ReturnOp(*values)
        self.builder.insert(op)
        return op


def _number(value: float | int) -> float:
    if isinstance(value, bool | int | float | np.number):
        return float(value)
    raise TessError(f"expected a tensor or a number, got {type(value).__name__}")


# ---------------------------------------------------------------------------------------
# functions and modules
# ---------------------------------------------------------------------------------------

Body: TypeAlias = Callable[..., SSAValue | Sequence[SSAValue]]


def build_function(
    name: str,
    input_types: Sequence[Attribute],
    body: Body,
    arg_names: Sequence[str | None] | None = None,
) -> func.FuncOp:
    """`func.func @name` whose body is `body(builder, *args)`; its results are returned."""
    block = Block(arg_types=input_types)
    for arg, arg_name in zip(block.args, arg_names or (), strict=False):
        if arg_name is not None and SSAValue.is_valid_name(arg_name):
            arg.name_hint = arg_name
    builder = TessBuilder.at_end(block)
    results = body(builder, *block.args)
    outputs = [results] if isinstance(results, SSAValue) else list(results)
    builder.ret(*outputs)
    return finish_function(name, block)


def finish_function(name: str, block: Block) -> func.FuncOp:
    """Wrap a block that ends in `func.return` into a `func.func` with the matching type."""
    terminator = block.last_op
    assert isinstance(terminator, func.ReturnOp), "the block must end in func.return"
    input_types = [arg.type for arg in block.args]
    output_types = [value.type for value in terminator.arguments]
    return func.FuncOp(name, (input_types, output_types), Region(block))


def build_module(functions: Iterable[func.FuncOp] | func.FuncOp) -> ModuleOp:
    ops = [functions] if isinstance(functions, func.FuncOp) else list(functions)
    module = ModuleOp(ops)
    module.verify()
    return module


__all__ = [
    "Body",
    "TessBuilder",
    "build_function",
    "build_module",
    "finish_function",
]
