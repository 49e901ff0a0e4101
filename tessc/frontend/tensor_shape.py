"""
`Tensor`'s shape methods: views and reshapes (`reshape`, `permute`, `transpose`, `.T`,
`squeeze`, `flatten`, `broadcast_to`, ...) and tiling (`repeat`, `repeat_interleave`).

A mixin of `tessc.frontend.tracer.Tensor` (its base class), in a module of its own so the
tracer stays about tracing. Where PyTorch and NumPy spell one method differently, the
method is PyTorch's and NumPy's other spellings are refused with a `TessError` naming
the unambiguous form. Each method builds through `Tensor._build`, so this module does not
import the tracer (the tracer imports it).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tessc.dialects.builder_types import DimsLike, TessError
from tessc.frontend import composites
from tessc.frontend.torch_semantics import is_int
from tessc.frontend.user_location import located

if TYPE_CHECKING:
    from tessc.frontend.tracer import Tensor


def shape_args(shape: tuple[Any, ...]) -> tuple[int, ...]:
    """`f(2, 3)` or `f((2, 3))` -> (2, 3)."""
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    return tuple(int(d) for d in shape)


class TensorShape:
    """The shape methods of `Tensor` (its base class)."""

    @located
    def reshape(self: Tensor, *shape: Any) -> Tensor:
        """A view: `x.reshape(4, -1)` or `x.reshape((4, -1))`."""
        return self._build("reshape", shape=shape_args(shape))

    @located
    def view(self: Tensor, *shape: Any) -> Tensor:
        """PyTorch's `view(*shape)`: `reshape` (tess values have no layout to respect);
        `view(dtype)`, as NumPy's and PyTorch's, reinterprets the bits as a dtype of the same
        width (`bitcast`)."""
        if len(shape) == 1 and (
            isinstance(shape[0], str) or not isinstance(shape[0], Sequence | int | np.integer)
        ):
            return self.bitcast(shape[0])
        return self._build("reshape", shape=shape_args(shape))

    @located
    def bitcast(self: Tensor, dtype: Any) -> Tensor:
        """The bits of each element as `dtype`, of the same width (`tess.bitcast`, like
        `jax.lax.bitcast_convert_type`): float32/int32, float64/int64, or 16-bit
        bfloat16/float16/int16."""
        return self._build("bitcast", dtype=dtype)

    @located
    def permute(self: Tensor, *dims: Any) -> Tensor:
        return self._build("permute", dims=shape_args(dims))

    @located
    def transpose(self: Tensor, *dims: Any) -> Tensor:
        """PyTorch's `transpose(dim0, dim1)`: dims `dim0` and `dim1` swapped. Any other
        arguments are refused: `permute(*dims)` reorders all dims, `ts.transpose(x, axes)`
        is NumPy's."""
        if len(dims) != 2 or not all(is_int(d) for d in dims):
            raise TessError(
                f"Tensor.transpose(dim0, dim1) swaps two dims (PyTorch), got "
                f"transpose{tuple(dims)!r}; to reorder all dims use x.permute(*dims) or "
                "tessc.transpose(x, axes) (NumPy)"
            )
        return self._build("transpose", dim0=int(dims[0]), dim1=int(dims[1]))

    swapaxes = swapdims = transpose

    @located
    def squeeze(self: Tensor, dim: DimsLike = None, *, axis: DimsLike = None) -> Tensor:
        """Drop the size-1 dims (only `dim`, if given)."""
        return self._build("squeeze", dims=axis if axis is not None else dim)

    @located
    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """PyTorch's `flatten`: dims `start_dim..end_dim` merged into one (all by default:
        a 1-D tensor, as NumPy's `flatten()`). NumPy's `order=` is refused."""
        for name, value in (("start_dim", start_dim), ("end_dim", end_dim)):
            if not is_int(value):
                raise TessError(
                    f"flatten: {name} must be an int (PyTorch's flatten(start_dim, end_dim)), "
                    f"got {value!r}; NumPy's order= is not supported"
                )
        return self._build("flatten", start=start_dim, end=end_dim)

    ravel = flatten

    @property
    @located
    def T(self: Tensor) -> Tensor:
        """All dims reversed, as in PyTorch (and NumPy); rank 0 and 1 unchanged. On other
        ranks than 2, PyTorch warns that `.T` is deprecated; so does this."""
        if self.ndim != 2:
            warnings.warn(
                "x.T on a tensor of rank other than 2 reverses its dims, which PyTorch "
                "deprecates: use x.mT to transpose the last two dims, or x.permute(...)",
                UserWarning,
                stacklevel=3,
            )
        if self.ndim < 2:
            return self
        return self._build("permute", dims=tuple(reversed(range(self.ndim))))

    @property
    @located
    def mT(self: Tensor) -> Tensor:
        """The last two dims swapped (PyTorch's `.mT`: a batch of matrices transposed)."""
        if self.ndim < 2:
            raise TessError(f"x.mT needs a tensor of rank 2 or more, got rank {self.ndim}")
        return self._build("transpose", dim0=-2, dim1=-1)

    @located
    def repeat(self: Tensor, *sizes: Any) -> Tensor:
        """PyTorch's `repeat`: the tensor tiled `sizes[i]` times along dim i (NumPy's `tile`;
        NumPy's `repeat` is `repeat_interleave`)."""
        return self._build(composites.tile, reps=shape_args(sizes))

    @located
    def repeat_interleave(self: Tensor, repeats: int, dim: int | None = None) -> Tensor:
        """Each element repeated `repeats` times along `dim` (the flattened tensor if None):
        PyTorch's `repeat_interleave` with an int, NumPy's `repeat`."""
        if not is_int(repeats):
            raise TessError(f"repeat_interleave: repeats must be an int, got {repeats!r}")
        x = self.flatten() if dim is None else self
        return x._build(composites.repeat_elements, repeats=int(repeats), dim=dim or 0)

    @located
    def broadcast_to(self: Tensor, *shape: Any) -> Tensor:
        return self._build("broadcast_to", shape=shape_args(shape))

    expand = broadcast_to

    @located
    def unsqueeze(self: Tensor, dim: int) -> Tensor:
        return self._build("unsqueeze", dim=dim)
