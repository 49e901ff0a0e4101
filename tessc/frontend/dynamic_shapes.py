"""
Automatic dynamic shapes (issue 26 §2): a new batch size without a recompile.

`jit` compiles a function for the shapes of its first call: every size a literal, the
fastest code. When a later call differs from it in one size only (every dim that changed
had one value before and one value after: the batch, N), the function is traced again
with those dims `?` (`tensor<?x64xf32>`, `dialects/dynamic_dims.py`) and compiled once;
every later size runs that generic program with no trace and no Numba compile, as
torch.compile's "automatic dynamic shapes" does. The shapes seen first keep their static
program. `jit(dynamic=False)` never does this; `jit(dynamic=True)` compiles the generic
program at the first call, N the leading dim of the plain array arguments.

A generic trace is checked: traced at two sizes it must give the same module and
constants, so no size leaked into the IR as a literal (`x.shape[0]` through `int()` or
NumPy); arithmetic on a `?` dim, a `?` meeting a static dim or a pass refusing `?` raise,
and then the function compiles statically for each size, as before (`Refusal`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tessc import timing
from tessc.dialects.dynamic_dims import DYNAMIC_INDEX, DynamicShapeError, is_dynamic
from tessc.frontend.call_plan import MISS
from tessc.frontend.pytree import TreeDef, leaf_count
from tessc.frontend.trace_function import Signature, TracedFunction, trace_signature
from tessc.frontend.tracer import DynamicSize


def _same_but_shapes(a: Signature, b: Signature) -> bool:
    return (
        a.tree == b.tree
        and a.donated == b.donated
        and a.weak == b.weak
        and len(a.arrays) == len(b.arrays)
        and all(
            da == db and len(sa) == len(sb)
            for (sa, da), (sb, db) in zip(a.arrays, b.arrays, strict=True)
        )
    )


def generalize(seen: Signature, new: Signature) -> Signature | None:
    """`seen` with the dims that changed in `new` as `?`, where they changed as one size
    (from one value to one other value); None where anything else differs."""
    if not _same_but_shapes(seen, new):
        return None
    changes = {
        (old, now)
        for (old_shape, _), (new_shape, _) in zip(seen.arrays, new.arrays, strict=True)
        for old, now in zip(old_shape, new_shape, strict=True)
        if old != now
    }
    if len(changes) != 1:
        return None
    arrays = tuple(
        (
            tuple(
                DYNAMIC_INDEX if old != now else old
                for old, now in zip(old_shape, new_shape, strict=True)
            ),
            dtype,
        )
        for (old_shape, dtype), (new_shape, _) in zip(seen.arrays, new.arrays, strict=True)
    )
    return replace(seen, arrays=arrays)


def _plain_leaves(tree: TreeDef) -> list[bool]:
    """For each array leaf of an `("arguments", ...)` structure: is it a whole argument
    (not inside a container)?"""
    plain: list[bool] = []
    for child in tree[2]:
        plain += [child[0] == "leaf"] * leaf_count(child)
    return plain


def guess(signature: Signature) -> Signature | None:
    """`jit(dynamic=True)`'s generic signature at a first call: the leading dim of every
    plain array argument as `?`, where they all have the same one (None otherwise)."""
    plain = _plain_leaves(signature.tree)
    leading = {
        shape[0]
        for k, (shape, _) in enumerate(signature.arrays)
        if plain[k] and shape and k not in signature.weak
    }
    if len(leading) != 1:
        return None
    size = leading.pop()
    arrays = tuple(
        ((DYNAMIC_INDEX, *shape[1:]), dtype)
        if plain[k] and shape and shape[0] == size and k not in signature.weak
        else (shape, dtype)
        for k, (shape, dtype) in enumerate(signature.arrays)
    )
    return replace(signature, arrays=arrays)


def size_in(generic: Signature, signature: Signature) -> int | None:
    """N if `signature` is an instance of `generic` (every `?` dim of one size N >= 1,
    every other dim as it is), else None."""
    if not _same_but_shapes(generic, signature):
        return None
    sizes: set[int] = set()
    for (pattern, _), (shape, _) in zip(generic.arrays, signature.arrays, strict=True):
        for want, got in zip(pattern, shape, strict=True):
            if is_dynamic(want):
                sizes.add(got)
            elif want != got:
                return None
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    return size if size >= 1 else None


def is_generic(signature: Signature) -> bool:
    return any(is_dynamic(d) for shape, _ in signature.arrays for d in shape)


def size_reader(generic: Signature) -> tuple[int, int]:
    """(array leaf, dim) where a call's N is read: the first `?` dim of `generic`."""
    for k, (shape, _) in enumerate(generic.arrays):
        for d, dim in enumerate(shape):
            if is_dynamic(dim):
                return k, d
    raise ValueError("a generic signature without a `?` dim")


def shape_fits(shape: tuple[int, ...], pattern: tuple[int, ...], size: int) -> bool:
    """`shape` is `pattern` with every `?` equal to `size`."""
    return len(shape) == len(pattern) and all(
        got == (size if is_dynamic(want) else want)
        for got, want in zip(shape, pattern, strict=True)
    )


def with_size(constants: Sequence[Any], size: int) -> tuple[Any, ...]:
    """The captured constants of a generic program for a call with N = `size`."""
    return tuple(c.value(size) if isinstance(c, DynamicSize) else c for c in constants)


def has_sizes(constants: Sequence[Any]) -> bool:
    return any(isinstance(c, DynamicSize) for c in constants)


def _same_constants(a: Sequence[Any], b: Sequence[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, DynamicSize) or isinstance(y, DynamicSize):
            if not (isinstance(x, DynamicSize) and isinstance(y, DynamicSize)):
                return False
            if x.dtype != y.dtype:
                return False
        elif x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y):
            return False
    return True


def trace_generic(
    fn: Callable, generic: Signature, names: Sequence[str], size: int
) -> TracedFunction:
    """The generic trace of `fn`, checked size-free: traced with `?` dims reading as
    `size` and as another size, the two must agree (else `DynamicShapeError`)."""
    traced = trace_signature(fn, generic, names, debug_outputs=True, dynamic_hint=size)
    other = trace_signature(fn, generic, names, debug_outputs=True, dynamic_hint=size + 7)
    if str(traced.module) != str(other.module) or not _same_constants(
        traced.constants, other.constants
    ):
        raise DynamicShapeError(
            "the traced program depends on the value of the dynamic size (a shape used as "
            "a Python number)"
        )
    return traced


@dataclass
class Refusal:
    """Why a function has no generic program (it then compiles per size)."""

    reason: str


def new_generic_trace(
    fn: Callable,
    dynamic: bool | None,
    seen: Iterable[Signature],
    signature: Signature,
    names: Sequence[str],
) -> tuple[Signature, TracedFunction] | Refusal | None:
    """The generic signature and trace for a call of `signature` (`pick_generic`); None
    where none fits, a `Refusal` where `fn` cannot be traced with a `?` dim."""
    if (picked := pick_generic(dynamic, seen, signature)) is None:
        return None
    generic, size = picked
    try:
        with timing.phase("trace (generic)"):
            return generic, trace_generic(fn, generic, names, size)
    except Exception as error:  # arithmetic on N, a `?` meeting a static dim, ...
        return Refusal(f"{type(error).__name__}: {error}")


def static_sizes(generic: Signature, compiled: Iterable[Signature]) -> frozenset[int]:
    """The sizes N the generic program has a static program for (`compiled`)."""
    sizes = (size_in(generic, signature) for signature in compiled)
    return frozenset(size for size in sizes if size is not None)


def call_constants(
    signature: Signature, constants: tuple[Any, ...], arrays: Sequence[Any]
) -> tuple[Any, ...]:
    """A call's constants: a generic program's with N (from its first `?` dim) filled in."""
    if not has_sizes(constants):
        return constants
    k, d = size_reader(signature)
    return with_size(constants, np.shape(arrays[k])[d])


def pick_generic(
    dynamic: bool | None, seen: Iterable[Signature], signature: Signature
) -> tuple[Signature, int] | None:
    """The generic signature a call of `signature` should run, and its N: at a first call
    with `dynamic=True` its `guess`; by default the first earlier signature it differs
    from in one size, generalized; None where neither applies."""
    if dynamic:
        generic = guess(signature)
    else:
        candidates = (generalize(old, signature) for old in seen)
        generic = next((g for g in candidates if g is not None), None)
    size = size_in(generic, signature) if generic is not None else None
    return None if generic is None or size is None else (generic, size)


ArrayTypes = tuple[tuple[tuple[int, ...], np.dtype], ...]

MAX_PLANS = 16
"""Call plans a generic program keeps (one per N: a plan checks exact shapes)."""


@dataclass
class GenericCall:
    """What `jit`'s fast path needs to call a generic program: where a call's N is read,
    the exact array types a call of each N must have (made once per N, so a call checks
    each leaf by one comparison, as a static program's does) and the captured constants
    with N filled in."""

    size_at: tuple[int, int]  # (array leaf, dim) of the first `?` dim
    patterns: ArrayTypes  # the generic signature's array types, `?` dims negative
    sized: bool  # the constants hold N (`DynamicSize`)
    make_plan: Callable[..., Callable[..., Any] | None] | None = None
    """`compile_call_plan` for this program but the array types and constants."""
    static_sizes: frozenset[int] = frozenset()  # sizes with a static program (not taken)
    types: dict[int, ArrayTypes] = field(default_factory=dict)
    plans: dict[int, Callable[..., Any] | None] = field(default_factory=dict)
    """A call plan per N seen (`call_plan`), up to `MAX_PLANS`."""
    current: Callable[..., Any] | None = None  # the plan of the last N called

    @staticmethod
    def of(
        generic: Signature,
        constants: Sequence[Any],
        make_plan: Callable[..., Callable[..., Any] | None] | None = None,
    ) -> GenericCall:
        patterns = tuple((shape, np.dtype(dtype)) for shape, dtype in generic.arrays)
        return GenericCall(size_reader(generic), patterns, has_sizes(constants), make_plan)

    def call(self, args: tuple[Any, ...]) -> Any:
        """The call through the plan of the last N (`MISS` where it does not fit)."""
        return MISS if self.current is None else self.current(*args)

    def use_size(self, size: int, constants: tuple[Any, ...]) -> None:
        """Make N = `size`'s plan the one `call` tries first (built at its first call)."""
        if size not in self.plans and self.make_plan is not None:
            if len(self.plans) >= MAX_PLANS:
                self.plans.clear()
            self.plans[size] = self.make_plan(
                array_types=self.array_types(size), constants=self.constants(constants, size)
            )
        self.current = self.plans.get(size)

    def size(self, leaves: Sequence[Any]) -> int:
        """N of a call with these array leaves; -1 where it has none or a static one."""
        k, d = self.size_at
        shape = getattr(leaves[k], "shape", ())
        size = shape[d] if len(shape) > d else -1
        return -1 if size < 1 or size in self.static_sizes else size

    def array_types(self, size: int) -> ArrayTypes:
        types = self.types.get(size)
        if types is None:
            types = self.types[size] = tuple(
                (tuple(size if is_dynamic(d) else d for d in shape), dtype)
                for shape, dtype in self.patterns
            )
        return types

    def constants(self, constants: tuple[Any, ...], size: int) -> tuple[Any, ...]:
        return with_size(constants, size) if self.sized else constants
