"""
`tess-memory-plan`'s buffers of a `?` dim: sized as expressions of N.

A generic host (`dialects/dynamic_dims.py`) allocates each intermediate with a `?` dim by
N, read at its entry (`memref.alloc(%n) : memref<?x128xf32>`). Here they share one byte
region allocated once per call, `memref.alloc(%bytes) : memref<?xi8>` with `%bytes = R *
N`: each buffer a `memref.view` at byte `r * N`, where `r` is the bytes per unit of N of
the buffers laid out before it (the widest first, each rounded to 8 bytes, so every view
is aligned for its element type). Buffers whose live intervals (their first and last
top-level op in the host) are disjoint share a slot of the same width. The region is
sized by the same N the views are, so no call can overrun it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, MemRefType, i8, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tessc.dialects.dynamic_dims import is_dynamic
from tessc.lowering.buffers.memory_plan_planner import views_and_uses
from tessc.runtime.abi import ALIGNMENT

ROW_ALIGNMENT = 8
"""Bytes per unit of N are rounded to this: every view starts aligned for f64."""


@dataclass
class Slot:
    """A part of the region: `width` bytes per unit of N, free after op `free_after`."""

    width: int
    free_after: int
    offset: int = 0  # bytes per unit of N before it


def dynamic_allocs(block: Block) -> list[memref.AllocOp]:
    """The host's allocations of one `?` dim by one size, in order."""
    return [
        op
        for op in block.ops
        if isinstance(op, memref.AllocOp)
        and len(op.dynamic_sizes) == 1
        and not op.symbol_operands
        and isinstance(op.memref.type, MemRefType)
    ]


def width_of(typ: MemRefType) -> int:
    """Bytes per unit of N of a buffer of `typ` (one `?` dim), rounded to `ROW_ALIGNMENT`."""
    static = math.prod(d for d in typ.get_shape() if not is_dynamic(d))
    size = static * typ.element_type.bitwidth // 8  # type: ignore[attr-defined]
    return -(-size // ROW_ALIGNMENT) * ROW_ALIGNMENT


def last_use(value: SSAValue, block: Block, position: dict[Operation, int]) -> int:
    """The position of the last top-level op of `block` that uses `value` (or a view)."""
    last = position[value.owner]  # type: ignore[index]
    for user in views_and_uses(value):
        top = block.find_ancestor_op_in_block(user)
        if top is not None:
            last = max(last, position[top])
    return last


def plan_dynamic_buffers(function: func.FuncOp) -> int:
    """Put `function`'s `?`-sized buffers into one region sized by N (module docstring);
    returns the region's bytes per unit of N (0 where there are none)."""
    block = function.body.block
    allocs = dynamic_allocs(block)
    if not allocs or len({a.dynamic_sizes[0] for a in allocs}) != 1:
        return 0
    size = allocs[0].dynamic_sizes[0]
    position = {op: k for k, op in enumerate(block.ops)}
    spans = [(a, position[a], last_use(a.memref, block, position)) for a in allocs]
    slots: list[Slot] = []
    placed: dict[memref.AllocOp, Slot] = {}
    for alloc, start, end in sorted(spans, key=lambda s: (-width_of(s[0].memref.type), s[1])):
        width = width_of(alloc.memref.type)  # type: ignore[arg-type]
        slot = next((s for s in slots if s.width == width and s.free_after < start), None)
        if slot is None:
            slots.append(slot := Slot(width, end))
        slot.free_after = end
        placed[alloc] = slot
    total = 0
    for slot in slots:
        slot.offset, total = total, total + slot.width
    # The region, right after N is read: every buffer is a view of it.
    anchor = size.owner if isinstance(size.owner, Operation) else None
    at = InsertPoint.after(anchor) if anchor is not None else InsertPoint.at_start(block)
    width = arith.ConstantOp(IntegerAttr(total, IndexType()))
    nbytes = arith.MuliOp(size, width.result)
    region_type = MemRefType(i8, [DYNAMIC_INDEX])
    region = memref.AllocOp([nbytes.result], [], region_type, IntegerAttr(ALIGNMENT, i64))
    region.memref.name_hint = "dynamic_arena"
    Rewriter.insert_op([width, nbytes, region], at)
    for alloc, slot in placed.items():
        for op in list(views_and_uses(alloc.memref)):
            if isinstance(op, memref.DeallocOp):
                Rewriter.erase_op(op)
        offset = arith.ConstantOp(IntegerAttr(slot.offset, IndexType()))
        shift = arith.MuliOp(size, offset.result)
        view = memref.ViewOp(region.memref, shift.result, [size], alloc.memref.type)
        Rewriter.insert_op([offset, shift], InsertPoint.before(alloc))
        Rewriter.replace_op(alloc, view)
    return total


__all__ = ["plan_dynamic_buffers"]
