"""
Trait lookups by type read a per-class cache: `Operation.get_trait(T)`, `has_trait(T)` and
`get_traits_of_type(T)` scanned the op class's traits with `isinstance` on every call, and
every rewrite step asks several (terminator? symbol? pure? its canonicalization patterns?):
~15% of passes over large modules. The answers depend only on the op class and its trait
set, so they are cached on the class's `OpTraits` (`OpTraits.add_trait` drops the cache).
For a type, `get_trait` returns the first trait of that type in the same order as before;
lookups by trait instance are unchanged.
"""

from __future__ import annotations

from typing import Any

from xdsl.ir import Operation
from xdsl.ir.core import OpTrait, OpTraits

from tessc.xdsl_patches.registry import Patch

TRAITS_BY_TYPE = "_tessc_traits_by_type"
"""The attribute of an `OpTraits` holding its cache: {trait type: traits of that type}."""


def traits_by_type(cls: type[Operation], trait_type: type[OpTrait]) -> tuple[OpTrait, ...]:
    """The traits of op class `cls` that are instances of `trait_type`, cached."""
    traits = cls.traits
    cache: dict[type[OpTrait], tuple[OpTrait, ...]] | None = vars(traits).get(TRAITS_BY_TYPE)
    if cache is None:
        cache = {}
        setattr(traits, TRAITS_BY_TYPE, cache)
    found = cache.get(trait_type)
    if found is None:
        found = cache[trait_type] = tuple(t for t in traits if isinstance(t, trait_type))
    return found


_original_get_trait = Operation.get_trait.__func__  # type: ignore[attr-defined]
_original_add_trait = OpTraits.add_trait


# The three lookups read the cache inline: passes ask ~150,000 times for the 1,000-op
# program, and the call layers cost as much as the lookup.


def get_trait(cls: type[Operation], trait: Any) -> Any:
    """`Operation.get_trait`."""
    if isinstance(trait, type):
        cache = vars(cls.traits).get(TRAITS_BY_TYPE)
        found = cache.get(trait) if cache is not None else None
        if found is None:
            found = traits_by_type(cls, trait)
        return found[0] if found else None
    return _original_get_trait(cls, trait)


def has_trait(cls: type[Operation], trait: Any, *, value_if_unregistered: bool = True) -> bool:
    """`Operation.has_trait`."""
    if isinstance(trait, type):
        cache = vars(cls.traits).get(TRAITS_BY_TYPE)
        found = cache.get(trait) if cache is not None else None
        if found is None:
            found = traits_by_type(cls, trait)
        return bool(found)
    return _original_get_trait(cls, trait) is not None


def get_traits_of_type(cls: type[Operation], trait_type: type[OpTrait]) -> list[OpTrait]:
    """`Operation.get_traits_of_type`."""
    cache = vars(cls.traits).get(TRAITS_BY_TYPE)
    found = cache.get(trait_type) if cache is not None else None
    return list(found if found is not None else traits_by_type(cls, trait_type))


def add_trait(self: OpTraits, trait: OpTrait) -> None:
    """`OpTraits.add_trait`, dropping the cache of lookups by type."""
    vars(self).pop(TRAITS_BY_TYPE, None)
    _original_add_trait(self, trait)


UPSTREAM = (
    "ir: cache trait lookups by type. Operation.get_trait(T), has_trait(T) and "
    "get_traits_of_type(T) scan the class's traits with isinstance on every call, ~15% of "
    "a canonicalize over a large module. Keep a dict {trait type: tuple of traits} on "
    "OpTraits, filled on first lookup and cleared by OpTraits.add_trait; lookups by trait "
    "instance unchanged; same first-match order."
)

PATCHES = (
    Patch(Operation, "get_trait", classmethod(get_trait), "speedup", UPSTREAM),
    Patch(Operation, "has_trait", classmethod(has_trait), "speedup", UPSTREAM),
    Patch(Operation, "get_traits_of_type", classmethod(get_traits_of_type), "speedup", UPSTREAM),
    Patch(OpTraits, "add_trait", add_trait, "speedup", UPSTREAM),
)

__all__ = [
    "PATCHES",
    "TRAITS_BY_TYPE",
    "add_trait",
    "get_trait",
    "get_traits_of_type",
    "has_trait",
    "traits_by_type",
]
