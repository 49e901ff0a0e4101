"""
Source locations on ops a pass creates (xDSL 0.74 gives them none; MLIR's builders take
the matched op's): `stamp_location` gives a location to new ops, `inherit_location` to
every op a `Builder` inserts. `tessc.xdsl_patches.fixes_locations` applies
them to every rewrite; passes that build with a plain `Builder` call `inherit_location`.
A verifier failure after a pass then points at the user's line.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.builder import Builder
from xdsl.dialects.builtin import LocationAttr, UnknownLoc
from xdsl.ir import Operation


def stamp_location(ops: Iterable[Operation], location: LocationAttr) -> None:
    """Give `location` to each op of `ops`, and to each op nested in them, that has none."""
    if isinstance(location, UnknownLoc):
        return
    for op in ops:
        for inner in op.walk():
            if isinstance(inner.location, UnknownLoc):
                inner.location = location


def inherit_location(builder: Builder, source: Operation) -> Builder:
    """`builder`, whose inserted ops (and the ops in them) take `source`'s location."""
    builder.operation_insertion_handler.append(lambda op: stamp_location((op,), source.location))
    return builder


__all__ = ["inherit_location", "stamp_location"]
