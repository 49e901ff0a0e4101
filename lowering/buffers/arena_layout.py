"""
Byte sizes and alignment of the buffers in a host's workspace arena, shared by the two
passes that place buffers there: `tess-memory-plan` (the planned arena of intermediates)
and `tess-hoist-scratch` (kernels' scratch, past the planned arena). Both align every
buffer to `ALIGNMENT`; the scratch puts buffers of `HUGE_PAGE` bytes or more at multiples
of it (`tessc.runtime.abi.HUGE_PAGE`, which the runtime's workspace matches).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Attribute
from xdsl.utils.exceptions import PassFailedException

from tessc.runtime.abi import ALIGNMENT


def memref_bytes(typ: Attribute) -> int | None:
    """The size of a memref of static shape (`i1` is a one-byte bool), else None."""
    if not isinstance(typ, MemRefType) or any(d < 0 for d in typ.get_shape()):
        return None
    element = typ.element_type
    width = 64 if isinstance(element, IndexType) else getattr(element, "bitwidth", None)
    if not isinstance(width, int):
        raise PassFailedException(f"no byte size for {element}")
    return math.prod(typ.get_shape()) * max(1, width // 8)


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    """`n` rounded up to a multiple of `alignment`."""
    return -(-n // alignment) * alignment


__all__ = ["align_up", "memref_bytes"]
