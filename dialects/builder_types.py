"""
The dtypes and shapes `TessBuilder` works in, in the user's terms.

`element_type` reads a dtype as the user writes it ("float32", `np.int64`, an xDSL type),
`promote_types` is NumPy's and JAX's promotion with weakly typed Python numbers, and the
shape helpers (`normalize_dims`, `infer_shape`, `describe`) check reduction dims and reshape
targets and name a tensor as diagnostics do, raising `TessError`. They are separate from
the builder because the frontends use them on their own: to type a traced argument, to
read a `.tess` type, to report where a shape went wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeAlias

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i16,
    i32,
    i64,
)
from xdsl.ir import SSAValue

from tessc.dialects.dynamic_dims import traced_dim, type_dim
from tessc.dialects.tess_base import element_type_of, format_shape, is_float

Shape: TypeAlias = tuple[int, ...]
FloatType: TypeAlias = Float32Type | Float64Type | BFloat16Type | Float16Type
ElementType: TypeAlias = FloatType | IntegerType
Operand: TypeAlias = SSAValue | float | int
DimsLike: TypeAlias = int | Sequence[int] | None
DTypeLike: TypeAlias = str | type | np.dtype | FloatType | IntegerType


class TessError(ValueError):
    """An operation that cannot be built: its shapes or dtypes do not fit (`tessc.TessError`,
    which the frontends report at the user's line)."""


_DTYPE_NAMES: dict[str, ElementType] = {
    "f32": f32, "float32": f32, "f64": f64, "float64": f64,
    "bf16": bf16, "bfloat16": bf16, "f16": f16, "float16": f16,
    "i16": i16, "int16": i16,
    "i32": i32, "int32": i32, "i64": i64, "int64": i64, "i1": i1, "bool": i1,
}  # fmt: skip
_SHORT_NAMES: dict[ElementType, str] = {
    f32: "f32", f64: "f64", bf16: "bf16", f16: "f16", i16: "i16", i32: "i32", i64: "i64",
    i1: "i1",
}  # fmt: skip
_NUMPY_DTYPES: dict[ElementType, np.dtype] = {
    f32: np.dtype(np.float32), f64: np.dtype(np.float64), bf16: np.dtype(ml_dtypes.bfloat16),
    f16: np.dtype(np.float16), i16: np.dtype(np.int16), i32: np.dtype(np.int32),
    i64: np.dtype(np.int64), i1: np.dtype(np.bool_),
}  # fmt: skip
NARROW_FLOATS: tuple[ElementType, ...] = (bf16, f16)
"""The 16-bit floats: stored in their dtype, computed in f32 (`tess-widen-narrow`)."""


def element_type(dtype: DTypeLike) -> ElementType:
    """`f32`/`f64`/`bf16`/`f16`/`i16`/`i32`/`i64`/`i1` from "f32", "bfloat16", "int32",
    "bool", `np.float32`, `ml_dtypes.bfloat16`, a NumPy dtype or an xDSL type."""
    if isinstance(dtype, FloatType | IntegerType) and dtype in _SHORT_NAMES:
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype]
    try:
        name = np.dtype(dtype).name  # type: ignore[arg-type]
    except TypeError:
        name = str(dtype)
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    raise TessError(
        f"unsupported dtype {name}: tessc computes in float32, float64, bfloat16, float16, "
        "int16, int32, int64 and bool"
    )


def numpy_dtype(dtype: DTypeLike) -> np.dtype:
    return _NUMPY_DTYPES[element_type(dtype)]


def dtype_name(dtype: DTypeLike) -> str:
    """The short name used in diagnostics and `.tess` types: "f32", "bf16", "i32", "i1", ..."""
    return _SHORT_NAMES[element_type(dtype)]


def is_float_value(value: SSAValue) -> bool:
    return is_float(element_type_of(value))


def promote_types(
    types: Iterable[ElementType], weak: Iterable[object] = (), default_float: ElementType = f32
) -> ElementType:
    """The dtype an op on tensors of `types` and Python numbers `weak` computes in.

    As NumPy and JAX promote: f32 with f64 is f64, integers and bools take the float type
    of the floats present, and without floats the widest integer wins, then bool. A Python
    number is weakly typed, as in JAX: it takes the tensors' dtype, except that a float
    number makes integer tensors `default_float` and an int number makes bool tensors i64.
    """
    kinds = list(dict.fromkeys(types))
    floats = [t for t in kinds if is_float(t)]
    if floats:  # bf16 with f16 is f32, as in JAX; a 16-bit float with integers stays 16-bit
        return f64 if f64 in floats else floats[0] if len(floats) == 1 else f32
    result = i64 if i64 in kinds else i32 if i32 in kinds else i16 if i16 in kinds else i1
    numbers = list(weak)
    if any(isinstance(v, float | np.floating) for v in numbers):
        return default_float
    if result == i1 and any(
        isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in numbers
    ):
        return i64
    return result


def tensor_type(shape: Sequence[int], dtype: DTypeLike = "f32") -> TensorType:
    return TensorType(element_type(dtype), [type_dim(d) for d in shape])


def shape_of(value: SSAValue) -> Shape:
    typ = value.type
    assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
    return tuple(traced_dim(d) for d in typ.get_shape())


def describe(value: SSAValue) -> str:
    """`f32(3,4)`: a tensor's dtype and shape, as diagnostics name it."""
    element = element_type_of(value)
    name = dtype_name(element) if is_float(element) else str(element)
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
