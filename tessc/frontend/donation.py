"""
Donated arrays are marked, so that passing one again is an error, not a stale value.

After a call of `jit(f, donate_argnums=...)`, each donated array that the call did not
return as an output may hold an output or scratch: its contents are gone, as JAX's
"Array has been deleted". `mark` remembers it (by identity, through a weak reference, so
a freed array's id can be reused safely); `check` raises for a call that passes a marked
array: "argument `x` was donated to `f` at a previous call; its buffer now holds another
value". `refuse_aliases` refuses a call whose donated argument shares memory with another
argument (the donated buffer would be overwritten while the other is still read).

`DONATED` is empty until something is donated, so the planned call pays one truth test.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy 1.x
    byte_bounds = np.byte_bounds  # type: ignore[attr-defined]

DONATED: dict[int, tuple[weakref.ref, str]] = {}
"""id(array) -> (a weak reference to it, the function it was donated to)."""


def mark(array: Any, function: str) -> None:
    """Remember that `array`'s buffer was donated to `function`."""
    key = id(array)
    try:
        reference = weakref.ref(array, lambda _, key=key: DONATED.pop(key, None))
    except TypeError:  # an object without weak references: not tracked
        return
    DONATED[key] = (reference, function)


def unmark_returned(outputs: Sequence[Any]) -> None:
    """Forget the marks of arrays a call returned: an output holds its value, even where
    the runtime hands back an array object it was once given donated (a device target's
    pooled output views)."""
    if DONATED:
        for output in outputs:
            entry = DONATED.get(id(output))
            if entry is not None and entry[0]() is output:
                del DONATED[id(output)]


def donated_to(array: Any) -> str | None:
    """The function `array` was donated to, or None."""
    entry = DONATED.get(id(array))
    if entry is None or entry[0]() is not array:
        return None
    return entry[1]


def check(arrays: Sequence[Any], names: Sequence[str]) -> None:
    """Raise if an argument array was donated before."""
    for array, name in zip(arrays, names, strict=True):
        function = donated_to(array)
        if function is not None:
            raise ValueError(
                f"argument `{name}` was donated to `{function}` at a previous call; its "
                "buffer now holds another value (use the arrays that call returned)"
            )


def refuse_aliases(
    arrays: Sequence[Any], names: Sequence[str], donated: Sequence[int], function: str
) -> None:
    """Raise if a donated array shares memory with another argument array.

    Only arrays whose byte ranges overlap are asked `np.shares_memory` (exact, and slow on
    views of one buffer): the parameters of an optimizer step, hundreds of views of one
    arena, are sorted by address once instead of compared pairwise."""
    donated_set = {d for d in donated if type(arrays[d]) is np.ndarray}
    if not donated_set:
        return
    spans = sorted(
        (*byte_bounds(a), k) for k, a in enumerate(arrays) if type(a) is np.ndarray and a.size
    )
    candidates: set[tuple[int, int]] = set()
    active: list[tuple[int, int]] = []  # (end, index) of the spans reaching past `start`
    for start, end, k in spans:
        active = [(e, j) for e, j in active if e > start]
        for _, j in active:
            if j in donated_set:
                candidates.add((j, k))
            if k in donated_set:
                candidates.add((k, j))
        active.append((end, k))
    order = {d: n for n, d in enumerate(donated)}
    for d, k in sorted(candidates, key=lambda pair: (order[pair[0]], pair[1])):
        if np.shares_memory(arrays[d], arrays[k]):
            raise ValueError(
                f"argument `{names[d]}` is donated to `{function}` but shares memory "
                f"with argument `{names[k]}`: the call would overwrite what it reads; "
                "pass a copy of one of them, or do not donate it"
            )


__all__ = ["DONATED", "check", "donated_to", "mark", "refuse_aliases"]
