"""
`Tensor`'s indexing: `take`, `x[key]` and JAX's `x.at[key]` updates.

A mixin of `tessc.frontend.tracer.Tensor` (its base class), in a module of its own so the
tracer stays about tracing. `x[key]` with NumPy's basic indexing (ints, slices of any
step, `None`, `...`) is one `tess.slice` view and a reshape, plus a gather (`tess.take`)
for one integer-array index; several array indices are `advanced_index`'s. Like
`advanced_index` it builds the results through `type(x)`, so it does not import the
tracer (the tracer imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.frontend.advanced_index import (
    IndexUpdateHelper,
    advanced_index,
    expand_boolean_masks,
    is_array_index,
)
from tessc.frontend.user_location import located

if TYPE_CHECKING:
    from tessc.frontend.tracer import Tensor


class TensorIndexing:
    """The indexing methods of `Tensor` (its base class)."""

    @located
    def take(self: Tensor, indices: Any, dim: int = 0, *, axis: int | None = None) -> Tensor:
        """Gather along `dim` at integer `indices` (a Tensor or an array; NumPy's `take`)."""
        dim = axis if axis is not None else dim
        return type(self)(
            self.trace.builder.take(self.value, self.trace.indices(indices), dim), self.trace
        )

    @located
    def __getitem__(self: Tensor, key: Any) -> Tensor:
        """NumPy indexing: ints, slices (any step), `None`, `...` as `tess.slice` views and
        reshapes; integer arrays (or integer Tensors) as a gather (`tess.take`); a boolean
        NumPy mask as its True positions (a traced mask: an error naming `ts.where`)."""
        return basic_index(self, key)

    @located
    def __setitem__(self: Tensor, key: Any, value: Any) -> None:
        raise TessError(
            "a traced Tensor cannot be assigned to in place (its value is an SSA value of "
            "the program, as JAX's arrays are immutable): write x = x.at[key].set(v), or "
            "x = ts.where(mask, v, x) for a boolean mask"
        )

    @property
    def at(self: Tensor) -> IndexUpdateHelper:
        """JAX's functional updates: `x.at[idx].set(v)`, `.add`, `.mul`, `.min`, `.max`."""
        return IndexUpdateHelper(self)


def basic_index(x: Tensor, key: Any) -> Tensor:
    """`x[key]` for NumPy's basic indexing plus one integer-array index (see __getitem__);
    a constant boolean mask is its integer indices (NumPy's rule)."""
    items = list(key) if isinstance(key, tuple) else [key]
    items = expand_boolean_masks(x, items)
    if sum(is_array_index(item, type(x)) for item in items) > 1:
        return advanced_index(x, items)
    if sum(item is Ellipsis for item in items) > 1:
        raise TessError("an index can only have a single ellipsis ('...')")
    consumed = sum(item is not None and item is not Ellipsis for item in items)
    if consumed > x.ndim:
        raise TessError(f"too many indices for a tensor of rank {x.ndim}")
    if any(item is Ellipsis for item in items):
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items[at : at + 1] = [slice(None)] * (x.ndim - consumed)
    arrays = [i for i, item in enumerate(items) if is_array_index(item, type(x))]
    items += [slice(None)] * (x.ndim - sum(item is not None for item in items))
    offsets: list[int] = []
    strides: list[int] = []
    sizes: list[int] = []
    result_shape: list[int] = []
    gather_dim: int | None = None
    dim = 0
    for position, item in enumerate(items):
        if item is None:
            result_shape.append(1)
            continue
        n = x.shape[dim]
        if position in arrays:
            gather_dim = len(result_shape)
            start, step, count = 0, 1, n
            result_shape.append(n)
        elif isinstance(item, slice):
            start, _, step = item.indices(n)
            count = len(range(*item.indices(n)))
            start = start if count else 0
            result_shape.append(count)
        elif isinstance(item, int | np.integer) and not isinstance(item, bool):
            if not -n <= int(item) < n:
                raise TessError(f"index {int(item)} is out of range for dim {dim} of size {n}")
            start, step, count = int(item) % n, 1, 1
        else:
            raise TessError(f"cannot index a Tensor with {type(item).__name__}")
        offsets.append(start)
        strides.append(step)
        sizes.append(count)
        dim += 1
    builder = x.trace.builder
    value = builder.slice(x.value, offsets, strides, sizes)
    if tuple(result_shape) != tuple(sizes):
        value = builder.reshape(value, result_shape)
    if gather_dim is not None:
        # The gathered dim was kept whole: take replaces it with the index dims.
        value = builder.take(value, x.trace.indices(items[arrays[0]]), gather_dim)
    return type(x)(value, x.trace)
