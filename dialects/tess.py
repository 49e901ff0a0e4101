"""
The `tess` dialect: value-semantics tensor operations with NumPy/minitorch broadcasting.

`tess` is the top level of tessc. Every op works on builtin `tensor<...>` types with static
shapes, of `f32`/`f64` (floats), `i32`/`i64` (integers) or `i1` (bool); which element types
an op takes is its `ELEMENTS` class (floats only for the transcendental maps, division,
`pow`, `mean` and `matmul`; numbers for `add sub mul max min neg abs sum reduce_max`; any
for the shape ops, `fill` and `select`'s values). Operands and results share one element
type except where an op says otherwise (comparisons, `select`'s condition, `cast`). Every
op's verifier infers its result shape and checks it against the declared one, so a shape
error is a located diagnostic rather than a wrong answer later.

The op families follow minitorch:

- map (unary, elementwise): `neg exp log relu sigmoid tanh sqrt reciprocal abs sin cos`;
- zip (binary, broadcasting): `add sub mul div max min pow` and the comparisons
  `lt gt eq`, whose result is `i1` (a bool tensor, what the front builds) or 0/1 in the
  operand dtype (a mask, what the VJP rules multiply with);
- `cast`: elementwise conversion between any two element types (NumPy's `astype`);
- reduce: `sum max mean prod` over a list of dims, keeping them as size 1 with `keepdim`;
- shape: `reshape` (a view), `permute`, `broadcast_to`, `fill` (a splat constant);
- `select` (where), broadcasting its three operands;
- `matmul`: 2-D and batched, broadcasting over the batch dims.

Broadcasting follows the three seed rules: a size-1 dim broadcasts with anything, a shorter
shape is padded with leading 1s, and everything else must match.

Indexing ops (gather, one-hot, arg-reductions, slices, concatenation) live in
`tessc.dialects.tess_index`, registered in the same `Tess` dialect.

Each op carries a `PATTERN_KIND` (TVM's FuseOps classification) for the fusion passes.
xDSL has no tensor dialect with implicit broadcasting, hence this one.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from enum import Enum
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerType,
    NoneAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

Shape = tuple[int, ...]


class PatternKind(Enum):
    """How an op composes under fusion, after TVM's `OpPatternKind` (smaller fuses more)."""

    ELEMENTWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    MATMUL = 4  # "out-elemwise-fusable": takes an elementwise epilogue
    OPAQUE = 8


def format_shape(shape: Sequence[int]) -> str:
    """`(3,4,1)` — the notation of the seeds, used in every shape diagnostic."""
    return "(" + ",".join(str(d) for d in shape) + ")"


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """The broadcast of `shapes` by the seed rules; raises ValueError naming the shapes."""
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    result: list[int] = []
    for dims in zip(*padded, strict=True):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            names = " and ".join(format_shape(s) for s in shapes)
            raise ValueError(f"shapes {names} are not broadcastable")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> Shape:
    """The shape after reducing `dims`; raises ValueError on a bad dim list."""
    rank = len(shape)
    if len(set(dims)) != len(dims):
        raise ValueError(f"reduction dims {list(dims)} contain duplicates")
    for d in dims:
        if not 0 <= d < rank:
            raise ValueError(f"reduction dim {d} is out of range for shape {format_shape(shape)}")
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def matmul_shape(lhs: Sequence[int], rhs: Sequence[int]) -> Shape:
    """`(..., n, k) @ (..., k, m) -> (..., n, m)` with broadcast batch dims."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise ValueError(
            f"matmul needs operands of rank >= 2, got {format_shape(lhs)} and {format_shape(rhs)}"
        )
    if lhs[-1] != rhs[-2]:
        raise ValueError(
            f"matmul contraction mismatch: {format_shape(lhs)} and {format_shape(rhs)} "
            f"({lhs[-1]} != {rhs[-2]})"
        )
    try:
        batch = broadcast_shapes(lhs[:-2], rhs[:-2])
    except ValueError:
        raise ValueError(
            f"matmul batch dims of {format_shape(lhs)} and {format_shape(rhs)} "
            "are not broadcastable"
        ) from None
    return (*batch, lhs[-2], rhs[-1])


def tensor_shape(value: SSAValue | Attribute) -> Shape:
    typ = value.type if isinstance(value, SSAValue) else value
    assert isinstance(typ, TensorType)
    return tuple(typ.get_shape())


class Elements(Enum):
    """Which element types an op takes."""

    FLOAT = "f32 or f64"
    NUMBER = "f32, f64, i32 or i64"
    ANY = "f32, f64, i32, i64 or i1"


def is_float(typ: Attribute) -> bool:
    return isinstance(typ, Float32Type | Float64Type)


def is_bool(typ: Attribute) -> bool:
    return isinstance(typ, IntegerType) and typ.width.data == 1


def is_integer(typ: Attribute) -> bool:
    """`i32`/`i64` (not `i1`, which is bool)."""
    return isinstance(typ, IntegerType) and typ.width.data in (32, 64)


def element_allowed(typ: Attribute, elements: Elements) -> bool:
    if elements is Elements.FLOAT:
        return is_float(typ)
    if elements is Elements.NUMBER:
        return is_float(typ) or is_integer(typ)
    return is_float(typ) or is_integer(typ) or is_bool(typ)


def check_tensor_type(op: Operation, typ: Attribute, elements: Elements) -> Attribute:
    """`typ` is a static, encoding-free tensor of an allowed element type; its element type."""
    if not isinstance(typ, TensorType):
        raise VerifyException(f"'{op.name}' expects tensor types, got {typ}")
    if not element_allowed(typ.element_type, elements):
        raise VerifyException(f"'{op.name}' expects {elements.value} elements, got {typ}")
    if any(d < 0 for d in typ.get_shape()):
        raise VerifyException(f"'{op.name}' expects static shapes, got {typ}")
    if typ.encoding != NoneAttr():
        # Every lowering assumes a dense row-major tensor; an encoding would be dropped.
        raise VerifyException(f"'{op.name}' expects tensors without an encoding, got {typ}")
    return typ.element_type


def check_same_elements(
    op: Operation, values: Sequence[SSAValue], elements: Elements = Elements.FLOAT
) -> Attribute:
    """`values` are static tensors of one allowed element type; that type."""
    element_types = {check_tensor_type(op, v.type, elements) for v in values}
    if len(element_types) > 1:
        names = ", ".join(sorted(str(t) for t in element_types))
        raise VerifyException(f"'{op.name}' mixes element types {names}")
    return element_types.pop()


def _check_float_tensors(op: Operation, elements: Elements = Elements.FLOAT) -> Attribute:
    """All operands and results are static tensors of one element type in `elements`."""
    return check_same_elements(op, [*op.operands, *op.results], elements)


def _check_result_shape(op: Operation, expected: Shape) -> None:
    actual = tensor_shape(op.results[0])
    if actual != expected:
        raise VerifyException(
            f"'{op.name}' result shape {format_shape(actual)} does not match the "
            f"inferred shape {format_shape(expected)}"
        )


def _tensor(shape: Sequence[int], element_type: Attribute) -> TensorType:
    return TensorType(element_type, shape)


def element_type_of(value: SSAValue) -> Attribute:
    """The element type of a tensor value (f32, f64, or an integer or bool type)."""
    typ = value.type
    assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
    return typ.element_type


class TessOp(IRDLOperation, abc.ABC):
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE
    ELEMENTS: ClassVar[Elements] = Elements.FLOAT

    traits = traits_def(Pure())


# ---------------------------------------------------------------------------------------
# map: unary elementwise
# ---------------------------------------------------------------------------------------


class UnaryOp(TessOp, abc.ABC):
    """`%y = tess.exp %x : tensor<3x4xf32>` — same type in and out."""

    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.ELEMENTWISE
    T: ClassVar = VarConstraint("T", base(TensorType))

    input = operand_def(T)
    result = result_def(T)

    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation):
        input = SSAValue.get(input)
        super().__init__(operands=[input], result_types=[input.type])

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)


@irdl_op_definition
class NegOp(UnaryOp):
    name = "tess.neg"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "tess.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "tess.log"


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "tess.relu"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    name = "tess.sigmoid"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "tess.tanh"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "tess.sqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    name = "tess.reciprocal"


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "tess.abs"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


# ---------------------------------------------------------------------------------------
# zip: binary elementwise with broadcasting
# ---------------------------------------------------------------------------------------


class BinaryOp(TessOp, abc.ABC):
    """`%z = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>`."""

    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.BROADCAST

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = broadcast_shapes(tensor_shape(lhs), tensor_shape(rhs))
        super().__init__(operands=[lhs, rhs], result_types=[_tensor(shape, element_type_of(lhs))])

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        try:
            shape = broadcast_shapes(tensor_shape(self.lhs), tensor_shape(self.rhs))
        except ValueError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        _check_result_shape(self, shape)


@irdl_op_definition
class AddOp(BinaryOp):
    name = "tess.add"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class SubOp(BinaryOp):
    name = "tess.sub"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class MulOp(BinaryOp):
    name = "tess.mul"
    ELEMENTS: ClassVar[Elements] = Elements.ANY


@irdl_op_definition
class DivOp(BinaryOp):
    name = "tess.div"


@irdl_op_definition
class MaxOp(BinaryOp):
    name = "tess.max"
    ELEMENTS: ClassVar[Elements] = Elements.ANY


@irdl_op_definition
class MinOp(BinaryOp):
    name = "tess.min"
    ELEMENTS: ClassVar[Elements] = Elements.ANY


@irdl_op_definition
class PowOp(BinaryOp):
    name = "tess.pow"


class CompareOp(BinaryOp, abc.ABC):
    """A comparison: `i1` where it holds (a bool tensor), or 1/0 in the operand dtype
    (a mask) when the result has the operands' element type.

    `tess.lt %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>`.
    """

    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, bool_result: bool = False
    ):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = broadcast_shapes(tensor_shape(lhs), tensor_shape(rhs))
        element = i1 if bool_result else element_type_of(lhs)
        super(BinaryOp, self).__init__(operands=[lhs, rhs], result_types=[_tensor(shape, element)])

    def verify_(self) -> None:
        operand_type = check_same_elements(self, [self.lhs, self.rhs], self.ELEMENTS)
        result_type = check_tensor_type(self, self.result.type, Elements.ANY)
        if result_type != operand_type and not is_bool(result_type):
            raise VerifyException(
                f"'{self.name}' result element type {result_type} is neither i1 nor the "
                f"operands' {operand_type}"
            )
        try:
            shape = broadcast_shapes(tensor_shape(self.lhs), tensor_shape(self.rhs))
        except ValueError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        _check_result_shape(self, shape)


@irdl_op_definition
class LtOp(CompareOp):
    name = "tess.lt"


@irdl_op_definition
class GtOp(CompareOp):
    name = "tess.gt"


@irdl_op_definition
class EqOp(CompareOp):
    name = "tess.eq"
    ELEMENTS: ClassVar[Elements] = Elements.ANY


@irdl_op_definition
class CastOp(TessOp):
    """Elementwise conversion, as NumPy's `astype`: `tess.cast %x : tensor<3xf32> ->
    tensor<3xi64>`. Float to integer truncates toward zero; anything to `i1` is `!= 0`;
    `i1` to a number is 0/1."""

    name = "tess.cast"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.ELEMENTWISE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element_type: Attribute):
        input = SSAValue.get(input)
        super().__init__(
            operands=[input], result_types=[_tensor(tensor_shape(input), element_type)]
        )

    def verify_(self) -> None:
        check_tensor_type(self, self.input.type, Elements.ANY)
        check_tensor_type(self, self.result.type, Elements.ANY)
        _check_result_shape(self, tensor_shape(self.input))


@irdl_op_definition
class SinOp(UnaryOp):
    name = "tess.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    name = "tess.cos"


@irdl_op_definition
class StopGradientOp(UnaryOp):
    """The identity, with a zero gradient (JAX's `stop_gradient`): `tess-to-linalg` drops
    it; `tess-autodiff` treats its result as a constant (a stable softmax's max)."""

    name = "tess.stop_gradient"
    ELEMENTS: ClassVar[Elements] = Elements.ANY


# ---------------------------------------------------------------------------------------
# reduce
# ---------------------------------------------------------------------------------------


class ReduceOp(TessOp, abc.ABC):
    """`%s = tess.sum %x dims = [1] keepdim : tensor<3x4xf32> -> tensor<3x1xf32>`."""

    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.REDUCTION

    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    assembly_format = (
        "$input `dims` `=` $dims (`keepdim` $keepdim^)? attr-dict "
        "`:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, dims: Sequence[int], keepdim: bool = False):
        input = SSAValue.get(input)
        shape = reduced_shape(tensor_shape(input), dims, keepdim)
        super().__init__(
            operands=[input],
            properties={
                "dims": DenseArrayBase.from_list(i64, list(dims)),
                "keepdim": UnitAttr() if keepdim else None,
            },
            result_types=[_tensor(shape, element_type_of(input))],
        )

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    @property
    def keeps_dims(self) -> bool:
        return self.keepdim is not None

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        try:
            shape = reduced_shape(tensor_shape(self.input), self.reduced_dims, self.keeps_dims)
        except ValueError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        _check_result_shape(self, shape)


@irdl_op_definition
class SumOp(ReduceOp):
    name = "tess.sum"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "tess.reduce_max"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class ProdOp(ReduceOp):
    """The product over `dims` (1 over an empty dim)."""

    name = "tess.prod"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER


@irdl_op_definition
class MeanOp(ReduceOp):
    name = "tess.mean"


# ---------------------------------------------------------------------------------------
# shape ops, constants, select
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ReshapeOp(TessOp):
    """A view with the same elements in row-major order: `tensor<3x4xf32> -> tensor<12xf32>`."""

    name = "tess.reshape"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.INJECTIVE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        input = SSAValue.get(input)
        super().__init__(operands=[input], result_types=[_tensor(shape, element_type_of(input))])

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        src, dst = tensor_shape(self.input), tensor_shape(self.result)
        if _numel(src) != _numel(dst):
            raise VerifyException(
                f"'{self.name}' cannot reshape {format_shape(src)} ({_numel(src)} elements) "
                f"to {format_shape(dst)} ({_numel(dst)} elements)"
            )


@irdl_op_definition
class PermuteOp(TessOp):
    """`%t = tess.permute %x dims = [1, 0]`: result dim i is input dim dims[i]."""

    name = "tess.permute"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.INJECTIVE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    assembly_format = "$input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, dims: Sequence[int]):
        input = SSAValue.get(input)
        shape = tensor_shape(input)
        super().__init__(
            operands=[input],
            properties={"dims": DenseArrayBase.from_list(i64, list(dims))},
            result_types=[_tensor([shape[d] for d in dims], element_type_of(input))],
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        shape, perm = tensor_shape(self.input), self.permutation
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(
                f"'{self.name}' dims {list(perm)} are not a permutation of the "
                f"{len(shape)} dims of {format_shape(shape)}"
            )
        _check_result_shape(self, tuple(shape[d] for d in perm))


@irdl_op_definition
class BroadcastToOp(TessOp):
    """Broadcast to an explicit shape by the seed rules: `tensor<3x1xf32> -> tensor<2x3x4xf32>`."""

    name = "tess.broadcast_to"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.BROADCAST
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        input = SSAValue.get(input)
        super().__init__(operands=[input], result_types=[_tensor(shape, element_type_of(input))])

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        src, dst = tensor_shape(self.input), tensor_shape(self.result)
        try:
            shape = broadcast_shapes(src, dst)
        except ValueError:
            shape = None
        if shape != dst:
            raise VerifyException(
                f"'{self.name}' cannot broadcast {format_shape(src)} to {format_shape(dst)}"
            )


@irdl_op_definition
class FillOp(TessOp):
    """A tensor with every element equal to `value`: `tess.fill 5.0e-01 : tensor<3xf32>`."""

    name = "tess.fill"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.ELEMENTWISE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    value = prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    assembly_format = "$value attr-dict `:` type($result)"

    def __init__(self, value: float, type: TensorType):
        super().__init__(properties={"value": FloatAttr(value, f64)}, result_types=[type])

    @property
    def fill_value(self) -> float:
        return float(self.value.value.data)

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)


@irdl_op_definition
class SelectOp(TessOp):
    """`where(cond != 0, lhs, rhs)`, broadcasting all three operands; `cond` may have any
    element type (an `i1` bool tensor, or a 0/1 mask)."""

    name = "tess.select"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.BROADCAST

    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) "
        "`->` type($result)"
    )

    def __init__(
        self,
        cond: SSAValue | Operation,
        lhs: SSAValue | Operation,
        rhs: SSAValue | Operation,
    ):
        cond, lhs, rhs = SSAValue.get(cond), SSAValue.get(lhs), SSAValue.get(rhs)
        shape = broadcast_shapes(tensor_shape(cond), tensor_shape(lhs), tensor_shape(rhs))
        super().__init__(
            operands=[cond, lhs, rhs], result_types=[_tensor(shape, element_type_of(lhs))]
        )

    def verify_(self) -> None:
        check_tensor_type(self, self.cond.type, Elements.ANY)
        check_same_elements(self, [self.lhs, self.rhs, self.result], Elements.ANY)
        shapes = (tensor_shape(self.cond), tensor_shape(self.lhs), tensor_shape(self.rhs))
        try:
            shape = broadcast_shapes(*shapes)
        except ValueError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        _check_result_shape(self, shape)


@irdl_op_definition
class MatmulOp(TessOp):
    """`(..., n, k) @ (..., k, m) -> (..., n, m)`, batch dims broadcast by the seed rules."""

    name = "tess.matmul"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.MATMUL

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = matmul_shape(tensor_shape(lhs), tensor_shape(rhs))
        super().__init__(operands=[lhs, rhs], result_types=[_tensor(shape, element_type_of(lhs))])

    def verify_(self) -> None:
        _check_float_tensors(self, self.ELEMENTS)
        try:
            shape = matmul_shape(tensor_shape(self.lhs), tensor_shape(self.rhs))
        except ValueError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        _check_result_shape(self, shape)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


UNARY_OPS: tuple[type[UnaryOp], ...] = (
    NegOp, ExpOp, LogOp, ReluOp, SigmoidOp, TanhOp, SqrtOp, ReciprocalOp, AbsOp, SinOp, CosOp,
)  # fmt: skip
BINARY_OPS: tuple[type[BinaryOp], ...] = (
    AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, LtOp, GtOp, EqOp,
)  # fmt: skip
COMPARE_OPS: tuple[type[CompareOp], ...] = (LtOp, GtOp, EqOp)
REDUCE_OPS: tuple[type[ReduceOp], ...] = (SumOp, ReduceMaxOp, MeanOp)

CORE_OPS: tuple[type[TessOp], ...] = (
    *UNARY_OPS, *BINARY_OPS, *REDUCE_OPS,
    ReshapeOp, PermuteOp, BroadcastToOp, FillOp, SelectOp, MatmulOp, CastOp, StopGradientOp,
    ProdOp,  # not in REDUCE_OPS: random programs keep to sums, means and maxima
)  # fmt: skip


def __getattr__(name: str) -> Dialect:
    """`Tess`, the dialect, with the ops of `tessc.dialects.tess_index` too: built on first
    use, because that module's ops derive from the classes above (PEP 562)."""
    if name != "Tess":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tessc.dialects.tess_index import INDEX_OPS

    dialect = Dialect("tess", [*CORE_OPS, *INDEX_OPS])
    globals()["Tess"] = dialect
    return dialect


__all__ = [
    "Elements",
    "PatternKind",
    "Tess",  # noqa: F822 (made on first use by the module's __getattr__)
    "broadcast_shapes",
    "element_type_of",
    "format_shape",
    "matmul_shape",
    "reduced_shape",
]
