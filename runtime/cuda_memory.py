"""
Device memory of a compiled CUDA program: a pool that lives with it, and strided copies.

`DevicePool` hands out device arrays by (shape, dtype) and takes them back by itself: an
array is handed out again only when nothing but the pool refers to it or to its memory (no
caller's reference, no view of it anywhere, on the device or in the simulator). So a
program's outputs and uploads are allocated on its first calls and reused after, and an
array the caller still holds (an output it kept, a view of an output arena) is never
overwritten by a later call: the pool allocates another (kept, up to `MAX_PER_SHAPE` of a
shape). `allocations` counts the device allocations it made (a test's per-call count).
numba-cuda has no pool of its own; an External Memory Management plugin (CuPy's or RMM's
pool) would make each allocation cheap, but still one per output per call, and must be
set before the CUDA context exists.

`copy_strided(destination, source)` copies a device array of any strides into another of
the same shape (one grid-stride launch): a non-contiguous view a caller passes, or a
strided view a program copies from (`memref.copy` of a `memref.subview`), which
`copy_to_device` refuses. Its kernels are compiled on first use, one per rank.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tessc.runtime.cuda_launch import strided_grid


def _memory(array: Any) -> Any:
    """The object that owns `array`'s memory: numba's `gpu_data` pointer, or the simulator's
    NumPy array (its views keep it as their `base`)."""
    memory = getattr(array, "gpu_data", None)
    if memory is None:
        memory = array._ary  # the simulator's FakeCUDAArray  # noqa: SLF001
        while isinstance(memory.base, np.ndarray):
            memory = memory.base
    return memory


def _references(array: Any) -> tuple[int, int, int]:
    """References to `array`, to its memory, and views of its memory (numba counts those in
    the owner's `refct`)."""
    memory = _memory(array)
    owner = getattr(memory, "owner", None)
    return sys.getrefcount(array), sys.getrefcount(memory), int(getattr(owner, "refct", 0))


MAX_PER_SHAPE = 8
"""The most arrays of one (shape, dtype) a pool keeps."""


class DevicePool:
    """Device arrays by (shape, dtype), each handed out again once nothing else refers to it."""

    def __init__(self) -> None:
        # (shape, dtype) -> [array, its reference counts when only the pool holds it].
        self.arrays: dict[tuple[tuple[int, ...], str], list[list[Any]]] = {}
        self.allocations = 0

    def take(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A device array of `shape` and `dtype` that nobody else holds (contents undefined)."""
        key = (tuple(shape), np.dtype(dtype).str)
        entries = self.arrays.setdefault(key, [])
        for entry in entries:
            if _references(entry[0]) == entry[1]:
                return entry[0]
        from numba import cuda

        self.allocations += 1
        if len(entries) >= MAX_PER_SHAPE:
            # Every pooled array of this shape is held: a caller keeping many results (or
            # a reference this pool cannot see). Not pooled, so the pool stays bounded.
            return cuda.device_array(key[0], dtype=np.dtype(dtype))
        entries.append([cuda.device_array(key[0], dtype=np.dtype(dtype)), None])
        entry = entries[-1]
        entry[1] = _references(entry[0])  # measured as the loop above measures it
        return entry[0]

    def upload(self, host: np.ndarray) -> Any:
        """`host` (C-contiguous) copied into a pooled device array."""
        array = self.take(host.shape, host.dtype)
        if host.size:
            array.copy_to_device(host)
        return array

    def contiguous(self, array: Any) -> Any:
        """`array` if C-contiguous, else its copy in a pooled device array (one launch)."""
        if array.is_c_contiguous():
            return array
        copy = self.take(tuple(array.shape), array.dtype)
        copy_strided(copy, array)
        return copy


_COPY_KERNELS: dict[int, Any] = {}

_COPY_SOURCE = """
def copy_{rank}(destination, source):
    start = cuda.grid(1)
    for flat in range(start, destination.size, cuda.gridsize(1)):
{split}
        destination[{index}] = source[{index}]
"""


def _copy_kernel(rank: int) -> Any:
    """The grid-stride copy kernel for arrays of `rank` dims (any strides)."""
    kernel = _COPY_KERNELS.get(rank)
    if kernel is None:
        from numba import cuda

        lines = ["        rest = flat"]
        for d in reversed(range(1, rank)):
            lines += [f"        i{d} = rest % destination.shape[{d}]", "        rest //= "
                      f"destination.shape[{d}]"]  # fmt: skip
        lines.append("        i0 = rest")
        index = ", ".join(f"i{d}" for d in range(rank))
        namespace: dict[str, Any] = {"cuda": cuda}
        exec(_COPY_SOURCE.format(rank=rank, split="\n".join(lines), index=index), namespace)  # noqa: S102
        kernel = _COPY_KERNELS[rank] = cuda.jit(namespace[f"copy_{rank}"])
    return kernel


def copy_strided(destination: Any, source: Any) -> None:
    """`destination[...] = source` on the device, for arrays of one shape and any strides."""
    size = int(np.prod(destination.shape))
    if size == 0:
        return
    if destination.ndim == 0:
        destination, source = destination.reshape(1), source.reshape(1)
    if destination.is_c_contiguous() and source.is_c_contiguous():
        destination.copy_to_device(source)
        return
    threads = 256
    grid = strided_grid(-(-size // threads), 1, 1, threads)
    _copy_kernel(destination.ndim)[grid, (threads, 1, 1)](destination, source)


__all__ = ["DevicePool", "copy_strided"]
