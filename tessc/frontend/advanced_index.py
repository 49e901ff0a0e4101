"""
Gathers and scatters beyond one integer-array index, built from `tess.take` and
`tess.scatter_add` (no op of their own, so they fuse and differentiate like the rest):

- `x[i, j]`, several integer-array (or int) indices, NumPy's advanced indexing: the indexed
  dims are flattened into one, the indices into one linear index, and one `take` gathers;
- `take_along_axis(x, idx, axis)` (NumPy's), a `take` from the flattened tensor at
  `base + idx * stride`, `base` a constant of the other dims' offsets;
- `x.at[key].set/add/mul/min/max(v)` (JAX's functional updates): `add` is a `scatter_add`
  of `v` at the flat positions `x[key]` reads; the others compare each position of `x` with
  each updated position, a (size, updates) mask reduced along the updates (so `set` is
  NumPy's last-write-wins on repeated indices, `mul`/`min`/`max` combine them all);
- boolean masks: a constant (NumPy) mask is its `np.nonzero` indices, as in NumPy; a
  traced mask cannot read (`x[mask]`'s shape depends on its values: an error naming
  `ts.where`, as JAX's NonConcreteBooleanIndexError) but can update, as a `select`.

Indices count back from the end when negative and are clamped to the dim, as `take` does.
This module works on the tracer's `Tensor` without importing it (the tracer imports this).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tessc.dialects.builder_types import TessError
from tessc.dialects.tess_base import broadcast_shapes
from tessc.frontend.user_location import located


def _tensor(x: Any, value: Any) -> Any:
    """A Tensor of `x`'s class in `x`'s trace around `value`."""
    return type(x)(value, x.trace)


def _index_tensor(x: Any, index: Any) -> Any:
    """`index` (an int, an integer array or Tensor) as an i64 Tensor in `x`'s trace."""
    value = x.trace.indices(index)
    return _tensor(x, value).astype(np.int64)


def _normalised(index: Any, n: int) -> Any:
    """Negative indices counted back from `n`, then clamped to [0, n): what `take` reads."""
    return ((index < 0).astype(np.int64) * n + index).clip(0, n - 1)


def _constant(x: Any, array: np.ndarray) -> Any:
    return _tensor(x, x.trace.constant(np.ascontiguousarray(array), array.dtype))


def is_array_index(item: Any, tensor_type: type) -> bool:
    return isinstance(item, tensor_type | np.ndarray | list) or (
        isinstance(item, np.generic) and not isinstance(item, np.integer)
    )


NONCONCRETE_MASK = (
    "`x[mask]` with a traced boolean mask has a shape that depends on the mask's values, "
    "which a compiled program cannot have (JAX raises NonConcreteBooleanIndexError here): "
    "use ts.where(mask, x, 0) to keep the shape, or make the mask a NumPy array (a "
    "constant: then x[mask] is NumPy's)"
)


def is_boolean_mask(item: Any, tensor_type: type) -> bool:
    """A boolean array index: a bool Tensor, a NumPy bool array or a list of bools."""
    if isinstance(item, tensor_type):
        return item.dtype == np.bool_
    if isinstance(item, np.ndarray):
        return item.dtype == np.bool_
    return isinstance(item, list) and np.asarray(item).dtype == np.bool_


def expand_boolean_masks(x: Any, items: list[Any]) -> list[Any]:
    """`items` with each constant boolean mask replaced by the integer index arrays of its
    True elements (`np.nonzero`, as NumPy does); a traced mask is a TessError."""
    if not any(is_boolean_mask(item, type(x)) for item in items):
        return items
    if any(isinstance(item, type(x)) and is_boolean_mask(item, type(x)) for item in items):
        raise TessError(NONCONCRETE_MASK)
    consumed = sum(
        np.ndim(item) if is_boolean_mask(item, type(x)) else 1
        for item in items
        if item is not None and item is not Ellipsis
    )
    expanded: list[Any] = []
    dim = 0
    for item in items:
        if item is Ellipsis:
            dim += x.ndim - consumed
        elif item is not None and not is_boolean_mask(item, type(x)):
            dim += 1
        if not is_boolean_mask(item, type(x)):
            expanded.append(item)
            continue
        mask = np.asarray(item)
        if mask.ndim == 0 or mask.shape != tuple(x.shape[dim : dim + mask.ndim]):
            raise TessError(
                f"boolean index of shape {mask.shape} does not match the indexed dims "
                f"{tuple(x.shape[dim : dim + mask.ndim])} of a tensor of shape {x.shape}"
            )
        expanded.extend(index.astype(np.int64) for index in np.nonzero(mask))
        dim += mask.ndim
    return expanded


def advanced_index(x: Any, items: list[Any]) -> Any:
    """`x[items]` with several integer-array items (NumPy's advanced indexing: the
    broadcast index dims in place of the indexed dims when those are adjacent, else first).
    Other items may be slices or ints (an int counts as a 0-d index array)."""
    if any(item is None for item in items):
        raise TessError("None (newaxis) cannot be combined with several index arrays")
    if sum(item is Ellipsis for item in items) > 1:
        raise TessError("an index can only have a single ellipsis ('...')")
    ellipsis = [d for d, item in enumerate(items) if item is Ellipsis]
    if ellipsis:
        at = ellipsis[0]
        items[at : at + 1] = [slice(None)] * (x.ndim - len(items) + 1)
    if len(items) > x.ndim:
        raise TessError(f"too many indices for a tensor of rank {x.ndim}")
    items = items + [slice(None)] * (x.ndim - len(items))
    advanced = [d for d, item in enumerate(items) if not isinstance(item, slice)]
    sliced = x[tuple(item if d not in advanced else slice(None) for d, item in enumerate(items))]
    rest = [d for d in range(x.ndim) if d not in advanced]
    sizes = [sliced.shape[d] for d in advanced]
    indices = [
        _normalised(_index_tensor(x, items[d]), n) for d, n in zip(advanced, sizes, strict=True)
    ]
    try:
        index_shape = broadcast_shapes(*(i.shape for i in indices))
    except ValueError:
        shapes = ", ".join(str(i.shape) for i in indices)
        raise TessError(f"index arrays of shapes {shapes} do not broadcast together") from None
    linear = indices[-1]
    stride = sizes[-1]
    for index, n in zip(indices[-2::-1], sizes[-2::-1], strict=True):
        linear = linear + index * stride
        stride *= n
    flat = sliced.permute(*advanced, *rest).reshape(
        (math.prod(sizes), *(sliced.shape[d] for d in rest))
    )
    result = flat.take(linear.broadcast_to(index_shape), 0)
    first = advanced[0]
    if advanced == list(range(first, first + len(advanced))) and first > 0:
        k = len(index_shape)
        order = [*range(k, k + first), *range(k), *range(k + first, result.ndim)]
        result = result.permute(*order)
    return result


@located
def take_along_axis(x: Any, indices: Any, axis: int) -> Any:
    """NumPy's `take_along_axis`: `y[..., i, ...] = x[..., indices[..., i, ...], ...]`, the
    index tensor of `x`'s rank, its other dims broadcasting with `x`'s."""
    if not hasattr(x, "trace"):
        raise TessError("take_along_axis needs a traced Tensor as its first operand")
    index = _index_tensor(x, indices)
    if index.ndim != x.ndim:
        raise TessError(
            f"take_along_axis needs indices of the input's rank {x.ndim}, got indices of "
            f"shape {index.shape} for an input of shape {x.shape}"
        )
    if not -x.ndim <= axis < x.ndim:
        raise TessError(f"axis {axis} is out of range for an input of shape {x.shape}")
    axis %= x.ndim
    others = [d for d in range(x.ndim) if d != axis]
    try:
        outer = broadcast_shapes(
            tuple(x.shape[d] for d in others), tuple(index.shape[d] for d in others)
        )
    except ValueError:
        raise TessError(
            f"take_along_axis: indices of shape {index.shape} do not broadcast with the "
            f"input of shape {x.shape} outside axis {axis}"
        ) from None
    n = x.shape[axis]
    if n == 0:
        raise TessError(f"cannot take along axis {axis} of size 0 of shape {x.shape}")
    full = (*outer[:axis], n, *outer[axis:])
    out = (*outer[:axis], index.shape[axis], *outer[axis:])
    if math.prod(full) == 0:  # nothing to gather from, or nothing gathered: empty
        return _tensor(x, x.trace.builder.fill(0, out, x.dtype))
    strides = np.cumprod((1, *full[:0:-1]))[::-1]
    base = np.zeros(out, dtype=np.int64)
    for d in others:
        shape = [1] * len(out)
        shape[d] = out[d]
        base = base + np.arange(out[d], dtype=np.int64).reshape(shape) * strides[d]
    linear = _normalised(index, n).broadcast_to(out) * int(strides[axis]) + _constant(x, base)
    return x.broadcast_to(full).reshape((math.prod(full),)).take(linear, 0)


class IndexUpdate:
    """`x.at[key]`: the functional updates of the elements `x[key]` reads."""

    def __init__(self, x: Any, key: Any):
        self.x = x
        self.key = key

    def _positions_and_updates(self, values: Any) -> tuple[Any, Any]:
        """The flat positions `x[key]` reads and `values` broadcast to them, both 1-D."""
        x = self.x
        iota = _constant(x, np.arange(max(math.prod(x.shape), 1), dtype=np.int64)[: x.size])
        positions = iota.reshape(x.shape)[self.key]
        operand = x.trace.operand(values, x.dtype)
        if operand is None:
            raise TessError(f"cannot update a Tensor with a {type(values).__name__}")
        if isinstance(operand, int | float | bool):
            operand = x.trace.builder.fill(operand, (), x.dtype)
        v = _tensor(x, operand)
        if v.dtype != x.dtype:
            v = v.astype(x.dtype)
        try:
            v = v.broadcast_to(positions.shape)
        except TessError:
            raise TessError(
                f"updates of shape {v.shape} do not broadcast to the indexed shape "
                f"{positions.shape} of x[{self.key!r}] (x of shape {x.shape})"
            ) from None
        return positions.reshape((positions.size,)), v.reshape((positions.size,))

    def _traced_mask(self) -> Any:
        """The key if it is one traced boolean mask (then an update is a select), else None."""
        key = self.key
        return key if isinstance(key, type(self.x)) and key.dtype == np.bool_ else None

    def _masked(self, values: Any, update: Callable[[Any], Any]) -> Any:
        """`x` where the traced `mask` is False, `update(v)` where it is True: NumPy's
        `x[mask] op= v` for a `v` that broadcasts to each selected row (`x.shape[mask.ndim:]`,
        so the number of True elements does not matter); any other `v` is a TessError."""
        x, mask = self.x, self.key
        if mask.shape != x.shape[: mask.ndim]:
            raise TessError(
                f"boolean index of shape {mask.shape} does not match the leading dims of a "
                f"tensor of shape {x.shape}"
            )
        operand = x.trace.operand(values, x.dtype)
        if operand is None:
            raise TessError(f"cannot update a Tensor with a {type(values).__name__}")
        if isinstance(operand, int | float | bool):
            operand = x.trace.builder.fill(operand, (), x.dtype)
        v = _tensor(x, operand)
        rest = tuple(x.shape[mask.ndim :])
        try:
            fits = broadcast_shapes(v.shape, rest) == rest
        except ValueError:
            fits = False
        if not fits:
            raise TessError(
                f"x.at[mask] with a traced boolean mask takes updates that broadcast to "
                f"{rest} (each selected element); updates of shape {v.shape} depend on how "
                "many elements the mask selects: use ts.where(mask, new_x, x)"
            )
        condition = mask.reshape((*mask.shape, *(1,) * len(rest)))
        return self._where(condition, update(v.astype(x.dtype)), x)

    def add(self, values: Any) -> Any:
        x = self.x
        if self._traced_mask() is not None:
            return self._masked(values, lambda v: x + v)
        positions, v = self._positions_and_updates(values)
        if v.size == 0:
            return x
        builder = x.trace.builder
        scattered = builder.scatter_add(v.value, positions.value, 0, (x.size,))
        return x + _tensor(x, scattered).reshape(x.shape)

    def _matches(self, positions: Any) -> Any:
        """(size, updates) bool: flat element p of x is updated by update k."""
        x = self.x
        elements = _constant(x, np.arange(x.size, dtype=np.int64).reshape(-1, 1))
        return positions.reshape((1, positions.size)) == elements

    def set(self, values: Any) -> Any:
        x = self.x
        if self._traced_mask() is not None:
            return self._masked(values, lambda v: v)
        positions, v = self._positions_and_updates(values)
        if v.size == 0:
            return x
        order = _constant(x, np.arange(v.size, dtype=np.int64).reshape(1, -1))
        last = self._where(self._matches(positions), order, -1).amax(1)
        picked = v.take(last.clip(0, v.size - 1), 0)
        flat = self._where(last >= 0, picked, x.reshape((x.size,)))
        return flat.reshape(x.shape)

    def _combine(self, values: Any, identity: float, reduce: str) -> Any:
        x = self.x
        positions, v = self._positions_and_updates(values)
        if v.size == 0:
            return x
        spread = self._where(self._matches(positions), v.reshape((1, v.size)), identity)
        return getattr(spread, reduce)(1).reshape(x.shape)

    def mul(self, values: Any) -> Any:
        if self._traced_mask() is not None:
            return self._masked(values, lambda v: self.x * v)
        return self.x * self._combine(values, 1, "prod")

    def min(self, values: Any) -> Any:
        if self._traced_mask() is not None:
            return self._masked(values, self.x.minimum)
        return self.x.minimum(self._combine(values, self._extreme(+1), "amin"))

    def max(self, values: Any) -> Any:
        if self._traced_mask() is not None:
            return self._masked(values, self.x.maximum)
        return self.x.maximum(self._combine(values, self._extreme(-1), "amax"))

    def get(self) -> Any:
        return self.x[self.key]

    def _extreme(self, sign: int) -> float:
        dtype = self.x.dtype
        if dtype.kind == "f":
            return sign * math.inf
        info = np.iinfo(dtype) if dtype.kind in "iu" else None
        if info is None:
            return 1 if sign > 0 else 0
        return int(info.max) if sign > 0 else int(info.min)

    def _where(self, condition: Any, a: Any, b: Any) -> Any:
        x = self.x
        trace = x.trace
        dtype = a.dtype if isinstance(a, type(x)) else x.dtype
        operands = [trace.operand(v, dtype) for v in (a, b)]
        value = trace.builder.select(trace.own(condition), *operands)
        return _tensor(x, value)


class IndexUpdateHelper:
    """`x.at`, subscripted: `x.at[key]` is an `IndexUpdate`."""

    def __init__(self, x: Any):
        self.x = x

    def __getitem__(self, key: Any) -> IndexUpdate:
        return IndexUpdate(self.x, key)
