"""
The one builder of `tess` IR: a thin layer over xDSL's `Builder`.

`TessBuilder` inserts `tess` ops at an `InsertPoint` and returns the result `SSAValue` of
each, so a program reads like the math it builds:

    def body(b: TessBuilder, x: SSAValue, w: SSAValue) -> SSAValue:
        return b.sum(b.relu(b.matmul(x, w)), dims=1)

    module = build_module(build_function("f", [tensor_type((4, 3)), tensor_type((3, 2))], body))

Every client builds `tess` through this class: both frontends (the `Tensor` tracer and the
`.tess` language, which is why they print identical IR for the same program) and the
autodiff pass, whose VJP rules build through `GradEmitter` (`tessc.lowering.vjp_rules`), a
subclass that also folds trivial gradient terms as it builds them. It lives with the
dialect, below both, because it needs only xDSL and `tess`.

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Self, TypeAlias

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    ModuleOp,
    TensorType,
    f32,
    f64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from tessc.dialects import tess
from tessc.dialects.tess import broadcast_shapes, format_shape, matmul_shape

Shape: TypeAlias = tuple[int, ...]
FloatType: TypeAlias = Float32Type | Float64Type
Operand: TypeAlias = SSAValue | float | int
DimsLike: TypeAlias = int | Sequence[int] | None
DTypeLike: TypeAlias = str | type | np.dtype | Float32Type | Float64Type


class TessError(ValueError):
    """An operation that cannot be built: its shapes or dtypes do not fit (`tessc.TessError`,
    which the frontends report at the user's line)."""


# ---------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------

_DTYPE_NAMES: dict[str, FloatType] = {
    "f32": f32,
    "float32": f32,
    "f64": f64,
    "float64": f64,
}


def element_type(dtype: DTypeLike) -> FloatType:
    """`f32`/`f64` from "f32", "float64", `np.float32`, a NumPy dtype or an xDSL type."""
    if isinstance(dtype, Float32Type | Float64Type):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise TessError(f"unsupported dtype {name}: tessc computes in float32 and float64")


def numpy_dtype(dtype: DTypeLike) -> np.dtype:
    return np.dtype(np.float32 if isinstance(element_type(dtype), Float32Type) else np.float64)


def dtype_name(dtype: DTypeLike) -> str:
    """The short name used in diagnostics and `.tess` types: "f32" or "f64"."""
    return "f32" if isinstance(element_type(dtype), Float32Type) else "f64"


def tensor_type(shape: Sequence[int], dtype: DTypeLike = "f32") -> TensorType:
    return TensorType(element_type(dtype), [int(d) for d in shape])


def shape_of(value: SSAValue) -> Shape:
    typ = value.type
    assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
    return tuple(typ.get_shape())


def element_type_of(value: SSAValue) -> Attribute:
    """The element type of a tensor value (f32, f64, or an integer or bool type)."""
    typ = value.type
    assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
    return typ.element_type


def describe(value: SSAValue) -> str:
    """`f32(3,4)`: a tensor's dtype and shape, as diagnostics name it."""
    element = element_type_of(value)
    name = dtype_name(element) if isinstance(element, Float32Type | Float64Type) else str(element)
    return f"{name}{format_shape(shape_of(value))}"


def numel(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def normalize_dims(dims: DimsLike, rank: int) -> tuple[int, ...]:
    """Reduction dims as a sorted tuple of non-negative ints; `None` means every dim."""
    if dims is None:
        return tuple(range(rank))
    dim_list = [dims] if isinstance(dims, int) else list(dims)
    normalized: list[int] = []
    for d in dim_list:
        if not isinstance(d, int | np.integer) or isinstance(d, bool):
            raise TessError(f"dims must be ints, got {d!r}")
        if not -rank <= d < rank:
            raise TessError(f"dim {d} is out of range for a tensor of rank {rank}")
        normalized.append(int(d) % rank if rank else int(d))
    if len(set(normalized)) != len(normalized):
        raise TessError(f"dims {dim_list} name a dim twice")
    return tuple(sorted(normalized))


def infer_shape(shape: Sequence[int], total: int, source: Shape) -> Shape:
    """A reshape target with at most one -1 filled in from the element count."""
    sizes = [int(d) for d in shape]
    unknown = [i for i, d in enumerate(sizes) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in sizes):
        raise TessError(f"invalid reshape target {format_shape(sizes)}")
    if unknown:
        known = numel([d for d in sizes if d != -1])
        if known == 0 or total % known:
            raise TessError(
                f"cannot reshape {format_shape(source)} ({total} elements) to {format_shape(sizes)}"
            )
        sizes[unknown[0]] = total // known
    if numel(sizes) != total:
        raise TessError(
            f"cannot reshape {format_shape(source)} ({total} elements) to "
            f"{format_shape(sizes)} ({numel(sizes)} elements)"
        )
    return tuple(sizes)


# ---------------------------------------------------------------------------------------
# the builder
# ---------------------------------------------------------------------------------------


class TessBuilder:
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
        return self.insert(tess.FillOp(float(value), TensorType(typ.element_type, list(dims))))

    def zeros_like(self, like: SSAValue) -> SSAValue:
        return self.full_like(like, 0.0)

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A splat of `value` in `like`'s dtype that broadcasts against `like`: here a rank-0
        tensor. (Numbers given as operands become these.)"""
        return self.fill(value, (), element_type_of(like))

    def _operands(self, *operands: Operand) -> list[SSAValue]:
        """SSAValues for `operands`, numbers becoming rank-0 fills of the tensors' dtype."""
        tensors = [v for v in operands if isinstance(v, SSAValue)]
        if not tensors:
            raise TessError("at least one operand must be a tensor")
        dtypes = {element_type_of(v) for v in tensors}
        if len(dtypes) > 1:
            names = " and ".join(describe(v) for v in tensors)
            raise TessError(f"dtype mismatch: {names}")
        like = tensors[0]
        return [v if isinstance(v, SSAValue) else self.scalar(_number(v), like) for v in operands]

    # -- map: unary elementwise ------------------------------------------------------------

    def unary(self, op: type[tess.UnaryOp], x: SSAValue) -> SSAValue:
        """`op(x)`: every map is built here."""
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

    def reciprocal(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.ReciprocalOp, x)

    def abs(self, x: SSAValue) -> SSAValue:
        return self.unary(tess.AbsOp, x)

    # -- zip: binary elementwise with broadcasting -----------------------------------------

    def binary(self, op: type[tess.BinaryOp], lhs: Operand, rhs: Operand) -> SSAValue:
        """`op(lhs, rhs)`, broadcasting: every zip is built here."""
        lhs_value, rhs_value = self._operands(lhs, rhs)
        self.check_broadcast(lhs_value, rhs_value)
        return self.insert(op(lhs_value, rhs_value))

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
        return self.binary(tess.LtOp, lhs, rhs)

    def gt(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.GtOp, lhs, rhs)

    def eq(self, lhs: Operand, rhs: Operand) -> SSAValue:
        return self.binary(tess.EqOp, lhs, rhs)

    def le(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """`max(lt, eq)`: unlike `1 - gt` it stays 0 when an operand is NaN."""
        lhs_value, rhs_value = self._operands(lhs, rhs)
        return self.maximum(self.lt(lhs_value, rhs_value), self.eq(lhs_value, rhs_value))

    def ge(self, lhs: Operand, rhs: Operand) -> SSAValue:
        lhs_value, rhs_value = self._operands(lhs, rhs)
        return self.maximum(self.gt(lhs_value, rhs_value), self.eq(lhs_value, rhs_value))

    def ne(self, lhs: Operand, rhs: Operand) -> SSAValue:
        """`1 - eq`, which is 1 for NaN as IEEE `!=` is."""
        equal = self.eq(lhs, rhs)
        return self.sub(1.0, equal)

    # -- select, matmul --------------------------------------------------------------------

    def select(self, cond: Operand, lhs: Operand, rhs: Operand) -> SSAValue:
        """`where(cond != 0, lhs, rhs)`, broadcasting all three. A tensor `cond` may have any
        dtype (a bool tensor, a 0/1 mask); the branches must agree on theirs."""
        if isinstance(cond, SSAValue) and not all(_is_number(v) for v in (lhs, rhs)):
            values = [cond, *self._operands(lhs, rhs)]
        else:
            values = self._operands(cond, lhs, rhs)
        self.check_broadcast(*values)
        return self.insert(tess.SelectOp(*values))

    where = select

    def matmul(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        lhs_value, rhs_value = self._operands(lhs, rhs)
        try:
            matmul_shape(shape_of(lhs_value), shape_of(rhs_value))
        except ValueError as e:
            raise TessError(str(e)) from None
        return self.insert(tess.MatmulOp(lhs_value, rhs_value))

    # -- reductions ------------------------------------------------------------------------

    def reduce(
        self, op: type[tess.ReduceOp], x: SSAValue, dims: DimsLike, keepdim: bool
    ) -> SSAValue:
        """`op` over `dims` of `x`: every reduction is built here."""
        return self.insert(op(x, normalize_dims(dims, len(shape_of(x))), bool(keepdim)))

    def sum(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """Sum over `dims` (an int, a sequence, or None for all; negative dims count back)."""
        return self.reduce(tess.SumOp, x, dims, keepdim)

    def mean(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        return self.reduce(tess.MeanOp, x, dims, keepdim)

    def reduce_max(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        return self.reduce(tess.ReduceMaxOp, x, dims, keepdim)

    def reduce_min(self, x: SSAValue, dims: DimsLike = None, keepdim: bool = False) -> SSAValue:
        """`-reduce_max(-x)`: tess has no min reduction."""
        return self.neg(self.reduce_max(self.neg(x), dims, keepdim))

    def sum_to_shape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """Undo broadcasting (a broadcast's gradient): sum `x` over the dims that a broadcast
        from `shape` added.

        Those are the leading dims `x` has in excess and the dims where `shape` has a 1 that
        was stretched. One `tess.sum` over all of them keeps them only when a stretched 1 is
        among them, and a reshape then drops the leading ones.
        """
        source, target = shape_of(x), tuple(int(d) for d in shape)
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
        source, target = shape_of(x), tuple(int(d) for d in shape)
        try:
            fits = broadcast_shapes(source, target) == target
        except ValueError:
            fits = False
        if not fits:
            raise TessError(f"cannot broadcast {format_shape(source)} to {format_shape(target)}")
        return self.insert(tess.BroadcastToOp(x, target))

    # -- functions -------------------------------------------------------------------------

    def ret(self, *values: SSAValue) -> func.ReturnOp:
        op = func.ReturnOp(*values)
        self.builder.insert(op)
        return op


def _is_number(value: Operand) -> bool:
    return not isinstance(value, SSAValue)


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
    "TessBuilder",
    "TessError",
    "build_function",
    "build_module",
    "describe",
    "dtype_name",
    "element_type",
    "element_type_of",
    "finish_function",
    "normalize_dims",
    "numpy_dtype",
    "shape_of",
    "tensor_type",
]
