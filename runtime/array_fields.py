"""
Many NumPy arrays' layouts and addresses, read in one compiled call.

An optimizer step over 200 parameters gets 200 new gradient arrays every call. Checking
each one's type, shape, dtype and contiguity, its memory owner and its data address took
a Python attribute read (or a Numba dispatch) per array and property: ~150 us a call, more
than the update itself. Here one Numba function reads the arrays' object pointers where
the caller's tuple holds them (`PyTupleObject.ob_item`; a list is made a tuple first) and
NumPy's `PyArrayObject_fields` struct of each (`ob_type`, `data`, `nd`, `dimensions`,
`base`, `descr`, `flags`: NumPy's public C ABI, unchanged since NumPy 1.7). The tuple and
its arrays are alive for the call (the caller holds them); `ob_type` is read first, past
the header only for an `np.ndarray`. `AVAILABLE` is False where a probe read disagrees
with NumPy's or CPython's own view of the probe (another layout, another interpreter):
then every function here answers "not shown" (False, None) and callers take their Python
path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_WORD = 8
TYPE, DATA, NDIM, DIMENSIONS, BASE, DESCR, FLAGS = 8, 16, 24, 32, 48, 56, 64
"""Byte offsets in `PyArrayObject_fields` after CPython's 16-byte `PyObject` header."""
C_CONTIGUOUS = 0x1  # NPY_ARRAY_C_CONTIGUOUS
TUPLE_ITEMS = -1
"""Byte offset of `PyTupleObject.ob_item` (`_probe_tuple`)."""
NO_IDS = np.zeros(0, np.int64)


def _loader(width: int) -> Any:
    """An intrinsic: the `width`-bit integer at an address, sign-extended to int64."""

    @intrinsic
    def load(typingctx: Any, address: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            value = builder.load(builder.inttoptr(args[0], ir.IntType(width).as_pointer()))
            return value if width == 64 else builder.sext(value, ir.IntType(64))

        return types.int64(types.int64), codegen

    return load


_load64, _load32 = _loader(64), _loader(32)


@njit(cache=True)
def _fields(address: int, out: np.ndarray) -> None:
    out[0] = _load64(address + TYPE)
    out[1] = _load64(address + DATA)
    out[2] = _load32(address + NDIM)
    out[3] = _load64(address + BASE)
    out[4] = _load64(address + DESCR)
    out[5] = _load32(address + FLAGS)
    out[6] = _load64(_load64(address + DIMENSIONS)) if out[2] > 0 else -1


@njit(cache=True)
def _read(address: int) -> int:
    return _load64(address)


@njit(cache=True)
def _listed(sorted_ids: np.ndarray, value: int) -> bool:
    k = np.searchsorted(sorted_ids, value)
    return k < sorted_ids.size and sorted_ids[k] == value


@njit(cache=True)
def _match(
    items: int,
    count: int,
    ndarray_type: int,
    descrs: np.ndarray,
    ndims: np.ndarray,
    dims: np.ndarray,
    dim_starts: np.ndarray,
    excluded: np.ndarray,
) -> bool:
    for k in range(count):
        a = _load64(items + _WORD * k)
        if _load64(a + TYPE) != ndarray_type or _load64(a + DESCR) != descrs[k]:
            return False
        if _load32(a + FLAGS) & C_CONTIGUOUS == 0 or _load32(a + NDIM) != ndims[k]:
            return False
        shape = _load64(a + DIMENSIONS)
        for d in range(ndims[k]):
            if _load64(shape + _WORD * d) != dims[dim_starts[k] + d]:
                return False
        if excluded.size and (_listed(excluded, a) or _listed(excluded, _load64(a + BASE))):
            return False
    return True


@njit(cache=True)
def _all_ndarrays(items: int, count: int, ndarray_type: int) -> bool:
    """Whether each of the `count` objects at `items` is exactly an `np.ndarray` (a
    subclass extends the struct: its fields are where they are)."""
    for k in range(count):
        if _load64(_load64(items + _WORD * k) + TYPE) != ndarray_type:
            return False
    return True


@njit(cache=True)
def _element_count(a: int) -> int:
    """The number of elements of the `PyArrayObject` at `a`."""
    shape = _load64(a + DIMENSIONS)
    size = 1
    for d in range(_load32(a + NDIM)):
        size *= _load64(shape + _WORD * d)
    return size


@njit(cache=True)
def _start(items: int, count: int, ndarray_type: int, byte_offsets: np.ndarray) -> tuple[int, int]:
    """(the common `data - byte_offset` of the non-empty arrays, the first one's index),
    or (0, -1) when they differ, do not share one memory owner, or all are empty; (0, -2)
    when one is not exactly an `np.ndarray`."""
    if not _all_ndarrays(items, count, ndarray_type):
        return 0, -2
    start, first, owner = 0, -1, 0
    for k in range(count):
        a = _load64(items + _WORD * k)
        if _element_count(a) == 0:
            continue  # no element to place (NumPy may point it anywhere)
        base = _load64(a + BASE)
        here = _load64(a + DATA) - byte_offsets[k]
        if first < 0:
            start, first, owner = here, k, base if base != 0 else a
        elif here != start or (base if base != 0 else a) != owner:
            return 0, -1
    return start, first


@njit(cache=True)
def _table(
    items: int,
    count: int,
    ndarray_type: int,
    byte_offsets: np.ndarray,
    itemsize: int,
    table: np.ndarray,
    forbidden: np.ndarray,
) -> int:
    """Fills `table[k]` with array k's `data - byte_offsets[k]`; -2 when one is not
    exactly an `np.ndarray`, -1 when a non-empty one's bytes meet a range `[forbidden[2i],
    forbidden[2i + 1])`, 1 when the non-empty ones have one `data - byte_offset` (0 or 1
    of them: not told apart, the table is right either way), else 0."""
    if not _all_ndarrays(items, count, ndarray_type):
        return -2
    start, common = -1, 1
    for k in range(count):
        a = _load64(items + _WORD * k)
        data = _load64(a + DATA)
        table[k] = data - byte_offsets[k]
        size = _element_count(a)
        if size == 0:
            continue  # never read (NumPy may point it anywhere)
        end = data + size * itemsize
        for i in range(0, forbidden.size, 2):
            if data < forbidden[i + 1] and forbidden[i] < end:
                return -1
        if start == -1:
            start = table[k]
        elif table[k] != start:
            common = 0
    return common


def _as_tuple(arrays: Sequence[Any]) -> tuple[Any, ...]:
    return arrays if type(arrays) is tuple else tuple(arrays)


def _probe_tuple() -> int:
    """The byte offset of a tuple's item pointers (`ob_item`: 24 on CPython 3.8-3.13,
    after the size; 32 where a cached hash follows it), -1 if neither reads the items."""
    items = tuple(object() for _ in range(5))
    for offset in (24, 32):  # 4 reads within the 5-tuple either way
        if all(_read(id(items) + offset + _WORD * k) == id(items[k]) for k in range(4)):
            return offset
    return -1


def _probe() -> bool:
    """Whether `_fields` reads what NumPy reports, on a view of a 2-D array."""
    if sys.implementation.name != "cpython" or np.dtype(np.intp).itemsize != _WORD:
        return False
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return False  # free-threaded CPython: a larger object header
    owner = np.zeros((3, 5), np.float32)
    view = owner[1:]
    out = np.zeros(7, np.int64)
    _fields(id(view), out)
    global TUPLE_ITEMS
    TUPLE_ITEMS = _probe_tuple()
    expected = [
        id(np.ndarray),
        view.__array_interface__["data"][0],
        2,
        id(owner),
        id(view.dtype),
        out[5],  # the flags, checked below
        2,
    ]
    c_contiguous = bool(out[5] & C_CONTIGUOUS) == view.flags.c_contiguous
    return [int(x) for x in out] == expected and c_contiguous and TUPLE_ITEMS >= 0


AVAILABLE = _probe()


class Layouts:
    """Expected (shape, dtype) of some arrays, checked in one call (`match`)."""

    def __init__(self, layouts: Sequence[tuple[tuple[int, ...], np.dtype]]) -> None:
        self.dtypes = tuple(dtype for _, dtype in layouts)  # held: their ids are compared
        self.descrs = np.array([id(d) for d in self.dtypes], np.int64)
        self.ndims = np.array([len(shape) for shape, _ in layouts], np.int64)
        self.dims = np.array([n for shape, _ in layouts for n in shape] or [0], np.int64)
        self.dim_starts = np.concatenate([[0], np.cumsum(self.ndims)[:-1]]).astype(np.int64)

    def match(self, arrays: Sequence[Any], excluded: np.ndarray = NO_IDS) -> bool:
        """Whether every array is shown to be a C-contiguous `np.ndarray` (not a
        subclass) of its shape and of exactly its dtype object, and neither it nor its
        `base` is one of the ids `excluded` (sorted int64). False is "not shown" (a dtype
        equal but another object, a wrong layout, an excluded id, `AVAILABLE` False): the
        caller checks those arrays in Python."""
        if not AVAILABLE or len(arrays) != len(self.dtypes):
            return False
        items = _as_tuple(arrays)  # held for the call: `_match` reads its item pointers
        return _match(
            id(items) + TUPLE_ITEMS,
            len(items),
            id(np.ndarray),
            self.descrs,
            self.ndims,
            self.dims,
            self.dim_starts,
            excluded,
        )


def common_start(arrays: Sequence[np.ndarray], byte_offsets: np.ndarray) -> tuple[int, int] | None:
    """(start, k): the non-empty `arrays` share one memory owner and each lies at `start +
    byte_offsets[k]`, array `k` being the first non-empty one; `k` is -1 when they do not
    (or all are empty). None when `AVAILABLE` is False or one is not exactly an
    `np.ndarray` (a subclass too: the caller reads those in Python)."""
    if not AVAILABLE or len(arrays) != len(byte_offsets):
        return None  # (`_start` reads `byte_offsets` unchecked)
    items = _as_tuple(arrays)  # held for the call: `_start` reads its item pointers
    start, first = _start(id(items) + TUPLE_ITEMS, len(items), id(np.ndarray), byte_offsets)
    return None if first == -2 else (start, first)


def member_table(
    arrays: Sequence[np.ndarray],
    byte_offsets: np.ndarray,
    itemsize: int,
    table: np.ndarray,
    forbidden: np.ndarray = NO_IDS,
) -> int | None:
    """Fills the int64 `table` with each array's data address less its byte offset (a
    member table, `codegen.numba_members`), in one compiled call. `arrays` are
    C-contiguous arrays of `itemsize` bytes an element; `forbidden` holds byte ranges
    `[lo, hi)` as pairs (the arrays the call writes). Returns 1 when the non-empty arrays
    share one start (views of one arena, or at most one non-empty), 0 when not, -1 when
    one meets a forbidden range; None when `AVAILABLE` is False or one is not exactly an
    `np.ndarray` (the caller packs them)."""
    count = len(arrays)
    if not AVAILABLE or count != len(byte_offsets) or count > len(table):
        return None  # (`_table` reads `byte_offsets` and writes `table` unchecked)
    items = _as_tuple(arrays)  # held for the call: `_table` reads its item pointers
    found = _table(
        id(items) + TUPLE_ITEMS, count, id(np.ndarray), byte_offsets, itemsize, table, forbidden
    )
    return None if found == -2 else found


__all__ = ["AVAILABLE", "NO_IDS", "Layouts", "common_start", "member_table"]
