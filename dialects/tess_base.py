"""
What every `tess` op shares: the shape rules (seed broadcasting, reductions, matmul), the
element-type classes an op accepts (`Elements`), the fusion classification (`PatternKind`)
and the `TessOp` base class with the checks its verifiers call.

Separate from the op families (`tess_elementwise.py`, `tess_structured.py`, `tess_index.py`)
because all of them build on it; `tess.py` is the dialect's namespace and re-exports it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from enum import Enum
from typing import ClassVar

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    NoneAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tessc.dialects.dynamic_dims import type_dim

Shape = tuple[int, ...]


class PatternKind(Enum):
    """How an op composes under fusion, after TVM's `OpPatternKind` (smaller fuses more)."""

    ELEMENTWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    MATMUL = 4  # "out-elemwise-fusable": takes an elementwise epilogue
    OPAQUE = 8


DYNAMIC = DYNAMIC_INDEX
"""A dynamic dim (`?` in `tensor<?x64xf32>`), as xDSL parses it. Every `?` of a function
is its one dynamic size (the batch): `tess.dynamic_size` checks them equal at entry, so a
`?` matches any dim here, and a `?` broadcast with 1 or `?` stays `?`."""


def is_dynamic(dim: int) -> bool:
    return dim == DYNAMIC or dim == -1


def format_shape(shape: Sequence[int]) -> str:
    """`(3,4,1)` — the notation of the seeds, used in every shape diagnostic."""
    return "(" + ",".join("?" if is_dynamic(d) else str(d) for d in shape) + ")"


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """The broadcast of `shapes` by the seed rules; raises ValueError naming the shapes."""
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    result: list[int] = []
    for dims in zip(*padded, strict=True):
        sizes = {DYNAMIC if is_dynamic(d) else d for d in dims if d != 1}
        if len(sizes) > 1 and DYNAMIC in sizes:
            sizes.discard(DYNAMIC)  # a `?` matches a static size at verify time
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
    if lhs[-1] != rhs[-2] and not (is_dynamic(lhs[-1]) or is_dynamic(rhs[-2])):
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
    return tuple(DYNAMIC if d == -1 else d for d in typ.get_shape())


class Elements(Enum):
    """Which element types an op takes."""

    FLOAT = "f32, f64, bf16 or f16"
    NUMBER = "f32, f64, bf16, f16, i16, i32 or i64"
    ANY = "f32, f64, bf16, f16, i16, i32, i64 or i1"


def is_float(typ: Attribute) -> bool:
    return isinstance(typ, Float32Type | Float64Type | BFloat16Type | Float16Type)


def is_bool(typ: Attribute) -> bool:
    return isinstance(typ, IntegerType) and typ.width.data == 1


def is_integer(typ: Attribute) -> bool:
    """`i16`/`i32`/`i64` (not `i1`, which is bool)."""
    return isinstance(typ, IntegerType) and typ.width.data in (16, 32, 64)


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
    if any(d < 0 and not is_dynamic(d) for d in typ.get_shape()):
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


def check_float_tensors(op: Operation, elements: Elements = Elements.FLOAT) -> Attribute:
    """All operands and results are static tensors of one element type in `elements`."""
    return check_same_elements(op, [*op.operands, *op.results], elements)


def inferred_shape(op: Operation, rule: Callable[..., Shape], *args: object) -> Shape:
    """`rule(*args)` (a shape rule: `broadcast_shapes`, `matmul_shape`, ...), its
    `ValueError` reported as the op's `VerifyException`."""
    try:
        return rule(*args)
    except ValueError as e:
        raise VerifyException(f"'{op.name}': {e}") from None


def check_result_shape(op: Operation, expected: Sequence[int]) -> None:
    actual = tensor_shape(op.results[0])
    if len(actual) != len(expected) or any(
        a != e and not (is_dynamic(a) or is_dynamic(e))
        for a, e in zip(actual, expected, strict=False)
    ):
        raise VerifyException(
            f"'{op.name}' result shape {format_shape(actual)} does not match the "
            f"inferred shape {format_shape(expected)}"
        )


def result_tensor(shape: Sequence[int], element_type: Attribute) -> TensorType:
    return TensorType(element_type, [type_dim(d) for d in shape])


def element_type_of(value: SSAValue) -> Attribute:
    """The element type of a tensor value (f32, f64, or an integer or bool type)."""
    typ = value.type
    assert isinstance(typ, TensorType), f"expected a tensor value, got {typ}"
    return typ.element_type


class TessOp(IRDLOperation, abc.ABC):
    PATTERN_KIND: ClassVar[PatternKind] = PatternKind.OPAQUE
    ELEMENTS: ClassVar[Elements] = Elements.FLOAT

    traits = traits_def(Pure())
