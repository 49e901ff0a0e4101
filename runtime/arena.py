"""
`tessc.arena`: keep many arrays in one contiguous buffer, so a horizontally fused program
reads them without a copy.

`tess-fuse-horizontal` compiles an optimizer step over hundreds of parameters into one
kernel over 1-D arenas: every parameter back to back in one buffer, every gradient in
another, every state in a third (members in argument order, no padding). The compiled
`Executable` still takes the separate arrays; when the arrays it is given are views of one
buffer at exactly those offsets it passes the buffer as it is, otherwise it packs them
(one copy per call). `arena` makes such views:

    params = tessc.arena(params)          # views of one buffer, in this order
    states = tessc.arena([np.zeros_like(p) for p in params])
    new_params, new_states = ..., step(lr, *params, *grads, *states)

With the parameters donated (`{tess.donated}`), the step updates the buffer in place and
returns the very arrays it was given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from tessc.runtime.abi import ALIGNMENT
from tessc.runtime.host_memory import aligned_empty, arena_of


def arena(arrays: Sequence[ArrayLike], dtype: DTypeLike | None = None) -> list[np.ndarray]:
    """Copies of `arrays`, as C-contiguous views of one new `ALIGNMENT`-aligned buffer, back
    to back in order (array k starts where array k-1 ends).

    All arrays get one dtype: `dtype`, else the first array's. The buffer lives as long as
    any of the views.
    """
    values = [np.asarray(a) for a in arrays]
    if not values:
        return []
    element = np.dtype(dtype) if dtype is not None else values[0].dtype
    total = sum(v.size for v in values)
    buffer = aligned_empty(total * element.itemsize, ALIGNMENT).view(element)
    views: list[np.ndarray] = []
    offset = 0
    for value in values:
        view = buffer[offset : offset + value.size].reshape(value.shape)
        view[...] = value
        views.append(view)
        offset += value.size
    return views


def arena_buffer(views: Sequence[np.ndarray]) -> np.ndarray | None:
    """The 1-D array the `views` lie in back to back, in order, if they do (as `arena`
    makes them); else None."""
    if not views:
        return None
    offsets: list[int] = []
    total = 0
    for view in views:
        offsets.append(total)
        total += view.size
    if any(v.dtype != views[0].dtype or not v.flags.c_contiguous for v in views):
        return None
    return arena_of(list(views), offsets, total)


__all__ = ["ALIGNMENT", "arena", "arena_buffer"]
