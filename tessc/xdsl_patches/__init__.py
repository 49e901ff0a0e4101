"""
Every change tessc makes to xDSL's own code, in one place (README.md lists them). Nothing
else in tessc assigns to an xDSL class or module.

`PATCHES` are process-wide: `apply()` puts them in place once per process (`tessc.context`
calls it whenever it builds or extends a `Context`, so every tool and test parsing tessc IR
has them). `SCOPED_PATCHES` are in place only inside a `with` block
(`failing_ops.recording_failing_ops`). Each `Patch` names the xDSL name it replaces, is a
`fix` or a `speedup`, keeps stock xDSL's `original`, and says which xDSL releases it was
written against and the upstream change that would retire it. Under any other xDSL release
the patch is not applied, stock xDSL runs, and one `XdslPatchSkipped` warning (for all the
patches left out) says so.
"""

from __future__ import annotations

import warnings

from tessc.xdsl_patches import (
    failing_ops,
    fixes,
    fixes_extended_floats,
    fixes_locations,
    registry,
    speedups_construction,
    speedups_effects,
    speedups_traits,
    speedups_verify,
)
from tessc.xdsl_patches.registry import Patch, XdslPatchSkipped

PATCHES: tuple[Patch, ...] = (
    *fixes.PATCHES,
    *fixes_extended_floats.PATCHES,
    *fixes_locations.PATCHES,
    *speedups_effects.PATCHES,
    *speedups_traits.PATCHES,
    *speedups_construction.PATCHES,
    *speedups_verify.PATCHES,
)
"""The process-wide patches, in the order they are applied."""

SCOPED_PATCHES: tuple[Patch, ...] = failing_ops.SCOPED_PATCHES
"""The patches in place only within a `with` block."""

_applied = False


def apply() -> None:
    """Apply every patch in `PATCHES` written for the installed xDSL, once per process;
    if some were not, they are left out (stock xDSL runs there) and one `XdslPatchSkipped`
    warning names them."""
    global _applied
    if _applied:
        return
    _applied = True
    version = registry.installed_xdsl_version()
    skipped = [patch for patch in (*PATCHES, *SCOPED_PATCHES) if not patch.written_for(version)]
    if skipped:
        written_for = sorted({release for patch in skipped for release in patch.xdsl_versions})
        warnings.warn(
            XdslPatchSkipped(
                f"xDSL {version} is installed, but tessc's patches of xDSL were written for "
                f"{', '.join(f'{r}.x' for r in written_for)}: stock xDSL is used, without "
                f"{len(skipped)} patch{'es' if len(skipped) > 1 else ''} "
                f"({', '.join(patch.name for patch in skipped)})"
            ),
            stacklevel=2,
        )
    for patch in PATCHES:
        if patch not in skipped:
            patch.apply()


def is_applied() -> bool:
    """Whether `apply()` has run in this process (it may have applied nothing)."""
    return _applied


def revert() -> None:
    """Put stock xDSL back in place of every patch in `PATCHES`; the next `apply()` decides
    again (tests compare the two)."""
    global _applied
    for patch in PATCHES:
        patch.revert()
    _applied = False


__all__ = [
    "PATCHES",
    "SCOPED_PATCHES",
    "Patch",
    "XdslPatchSkipped",
    "apply",
    "is_applied",
    "revert",
]
