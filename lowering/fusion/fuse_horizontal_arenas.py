"""
`tess-fuse-horizontal`'s rewrite of one function (steps 2 and 2b): its groups of updates
and its families of segmented reductions over arenas.

`FunctionPacker` packs each operand position's arguments into one 1-D arena argument (and
each result position's results into one arena result), builds one generic per group
(`build_arena_generic`) or a family's segmented kernels (`fuse_horizontal_segments`),
gives other uses of a packed value a view of its arena, and records `tess.arena_layout`.
Which updates form a group is decided in `fuse_horizontal_groups`; the pass and the scalar
prologue are in `fuse_horizontal.py`, the algorithm in lowering/fusion/README.md.
"""

from __future__ import annotations

import math
import os.path
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from tessc.dialects import contract
from tessc.dialects.contract import ARENA_LAYOUT, DONATED, ArenaLayout, ArenaSlot
from tessc.lowering.fusion.fuse_horizontal_groups import (
    Family,
    Group,
    Update,
    element_of,
    inputs_with_maps,
    is_shared_operand,
    shape_of,
)
from tessc.lowering.fusion.fuse_horizontal_segments import SegmentedBuilder


def _view(value: SSAValue, offset: int, shape: Sequence[int], before: Operation) -> SSAValue:
    """Elements [offset, offset + prod(shape)) of the 1-D `value`, shaped `shape`."""
    size, element = math.prod(shape), element_of(value)
    view: Operation = tensor.ExtractSliceOp(
        value, [offset], [size], [1], TensorType(element, [size])
    )
    ops = [view]
    if len(shape) > 1:
        groups = ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in range(len(shape))])])
        shaped = TensorType(element, shape)
        view = tensor.ExpandShapeOp(view.results[0], [], groups, list(shape), shaped)
        ops.append(view)
    block = before.parent_block()
    assert block is not None
    block.insert_ops_before(ops, before)
    return view.results[0]


def _arena_name(values: Sequence[SSAValue], suffix: str, fallback: str) -> str:
    """`p_arena` for members `%p0, %p1, ...`; `fallback` when their names share no stem."""
    stem = os.path.commonprefix([v.name_hint or "" for v in values]).rstrip("0123456789_")
    return f"{stem}_arena{suffix}" if stem else fallback


def _unique_names(names: Sequence[str]) -> list[str]:
    """`names` with repeats numbered as the printer does (xDSL drops a `_<n>` suffix from
    name hints, so `params_0, params_1` are both `params`): `params, params_1, ...`."""
    seen: dict[str, int] = {}
    unique: list[str] = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(f"{name}_{seen[name] - 1}" if seen[name] > 1 else name)
    return unique


def build_arena_generic(
    updates: Sequence[Update], arenas: Sequence[BlockArgument], chunk_size: int
) -> tuple[list[Operation], GenericOp]:
    """The 1-D generic over `arenas` with the members' body (and the inits it writes)."""
    first = updates[0].op
    arena_type = arenas[0].type
    assert isinstance(arena_type, TensorType)
    packed = iter(arenas)
    inputs: list[SSAValue] = []
    maps: list[AffineMap] = []
    for value, affine_map in inputs_with_maps(first):
        shared = is_shared_operand(value, affine_map)
        inputs.append(value if shared else next(packed))
        maps.append(AffineMap(1, 0, ()) if shared else AffineMap.identity(1))
    # Each output arena in its output's dtype (a split-bf16 update writes bf16, i16, f32).
    output_types = [TensorType(element_of(v), arena_type.get_shape()) for v in first.outputs]
    empties = [tensor.EmptyOp([], t) for t in output_types]
    generic = GenericOp(
        inputs,
        [e.results[0] for e in empties],
        first.body.clone(),
        [AffineMapAttr(m) for m in (*maps, *[AffineMap.identity(1)] * len(empties))],
        ArrayAttr([IteratorTypeAttr.parallel()]),
        output_types,
    )
    reports = (contract.HORIZONTAL_REFUSED.name, contract.HORIZONTAL_MEMBERS.name)
    generic.attributes.update({k: v for k, v in first.attributes.items() if k not in reports})
    if 0 < chunk_size < arena_type.get_shape()[0]:
        contract.CHUNK_SIZE.set(generic, chunk_size)
    return [*empties, generic], generic


@dataclass
class FunctionPacker:
    """Rewrites one function: each group into an arena generic, its signature to arenas."""

    function: func.FuncOp
    chunk_size: int
    report: bool
    input_slots: dict[SSAValue, tuple[BlockArgument, int]] = field(default_factory=dict)
    """Each packed argument's arena argument and offset."""
    output_slots: dict[SSAValue, tuple[SSAValue, int]] = field(default_factory=dict)
    """Each packed result's arena result and offset."""

    def pack(
        self, groups: Sequence[Group], families: Sequence[Family] = ()
    ) -> tuple[list[GenericOp], list[SegmentedBuilder]]:
        """Rewrite `groups` and `families`; the arena generics, in program order, and each
        family's kernels."""
        function = self.function
        block = function.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        old_args, old_results = list(block.args), list(ret.operands)
        arg_attrs = list(function.arg_attrs.data) if function.arg_attrs else []
        attrs = dict(zip(old_args, arg_attrs, strict=False))
        names = _unique_names([a.name_hint or f"in{k}" for k, a in enumerate(old_args)])
        arenas: list[GenericOp] = []
        members: list[GenericOp] = []
        for n, group in enumerate(groups):
            arena, old = self.rewrite(group, n, attrs)
            arenas.append(arena)
            members += old
        builders: list[SegmentedBuilder] = []
        for n, family in enumerate(families, start=len(groups)):
            builder, old_ops = self.rewrite_family(family, n, attrs)
            builders.append(builder)
            members += old_ops
        # The return: each output arena where its first member was.
        holders = [self.output_slots.get(v, (v, None)) for v in old_results]
        returned = list(dict.fromkeys(holder for holder, _ in holders))
        block.insert_op_before(func.ReturnOp(*returned), ret)
        for op in [ret, *members]:
            op.detach()
            op.erase()
        for op in list(block.ops):  # the members' inits
            if isinstance(op, tensor.EmptyOp) and not op.results[0].uses:
                op.detach()
                op.erase()
        # Packed arguments: views where still read, then gone.
        assert block.first_op is not None
        for member, (arena, offset) in self.input_slots.items():
            if member.uses:
                member.replace_all_uses_with(_view(arena, offset, shape_of(member), block.first_op))
            assert isinstance(member, BlockArgument)
            block.erase_arg(member)
        function.properties["arg_attrs"] = ArrayAttr(
            [attrs.get(a, DictionaryAttr({})) for a in block.args]
        )
        function.properties["function_type"] = FunctionType.from_lists(
            [a.type for a in block.args], [v.type for v in returned]
        )
        function.properties.pop("res_attrs", None)

        inputs = [
            ArenaSlot(holder.index, offset, shape_of(arg))
            for arg in old_args
            for holder, offset in [self.input_slots.get(arg, (arg, None))]
        ]
        outputs = [
            ArenaSlot(returned.index(holder), offset, shape_of(value))
            for value, (holder, offset) in zip(old_results, holders, strict=True)
        ]
        ARENA_LAYOUT.set(function, ArenaLayout(tuple(inputs), tuple(outputs), tuple(names)))
        return sorted(arenas, key=block.get_operation_index), builders

    def pack_arguments(
        self,
        members: Sequence[tuple[BlockArgument, ...]],
        number: int,
        attrs: dict[SSAValue, DictionaryAttr],
    ) -> tuple[list[BlockArgument], list[int]]:
        """Each operand position's arguments (one tuple per member, members in arena order)
        as one arena argument of their dtype (positions may differ: a split-bf16 update
        packs bf16 weights, int16 trails and f32 states); the arenas and each member's
        offset."""
        block = self.function.body.block
        offsets = [0]
        for arguments in members:
            offsets.append(offsets[-1] + math.prod(shape_of(arguments[0])))
        size = offsets.pop()
        arenas: list[BlockArgument] = []
        for position in range(len(members[0])):
            packed = [arguments[position] for arguments in members]
            arena_type = TensorType(element_of(packed[0]), [size])
            lead = min(packed, key=lambda a: a.index)
            arena = block.insert_arg(arena_type, lead.index)
            arena.name_hint = _arena_name(packed, "", f"arena{number}_{position}")
            donated = all(DONATED.in_dict(attrs.get(m, DictionaryAttr({}))) for m in packed)
            attrs[arena] = DONATED.dict(donated)
            arenas.append(arena)
            for member, offset in zip(packed, offsets, strict=True):
                self.input_slots[member] = (arena, offset)
        return arenas, offsets

    def rewrite(
        self, group: Group, number: int, attrs: dict[SSAValue, DictionaryAttr]
    ) -> tuple[GenericOp, list[GenericOp]]:
        """Arena arguments and the arena generic for `group`; its members, to be erased."""
        block = self.function.body.block
        updates = sorted(group.updates, key=lambda u: u.arguments[0].index)
        arenas, offsets = self.pack_arguments([u.arguments for u in updates], number, attrs)
        ops, generic = build_arena_generic(updates, arenas, self.chunk_size)
        if self.report:
            contract.HORIZONTAL_MEMBERS.set(generic, len(updates))
        first = next(op for op in block.ops if any(op is u.op for u in updates))
        block.insert_ops_before(ops, first)
        ret = block.last_op
        for r, result in enumerate(generic.results):
            results = [u.op.results[r] for u in updates]
            result.name_hint = _arena_name(results, "_new", f"arena{number}_new{r}")
            for member, offset in zip(results, offsets, strict=True):
                self.output_slots[member] = (result, offset)
                for use in list(member.uses):
                    if use.operation is not ret:  # a view, right after the arena generic
                        view = _view(result, offset, shape_of(member), first)
                        use.operation.operands[use.index] = view
        return generic, [u.op for u in updates]

    def rewrite_family(
        self, family: Family, number: int, attrs: dict[SSAValue, DictionaryAttr]
    ) -> tuple[SegmentedBuilder, list[Operation]]:
        """Arena arguments and the two kernels' ops for `family` (inserted before the
        return); the members' ops, to be erased."""
        block = self.function.body.block
        members = family.members
        template = members[0]
        arguments = [m.arguments for m in members]
        arenas, offsets = self.pack_arguments(arguments, number, attrs)
        builder = SegmentedBuilder(template, arenas, [m.size for m in members], self.chunk_size)
        builder.build()
        if self.report:
            for op in builder.first + builder.updates:
                if contract.ROW_RANGES.has(op) or op in builder.update_results:
                    contract.HORIZONTAL_MEMBERS.set(op, len(members))
        ret = block.last_op
        assert ret is not None
        block.insert_ops_before([*builder.first, *builder.updates], ret)
        updates = [[s.op for s in m.steps if s.kind == "update"] for m in members]
        for t, generic in enumerate(builder.update_results):
            for r, result in enumerate(generic.results):
                results = [steps[t].results[r] for steps in updates]
                result.name_hint = _arena_name(results, "_new", f"arena{number}_new{r}")
                for member, offset in zip(results, offsets, strict=True):
                    self.output_slots[member] = (result, offset)
        old = sorted({op for m in members for op in m.ops}, key=block.get_operation_index)
        return builder, old[::-1]
