"""
The elementwise `tess` ops: map (unary: `neg exp log relu sigmoid tanh sqrt reciprocal abs
sin cos erf floor ceil round stop_gradient`), zip (binary with broadcasting: `add sub mul
div max min pow` and the comparisons `lt gt eq`; on integers only, the bit operations `xor
or shl shru`), `cast` and `iota` (each element's row-major index: with the bit operations,
the counter-based random numbers of `tessc.random` are computed inside the kernel that
uses them).

Their results have their operands' broadcast shape, so they are one family for the fusion
passes (`PatternKind.ELEMENTWISE`); the dialect's namespace is `tess.py`.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from xdsl.dialects.builtin import IntegerType, TensorType, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import VarConstraint, base, irdl_op_definition, operand_def, result_def
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.tess_base import (
    Elements,
    PatternKind,
    TessOp,
    broadcast_shapes,
    check_float_tensors,
    check_result_shape,
    check_same_elements,
    check_tensor_type,
    element_type_of,
    inferred_shape,
    is_bool,
    is_integer,
    result_tensor,
    tensor_shape,
)

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
        check_float_tensors(self, self.ELEMENTS)


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
        super().__init__(
            operands=[lhs, rhs], result_types=[result_tensor(shape, element_type_of(lhs))]
        )

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        lhs, rhs = tensor_shape(self.lhs), tensor_shape(self.rhs)
        check_result_shape(self, inferred_shape(self, broadcast_shapes, lhs, rhs))


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
        super(BinaryOp, self).__init__(
            operands=[lhs, rhs], result_types=[result_tensor(shape, element)]
        )

    def verify_(self) -> None:
        operand_type = check_same_elements(self, [self.lhs, self.rhs], self.ELEMENTS)
        result_type = check_tensor_type(self, self.result.type, Elements.ANY)
        if result_type != operand_type and not is_bool(result_type):
            raise VerifyException(
                f"'{self.name}' result element type {result_type} is neither i1 nor the "
                f"operands' {operand_type}"
            )
        lhs, rhs = tensor_shape(self.lhs), tensor_shape(self.rhs)
        check_result_shape(self, inferred_shape(self, broadcast_shapes, lhs, rhs))


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
            operands=[input], result_types=[result_tensor(tensor_shape(input), element_type)]
        )

    def verify_(self) -> None:
        check_tensor_type(self, self.input.type, Elements.ANY)
        check_tensor_type(self, self.result.type, Elements.ANY)
        check_result_shape(self, tensor_shape(self.input))


@irdl_op_definition
class BitcastOp(TessOp):
    """Each element's bits reinterpreted as another type of the same width (as
    `jax.lax.bitcast_convert_type`, NumPy's `view`): `tess.bitcast %x : tensor<3xbf16> ->
    tensor<3xi16>`; f32/i32, f64/i64, and bf16/f16/i16 share their widths."""

    name = "tess.bitcast"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.ELEMENTWISE
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element_type: Attribute):
        input = SSAValue.get(input)
        super().__init__(
            operands=[input], result_types=[result_tensor(tensor_shape(input), element_type)]
        )

    def verify_(self) -> None:
        source = check_tensor_type(self, self.input.type, Elements.NUMBER)
        target = check_tensor_type(self, self.result.type, Elements.NUMBER)
        check_result_shape(self, tensor_shape(self.input))
        if element_width(source) != element_width(target):
            raise VerifyException(
                f"'{self.name}' reinterprets bits of one width: {source} is "
                f"{element_width(source)} bits, {target} {element_width(target)}"
            )


def element_width(typ: Attribute) -> int:
    """The bits of a float or integer element type."""
    return typ.width.data if isinstance(typ, IntegerType) else typ.bitwidth  # type: ignore[attr-defined]


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


@irdl_op_definition
class ErfOp(UnaryOp):
    """The error function `2/sqrt(pi) * integral_0^x exp(-t^2) dt` (`math.erf`), which the
    exact GELU needs."""

    name = "tess.erf"


@irdl_op_definition
class FloorOp(UnaryOp):
    """The largest integral value not above the input (`math.floor`; zero gradient)."""

    name = "tess.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """The smallest integral value not below the input (`math.ceil`; zero gradient)."""

    name = "tess.ceil"


@irdl_op_definition
class RoundOp(UnaryOp):
    """The nearest integral value, halves to even as NumPy's `round` (`math.roundeven`;
    zero gradient)."""

    name = "tess.round"


# ---------------------------------------------------------------------------------------
# integer bit operations and iota: the counter-based RNG's building blocks
# ---------------------------------------------------------------------------------------


class BitwiseOp(BinaryOp, abc.ABC):
    """A bit operation on i32/i64 (two's complement; a shift count is in [0, width))."""

    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    def verify_(self) -> None:
        super().verify_()
        if not is_integer(element_type_of(self.lhs)):
            raise VerifyException(f"'{self.name}' expects i32 or i64 elements, got {self.lhs.type}")


@irdl_op_definition
class XOrOp(BitwiseOp):
    name = "tess.xor"


@irdl_op_definition
class OrOp(BitwiseOp):
    name = "tess.or"


@irdl_op_definition
class ShLOp(BitwiseOp):
    """Shift left; bits shifted out are lost (arith.shli)."""

    name = "tess.shl"


@irdl_op_definition
class ShRUOp(BitwiseOp):
    """Logical shift right: zeros shifted in, whatever the sign bit (arith.shrui)."""

    name = "tess.shru"


@irdl_op_definition
class IotaOp(TessOp):
    """Each element's row-major linear index: `tess.iota : tensor<2x3xi32>` is
    `[[0, 1, 2], [3, 4, 5]]` (what a counter-based generator counts)."""

    name = "tess.iota"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.ELEMENTWISE
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    result = result_def(TensorType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, result_type: TensorType):
        super().__init__(result_types=[result_type])

    def verify_(self) -> None:
        element = check_tensor_type(self, self.result.type, Elements.NUMBER)
        if not is_integer(element):
            raise VerifyException(f"'{self.name}' expects i32 or i64 elements, got {element}")
