"""
The `tess` ops whose result shape is not their operands' broadcast: the reductions (`sum
max mean prod` over dims), the shape ops (`reshape permute broadcast_to`), `fill`, `select`
and `matmul`.

Each verifier infers the result shape from the operands and properties and checks it
against the declared type; the dialect's namespace is `tess.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    TensorType,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_prop_def, prop_def, result_def
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
    format_shape,
    inferred_shape,
    matmul_shape,
    reduced_shape,
    result_tensor,
    tensor_shape,
)

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
            result_types=[result_tensor(shape, element_type_of(input))],
        )

    @property
    def reduced_dims(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    @property
    def keeps_dims(self) -> bool:
        return self.keepdim is not None

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        source = tensor_shape(self.input)
        shape = inferred_shape(self, reduced_shape, source, self.reduced_dims, self.keeps_dims)
        check_result_shape(self, shape)


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
        super().__init__(
            operands=[input], result_types=[result_tensor(shape, element_type_of(input))]
        )

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
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
            result_types=[result_tensor([shape[d] for d in dims], element_type_of(input))],
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        shape, perm = tensor_shape(self.input), self.permutation
        if sorted(perm) != list(range(len(shape))):
            raise VerifyException(
                f"'{self.name}' dims {list(perm)} are not a permutation of the "
                f"{len(shape)} dims of {format_shape(shape)}"
            )
        check_result_shape(self, tuple(shape[d] for d in perm))


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
        super().__init__(
            operands=[input], result_types=[result_tensor(shape, element_type_of(input))]
        )

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
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
        check_float_tensors(self, self.ELEMENTS)


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
            operands=[cond, lhs, rhs], result_types=[result_tensor(shape, element_type_of(lhs))]
        )

    def verify_(self) -> None:
        check_tensor_type(self, self.cond.type, Elements.ANY)
        check_same_elements(self, [self.lhs, self.rhs, self.result], Elements.ANY)
        shapes = (tensor_shape(self.cond), tensor_shape(self.lhs), tensor_shape(self.rhs))
        check_result_shape(self, inferred_shape(self, broadcast_shapes, *shapes))


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
        super().__init__(
            operands=[lhs, rhs], result_types=[result_tensor(shape, element_type_of(lhs))]
        )

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        lhs, rhs = tensor_shape(self.lhs), tensor_shape(self.rhs)
        check_result_shape(self, inferred_shape(self, matmul_shape, lhs, rhs))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
