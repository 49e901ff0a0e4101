"""
The convolution ops of the `tess` dialect: `pad`, `conv`, `pool` and `unpool`.

Spatial dims are the trailing ones; properties hold one entry per spatial dim.

- `pad` `%y = tess.pad %x low = [0, 0, 1] high = [0, 0, 2] value = 0.0`: `x` with `low`
  (`high`) elements of `value` before (after) each dim (NumPy's constant `pad`).
- `conv` `%y = tess.conv %x, %w strides = [1] dilations = [1] padding_low = [1]
  padding_high = [1] groups = 1 : tensor<NxCxW>, tensor<FxC/GxK> -> tensor<NxFxW'>`:
  `y[n, f, o] = sum_{c, k} xp[n, g(f)*C/G + c, o*s + k*d] * w[f, c, k]` with `xp` the input
  zero-padded by `padding_low/high` and `g(f) = f // (F/G)` (PyTorch's cross-correlation).
- `pool` `%y = tess.pool %x kind = "max" kernel = [2, 2] strides = [2, 2] padding_low =
  [0, 0] padding_high = [0, 0]`: over windows of the padded input, the maximum (padding
  -inf), the average (padding 0, divided by the window size: `count_include_pad`) or, for
  kind `argmax`, the row-major offset in the window (i64) of the first maximum.
- `unpool` (the adjoint of a pool's windows) `%dx = tess.unpool %dy [, %idx] kernel = ...`
  to the pooled input's shape: each input element sums `dy` over the windows holding it,
  only those whose `idx` names its offset when `idx` is given (max pooling's gradient).

Output size per spatial dim: `(in + low + high - d*(k-1) - 1) // s + 1`, at least 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.tess_base import (
    Elements,
    PatternKind,
    Shape,
    TessOp,
    check_float_tensors,
    check_result_shape,
    check_same_elements,
    check_tensor_type,
    element_type_of,
    format_shape,
    is_integer,
    tensor_shape,
)

POOL_KINDS = ("max", "avg", "argmax")


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _values(attr: DenseArrayBase) -> tuple[int, ...]:
    return tuple(int(v) for v in attr.get_values())


def window_output_shape(
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    low: Sequence[int],
    high: Sequence[int],
) -> Shape:
    """The spatial output shape of windows sliding over the padded input; raises
    ValueError when a window is larger than the padded input."""
    sizes = []
    for n, k, s, d, lo, hi in zip(spatial, kernel, strides, dilations, low, high, strict=True):
        if s < 1 or d < 1 or lo < 0 or hi < 0 or k < 1:
            raise ValueError(
                f"strides, dilations and the kernel must be positive and padding non-negative "
                f"(strides {list(strides)}, dilations {list(dilations)}, kernel {list(kernel)}, "
                f"padding {list(low)}/{list(high)})"
            )
        span = d * (k - 1) + 1
        if n + lo + hi < span:
            raise ValueError("kernel larger than the padded input")
        sizes.append((n + lo + hi - span) // s + 1)
    return tuple(sizes)


def conv_shape(
    input: Sequence[int],
    weight: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    low: Sequence[int],
    high: Sequence[int],
    groups: int,
) -> Shape:
    """`(N, C, *in) * (F, C/G, *k) -> (N, F, *out)`; ValueError naming both shapes."""
    names = f"input {format_shape(input)} and weight {format_shape(weight)}"
    spatial = len(input) - 2
    if spatial < 1 or len(weight) != len(input):
        raise ValueError(f"conv needs an (N, C, *spatial) input and a weight of its rank: {names}")
    if not len(strides) == len(dilations) == len(low) == len(high) == spatial:
        raise ValueError(f"conv needs one stride, dilation and padding per spatial dim: {names}")
    channels, features = input[1], weight[0]
    if groups < 1 or channels % groups or features % groups:
        raise ValueError(
            f"groups = {groups} does not divide the {channels} input channels and the "
            f"{features} output channels of {names}"
        )
    if weight[1] * groups != channels:
        raise ValueError(
            f"channel mismatch: {names} ({channels} input channels, {groups} groups of {weight[1]})"
        )
    padded = [n + lo + hi for n, lo, hi in zip(input[2:], low, high, strict=True)]
    try:
        out = window_output_shape(input[2:], weight[2:], strides, dilations, low, high)
    except ValueError as e:
        raise ValueError(f"conv: {e}: {names} (padded {format_shape(padded)})") from None
    return (input[0], features, *out)


def pool_shape(
    input: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    low: Sequence[int],
    high: Sequence[int],
) -> Shape:
    """The leading dims of `input`, then the pooled spatial dims (the last `len(kernel)`)."""
    spatial = len(kernel)
    if not 1 <= spatial <= len(input) or not len(strides) == len(low) == len(high) == spatial:
        raise ValueError(
            f"pooling of {format_shape(input)} needs one kernel size, stride and padding per "
            "spatial dim"
        )
    for k, lo, hi in zip(kernel, low, high, strict=True):
        if lo > k // 2 or hi > k // 2:
            raise ValueError(
                f"pooling padding {list(low)}/{list(high)} exceeds half the kernel {list(kernel)}"
            )
    lead, dims = input[: len(input) - spatial], input[len(input) - spatial :]
    try:
        out = window_output_shape(dims, kernel, strides, [1] * spatial, low, high)
    except ValueError as e:
        padded = [n + lo + hi for n, lo, hi in zip(dims, low, high, strict=True)]
        raise ValueError(
            f"pooling: {e}: input {format_shape(input)} (padded {format_shape(padded)}) and "
            f"kernel {format_shape(kernel)}"
        ) from None
    return (*lead, *out)


def _checked(op: Operation, rule: object, *args: object) -> Shape:
    try:
        return rule(*args)  # type: ignore[operator]
    except ValueError as e:
        raise VerifyException(f"'{op.name}': {e}") from None


# ---------------------------------------------------------------------------------------
# pad
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class PadOp(TessOp):
    """`x` with `low`/`high` elements of `value` around each dim (see the module docstring)."""

    name = "tess.pad"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.INJECTIVE
    ELEMENTS: ClassVar[Elements] = Elements.NUMBER

    input = operand_def(TensorType)
    low = prop_def(DenseArrayBase.constr(i64))
    high = prop_def(DenseArrayBase.constr(i64))
    value = prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    assembly_format = (
        "$input `low` `=` $low `high` `=` $high `value` `=` $value attr-dict "
        "`:` type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        low: Sequence[int],
        high: Sequence[int],
        value: float = 0.0,
    ):
        input = SSAValue.get(input)
        shape = [n + lo + hi for n, lo, hi in zip(tensor_shape(input), low, high, strict=True)]
        super().__init__(
            operands=[input],
            properties={"low": _ints(low), "high": _ints(high), "value": FloatAttr(value, f64)},
            result_types=[TensorType(element_type_of(input), shape)],
        )

    @property
    def static_low(self) -> tuple[int, ...]:
        return _values(self.low)

    @property
    def static_high(self) -> tuple[int, ...]:
        return _values(self.high)

    @property
    def pad_value(self) -> float:
        return float(self.value.value.data)

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        shape, low, high = tensor_shape(self.input), self.static_low, self.static_high
        if not len(low) == len(high) == len(shape) or min((*low, *high), default=0) < 0:
            raise VerifyException(
                f"'{self.name}' needs a non-negative low and high padding per dim of "
                f"{format_shape(shape)}, got {list(low)} and {list(high)}"
            )
        check_result_shape(self, [n + lo + hi for n, lo, hi in zip(shape, low, high, strict=True)])


# ---------------------------------------------------------------------------------------
# conv
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ConvOp(TessOp):
    """An N-d grouped, strided, dilated, padded cross-correlation (the module docstring)."""

    name = "tess.conv"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.MATMUL

    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    strides = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    padding_low = prop_def(DenseArrayBase.constr(i64))
    padding_high = prop_def(DenseArrayBase.constr(i64))
    groups = prop_def(IntegerAttr[i64])
    result = result_def(TensorType)

    assembly_format = (
        "$input `,` $weight `strides` `=` $strides `dilations` `=` $dilations "
        "`padding_low` `=` $padding_low `padding_high` `=` $padding_high `groups` `=` $groups "
        "attr-dict `:` type($input) `,` type($weight) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        weight: SSAValue | Operation,
        strides: Sequence[int],
        dilations: Sequence[int],
        padding_low: Sequence[int],
        padding_high: Sequence[int],
        groups: int = 1,
    ):
        input, weight = SSAValue.get(input), SSAValue.get(weight)
        shape = conv_shape(
            tensor_shape(input), tensor_shape(weight), strides, dilations,
            padding_low, padding_high, groups,
        )  # fmt: skip
        super().__init__(
            operands=[input, weight],
            properties={
                "strides": _ints(strides),
                "dilations": _ints(dilations),
                "padding_low": _ints(padding_low),
                "padding_high": _ints(padding_high),
                "groups": IntegerAttr(groups, i64),
            },
            result_types=[TensorType(element_type_of(input), shape)],
        )

    @property
    def static_strides(self) -> tuple[int, ...]:
        return _values(self.strides)

    @property
    def static_dilations(self) -> tuple[int, ...]:
        return _values(self.dilations)

    @property
    def static_low(self) -> tuple[int, ...]:
        return _values(self.padding_low)

    @property
    def static_high(self) -> tuple[int, ...]:
        return _values(self.padding_high)

    @property
    def group_count(self) -> int:
        return int(self.groups.value.data)

    def verify_(self) -> None:
        check_float_tensors(self, self.ELEMENTS)
        shape = _checked(
            self, conv_shape, tensor_shape(self.input), tensor_shape(self.weight),
            self.static_strides, self.static_dilations, self.static_low, self.static_high,
            self.group_count,
        )  # fmt: skip
        check_result_shape(self, shape)


# ---------------------------------------------------------------------------------------
# pooling and its adjoint
# ---------------------------------------------------------------------------------------


class _WindowOp(TessOp):
    """What `pool` and `unpool` share: the windows' kernel, strides and padding."""

    kernel = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    padding_low = prop_def(DenseArrayBase.constr(i64))
    padding_high = prop_def(DenseArrayBase.constr(i64))

    @staticmethod
    def window_properties(
        kernel: Sequence[int], strides: Sequence[int], low: Sequence[int], high: Sequence[int]
    ) -> dict[str, DenseArrayBase]:
        return {
            "kernel": _ints(kernel),
            "strides": _ints(strides),
            "padding_low": _ints(low),
            "padding_high": _ints(high),
        }

    @property
    def static_kernel(self) -> tuple[int, ...]:
        return _values(self.kernel)

    @property
    def static_strides(self) -> tuple[int, ...]:
        return _values(self.strides)

    @property
    def static_low(self) -> tuple[int, ...]:
        return _values(self.padding_low)

    @property
    def static_high(self) -> tuple[int, ...]:
        return _values(self.padding_high)

    def pooled_shape(self, input: Shape) -> Shape:
        return _checked(
            self, pool_shape, input, self.static_kernel, self.static_strides,
            self.static_low, self.static_high,
        )  # fmt: skip


@irdl_op_definition
class PoolOp(_WindowOp):
    """Max, average or first-argmax over windows (see the module docstring)."""

    name = "tess.pool"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.REDUCTION

    input = operand_def(TensorType)
    kind = prop_def(StringAttr)
    result = result_def(TensorType)

    assembly_format = (
        "$input `kind` `=` $kind `kernel` `=` $kernel `strides` `=` $strides "
        "`padding_low` `=` $padding_low `padding_high` `=` $padding_high attr-dict "
        "`:` type($input) `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue | Operation,
        kind: str,
        kernel: Sequence[int],
        strides: Sequence[int],
        low: Sequence[int],
        high: Sequence[int],
    ):
        input = SSAValue.get(input)
        shape = pool_shape(tensor_shape(input), kernel, strides, low, high)
        element = i64 if kind == "argmax" else element_type_of(input)
        super().__init__(
            operands=[input],
            properties={
                "kind": StringAttr(kind),
                **self.window_properties(kernel, strides, low, high),
            },
            result_types=[TensorType(element, shape)],
        )

    @property
    def pool_kind(self) -> str:
        return self.kind.data

    def verify_(self) -> None:
        if self.pool_kind not in POOL_KINDS:
            raise VerifyException(
                f"'{self.name}' kind must be one of {', '.join(POOL_KINDS)}, got {self.pool_kind!r}"
            )
        check_tensor_type(self, self.input.type, Elements.FLOAT)
        if self.pool_kind == "argmax":
            check_tensor_type(self, self.result.type, Elements.NUMBER)
            if element_type_of(self.result) != i64:
                raise VerifyException(
                    f"'{self.name}' kind argmax gives i64, got {self.result.type}"
                )
        else:
            check_same_elements(self, [self.input, self.result])
        check_result_shape(self, self.pooled_shape(tensor_shape(self.input)))


@irdl_op_definition
class UnpoolOp(_WindowOp):
    """The adjoint of a pool's windows, routed by `indices` when given (module docstring)."""

    name = "tess.unpool"
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE

    grad = operand_def(TensorType)
    indices = opt_operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$grad (`,` $indices^)? `kernel` `=` $kernel `strides` `=` $strides "
        "`padding_low` `=` $padding_low `padding_high` `=` $padding_high attr-dict "
        "`:` type($grad) (`,` type($indices)^)? `->` type($result)"
    )

    def __init__(
        self,
        grad: SSAValue | Operation,
        indices: SSAValue | Operation | None,
        kernel: Sequence[int],
        strides: Sequence[int],
        low: Sequence[int],
        high: Sequence[int],
        shape: Sequence[int],
    ):
        grad = SSAValue.get(grad)
        super().__init__(
            operands=[grad, [] if indices is None else [SSAValue.get(indices)]],
            properties=self.window_properties(kernel, strides, low, high),
            result_types=[TensorType(element_type_of(grad), shape)],
        )

    def verify_(self) -> None:
        check_same_elements(self, [self.grad, self.result])
        target = tensor_shape(self.result)
        expected = self.pooled_shape(target)
        if tensor_shape(self.grad) != expected:
            raise VerifyException(
                f"'{self.name}' operand shape {format_shape(tensor_shape(self.grad))} does not "
                f"match {format_shape(expected)}, the pooled shape of the result "
                f"{format_shape(target)}"
            )
        if self.indices is not None:
            check_tensor_type(self, self.indices.type, Elements.NUMBER)
            if not is_integer(element_type_of(self.indices)):
                raise VerifyException(f"'{self.name}' expects integer indices")
            if tensor_shape(self.indices) != expected:
                raise VerifyException(
                    f"'{self.name}' indices shape {format_shape(tensor_shape(self.indices))} "
                    f"does not match the operand's {format_shape(expected)}"
                )


CONV_OPS: tuple[type[TessOp], ...] = (PadOp, ConvOp, PoolOp, UnpoolOp)

__all__ = [
    "CONV_OPS",
    "POOL_KINDS",
    "ConvOp",
    "PadOp",
    "PoolOp",
    "UnpoolOp",
    "conv_shape",
    "pool_shape",
    "window_output_shape",
]
