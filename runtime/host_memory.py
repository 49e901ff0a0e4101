"""
Host memory of a compiled CPU program: aligned buffers, arenas found in arrays, outputs
carved from one buffer.

- `aligned`, `aligned_empty`: byte arrays that start on an alignment (`abi.ALIGNMENT`, by
  which `tessc.arena` and a host's workspace are laid out); `workspace_buffer`: a host's
  workspace, from `abi.HUGE_PAGE` bytes on a fresh mapping advised huge pages;
- `arena_of`: the one buffer some arrays are views of at given offsets, if they are (an
  arena `Executable` then passes without a copy);
- `carve_plan`, `carve_outputs`: a program's outputs as views of one buffer per dtype, back
  to back in order, which another program reads as an arena without a copy;
- `disjoint`: whether arrays share no byte (sorted byte ranges).

`tessc.runtime.executor.Executable` uses them all; `tessc.arena` and the distributed layout
make their buffers with `aligned_empty`.
"""

from __future__ import annotations

import mmap
import operator
from collections.abc import Sequence
from itertools import compress, repeat

import numpy as np

from tessc.runtime.abi import ALIGNMENT, HUGE_PAGE
from tessc.runtime.output_cache import empty as output_empty
from tessc.runtime.signatures import ArraySpec

BYTE = np.dtype(np.uint8)

BULK_ARRAYS = 16
"""From this many arrays, `arena_of` reads their addresses in one compiled call
(`array_fields`) rather than one Python attribute read each."""


def arena_of(
    arrays: Sequence[np.ndarray],
    offsets: Sequence[int],
    size: int,
    byte_offsets: np.ndarray | None = None,
) -> np.ndarray | None:
    """The 1-D array of `size` elements whose elements from `offsets[k]` on are `arrays[k]`
    (C-contiguous, one dtype), if they are views of one memory owner laid out so; else
    None. `byte_offsets`: the offsets times the itemsize as int64, if the caller has them."""
    if not arrays:
        return None
    itemsize = arrays[0].dtype.itemsize
    if len(arrays) >= BULK_ARRAYS:
        from tessc.runtime import array_fields  # loads Numba: only for many arrays

        if byte_offsets is None:
            byte_offsets = np.asarray(offsets, np.int64) * itemsize
        located = array_fields.common_start(arrays, byte_offsets)
        if located is not None:
            start, first = located
            return None if first < 0 else _arena_at(arrays[first], start, size)
    # An empty array has no element to place (NumPy may point it anywhere): skipped.
    sizes = list(map(operator.attrgetter("size"), arrays))
    placed = list(compress(arrays, sizes))
    if not placed:
        return None
    if len({id(a if a.base is None else a.base) for a in placed}) != 1:
        return None  # not one memory owner
    steps = map(operator.mul, compress(offsets, sizes), repeat(itemsize))
    addresses = (a.__array_interface__["data"][0] for a in placed)
    starts = set(map(operator.sub, addresses, steps))  # each address - its offset
    if len(starts) != 1:
        return None
    return _arena_at(placed[0], starts.pop(), size)


def _arena_at(first: np.ndarray, start: int, size: int) -> np.ndarray | None:
    """The `size` elements of `first`'s dtype from address `start` in `first`'s memory
    owner, if they lie inside it."""
    itemsize = first.dtype.itemsize
    root = first if first.base is None else first.base
    if not isinstance(root, np.ndarray) or not root.flags.c_contiguous:
        return None
    begin = start - root.__array_interface__["data"][0]
    if begin < 0 or begin + size * itemsize > root.nbytes:
        return None
    flat = root.reshape(-1).view(np.uint8)[begin : begin + size * itemsize]
    return flat.view(first.dtype)


def aligned(raw: np.ndarray, size: int, alignment: int) -> np.ndarray:
    """The `size` bytes of the byte array `raw` that start at its first address on a
    multiple of `alignment` (`raw` has `alignment` bytes to spare)."""
    start = -raw.ctypes.data % alignment
    return raw[start : start + size]


def aligned_empty(size: int, alignment: int) -> np.ndarray:
    """A new byte array of `size` bytes starting on a multiple of `alignment`."""
    return aligned(np.empty(size + alignment, dtype=np.uint8), size, alignment)


def workspace_buffer(size: int) -> np.ndarray:
    """A new byte array of `size` for a host's workspace: 64-byte aligned; from `HUGE_PAGE`
    bytes on, a fresh anonymous mapping starting on a `HUGE_PAGE` boundary and advised
    huge pages (`madvise(MADV_HUGEPAGE)`; an advice, where the system refuses nothing
    changes). Fresh matters: `np.empty` may reuse heap memory already mapped in 4 KiB
    pages, which the advice does not turn into huge ones, and packed matmul panels on
    4 KiB pages crowd L2 sets (`abi.HUGE_PAGE`)."""
    if size < HUGE_PAGE:
        return aligned_empty(size, ALIGNMENT)
    if not hasattr(mmap, "MAP_ANONYMOUS"):  # not a POSIX mmap: no advice to give
        return aligned_empty(size, HUGE_PAGE)
    # Private: a shared anonymous mapping is shmem, which the advice does not cover.
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    region = mmap.mmap(-1, size + HUGE_PAGE, flags=flags)  # the array keeps it mapped
    raw = np.frombuffer(region, dtype=np.uint8)
    workspace = aligned(raw, size, HUGE_PAGE)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        region.madvise(advice, workspace.ctypes.data - raw.ctypes.data, size)
    return workspace


def disjoint(arrays: Sequence[np.ndarray]) -> bool:
    """Whether no two of `arrays` share a byte: their byte ranges, sorted by address, each
    end before the next begins (O(n log n); `np.shares_memory` over every pair of a train
    step's ~100 inputs, its optimizer state views of one arena each, cost ~2.5 ms a call).
    False, not proven, where an array is not C-contiguous (its range is not its bytes)."""
    spans = []
    for array in arrays:
        if not array.flags.c_contiguous:
            return False
        if array.nbytes:
            start = array.__array_interface__["data"][0]
            spans.append((start, start + array.nbytes))
    spans.sort()
    return all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))


CarvePlan = tuple[
    tuple[tuple[np.dtype, int], ...], tuple[tuple[int, int, int, tuple[int, ...]], ...]
]
"""(the buffers: (dtype, elements) each; the outputs: (buffer, offset, size, shape) each)."""


def carve_plan(specs: Sequence[ArraySpec]) -> CarvePlan | None:
    """How to allocate the outputs `specs` as views of one buffer per dtype, back to back
    in order, when there are at least two of static shape: then a program's outputs that
    another program packs into an arena (a gradient function's gradients, an optimizer
    step's `grads`) are passed to it without a copy (`arena_of`), and a call allocates one
    array per dtype instead of one per output. None otherwise."""
    if len(specs) < 2 or any(None in spec.shape for spec in specs):
        return None
    buffers: dict[np.dtype, int] = {}
    order: dict[np.dtype, int] = {}
    views: list[tuple[int, int, int, tuple[int, ...]]] = []
    for spec in specs:
        dtype = np.dtype(spec.dtype)
        shape: tuple[int, ...] = tuple(spec.shape)  # type: ignore[arg-type]
        size = int(np.prod(shape, dtype=np.int64))
        slot = order.setdefault(dtype, len(order))
        views.append((slot, buffers.get(dtype, 0), size, shape))
        buffers[dtype] = buffers.get(dtype, 0) + size
    return tuple(buffers.items()), tuple(views)


def carve_outputs(
    buffers: tuple[tuple[np.dtype, int], ...],
    views: tuple[tuple[int, int, int, tuple[int, ...]], ...],
) -> list[np.ndarray]:
    """New outputs as `carve_plan` laid them out."""
    flat = [
        aligned(
            output_empty((size * dtype.itemsize + ALIGNMENT,), BYTE),
            size * dtype.itemsize,
            ALIGNMENT,
        ).view(dtype)
        for dtype, size in buffers
    ]
    return [flat[b][offset : offset + size].reshape(shape) for b, offset, size, shape in views]


__all__ = [
    "BULK_ARRAYS",
    "CarvePlan",
    "aligned",
    "aligned_empty",
    "arena_of",
    "carve_outputs",
    "carve_plan",
    "disjoint",
    "workspace_buffer",
]
