"""
Codegen's choice of the kernels a compiled host calls by name (`tessc.runtime.external`)
instead of holding them in its body, and how such a kernel is spelled.

A host of many serial kernels emitted into its body is one huge function, and Numba's
compile time grows faster than a function's size (the MLP step as one function: 3.9 s of
Numba's time; 17 of its kernels compiled one by one: 3.3 s). So where a host calls at least
`EXTERNAL_MIN_KERNELS` qualifying kernels of `EXTERNAL_MIN_OPS` ops in all, each becomes a
C callable of its own (`@external(...)`, a `numba.cfunc`) called by its symbol with
pointers, which the runtime compiles concurrently. A kernel qualifies when it is serial and
all its arguments are contiguous memrefs of `EXTERNAL_DTYPES`. A `?` dim of an argument (a
generic program's batch, issue 26 §2) is an `intp` argument after the pointers, from which
the kernel's array is made (`carray(x_ptr, (x_n0, 64), ...)`). The figures behind the
thresholds are in lowering/codegen/README.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, NoneAttr, StridedLayoutAttr

from tessc.dialects import contract
from tessc.dialects.functions import called_functions
from tessc.lowering.codegen.numba_source import (
    NoDtypeError,
    dtype_name,
    memref_shape,
    tuple_literal,
)

EXTERNAL_MIN_KERNELS = 2
"""A host calling fewer qualifying kernels holds them: no concurrency to gain."""
EXTERNAL_MIN_OPS = 200
"""Ops (nested ones included) of a host's qualifying kernels from which they are compiled
on their own: ~1 s of Numba's time (the MLP step's 17 kernels hold 771 ops, 3.3 s)."""
EXTERNAL_DTYPES = frozenset(
    ["float32", "float64", "int8", "int16", "int32", "int64"]
    + ["uint8", "uint16", "uint32", "uint64", "bool_"]
)


def imports(sized: bool, numba_kernels: bool, llvm_kernels: bool) -> list[str]:
    """The generated module's imports for its kernels called by name: `intp` where one
    takes the sizes of `?` dims, `external` for Numba's, `llvm_kernel` for LLVM IR ones."""
    names = [*(["external"] if numba_kernels else []), *(["llvm_kernel"] if llvm_kernels else [])]
    return [
        f"from numba.types import {'intp, ' if sized else ''}void, voidptr",
        f"from tessc.runtime.external import {', '.join(names)}",
    ]


def qualifies(fn: func.FuncOp) -> bool:
    """Whether kernel `fn` can be called by name: no results, memref arguments, contiguous
    (`is_contiguous`) and of a dtype in `EXTERNAL_DTYPES`."""
    if fn.function_type.outputs.data:
        return False
    for typ in fn.function_type.inputs.data:
        if not isinstance(typ, MemRefType):
            return False
        if not is_contiguous(typ):
            return False
        try:
            if dtype_name(typ.element_type) not in EXTERNAL_DTYPES:
                return False
        except NoDtypeError:
            return False
    return True


def is_contiguous(typ: MemRefType) -> bool:
    """Identity layout, or strides that are the row-major strides of the shape at any
    offset (`key[1:2]`, a row of a matrix): the view's data pointer and the shape then
    describe it, as `carray` rebuilds it. A stride that depends on a `?` dim is never
    known to be row-major."""
    if isinstance(typ.layout, NoneAttr):
        return True
    if not isinstance(typ.layout, StridedLayoutAttr):
        return False
    expected: list[int | None] = []
    stride: int | None = 1
    for size in reversed(memref_shape(typ)):
        expected.append(stride)
        stride = None if stride is None or size < 0 else stride * size
    strides = typ.layout.get_strides()
    return all(
        size == 1 or (want is not None and given == want)  # a unit dim's stride is unused
        for size, given, want in zip(memref_shape(typ), strides, reversed(expected), strict=True)
    )


def external_kernels(
    functions: Sequence[func.FuncOp],
    serial_kernels: dict[str, func.FuncOp],
    *,
    min_kernels: int | None = None,
    min_ops: int | None = None,
) -> set[str]:
    """The names of the `serial_kernels` (those codegen would emit into their hosts) to
    compile on their own: the qualifying ones of every host that calls at least
    `min_kernels` of them holding `min_ops` ops or more in all (by default
    `EXTERNAL_MIN_KERNELS` and `EXTERNAL_MIN_OPS`, read when called)."""
    min_kernels = EXTERNAL_MIN_KERNELS if min_kernels is None else min_kernels
    min_ops = EXTERNAL_MIN_OPS if min_ops is None else min_ops
    size = {name: sum(1 for _ in fn.walk()) for name, fn in serial_kernels.items() if qualifies(fn)}
    chosen: set[str] = set()
    for fn in functions:
        if contract.KERNEL.has(fn):
            continue
        callees = called_functions(fn) & size.keys()
        if len(callees) >= min_kernels and sum(size[c] for c in callees) >= min_ops:
            chosen |= callees
    return chosen  # every host calls a chosen kernel by name, those calling few too


def dynamic_dims(typ: MemRefType) -> list[int]:
    """The positions of the `?` dims of `typ`: each is an `intp` argument of a kernel."""
    return [k for k, size in enumerate(memref_shape(typ)) if size < 0]


def size_count(fn: func.FuncOp) -> int:
    """How many `intp` sizes external kernel `fn` takes after its pointers."""
    return sum(len(dynamic_dims(t)) for t in fn.function_type.inputs.data)  # type: ignore[arg-type]


def pointer_signature(fn: func.FuncOp) -> str:
    """`void(voidptr, ..., intp, ...)`: the C signature of external kernel `fn`, one
    pointer per argument (untyped: the host passes a workspace's bytes as they are), then
    the size of every `?` dim of its arguments, in order."""
    pointers = ["voidptr" for _ in fn.function_type.inputs.data]
    return f"void({', '.join(pointers + ['intp'] * size_count(fn))})"


def body_key(signature: str, names: Sequence[str], lines: Sequence[str]) -> str:
    """Kernel text with its argument and array `names` replaced by their positions: two
    kernels with the same key compute the same thing on their arguments."""
    if not names:
        return "\n".join([signature, *lines])
    position = {name: f"@{k}" for k, name in enumerate(names)}
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?!\w)")
    text = "\n".join(lines)
    return signature + "\n" + pattern.sub(lambda m: position[m.group(1)], text)


def carray_line(name: str, pointer: str, typ: MemRefType, sizes: Sequence[str] = ()) -> str:
    """`x = carray(x_ptr, (128, 64), np.float32)`: the array argument `pointer` points to,
    its `?` dims the `sizes` (names of `intp` arguments), in order."""
    given = iter(sizes)
    shape = tuple_literal([str(d) if d >= 0 else next(given) for d in memref_shape(typ)])
    return f"{name} = carray({pointer}, {shape}, np.{dtype_name(typ.element_type)})"


__all__ = [
    "EXTERNAL_MIN_KERNELS",
    "EXTERNAL_MIN_OPS",
    "body_key",
    "carray_line",
    "dynamic_dims",
    "external_kernels",
    "imports",
    "pointer_signature",
    "size_count",
]
