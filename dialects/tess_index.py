"""
The indexing ops of the `tess` dialect: gather, one-hot, arg-reductions, slices, concatenation.

They are registered in the same `tess` dialect as `tessc.dialects.tess` (which holds the
map/zip/reduce/shape ops and the helpers these verifiers share); they live in their own
module only to keep each file readable. Integer index operands are `i32` or `i64`.

- `take` (gather) `%y = tess.take %x, %idx dim = 0 : tensor<5x3xf32>, tensor<4xi64> ->
  tensor<4x3xf32>`: `y[..., i..., ...] = x[..., idx[i...], ...]`, the index tensor's dims
  replacing dim `dim` (NumPy's `take(x, idx, axis=dim)`). A negative index counts from the
  end; an index still out of range is clamped to it (as JAX's indexing does): a kernel
  never reads outside `x`.
- `scatter_add` (take's adjoint) `%x = tess.scatter_add %y, %idx dim = 0 : tensor<4x3xf32>,
  tensor<4xi64> -> tensor<5x3xf32>`: zeros of the result type, to which every element of
  `%y` is added at the (normalised, clamped) position `take` read it from.
- `one_hot` `%y = tess.one_hot %labels : tensor<4xi64> -> tensor<4x10xf32>`: 1 where the
  last result index equals the label, else 0 (a label outside [0, n) gives a zero row).
- `argmax`/`argmin` `%i = tess.argmax %x dim = 1 : tensor<4x10xf32> -> tensor<4xi64>`:
  the index (i64) of the first maximum (minimum) along one dim, NaN counting as the
  extreme (NumPy's rule); `keepdim` keeps the dim with size 1.
- `slice` `%y = tess.slice %x offsets = [1, 4] strides = [2, -1] : tensor<6x5xf32> ->
  tensor<3x5xf32>`: `y[i, j] = x[1 + 2i, 4 - j]`, the sizes those of the result (a basic
  NumPy slice; every index it reads is in range).
- `unslice` (slice's adjoint) with the same properties, from the slice to the full shape:
  zeros, with the operand's elements at the positions `slice` reads.
- `concat` `%y = tess.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> ->
  tensor<6x3xf32>`: the operands one after another along `dim`, other dims equal.

xDSL's `tensor` dialect has gathers and slices on tensors without tess's element-type
rules or gradients; these lower to `linalg.generic` through `tess-to-linalg`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, TensorType, UnitAttr, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.tess_base import (
    Elements,
    PatternKind,
    Shape,
    TessOp,
    check_result_shape,
    check_same_elements,
    check_tensor_type,
    element_type_of,
    format_shape,
    inferred_shape,
    is_integer,
    tensor_shape,
)


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _check_dim(op: Operation, dim: int, rank: int) -> None:
    if not 0 <= dim < rank:
        raise VerifyException(f"'{op.name}' dim {dim} is out of range for rank {rank}")


def _check_index_type(op: Operation, value: SSAValue) -> None:
    check_tensor_type(op, value.type, Elements.ANY)
    if not is_integer(element_type_of(value)):
        raise VerifyException(f"'{op.name}' expects i32 or i64 indices, got {value.type}")


def gathered_shape(source: Shape, indices: Shape, dim: int) -> Shape:
    """The shape of `take(x, idx, dim)`: idx's dims in place of dim `dim` of x."""
    return (*source[:dim], *indices, *source[dim + 1 :])


# ---------------------------------------------------------------------------------------
# gather and its adjoint
# ---------------------------------------------------------------------------------------


class _AlongDimOp(TessOp):
    """What `take` and its adjoint `scatter_add` share: a source, an integer index tensor,
    and the one dim the indices address."""

    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    dim = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    assembly_format = (
        "$input `,` $indices `dim` `=` $dim attr-dict `:` type($input) `,` type($indices) "
        "`->` type($result)"
    )

    @property
    def axis(self) -> int:
        return self.dim.get_values()[0]

    def check_along_dim(self, indexed: Shape, verb: str) -> None:
        """Element types, index type, and one valid, non-empty dim of the `indexed` shape
        (the source a take gathers from, the result a scatter_add scatters into)."""
        check_same_elements(self, [self.input, self.result], self.ELEMENTS)
        _check_index_type(self, self.indices)
        if len(self.dim.get_values()) != 1:
            raise VerifyException(f"'{self.name}' takes one dim")
        _check_dim(self, self.axis, len(indexed))
        if indexed[self.axis] == 0:
            raise VerifyException(f"'{self.name}' cannot {verb} an empty dim")


@irdl_op_definition
class TakeOp(_AlongDimOp):
    """Gather along `dim` by an integer index tensor (see the module docstring)."""

    name = "tess.take"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    def __init__(self, input: SSAValue | Operation, indices: SSAValue | Operation, dim: int):
        input, indices = SSAValue.get(input), SSAValue.get(indices)
        shape = gathered_shape(tensor_shape(input), tensor_shape(indices), dim)
        super().__init__(
            operands=[input, indices],
            properties={"dim": _ints([dim])},
            result_types=[TensorType(element_type_of(input), shape)],
        )

    def verify_(self) -> None:
        source = tensor_shape(self.input)
        self.check_along_dim(source, "gather from")
        check_result_shape(self, gathered_shape(source, tensor_shape(self.indices), self.axis))


@irdl_op_definition
class ScatterAddOp(_AlongDimOp):
    """`take`'s adjoint: zeros of the result type plus each operand element at the
    position `take` reads it from (see the module docstring)."""

    name = "tess.scatter_add"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    def __init__(
        self,
        input: SSAValue | Operation,
        indices: SSAValue | Operation,
        dim: int,
        shape: Sequence[int],
    ):
        input, indices = SSAValue.get(input), SSAValue.get(indices)
        super().__init__(
            operands=[input, indices],
            properties={"dim": _ints([dim])},
            result_types=[TensorType(element_type_of(input), shape)],
        )

    def verify_(self) -> None:
        target = tensor_shape(self.result)
        self.check_along_dim(target, "scatter into")
        expected = gathered_shape(target, tensor_shape(self.indices), self.axis)
        if tensor_shape(self.input) != expected:
            raise VerifyException(
                f"'{self.name}' operand shape {format_shape(tensor_shape(self.input))} does "
                f"not match {format_shape(expected)}, what take gathers from the result"
            )


# ---------------------------------------------------------------------------------------
# one-hot and arg-reductions
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class OneHotOp(TessOp):
    """1 where the last index equals the label, else 0; labels `(...)` -> `(..., n)`."""

    name = "tess.one_hot"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.BROADCAST
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, classes: int, element_type: Attribute):
        input = SSAValue.get(input)
        shape = (*tensor_shape(input), classes)
        super().__init__(operands=[input], result_types=[TensorType(element_type, shape)])

    @property
    def classes(self) -> int:
        return tensor_shape(self.result)[-1]

    def verify_(self) -> None:
        _check_index_type(self, self.input)
        check_tensor_type(self, self.result.type, Elements.ANY)
        result = tensor_shape(self.result)
        if not result:
            raise VerifyException(f"'{self.name}' result must have a class dim")
        check_result_shape(self, (*tensor_shape(self.input), result[-1]))


class ArgReduceOp(TessOp):
    """`%i = tess.argmax %x dim = 1 : tensor<4x10xf32> -> tensor<4xi64>`."""

    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.REDUCTION
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    input = operand_def(TensorType)
    dim = prop_def(DenseArrayBase.constr(i64))
    keepdim = opt_prop_def(UnitAttr)
    result = result_def(TensorType)

    assembly_format = (
        "$input `dim` `=` $dim (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, dim: int, keepdim: bool = False):
        input = SSAValue.get(input)
        shape = list(tensor_shape(input))
        if keepdim:
            shape[dim] = 1
        else:
            del shape[dim]
        super().__init__(
            operands=[input],
            properties={"dim": _ints([dim]), "keepdim": UnitAttr() if keepdim else None},
            result_types=[TensorType(i64, shape)],
        )

    @property
    def axis(self) -> int:
        return self.dim.get_values()[0]

    @property
    def keeps_dims(self) -> bool:
        return self.keepdim is not None

    def verify_(self) -> None:
        check_tensor_type(self, self.input.type, self.ELEMENTS)
        if element_type_of(self.result) != i64:
            raise VerifyException(f"'{self.name}' result must be an i64 tensor")
        source = tensor_shape(self.input)
        if len(self.dim.get_values()) != 1:
            raise VerifyException(f"'{self.name}' takes one dim")
        _check_dim(self, self.axis, len(source))
        if source[self.axis] == 0:
            raise VerifyException(f"'{self.name}' of an empty dim has no index")
        shape = list(source)
        if self.keeps_dims:
            shape[self.axis] = 1
        else:
            del shape[self.axis]
        check_result_shape(self, tuple(shape))


@irdl_op_definition
class ArgMaxOp(ArgReduceOp):
    name = "tess.argmax"


@irdl_op_definition
class ArgMinOp(ArgReduceOp):
    name = "tess.argmin"


# ---------------------------------------------------------------------------------------
# slices and concatenation
# ---------------------------------------------------------------------------------------


def check_slice(
    op: Operation, full: Shape, part: Shape, offsets: Sequence[int], strides: Sequence[int]
) -> None:
    """`part` is a strided slice of `full` at `offsets`/`strides` reading only in range."""
    if not len(full) == len(part) == len(offsets) == len(strides):
        raise VerifyException(
            f"'{op.name}' needs one offset and stride per dim of {format_shape(full)}"
        )
    for d, (n, size, offset, stride) in enumerate(zip(full, part, offsets, strides, strict=True)):
        if stride == 0:
            raise VerifyException(f"'{op.name}' stride of dim {d} is 0")
        last = offset + (size - 1) * stride
        if size and not (0 <= offset < n and 0 <= last < n):
            raise VerifyException(
                f"'{op.name}' dim {d}: {size} elements from {offset} by {stride} leave [0, {n})"
            )


class SliceLikeOp(TessOp):
    """`tess.slice` and `tess.unslice`: a strided slice and its adjoint."""

    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.INJECTIVE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    input = operand_def(TensorType)
    offsets = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    assembly_format = (
        "$input `offsets` `=` $offsets `strides` `=` $strides attr-dict "
        "`:` type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        offsets: Sequence[int],
        strides: Sequence[int],
        shape: Sequence[int],
    ):
        input = SSAValue.get(input)
        super().__init__(
            operands=[input],
            properties={"offsets": _ints(offsets), "strides": _ints(strides)},
            result_types=[TensorType(element_type_of(input), shape)],
        )

    @property
    def static_offsets(self) -> tuple[int, ...]:
        return tuple(self.offsets.get_values())

    @property
    def static_strides(self) -> tuple[int, ...]:
        return tuple(self.strides.get_values())

    def full_and_part(self) -> tuple[Shape, Shape]:
        raise NotImplementedError

    def verify_(self) -> None:
        check_same_elements(self, [self.input, self.result], self.ELEMENTS)
        full, part = self.full_and_part()
        check_slice(self, full, part, self.static_offsets, self.static_strides)


@irdl_op_definition
class SliceOp(SliceLikeOp):
    """`y[i...] = x[offsets + i * strides]`, the sizes the result's."""

    name = "tess.slice"

    def full_and_part(self) -> tuple[Shape, Shape]:
        return tensor_shape(self.input), tensor_shape(self.result)


@irdl_op_definition
class UnsliceOp(SliceLikeOp):
    """Zeros of the result type with `x[i...]` at `offsets + i * strides`."""

    name = "tess.unslice"
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    def full_and_part(self) -> tuple[Shape, Shape]:
        return tensor_shape(self.result), tensor_shape(self.input)


def concat_shape(shapes: Sequence[Shape], dim: int) -> Shape:
    """The shape of `shapes` concatenated along `dim`; ValueError naming them otherwise."""
    first = shapes[0]
    for shape in shapes:
        if len(shape) != len(first) or any(
            a != b for d, (a, b) in enumerate(zip(shape, first, strict=True)) if d != dim
        ):
            names = ", ".join(format_shape(s) for s in shapes)
            raise ValueError(f"shapes {names} differ outside dim {dim}")
    return (*first[:dim], sum(s[dim] for s in shapes), *first[dim + 1 :])


@irdl_op_definition
class ConcatOp(TessOp):
    """`%y = tess.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> ->
    tensor<6x3xf32>`."""

    name = "tess.concat"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.INJECTIVE
    ELEMENTS: ClassVar[Elements] = Elements.ANY

    inputs = var_operand_def(TensorType)
    dim = prop_def(DenseArrayBase.constr(i64))
    result = result_def(TensorType)

    assembly_format = "$inputs `dim` `=` $dim attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue | Operation], dim: int):
        values = [SSAValue.get(v) for v in inputs]
        shape = concat_shape([tensor_shape(v) for v in values], dim)
        super().__init__(
            operands=[values],
            properties={"dim": _ints([dim])},
            result_types=[TensorType(element_type_of(values[0]), shape)],
        )

    @property
    def axis(self) -> int:
        return self.dim.get_values()[0]

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException(f"'{self.name}' needs at least one operand")
        check_same_elements(self, [*self.inputs, self.result], self.ELEMENTS)
        shapes = [tensor_shape(v) for v in self.inputs]
        _check_dim(self, self.axis, len(shapes[0]))
        check_result_shape(self, inferred_shape(self, concat_shape, shapes, self.axis))


INDEX_OPS: tuple[type[TessOp], ...] = (
    TakeOp, ScatterAddOp, OneHotOp, ArgMaxOp, ArgMinOp, SliceOp, UnsliceOp, ConcatOp,
)  # fmt: skip

__all__ = [
    "INDEX_OPS",
    "ArgMaxOp",
    "ArgMinOp",
    "ArgReduceOp",
    "ConcatOp",
    "OneHotOp",
    "ScatterAddOp",
    "SliceLikeOp",
    "SliceOp",
    "TakeOp",
    "UnsliceOp",
    "concat_shape",
    "gathered_shape",
]
