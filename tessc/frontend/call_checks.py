"""
A planned call's checks of its array leaves in bulk, and what it trusts between calls.

`call_plan` writes a line per leaf checking its type, shape, dtype and strides: the
fastest Python can do for a train step's ten arrays, but an optimizer step over 200
parameters has 400 to 800 leaves. `LeafChecks.accept` checks them in one compiled call
(`array_fields.Layouts`, from `BULK_ARRAYS` arrays; else C-level `map`s), and not again
the very array objects it accepted on the last call (as the runtime's arena cache,
`Executable._zero_copy`, assumes too).

Donated views may overlap another argument, which the general path checks pairwise
(`donation.refuse_aliases`). The views the program returned last (`TrustedViews`: of its
output arenas, disjoint) are taken as donated all the same, so that an optimizer's
parameters and state come back without the general path; another argument may then not
be a donated array or a returned view's arena, nor a view of either (NumPy points `base`
at the owner): checked in the same compiled call, against a sorted id table.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import partial
from itertools import chain, compress, repeat
from typing import Any

import numpy as np

from tessc.frontend.donation import DONATED, mark
from tessc.runtime.host_memory import BULK_ARRAYS

_BASE = operator.attrgetter("base")
_LAYOUT = operator.attrgetter("shape", "dtype", "strides")
_IS_VIEW = partial(operator.is_not, None)
_NO_IDS = np.zeros(0, np.int64)


def row_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of `shape`."""
    strides: list[int] = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _picker(positions: Sequence[int]) -> Any:
    """`leaves -> tuple of the leaves at positions`, in C."""
    if not positions:
        return lambda _: ()
    if len(positions) == 1:
        (only,) = positions
        return lambda leaves: (leaves[only],)
    return operator.itemgetter(*positions)


class _Types:
    """The expected (shape, dtype, row-major strides) of some leaves, as tuples."""

    def __init__(self, types: Sequence[tuple[tuple[int, ...], Any]]) -> None:
        self.layouts = tuple(
            (tuple(shape), np.dtype(dtype), row_strides(tuple(shape), np.dtype(dtype).itemsize))
            for shape, dtype in types
        )
        self.sorted_for: tuple[frozenset[int], np.ndarray] = (frozenset(), _NO_IDS)
        self.in_bulk: Any = None
        """Many arrays (an optimizer's gradients): one compiled call reads their layouts
        (`array_fields.Layouts`) instead of three attributes each."""
        if len(self.layouts) >= BULK_ARRAYS:
            from tessc.runtime.array_fields import Layouts

            self.in_bulk = Layouts([(shape, dtype) for shape, dtype, _ in self.layouts])

    def match(self, arrays: tuple[Any, ...], owned: frozenset[int] = frozenset()) -> bool:
        """Plain C-contiguous ndarrays of these shapes and dtypes (the planned path's
        rule: anything else takes the general path), none of them, nor its `base`, one
        of the ids `owned`."""
        if self.in_bulk is not None and self.in_bulk.match(arrays, self.sorted_ids(owned)):
            return True  # else shown below, or not
        if not all(map(operator.is_, map(type, arrays), repeat(np.ndarray))):
            return False
        if owned and not owned.isdisjoint(map(id, chain(arrays, map(_BASE, arrays)))):
            return False
        layouts = tuple(map(_LAYOUT, arrays))
        if layouts == self.layouts:
            return True
        # Other strides, contiguous still where an extent is 1.
        return all(
            got[:2] == want[:2] and array.flags.c_contiguous
            for got, want, array in zip(layouts, self.layouts, arrays, strict=True)
        )

    def sorted_ids(self, ids: frozenset[int]) -> np.ndarray:
        """`ids` as a sorted int64 array, as `array_fields` looks them up (kept for the
        same set: a step's donated arrays change only when other arrays are passed)."""
        if self.sorted_for[0] is not ids:
            self.sorted_for = (ids, np.array(sorted(ids), np.int64))
        return self.sorted_for[1]


class TrustedViews:
    """The arrays a plan's program returned last that are views: passed back donated,
    the planned path takes them (module docstring). Holds the arrays, so that their ids
    stay theirs; `version` counts the changes."""

    def __init__(self) -> None:
        self.outputs: tuple[Any, ...] = ()
        self.ids: frozenset[int] = frozenset()
        self.bases: frozenset[int] = frozenset()
        self.version = 0

    def update(self, outputs: Sequence[Any]) -> None:
        """Trust `outputs` (a call's, through the plan or the general path) instead; the
        same arrays again (an in-place step's) change nothing."""
        if len(outputs) == len(self.outputs) and all(map(operator.is_, outputs, self.outputs)):
            return
        self.outputs = tuple(outputs)
        views = [x for x in self.outputs if type(x) is np.ndarray and x.base is not None]
        self.ids = frozenset(map(id, views))
        self.bases = frozenset(id(x.base) for x in views)
        self.version += 1


class LeafChecks:
    """`accept(leaves)` before a planned call, `after(leaves, outputs)` once it ran
    (module docstring). `donated` are the donated leaves' positions; `returned`, when
    known, the donated leaves the program returns as themselves."""

    def __init__(
        self,
        types: Sequence[tuple[tuple[int, ...], Any]],
        donated: Sequence[int],
        returned: frozenset[int] | None,
        function: str,
    ) -> None:
        donated_set = frozenset(donated)
        others = [k for k in range(len(types)) if k not in donated_set]
        self.pick_donated, self.pick_others = _picker(tuple(donated)), _picker(others)
        self.donated_types = _Types([types[d] for d in donated])
        self.other_types = _Types([types[k] for k in others])
        self.has_donated = bool(donated)
        self.never_returned = (
            None if returned is None else tuple(d for d in donated if d not in returned)
        )
        self.function = function
        self.trusted = TrustedViews()
        self.kept: tuple[Any, ...] = ()
        """The donated arrays of the last call, all returned as themselves: checked."""
        self.kept_version = -1
        self.owned: frozenset[int] = frozenset()
        """Ids a non-donated argument must not be, nor be a view of."""
        self.unchanged = False
        """The last `accept` found the donated arrays `kept` (and nothing trusted anew)."""
        self.seen: tuple[Any, ...] = ()
        """The other arrays of the last accepted call (checked then). Holding them keeps
        them alive until the next call, as a training loop's variable holding the last
        gradients does anyway."""

    def accept(self, leaves: tuple[Any, ...]) -> bool:
        if DONATED and not DONATED.keys().isdisjoint(map(id, leaves)):
            return False  # the general path raises
        others = self.pick_others(leaves)
        same_others = len(others) == len(self.seen) and all(map(operator.is_, others, self.seen))
        if not same_others:
            self.seen = ()
        if not self.has_donated:
            if not same_others and not self.other_types.match(others):
                return False
            self.seen = others
            return True
        donated = self.pick_donated(leaves)
        trusted = self.trusted
        kept = self.kept
        self.unchanged = (
            len(donated) == len(kept)
            and self.kept_version == trusted.version
            and all(map(operator.is_, donated, kept))
        )
        if not self.unchanged:
            self.kept = ()  # until `after` keeps the arrays this check passes
            if not self.donated_types.match(donated):
                return False
            # Each owns its memory or is a trusted view, and none is a trusted arena.
            views = compress(donated, map(_IS_VIEW, map(_BASE, donated)))
            if not trusted.ids.issuperset(map(id, views)):
                return False
            if not trusted.bases.isdisjoint(map(id, donated)):
                return False
            ids = frozenset(map(id, donated))
            if len(ids) != len(donated):
                return False
            self.owned = ids | trusted.bases
        elif same_others:
            return True  # the very arrays this found apart last time
        # Each other array of its layout (unless seen last call), and not a donated array
        # or arena, nor a view of one (`id(None)` is in no `owned`): one bulk check.
        if same_others:
            if not self.owned.isdisjoint(map(id, chain(others, map(_BASE, others)))):
                return False
        elif not self.other_types.match(others, self.owned):
            return False
        self.seen = others
        return True

    def after(self, leaves: tuple[Any, ...], outputs: Sequence[Any]) -> None:
        if not self.has_donated:
            return
        donated = self.pick_donated(leaves)
        self.trusted.update(outputs)
        if self.unchanged and self.kept_version == self.trusted.version:
            return  # the same arrays in and out again (an in-place step)
        returned = set(map(id, outputs))
        if self.never_returned is not None:
            for d in self.never_returned:
                mark(leaves[d], self.function)
        elif not returned.issuperset(map(id, donated)):
            for array in donated:
                if id(array) not in returned:
                    mark(array, self.function)
        everything = returned.issuperset(map(id, donated))
        self.kept = donated if everything else ()
        self.kept_version = self.trusted.version


__all__ = ["LeafChecks", "TrustedViews", "row_strides"]
