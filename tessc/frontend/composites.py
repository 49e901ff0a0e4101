"""
Operations the tracer offers that `tess` has no single op for, built from the ops it has.

- `power`: NumPy's `**`, where an integer to an integer power stays an integer
  (`tess.pow` computes in floats): a constant exponent by repeated squaring (exact, wrapping
  on overflow as NumPy's does), a tensor exponent in f64 and truncated back (exact while
  the result fits in 2**53).
- `floor_divide` and `remainder`: `//` and `%`, NumPy's (the quotient rounds toward minus
  infinity, the remainder has the divisor's sign). Integers: `n // 0 == n % 0 == 0`,
  computed in f64, exact for operands below 2**53. Floats: `floor(a / b)` and
  `a - floor(a / b) * b` (`x // 0.0` is +-inf, `x % 0.0` and `inf // x` NaN, as NumPy's;
  an infinite divisor differs: NumPy's `-1.0 // inf` is -1, `-1.0 % inf` inf).
- `tile` (PyTorch's `Tensor.repeat`, NumPy's `tile`) and `repeat_elements` (PyTorch's
  `repeat_interleave`, NumPy's `repeat`): reshapes around one `tess.broadcast_to`, so they
  are views to the fusion passes and their gradients are sums.

Every function takes a `TessBuilder` and operands (SSA values or Python numbers, typed
weakly as the builder types them) and returns an SSA value.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import f64, i1, i64
from xdsl.ir import SSAValue

from tessc.dialects.builder import TessBuilder
from tessc.dialects.builder_types import (
    ElementType,
    Operand,
    TessError,
    promote_types,
    shape_of,
)
from tessc.dialects.tess_base import element_type_of, is_float


def _dtype(b: TessBuilder, *operands: Operand) -> ElementType:
    """The dtype the operands compute in (the builder's promotion; bools count as i64)."""
    tensors = [element_type_of(v) for v in operands if isinstance(v, SSAValue)]
    numbers = [v for v in operands if not isinstance(v, SSAValue)]
    dtype = promote_types(tensors, numbers, b.default_float)
    return i64 if dtype == i1 else dtype


def _as(b: TessBuilder, value: Operand, dtype: ElementType) -> SSAValue:
    if isinstance(value, SSAValue):
        return b.cast(value, dtype)
    return b.fill(float(value), (), dtype)


def power(b: TessBuilder, base: Operand, exponent: Operand) -> SSAValue:
    """`base ** exponent` (module docstring)."""
    dtype = _dtype(b, base, exponent)
    if is_float(dtype):
        return b.pow(base, exponent)
    if not isinstance(exponent, SSAValue):
        n = int(exponent)
        if n < 0:
            raise TessError(
                "integers to negative integer powers are not allowed (NumPy's rule): make "
                "the base a float, e.g. x.astype(np.float32) ** -2"
            )
        factor = _as(b, base, dtype)
        result: SSAValue | None = None
        while n:
            if n & 1:
                result = factor if result is None else b.mul(result, factor)
            n >>= 1
            if n:
                factor = b.mul(factor, factor)
        return result if result is not None else b.full_like(factor, 1.0)
    wide = b.pow(_as(b, base, f64), b.cast(exponent, f64))
    return b.cast(wide, dtype)


def _operands(b: TessBuilder, lhs: Operand, rhs: Operand) -> tuple[ElementType, SSAValue, SSAValue]:
    dtype = _dtype(b, lhs, rhs)
    return dtype, _as(b, lhs, dtype), _as(b, rhs, dtype)


def _floor_quotient(b: TessBuilder, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """floor(lhs / rhs) in f64, for integer operands (0 where `rhs` is 0)."""
    quotient = b.div(b.cast(lhs, f64), b.cast(rhs, f64))
    truncated = b.cast(b.cast(b.select(b.eq(rhs, 0), 0.0, quotient), i64), f64)
    return b.sub(truncated, b.cast(b.lt(quotient, truncated), f64))


def floor_divide(b: TessBuilder, lhs: Operand, rhs: Operand) -> SSAValue:
    """`lhs // rhs` (module docstring)."""
    dtype, left, right = _operands(b, lhs, rhs)
    if is_float(dtype):  # an infinite dividend has no floored quotient: NaN, as NumPy's
        infinite = b.eq(b.abs(left), float("inf"))
        return b.select(infinite, float("nan"), b.floor(b.div(left, right)))
    return b.cast(_floor_quotient(b, left, right), dtype)


def remainder(b: TessBuilder, lhs: Operand, rhs: Operand) -> SSAValue:
    """`lhs % rhs`: `lhs - (lhs // rhs) * rhs` (of integers 0 where `rhs` is 0)."""
    dtype, left, right = _operands(b, lhs, rhs)
    if is_float(dtype):
        return b.sub(left, b.mul(b.floor(b.div(left, right)), right))
    quotient = b.cast(_floor_quotient(b, left, right), dtype)
    return b.select(b.eq(right, 0), 0, b.sub(left, b.mul(quotient, right)))


def tile(b: TessBuilder, x: SSAValue, reps: Sequence[int]) -> SSAValue:
    """`x` repeated `reps[i]` times along dim i (`reps` has at least `x`'s rank; leading
    extra entries add dims, as PyTorch's `repeat`)."""
    shape = shape_of(x)
    if len(reps) < len(shape):
        raise TessError(
            f"repeat: {len(reps)} repeat counts for a tensor of rank {len(shape)} (give at "
            "least one per dim)"
        )
    if any(r < 0 for r in reps):
        raise TessError(f"repeat counts must be non-negative, got {tuple(reps)}")
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    split: list[int] = []
    stretched: list[int] = []
    for r, n in zip(reps, padded, strict=True):
        if r != 1:
            split.append(1)
            stretched.append(r)
        split.append(n)
        stretched.append(n)
    result = b.broadcast_to(b.reshape(x, split), stretched)
    return b.reshape(result, [r * n for r, n in zip(reps, padded, strict=True)])


def repeat_elements(b: TessBuilder, x: SSAValue, repeats: int, dim: int) -> SSAValue:
    """Each element of `x` repeated `repeats` times along `dim`, in place."""
    shape = list(shape_of(x))
    if repeats < 0:
        raise TessError(f"repeats must be non-negative, got {repeats}")
    if not -len(shape) <= dim < len(shape):
        raise TessError(f"dim {dim} is out of range for a tensor of rank {len(shape)}")
    dim %= len(shape)
    split = [*shape[: dim + 1], 1, *shape[dim + 1 :]]
    stretched = [*shape[: dim + 1], repeats, *shape[dim + 1 :]]
    result = b.broadcast_to(b.reshape(x, split), stretched)
    return b.reshape(result, [*shape[:dim], shape[dim] * repeats, *shape[dim + 1 :]])


__all__ = ["floor_divide", "power", "remainder", "repeat_elements", "tile"]
