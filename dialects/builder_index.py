"""
`TessBuilder`'s indexing methods: the ops of `tess_index` (`take`, `scatter_add`, `one_hot`,
`argmax`/`argmin`, `slice`, `concatenate`, `stack`).

They are a mixin of `TessBuilder`, apart from the core dialect's methods because they build
another dialect's ops and check another kind of argument: integer index tensors (a boolean
mask has a data-dependent shape, so it is refused here), dims of gathers and concatenations.
Like every method of the builder they build through its primitives (`insert`, `cast`,
`reshape`, `_operands`), so a subclass that overrides those sees these ops too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from xdsl.dialects.builtin import i1, i32, i64
from xdsl.ir import SSAValue

from tessc.dialects import tess_index
from tessc.dialects.builder_types import (
    DTypeLike,
    Operand,
    TessError,
    describe,
    element_type,
    is_float_value,
    numel,
    shape_of,
)
from tessc.dialects.tess_base import element_type_of, format_shape

if TYPE_CHECKING:
    from tessc.dialects.builder import TessBuilder


class IndexBuilder:
    """The `tess_index` methods of `TessBuilder` (its base class)."""

    def _indices(self: TessBuilder, indices: Operand) -> SSAValue:
        if not isinstance(indices, SSAValue):
            if not isinstance(indices, int | np.integer) or isinstance(indices, bool):
                raise TessError(f"indices must be an integer tensor or an int, got {indices!r}")
            return self.fill(float(indices), (), i64)
        if element_type_of(indices) == i1:
            raise TessError(
                f"boolean mask indexing ({describe(indices)}) gives a data-dependent shape, "
                "which tessc cannot trace; use tessc.where"
            )
        if is_float_value(indices):
            raise TessError(f"indices must be integers, got {describe(indices)}")
        return indices

    def take(self: TessBuilder, x: SSAValue, indices: Operand, dim: int = 0) -> SSAValue:
        """`x` gathered along `dim` at integer `indices` (NumPy's `take(x, idx, axis=dim)`:
        the index dims replace `dim`; negative indices count back, others are clamped)."""
        axis = self._dim(dim, len(shape_of(x)))
        if shape_of(x)[axis] == 0:
            raise TessError(f"cannot take from dim {axis} of size 0 in {describe(x)}")
        return self.insert(tess_index.TakeOp(x, self._indices(indices), axis))

    def one_hot(
        self: TessBuilder, labels: SSAValue, classes: int, dtype: DTypeLike = "f32"
    ) -> SSAValue:
        """`(..., classes)`: 1 where the last index is the label, else 0 (a label outside
        [0, classes) gives a zero row)."""
        if not isinstance(classes, int | np.integer) or classes < 1:
            raise TessError(f"one_hot needs a positive number of classes, got {classes!r}")
        return self.insert(
            tess_index.OneHotOp(self._indices(labels), int(classes), element_type(dtype))
        )

    def _arg_reduce(
        self: TessBuilder,
        op: type[tess_index.ArgReduceOp],
        x: SSAValue,
        dim: int | None,
        keepdim: bool,
    ) -> SSAValue:
        if element_type_of(x) == i1:
            x = self.cast(x, i32)
        if dim is None:
            if numel(shape_of(x)) == 0:
                raise TessError(f"{op.name[5:]} of an empty tensor: {describe(x)}")
            flat = self.reshape(x, (numel(shape_of(x)),))
            result = self.insert(op(flat, 0, False))
            return self.reshape(result, (1,) * len(shape_of(x))) if keepdim else result
        axis = self._dim(dim, len(shape_of(x)))
        if shape_of(x)[axis] == 0:
            raise TessError(f"{op.name[5:]} of an empty dim: {describe(x)}")
        return self.insert(op(x, axis, bool(keepdim)))

    def argmax(
        self: TessBuilder, x: SSAValue, dim: int | None = None, keepdim: bool = False
    ) -> SSAValue:
        """The index (int64) of the first maximum along `dim` (of the flattened `x` if None)."""
        return self._arg_reduce(tess_index.ArgMaxOp, x, dim, keepdim)

    def argmin(
        self: TessBuilder, x: SSAValue, dim: int | None = None, keepdim: bool = False
    ) -> SSAValue:
        return self._arg_reduce(tess_index.ArgMinOp, x, dim, keepdim)

    def slice(
        self: TessBuilder,
        x: SSAValue,
        offsets: Sequence[int],
        strides: Sequence[int],
        sizes: Sequence[int],
    ) -> SSAValue:
        """`y[i...] = x[offsets + i * strides]` of shape `sizes` (`tess.slice`)."""
        full = shape_of(x)
        if not len(full) == len(sizes) == len(offsets) == len(strides):
            raise TessError(f"slice needs one offset, stride and size per dim of {describe(x)}")
        for d, (n, size, offset, stride) in enumerate(
            zip(full, sizes, offsets, strides, strict=True)
        ):
            last = offset + (size - 1) * stride
            if stride == 0 or (size and not (0 <= offset < n and 0 <= last < n)):
                raise TessError(f"slice of dim {d} leaves {format_shape(full)}")
        if tuple(sizes) == full and all(o == 0 for o in offsets) and all(s == 1 for s in strides):
            return x
        return self.insert(tess_index.SliceOp(x, offsets, strides, sizes))

    def concatenate(self: TessBuilder, xs: Sequence[SSAValue], dim: int = 0) -> SSAValue:
        """The tensors one after another along `dim` (dtypes promoted)."""
        if not xs:
            raise TessError("concatenate needs at least one tensor")
        values = self._operands(*xs)
        rank = len(shape_of(values[0]))
        if any(len(shape_of(v)) != rank for v in values):
            shapes = ", ".join(format_shape(shape_of(v)) for v in values)
            raise TessError(f"cannot concatenate tensors of different ranks: {shapes}")
        if rank == 0:
            raise TessError("cannot concatenate rank-0 tensors (stack them)")
        axis = self._dim(dim, rank)
        try:
            tess_index.concat_shape([shape_of(v) for v in values], axis)
        except ValueError as e:
            raise TessError(f"cannot concatenate: {e}") from None
        if len(values) == 1:
            return values[0]
        return self.insert(tess_index.ConcatOp(values, axis))

    def stack(self: TessBuilder, xs: Sequence[SSAValue], dim: int = 0) -> SSAValue:
        """The tensors (of one shape) along a new dim `dim`."""
        if not xs:
            raise TessError("stack needs at least one tensor")
        shapes = {shape_of(v) for v in xs if isinstance(v, SSAValue)}
        if len(shapes) != 1:
            names = ", ".join(format_shape(s) for s in shapes)
            raise TessError(f"stack needs tensors of one shape, got {names}")
        rank = len(next(iter(shapes)))
        if not -rank - 1 <= dim <= rank:
            raise TessError(f"dim {dim} is out of range for stacking rank-{rank} tensors")
        return self.concatenate([self.unsqueeze(v, dim) for v in self._operands(*xs)], dim)

    def scatter_add(
        self: TessBuilder, y: SSAValue, indices: Operand, dim: int, shape: Sequence[int]
    ) -> SSAValue:
        """Zeros of `shape` with each element of `y` added at the position along `dim`
        that `take(result, indices, dim)` reads it from (`tess.scatter_add`, take's
        adjoint: repeated indices add up)."""
        shape = tuple(int(n) for n in shape)
        axis = self._dim(dim, len(shape))
        if shape[axis] == 0:
            raise TessError(f"cannot scatter into dim {axis} of size 0 of {format_shape(shape)}")
        index = self._indices(indices)
        expected = tess_index.gathered_shape(shape, shape_of(index), axis)
        if shape_of(y) != expected:
            raise TessError(
                f"scatter_add of {describe(y)} at indices {describe(index)} along dim {axis} "
                f"needs updates of shape {format_shape(expected)} for a result of shape "
                f"{format_shape(shape)}"
            )
        return self.insert(tess_index.ScatterAddOp(y, index, axis, shape))
