"""
Tensor types and hypothesis strategies for shapes: plain shapes, shapes that broadcast by
the seed rules (`broadcastable_pair`, `broadcastable_triple`), reduction dim lists and
batched matmul shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from xdsl.dialects.builtin import Float32Type, Float64Type, TensorType, f32, f64
from xdsl.ir import Attribute

from tessc.dialects.tess import broadcast_shapes

Shape = tuple[int, ...]
MAX_RANK = 4

# ---------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------

_ELEMENT_TYPES: dict[str, Attribute] = {"f32": f32, "f64": f64}


def element_type(dtype: str | np.dtype | type | Attribute) -> Attribute:
    """`"f32"`, `np.float32`, `np.dtype("float64")` or an xDSL float type -> f32/f64."""
    if isinstance(dtype, Float32Type | Float64Type):
        return dtype
    if isinstance(dtype, str) and dtype in _ELEMENT_TYPES:
        return _ELEMENT_TYPES[dtype]
    numpy = np.dtype(dtype)  # type: ignore[arg-type]
    if numpy == np.float32:
        return f32
    if numpy == np.float64:
        return f64
    raise ValueError(f"tess tensors hold f32 or f64, not {dtype}")


def tensor_type(shape: Sequence[int], dtype: str | np.dtype | type | Attribute) -> TensorType:
    """`tensor_type((3, 4), "f32")` is `tensor<3x4xf32>`."""
    return TensorType(element_type(dtype), list(shape))


def _as_tensor_type(typ: TensorType | tuple[Sequence[int], Any]) -> TensorType:
    if isinstance(typ, TensorType):
        return typ
    shape, dtype = typ
    return tensor_type(shape, dtype)


# ---------------------------------------------------------------------------------------
# shape strategies
# ---------------------------------------------------------------------------------------


def shapes(
    min_rank: int = 0, max_rank: int = MAX_RANK, max_side: int = 5, min_side: int = 1
) -> st.SearchStrategy[Shape]:
    """Static shapes of rank in [min_rank, max_rank] with sides in [min_side, max_side]."""
    sides = st.integers(min_side, max_side)
    return st.lists(sides, min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def _partner_shape(draw: st.DrawFn, shape: Shape) -> Shape:
    """A shape that broadcasts with `shape` to `shape` (some dims 1, leading dims dropped)."""
    kept = draw(st.integers(0, len(shape)))
    partner = shape[len(shape) - kept :]
    return tuple(1 if draw(st.booleans()) else d for d in partner)


@st.composite
def broadcastable_shapes(
    draw: st.DrawFn, count: int, min_rank: int = 0, max_rank: int = MAX_RANK, max_side: int = 5
) -> tuple[Shape, ...]:
    """`count` shapes whose broadcast is a drawn shape of rank in [min_rank, max_rank]."""
    full = draw(shapes(min_rank, max_rank, max_side))
    result = tuple(draw(_partner_shape(full)) for _ in range(count))
    # The broadcast may be smaller than `full` if every operand dropped or unit-ed a dim;
    # that is still a valid broadcasting case, so it is kept as drawn.
    broadcast_shapes(*result)
    return result


def broadcastable_pair(
    min_rank: int = 0, max_rank: int = MAX_RANK, max_side: int = 5
) -> st.SearchStrategy[tuple[Shape, ...]]:
    """Two shapes that broadcast by the seed rules, e.g. `((3, 1, 5), (4, 1))`."""
    return broadcastable_shapes(2, min_rank, max_rank, max_side)


def broadcastable_triple(
    min_rank: int = 0, max_rank: int = MAX_RANK, max_side: int = 5
) -> st.SearchStrategy[tuple[Shape, ...]]:
    """Three shapes that broadcast together (for `select`)."""
    return broadcastable_shapes(3, min_rank, max_rank, max_side)


def reduce_dims(shape: Sequence[int], min_size: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    """Distinct dims of `shape` in any order (the tess verifier accepts any order)."""
    rank = len(shape)
    if rank == 0:
        return st.just(())
    return st.lists(
        st.integers(0, rank - 1), min_size=min(min_size, rank), max_size=rank, unique=True
    ).map(tuple)


@st.composite
def matmul_shapes(
    draw: st.DrawFn, max_batch_rank: int = 2, max_side: int = 5
) -> tuple[Shape, Shape]:
    """`(..., n, k)` and `(..., k, m)` whose batch dims broadcast (and may differ in rank)."""
    lhs_batch, rhs_batch = draw(broadcastable_pair(0, max_batch_rank, max_side))
    n, k, m = (draw(st.integers(1, max_side)) for _ in range(3))
    return (*lhs_batch, n, k), (*rhs_batch, k, m)
