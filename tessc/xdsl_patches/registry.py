"""
What a patch of xDSL is (`Patch`), which xDSL is installed, and the warning given when it is
not the version the patches were written for. Every patch module builds its `Patch`es with
this; `tessc.xdsl_patches` lists them and applies them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any, Literal

INHERITED = type("Inherited", (), {"__repr__": lambda self: "INHERITED"})()
"""`Patch.original` of a name the owner inherits (stock xDSL defines it on a base class):
reverting the patch deletes the owner's own definition."""

XDSL_0_74 = ("0.74",)
"""The xDSL releases every patch here was written against: 0.74.x (pyproject pins it)."""


class XdslPatchSkipped(UserWarning):
    """The installed xDSL is not the one tessc's patches were written for: stock xDSL runs."""


@cache
def installed_xdsl_version() -> str:
    """The installed xDSL's version ("0.74.0"), or "unknown" without package metadata (read
    once: the patch guards ask for it through this module, so a test can replace it)."""
    try:
        return version("xdsl")
    except PackageNotFoundError:
        return "unknown"


def qualified_name(owner: type | ModuleType, attribute: str) -> str:
    """`xdsl.ir.core.Operation.__init__`: where `attribute` of `owner` lives in xDSL."""
    if isinstance(owner, ModuleType):
        return f"{owner.__name__}.{attribute}"
    return f"{owner.__module__}.{owner.__qualname__}.{attribute}"


@dataclass(frozen=True, eq=False)
class Patch:
    """One xDSL name (`owner.attribute`) that tessc replaces by `replacement`.

    `original` is what stock xDSL has there, read when the `Patch` is made (patch modules
    are imported before anything is applied). `xdsl_versions` are the releases it was
    written against ("0.74" is every 0.74.x); `upstream` is the change to xDSL that would
    make the patch unnecessary, as one would describe it in a pull request."""

    owner: type | ModuleType
    attribute: str
    replacement: Any
    kind: Literal["fix", "speedup"]
    upstream: str
    xdsl_versions: tuple[str, ...] = XDSL_0_74
    original: Any = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "original", vars(self.owner).get(self.attribute, INHERITED))

    @property
    def name(self) -> str:
        """The xDSL name it replaces."""
        return qualified_name(self.owner, self.attribute)

    def written_for(self, xdsl_version: str) -> bool:
        """Whether `xdsl_version` ("0.74.0") is a release this patch was written against."""
        return any(
            xdsl_version == written or xdsl_version.startswith(f"{written}.")
            for written in self.xdsl_versions
        )

    def is_applied(self) -> bool:
        return vars(self.owner).get(self.attribute, INHERITED) is self.replacement

    def _put(self, value: Any) -> None:
        if value is INHERITED:
            if self.attribute in vars(self.owner):
                delattr(self.owner, self.attribute)
        else:
            setattr(self.owner, self.attribute, value)

    def apply(self) -> None:
        setattr(self.owner, self.attribute, self.replacement)

    def revert(self) -> None:
        self._put(self.original)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The patch in place for a `with` block, then whatever was there before."""
        before = vars(self.owner).get(self.attribute, INHERITED)
        self.apply()
        try:
            yield
        finally:
            self._put(before)

    @contextmanager
    def stock(self) -> Iterator[None]:
        """Stock xDSL's for a `with` block (tests compare the two), then what was there."""
        before = vars(self.owner).get(self.attribute, INHERITED)
        self.revert()
        try:
            yield
        finally:
            self._put(before)


__all__ = [
    "INHERITED",
    "XDSL_0_74",
    "Patch",
    "XdslPatchSkipped",
    "installed_xdsl_version",
    "qualified_name",
]
