"""
Which host buffers of the gpu level may share memory: the arena windows (`memref.view`s of
the workspace at constant shifts) and arguments, with `tess.aliases_input`. Shared by
`tess-gpu-partition` (joining kernel calls) and `tess-gpu-horizontal` (launches side by
side).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, SSAValue

from tessc.dialects import contract
from tessc.lowering.gpu.gpu_common import constant_index


def byte_range(value: SSAValue) -> tuple[SSAValue, int, int] | None:
    """(the buffer, start, end) in bytes that a host value covers: a function argument is
    a buffer of its own, a `memref.view` at a constant shift a window of its source."""
    if isinstance(value.owner, memref.CollapseShapeOp | memref.ExpandShapeOp):
        return byte_range(value.owner.operands[0])
    typ = value.type
    if not isinstance(typ, MemRefType) or any(d < 0 for d in typ.get_shape()):
        return None
    size = math.prod(typ.get_shape()) * (typ.element_type.bitwidth // 8)  # type: ignore[attr-defined]
    if isinstance(value, BlockArgument):
        return value, 0, size
    if isinstance(value.owner, memref.ViewOp):
        shift = constant_index(value.owner.byte_shift)
        source = value.owner.source
        if shift is not None and isinstance(source, BlockArgument):
            return source, shift, shift + size
    return None


def disjoint(values: Sequence[SSAValue]) -> bool:
    """Whether the distinct host `values` cover disjoint memory (the no-overlap promise
    `tess-outline-kernels` makes for one kernel's arguments, kept by a join). An output
    that reuses a donated input's storage overlaps it."""
    ranges = [byte_range(v) for v in values]
    if any(r is None for r in ranges):
        return False
    for i, (a, a0, a1) in enumerate(ranges):  # type: ignore[misc]
        for b, b0, b1 in ranges[i + 1 :]:  # type: ignore[misc]
            if a is b and a0 < b1 and b0 < a1:
                return False
            if a is not b and isinstance(a, BlockArgument) and isinstance(b, BlockArgument):
                owner = a.owner.parent_op()
                if isinstance(owner, func.FuncOp) and aliased(owner, a.index, b.index):
                    return False
    return True


def aliased(function: func.FuncOp, a: int, b: int) -> bool:
    """Whether arguments `a` and `b` of `function` share storage (`tess.aliases_input`)."""
    return any(contract.ALIASES_INPUT.get_arg(function, x) == y for x, y in ((a, b), (b, a)))


__all__ = ["aliased", "byte_range", "disjoint"]
