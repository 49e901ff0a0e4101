"""
`tess-memory-plan`'s rewrite of `kernel.group`s whose accumulator is an out-param, so that
a donated input can back it (its step 3).

An in-place epilogue group (a weight update fused after the matmul of its gradient)
accumulates in the out-param, which can then never alias the donated weight: the fill
would zero it before the update reads it. `detach_accumulator` moves the fill and the
contraction to a fresh arena buffer, so the last member alone reads the weight and writes
the out-param, element by element. `readers_before_writer` moves members that read a
donated optimizer state before the member updating it. Both are made only when the plan's
partner test then passes; the worked example is in lowering/buffers/README.md.
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.dialects.linalg.ops import GenericOp, IteratorType
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.rewriter import InsertPoint, Rewriter

from tessc.dialects.kernel import GroupOp

VIEW_OPS = (
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    memref.CastOp,
    memref.ViewOp,
)
"""Ops whose result is another name for (part of) their source's memory (also
`tess-memory-plan`'s)."""


def _identity(map_attr: AffineMapAttr) -> bool:
    return map_attr.data == AffineMap.identity(map_attr.data.num_dims)


def _epilogue(group: GroupOp, out: SSAValue, source: SSAValue) -> GenericOp | None:
    """The last member touching `out`, if the rewrite applies to it: an all-parallel
    generic (no loads) whose only output is `out` at identity, reading `source` only at
    identity; `source` touched by no other member; `out` only written (as `outs`) by the
    members before it and touched by none after."""
    members = group.members()
    touching = [k for k, m in enumerate(members) if out in m.operands]
    if len(touching) < 2:
        return None  # nothing accumulates in `out` ahead of the epilogue
    last = touching[-1]
    epilogue = members[last]
    if not isinstance(epilogue, GenericOp) or list(epilogue.outputs) != [out]:
        return None
    if any(it.data != IteratorType.PARALLEL for it in epilogue.iterator_types.data):
        return None
    if any(isinstance(op, memref.LoadOp) for op in epilogue.body.walk()):
        return None
    maps = epilogue.indexing_maps.data
    if not _identity(maps[-1]) or out in epilogue.inputs:
        return None
    if not any(v is source for v in epilogue.inputs):
        return None
    if any(v is source and not _identity(m) for v, m in zip(epilogue.inputs, maps, strict=False)):
        return None
    for k, member in enumerate(members):
        if k != last and source in member.operands:
            return None
        if k < last and out in member.operands:
            if not isinstance(member, GenericOp) or out in member.inputs:
                return None
    return epilogue


def detach_accumulator(group: GroupOp, out: SSAValue, source: SSAValue) -> bool:
    """Move the accumulation of `out` in `group` to a fresh buffer (see the module
    docstring); False, and nothing changed, when the group is not of that form."""
    if not isinstance(out.type, MemRefType) or out.type != source.type:
        return False
    for value in (out, source):
        if any(isinstance(use.operation, VIEW_OPS) for use in value.uses):
            return False
    epilogue = _epilogue(group, out, source)
    if epilogue is None:
        return False
    acc = memref.AllocOp([], [], out.type)
    acc.memref.name_hint = "acc"
    Rewriter.insert_op(acc, InsertPoint.before(group))
    for member in group.members():
        if member is epilogue:
            break
        for operand_index, value in enumerate(member.operands):
            if value is out:
                member.operands[operand_index] = acc.memref
    block = epilogue.body.block
    inputs = list(epilogue.inputs)
    accumulated = block.insert_arg(out.type.element_type, len(inputs))
    accumulated.name_hint = "acc"
    output_arg = block.args[len(inputs) + 1]
    output_arg.replace_all_uses_with(accumulated)
    maps = list(epilogue.indexing_maps.data)
    rank = maps[-1].data.num_dims
    identity = AffineMapAttr(AffineMap.identity(rank))
    new_epilogue = GenericOp(
        [*inputs, acc.memref],
        list(epilogue.outputs),
        Rewriter.move_region_contents_to_new_regions(epilogue.body),
        [*maps[: len(inputs)], identity, *maps[len(inputs) :]],
        epilogue.iterator_types,
        doc=epilogue.doc,
        library_call=epilogue.library_call,
    )
    for name, attr in epilogue.attributes.items():
        new_epilogue.attributes.setdefault(name, attr)
    Rewriter.replace_op(epilogue, new_epilogue)
    return True


def elementwise_reader(member: object, source: SSAValue) -> bool:
    """`member` reads `source` only as an input, at the element each iteration writes."""
    if not isinstance(member, GenericOp) or source in member.outputs:
        return False
    if any(it.data != IteratorType.PARALLEL for it in member.iterator_types.data):
        return False
    if any(isinstance(op, memref.LoadOp) for op in member.body.walk()):
        return False
    maps = member.indexing_maps.data
    return all(_identity(m) for v, m in zip(member.inputs, maps, strict=False) if v is source)


def readers_before_writer(group: GroupOp, out: SSAValue, source: SSAValue) -> bool:
    """Move the members that read `source` after the one member writing `out` (an
    optimizer's state update, read again by the parameter update that recomputes it) to
    just before that writer, when they depend on nothing between; then the writer is the
    last member touching `source`. False, and nothing changed, when that is not possible."""
    members = group.members()
    writers = [m for m in members if out in m.operands]
    if len(writers) != 1 or not elementwise_reader(writers[0], source):
        return False
    writer = writers[0]
    start = members.index(writer)
    readers = [m for m in members[start + 1 :] if source in m.operands]
    if not readers or not all(elementwise_reader(m, source) for m in readers):
        return False
    moved: list[GenericOp] = []
    for reader in readers:
        assert isinstance(reader, GenericOp)
        between = [m for m in members[start : members.index(reader)] if m not in moved]
        written = {v for m in between if isinstance(m, GenericOp) for v in m.outputs}
        touched = {v for m in between for v in m.operands}
        if written & set(reader.inputs) or set(reader.outputs) & touched or out in reader.operands:
            return False
        moved.append(reader)
    for reader in moved:
        reader.detach()
        Rewriter.insert_op(reader, InsertPoint.before(writer))
    return True


__all__ = ["detach_accumulator", "elementwise_reader", "readers_before_writer"]
