"""
Dynamic dims (`?`, `tensor<?x64xf32>`): one dynamic size per function.

A traced function made generic in its batch (`jit`'s automatic dynamic shapes) has every
varying dim as `?`, and they are all the same size, N: `tessc.frontend.jit` passes only
arguments whose `?` dims agree (the entry check). So a pass that needs a `?` dim's value
reads N once at the function's entry, `memref.dim` (or `tensor.dim`) of the first argument
with a `?` dim (`entry_dynamic_size`), and sizes every allocation and loop bound of a `?`
dim by it, as MLIR's `memref.alloc(%n)` and linalg's loop ranges do.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence

from xdsl.dialects import arith, func, memref, tensor
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, MemRefType, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter


def is_dynamic(dim: int) -> bool:
    return dim == DYNAMIC_INDEX or dim == -1


def has_dynamic_dims(typ: Attribute) -> bool:
    return isinstance(typ, MemRefType | TensorType) and any(is_dynamic(d) for d in typ.get_shape())


def dynamic_count(typ: Attribute) -> int:
    if not isinstance(typ, MemRefType | TensorType):
        return 0
    return sum(is_dynamic(d) for d in typ.get_shape())


def operation_has_dynamic_dims(op: Operation) -> bool:
    """Any operand or result of `op` or of an op nested in it has a `?` dim."""
    return any(
        has_dynamic_dims(v.type) for inner in op.walk() for v in (*inner.operands, *inner.results)
    )


def entry_dynamic_size(
    block: Block, arguments: Sequence[SSAValue] | None = None
) -> SSAValue | None:
    """N, read once at the top of `block` (a function's entry): the `?` dim of its first
    argument (of `arguments`, all by default) that has one; None where none has one."""
    arguments = list(block.args) if arguments is None else list(arguments)
    for op in block.ops:
        if isinstance(op, memref.DimOp | tensor.DimOp) and op.source in arguments:
            return op.result
        if not isinstance(op, arith.ConstantOp | memref.DimOp | tensor.DimOp):
            break
    for arg in arguments:
        typ = arg.type
        if has_dynamic_dims(typ):
            assert isinstance(typ, MemRefType | TensorType)
            position = next(i for i, d in enumerate(typ.get_shape()) if is_dynamic(d))
            index = arith.ConstantOp.from_int_and_width(position, IndexType())
            dim_class = memref.DimOp if isinstance(typ, MemRefType) else tensor.DimOp
            dim = dim_class(arg, index)
            Rewriter.insert_op([index, dim], InsertPoint.at_start(block))
            dim.result.name_hint = "n"
            return dim.result
    return None


def dynamic_sizes(typ: Attribute, size: SSAValue | None) -> Sequence[SSAValue]:
    """The dynamic-size operands an allocation of `typ` takes: N for each `?`."""
    count = dynamic_count(typ)
    if count and size is None:
        raise ValueError(f"a `?` dim in {typ} where the function has no dynamic argument")
    return [size] * count if size is not None else []


def function_entry(block: Block) -> Block:
    """The entry block of the function (the outermost region's first block) `block` is in."""
    op = block.parent_op()
    while op is not None and not isinstance(op, func.FuncOp):
        block = op.parent_block()  # type: ignore[assignment]
        op = block.parent_op() if block is not None else None
    return op.body.block if op is not None else block


# ---------------------------------------------------------------------------------------
# the dynamic size while a trace runs
# ---------------------------------------------------------------------------------------


class DynamicShapeError(TypeError):
    """A traced function computes with the dynamic size in a way a `?` dim cannot carry
    (arithmetic on it, a `?` dim meeting a static one): `jit` compiles it statically."""


class SymDim(int):
    """A `?` dim as a traced function sees it (`Tensor.shape`): an int holding the
    current size (`hint`) for code that only reads it, equal only to another `SymDim`
    (the function has one dynamic size), so a `?` that meets a static dim of the same
    value is a mismatch, not a coincidence. Arithmetic on it raises `DynamicShapeError`;
    used as an operand of a Tensor op it is N at run time (`Trace.operand`)."""

    def __new__(cls, hint: int) -> SymDim:
        return super().__new__(cls, hint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymDim)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, SymDim)

    def __hash__(self) -> int:
        return hash("tessc.SymDim")

    def __repr__(self) -> str:
        return "?"

    __str__ = __repr__

    def _refuse(self, *_: object) -> int:
        raise DynamicShapeError(
            "arithmetic on a dynamic dim (the batch size): tessc compiles this function "
            "for each size (pass dynamic=False to jit to skip the attempt)"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = _refuse
    __mod__ = __rmod__ = __pow__ = __rpow__ = __neg__ = __divmod__ = _refuse


DYNAMIC_HINT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "tessc_dynamic_hint", default=None
)
"""The size a `?` dim reads as (a `SymDim`) in the trace running now; None outside one."""


def traced_dim(dim: int) -> int:
    """A dim of a type as the traced function sees it: a `?` is a `SymDim` in a trace."""
    if is_dynamic(dim):
        hint = DYNAMIC_HINT.get()
        return SymDim(hint) if hint is not None else DYNAMIC_INDEX
    return dim


def type_dim(dim: int) -> int:
    """A dim of a shape the frontend built, as a type holds it: `?` for a `SymDim`."""
    return DYNAMIC_INDEX if isinstance(dim, SymDim) or is_dynamic(dim) else int(dim)
