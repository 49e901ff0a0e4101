"""
`empty(shape, dtype)`: a program's output array, reusing one the caller has dropped.

A large new array is fresh memory: glibc maps every block of 32 MiB or more anew (and often
smaller ones) and the kernel faults in and zeroes each page at first touch, so a program that
returns a new 64 MiB result every call paid ~5 ms of page faults on top of a ~10 ms kernel
(issue 26's W1), and on a VM, memory the guest never touched costs far more. Like PyTorch's
caching allocator, outputs from `MIN_BYTES` on are kept here and handed out again once
nothing but this cache refers to them: the same array object, never a view, so its `base`
stays None and a later call may take it as a donated input. An array is free when its
reference count is the cache's own (every view the user keeps, every buffer export and every
library wrapping it holds a reference: exactly when NumPy itself could free the memory), it
has no weak reference (a donated array is marked through one), and it still has its shape,
dtype and flags. At most `PER_SHAPE` arrays per (shape, dtype) and `limit_bytes()` in all
are kept (`TESSC_OUTPUT_CACHE_BYTES`, 0 turns the cache off); `clear()` drops them.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from math import prod

import numpy as np

MIN_BYTES = 1 << 20
"""Smaller outputs come from `np.empty`: measured on this project's machine, a fresh 1 MiB
array written once costs ~0.2 ms of faults over a reused one, and a lookup here ~1 us."""

PER_SHAPE = 4
"""Arrays kept per (shape, dtype): `y = f(x)` in a loop needs two (the previous result is
still bound to `y` during the call); a step returning several outputs of one shape, more."""

DEFAULT_LIMIT_BYTES = 512 << 20

_entries: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
_tracked_bytes = 0
_lock = threading.Lock()


def limit_bytes() -> int:
    """The most bytes of outputs kept (`TESSC_OUTPUT_CACHE_BYTES`, else 512 MiB); 0 where
    reference counts do not say who holds an array (a free-threaded Python)."""
    gil = getattr(sys, "_is_gil_enabled", None)
    if gil is not None and not gil():
        return 0
    configured = os.environ.get("TESSC_OUTPUT_CACHE_BYTES", "")
    return int(configured) if configured.isdigit() else DEFAULT_LIMIT_BYTES


def _references(entries: list[np.ndarray], index: int) -> int:
    return sys.getrefcount(entries[index])


FREE_REFERENCES = _references([np.empty(0)], 0)
"""An array's reference count as `_references` sees it when only the cache's list holds it
(measured, so that it holds on any CPython version)."""


def _reusable(array: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    flags = array.flags
    return (
        array.shape == shape
        and array.dtype == dtype
        and flags.c_contiguous
        and flags.writeable
        and flags.owndata
        and weakref.getweakrefcount(array) == 0
    )


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array of `shape` and `dtype` whose contents are undefined, as
    `np.empty`: one the caller no longer holds if this cache has one."""
    global _tracked_bytes
    nbytes = prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    limit = limit_bytes()
    if limit == 0:
        return np.empty(shape, dtype)
    key = (shape, dtype)
    with _lock:
        entries = _entries.setdefault(key, [])
        index = len(entries) - 1
        while index >= 0:
            if _references(entries, index) == FREE_REFERENCES:
                if _reusable(entries[index], shape, dtype):
                    return entries[index]
                # Marked donated, resized or made read-only: let it go as NumPy would.
                del entries[index]
                _tracked_bytes -= nbytes
            index -= 1
        array = np.empty(shape, dtype)
        if len(entries) < PER_SHAPE and (
            _tracked_bytes + nbytes <= limit or _release_free(nbytes, limit)
        ):
            entries.append(array)
            _tracked_bytes += nbytes
        return array


def _release_free(needed: int, limit: int) -> bool:
    """Drop free arrays (of any shape) until `needed` more bytes fit under `limit`."""
    global _tracked_bytes
    for (shape, dtype), entries in _entries.items():
        for index in range(len(entries) - 1, -1, -1):
            if _tracked_bytes + needed <= limit:
                return True
            if _references(entries, index) == FREE_REFERENCES:
                del entries[index]
                _tracked_bytes -= prod(shape) * dtype.itemsize
    return _tracked_bytes + needed <= limit


def clear() -> None:
    """Forget every kept array (those the caller still holds stay valid: only the cache's
    references go)."""
    global _tracked_bytes
    with _lock:
        _entries.clear()
        _tracked_bytes = 0


def tracked_bytes() -> int:
    """Bytes of the arrays kept now, held by a caller or free."""
    return _tracked_bytes


__all__ = ["MIN_BYTES", "PER_SHAPE", "clear", "empty", "limit_bytes", "tracked_bytes"]
