"""
Horizontal fusion of independent elementwise updates into arena kernels (`tess-fuse-horizontal`).

An optimizer step updates each of hundreds of parameters with the same few elementwise
clauses (`w - lr * g`; Adagrad's five). After `tess-fuse` each parameter's clauses are one
or two `linalg.generic`s: still a kernel launch and a pass over a small array per
parameter. This pass makes them ONE generic over contiguous storage: the parameters in one
1-D buffer (an arena), the gradients in another, the states in a third. It runs at level 3
(linalg on tensors), after `tess-fuse`, in three steps.

1. Sibling merge (`merge-siblings`). Two all-parallel generics over the same iteration
   space that read a common tensor become one multi-output generic (both bodies, then
   xDSL's `cse`: what `tess-fuse` duplicated into each, like Adagrad's `s + g * g`, is
   computed once). Legal when every use of the first one's results comes after the
   second (so the second cannot depend on the first); the merged op takes the second's
   place. Each parameter's update is then one generic.

2. Grouping (in `tessc.lowering.horizontal_groups`). An *update* is a generic that is
   elementwise (all iterators parallel, rank >= 1, every operand read through the
   identity map or a rank-0 tensor read through `(d...) -> ()`, its inits never read,
   one element type), whose full-rank operands are
   distinct ARGUMENTS of the function and whose results are each returned once. Updates
   with structurally identical bodies (ops, attributes, operand wiring, constants), one
   element type and the same rank-0 operands (the same SSA values, like `lr`) form a
   group, members in argument order; an argument is packed once (an update whose
   argument is already packed is refused). The members are independent by construction:
   they read only arguments and shared values that dominate them all (an update reading
   another's result is refused: it does not read an argument). A group of at least
   `min-group-size` updates (with `donated-only`, only if some operand position packs
   only `{tess.donated}` arguments) is rewritten:

   - each operand position's K arguments become ONE argument `tensor<N x dtype>`, where
     the first of them was; member m sits at element offset o_m, the sizes before it (no
     padding); the arena is `{tess.donated}` if all its members were;
   - each result position's K results become ONE result, where the first of them was;
   - ONE 1-D generic with the members' body computes them (identity maps on arenas,
     `(d0) -> ()` on shared operands), in place of the members;
   - other uses of a packed argument or result read a view of its arena:
     `tensor.extract_slice` (offset o_m), then `tensor.expand_shape` to the member's shape.

   The function gets `tess.arena_layout = {inputs, outputs, input_names}`: for each
   ORIGINAL input and result, in order, `array<i64: host, offset, shape...>`, the argument
   (result) that now holds it and its element offset there, offset -1 if it is passed as
   it was. Bufferization keeps it (results become out-params in order), codegen copies it
   into `TESSC_SIGNATURES`, and the runtime `Executable` keeps the caller's convention:
   separate arrays in, each passed in its arena without a copy when the caller's arrays
   are views of one buffer at those offsets (`tessc.arena` makes such views), else packed
   (a copy); separate arrays out, views of the output arenas. With donation the memory
   plan makes an output arena alias its input arena: the update runs in place.

2b. Segmented reductions (`segmented`, before 2). An optimizer like Lamb reduces each
   parameter to norms (`|p|`, `|u|`), computes a per-parameter trust ratio from them, and
   updates the parameter elementwise with it: after `tess-fuse`, per parameter, full
   reductions of its arguments (kernel groups with their init and rank-0 epilogues) and
   an elementwise update reading rank-0 values computed from them. Step 2 cannot group
   those updates (their rank-0 operands differ per parameter) nor the reductions.
   `horizontal_groups.find_families` collects each parameter's ops (its *member*: the ops
   that read its arguments or its rank-0 values, whose values nothing else reads) and puts
   members alike up to shapes in one *family*; `horizontal_segments.SegmentedBuilder`
   rewrites a family of at least `min-group-size` members over arenas (arguments packed
   as in step 2, one *segment* per parameter): every reduction of the family is a chunk
   partial of ONE pass over the arenas (chunks of at most `chunk-size` elements, each in
   one segment, so a large parameter spreads over threads), the partials are combined per
   segment, the rank-0 ops run once per segment, and the update runs over the chunks
   reading its segment's values. Loops whose inner range depends on the row (a chunk's
   elements, a segment's chunks) are 2-D generics with `tess.row_ranges`. Before
   grouping, a one-element update that `tess-fuse-epilogue` put in its norm's group
   (extent-1 loops count as none) is taken out of it, so that one-element parameters
   are members like the others; put back if it joins no family.

   Two passes over the arenas, so two kernels. Every element's new value needs its
   parameter's trust ratio, which needs the parameter's complete norms, which read every
   element before any may be written (in place: the arenas are donated). So no single
   pass can do it: the chunks of a segment would have to wait for each other (a
   grid-wide barrier on a GPU; on the CPU the end of a parallel loop). Pass 1 (after the
   step count's scalar prologue) reads the arenas once for the moments and both norms of
   every parameter, then combines the chunk partials and computes the trust ratios; pass
   2 recomputes the moments (cheaper than storing them in pass 1, which then writes
   nothing of arena size) and applies the ratio-scaled update in place, as the seed's
   fused Lamb does in its two passes. Each pass is a kernel: one `kernel.group` holding
   both would run them as two parallel loops all the same (a segmented loop shares no
   loop with its neighbours), saving one call, and the memory plan would have to learn
   that an update after whole-arena reads in its group may still write in place. A Lamb
   step over any number of parameters is two kernels
   (tests/filecheck/fusion/lamb-steps.mlir).

3. Scalar prologue (`scalar-prologue`). An optimizer's step count makes rank-0 work:
   bias corrections `1 - beta^t`, a decayed learning rate, `t + 1`. Each is a rank-0
   generic, a kernel of its own, run once per call. The rank-0 generics that read only
   function arguments and each other's results, and whose results only they, the arena
   generics and the return read, move with the first arena generic into one
   `kernel.group`: computed once, serially, at the start of the arena kernel (they share
   no loop with it), so an optimizer step is ONE kernel.

Chunks (`chunk-size`, elements; 0: none). The arena generic carries `tess.chunk_size`
when N exceeds it; its loop becomes a `prange` over chunks of that many elements, each a
unit-stride loop (see codegen). The seed's cache-sized groups keep one clause's data in
cache for the next clause; here all clauses are one loop body, so each element is read
once anyway, and chunks only set the scheduling grain. Measured on W4 (200 Adagrad
parameters, 9.3M floats, bench/bench_adagrad.py): chunks of 4096 to 262144 and no chunks
(0) all within the run-to-run noise (about 10%); the default is 16384.

Only functions no `func.call` calls are rewritten (their signature changes), once (a
function with `tess.arena_layout` is left alone). Refused, with the reason under `report`:
reductions outside a family (step 2b), contractions, broadcasts, transposes, rank-0 ops,
generics inside a `kernel.group`, updates reading a computed tensor (a dependency) or not
returned, mixed element types, updates alone in their class. Updating intermediates (a
gradient computed in the same function) would need their producers to write into arena
slices: not done.

`report=true` writes `tess.horizontal_members = K` on each arena generic (and on a
family's segmented generics),
`tess.horizontal_prologue = P` on a group with a scalar prologue of P generics, and
`tess.horizontal_refused = "<reason>"` on each other top-level generic. xDSL has no
horizontal fusion (nor a packing of function arguments), hence this pass.
"""

from __future__ import annotations

import math
import os.path
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse

from tessc.dialects import contract
from tessc.dialects.contract import ARENA_LAYOUT, DONATED, ArenaLayout, ArenaSlot
from tessc.dialects.functions import called_functions
from tessc.dialects.kernel import GroupOp, wrap_in_group
from tessc.lowering.generic_analysis import generic_maps
from tessc.lowering.horizontal_groups import (
    Family,
    Group,
    Update,
    append_body,
    body_fingerprint,
    element_of,
    elementwise_refusal,
    find_families,
    find_groups,
    inputs_with_maps,
    is_shared_operand,
    shape_of,
)
from tessc.lowering.horizontal_segments import Peeled, SegmentedBuilder

# ---------------------------------------------------------------------------------------
# Step 1: sibling merge
# ---------------------------------------------------------------------------------------


def can_merge_siblings(first: GenericOp, second: GenericOp, block: Block) -> bool:
    """`first` and the later `second` iterate the same space, share a tensor input, and
    every use of `first`'s results comes after `second` (so `second` does not depend on it)."""
    if elementwise_refusal(first) or elementwise_refusal(second):
        return False
    if shape_of(first.results[0]) != shape_of(second.results[0]):
        return False
    if element_of(first.results[0]) != element_of(second.results[0]):
        return False
    shared = {v for v, m in inputs_with_maps(first) if not is_shared_operand(v, m)}
    if not any(v in shared for v in second.inputs):
        return False
    for result in first.results:
        for use in result.uses:
            user = block.find_ancestor_op_in_block(use.operation)
            if user is None or user is second or not second.is_before_in_block(user):
                return False
    return True


def merge_siblings(first: GenericOp, second: GenericOp) -> GenericOp:
    """One generic computing both, in `second`'s place; both are erased."""
    inputs: list[tuple[SSAValue, AffineMap]] = []
    for value, affine_map in inputs_with_maps(first) + inputs_with_maps(second):
        if not any(v is value and m == affine_map for v, m in inputs):
            inputs.append((value, affine_map))
    outputs = [*first.outputs, *second.outputs]
    out_maps = [
        *generic_maps(first)[len(first.inputs) :],
        *generic_maps(second)[len(second.inputs) :],
    ]
    block = Block(arg_types=[element_of(v) for v in (*(v for v, _ in inputs), *outputs)])
    yielded: list[SSAValue] = []
    for op, offset in ((first, 0), (second, len(first.outputs))):
        body = op.body.block
        mapping: dict[SSAValue, SSAValue] = {}
        for index, (value, affine_map) in enumerate(inputs_with_maps(op)):
            slot = next(k for k, (v, m) in enumerate(inputs) if v is value and m == affine_map)
            mapping[body.args[index]] = block.args[slot]
        for index in range(len(op.outputs)):
            mapping[body.args[len(op.inputs) + index]] = block.args[len(inputs) + offset + index]
        yielded += append_body(body, block, mapping)
    block.add_op(YieldOp(*yielded))
    merged = GenericOp(
        [v for v, _ in inputs],
        outputs,
        Region(block),
        [AffineMapAttr(m) for m in (*(m for _, m in inputs), *out_maps)],
        second.iterator_types,
        [*first.result_types, *second.result_types],
    )
    merged.attributes.update({**first.attributes, **second.attributes})
    parent = second.parent_block()
    assert parent is not None
    parent.insert_op_before(merged, second)
    cse(merged.body.block)
    for old, new in zip([*first.results, *second.results], merged.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for op in (second, first):
        op.detach()
        op.erase()
    return merged


def merge_all_siblings(block: Block) -> None:
    """Merge sibling generics of `block` until none is left: each generic, in program
    order, with the first later reader of one of its tensors it can merge with, again and
    again (the merged op may have further siblings)."""
    worklist = [op for op in block.ops if isinstance(op, GenericOp)][::-1]
    while worklist:
        first = worklist.pop()
        if first.parent is not block or elementwise_refusal(first):
            continue
        readers = {use.operation for v in first.inputs if shape_of(v) for use in v.uses}
        candidates = [
            op
            for op in block.ops
            if op in readers and op is not first and first.is_before_in_block(op)
        ]
        for second in candidates:
            if isinstance(second, GenericOp) and can_merge_siblings(first, second, block):
                worklist.append(merge_siblings(first, second))
                break


# ---------------------------------------------------------------------------------------
# Rewriting a function
# ---------------------------------------------------------------------------------------


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
    empties = [tensor.EmptyOp([], arena_type) for _ in first.outputs]
    generic = GenericOp(
        inputs,
        [e.results[0] for e in empties],
        first.body.clone(),
        [AffineMapAttr(m) for m in (*maps, *[AffineMap.identity(1)] * len(empties))],
        ArrayAttr([IteratorTypeAttr.parallel()]),
        [arena_type] * len(empties),
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
        element: Attribute,
        number: int,
        attrs: dict[SSAValue, DictionaryAttr],
    ) -> tuple[list[BlockArgument], list[int]]:
        """Each operand position's arguments (one tuple per member, members in arena order)
        as one arena argument; the arenas and each member's offset."""
        block = self.function.body.block
        offsets = [0]
        for arguments in members:
            offsets.append(offsets[-1] + math.prod(shape_of(arguments[0])))
        arena_type = TensorType(element, [offsets.pop()])
        arenas: list[BlockArgument] = []
        for position in range(len(members[0])):
            packed = [arguments[position] for arguments in members]
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
        element = element_of(updates[0].op.results[0])
        arenas, offsets = self.pack_arguments(
            [u.arguments for u in updates], element, number, attrs
        )
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
        element = element_of(template.arguments[0])
        arguments = [m.arguments for m in members]
        arenas, offsets = self.pack_arguments(arguments, element, number, attrs)
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


# ---------------------------------------------------------------------------------------
# Step 3: the scalar prologue
# ---------------------------------------------------------------------------------------


def scalar_prologue(block: Block, consumers: Sequence[Operation]) -> list[GenericOp]:
    """The rank-0 generics of `block` that can run at the start of the first arena
    kernel: they read only arguments and each other, and only they, `consumers` (top-level
    ops: the arena generics and a family's kernel ops) and the return read them. In block
    order (a valid order: each reads only earlier ones)."""
    ret = block.last_op
    readers = {*consumers, ret}
    members = [
        op for op in block.ops if isinstance(op, GenericOp) and not op.iterator_types and op.results
    ]
    while True:
        chosen = set(members)
        kept = [
            op
            for op in members
            if all(
                (isinstance(v, BlockArgument) and v.block is block)
                or (isinstance(v, OpResult) and v.op in chosen)
                for v in op.inputs
            )
            and all(
                isinstance(v.owner, tensor.EmptyOp) and v.owner.parent_block() is block
                for v in op.outputs
            )
            and all(
                use.operation in chosen or block.find_ancestor_op_in_block(use.operation) in readers
                for result in op.results
                for use in result.uses
            )
        ]
        if len(kept) == len(members):
            return kept
        members = kept


def mark_prologue(group: GroupOp, prologue: int, report: bool) -> None:
    if report and prologue:
        contract.HORIZONTAL_PROLOGUE.set(group, prologue)


def group_kernels(
    block: Block,
    arenas: Sequence[GenericOp],
    families: Sequence[SegmentedBuilder],
    with_prologue: bool,
    report: bool,
) -> None:
    """The scalar prologue into the first arena kernel (in block order), and each
    family's kernels into `kernel.group`s."""
    consumers: list[Operation] = [*arenas]
    for family in families:
        consumers += family.first + family.updates
    prologue = scalar_prologue(block, consumers) if with_prologue else []
    if prologue and arenas:
        mark_prologue(wrap_in_group([*prologue, arenas[0]]), len(prologue), report)
        prologue = []
    for family in families:
        mark_prologue(wrap_in_group([*prologue, *family.first]), len(prologue), report)
        prologue = []
        if len(family.update_results) > 1:
            wrap_in_group(family.updates)


# ---------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TessFuseHorizontalPass(ModulePass):
    """
    Independent elementwise updates of function arguments -> one arena kernel (see the
    module docstring).

    Options: `report` writes `tess.horizontal_members` and `tess.horizontal_refused`;
    `chunk-size` (elements, 0 = none) is the scheduling chunk of the arena loop;
    `min-group-size` is the fewest updates worth an arena; `merge-siblings` merges a
    parameter's clauses (generics reading a common tensor) into one generic first;
    `donated-only` packs only groups that update donated arguments (whose callers keep
    them in arenas), so that no caller pays a packing copy on every call;
    `scalar-prologue` computes the function's argument-only rank-0 generics at the start
    of the first arena kernel instead of in kernels of their own; `segmented` packs
    families of per-parameter reductions and updates (step 2b; the gpu passes do not
    lower its `tess.row_ranges` loops, so the cuda pipeline turns it off).
    """

    name = "tess-fuse-horizontal"

    report: bool = False
    chunk_size: int = 16384
    min_group_size: int = 2
    merge_siblings: bool = True
    donated_only: bool = False
    scalar_prologue: bool = True
    segmented: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        called = called_functions(op)
        for function in list(op.body.block.ops):
            if not isinstance(function, func.FuncOp) or function.is_declaration:
                continue
            block = function.body.blocks.first
            if len(function.body.blocks) != 1 or ARENA_LAYOUT.has(function):
                continue
            assert block is not None
            ret = block.last_op
            if not isinstance(ret, func.ReturnOp):
                continue
            if function.sym_name.data in called:
                reason = f"@{function.sym_name.data} is called by another function"
                self.annotate({g: reason for g in block.ops if isinstance(g, GenericOp)})
                continue
            peeled: list[Peeled] = []
            if self.segmented:  # one-element parameters' steps as the others'
                candidates = [g for g in block.ops if isinstance(g, GroupOp)]
                peeled = [p for g in candidates if (p := Peeled.peel(g)) is not None]
            if self.merge_siblings:
                merge_all_siblings(block)
            families, refused = find_families(block, ret) if self.segmented else ([], {})
            segmented: list[Family] = []
            for family in families:
                if len(family.members) < max(2, self.min_group_size):
                    reason = "too few parameters whose reductions and updates are alike"
                elif self.donated_only and not family.donated(function):
                    reason = "no argument position has only donated arguments (donated-only)"
                else:
                    segmented.append(family)
                    continue
                refused.update({op: reason for m in family.members for op in m.ops})
            skip = {op for family in segmented for m in family.members for op in m.ops}
            groups, unpacked = find_groups(block, ret, skip)
            refused.update(unpacked)
            packed: list[Group] = []
            for group in groups:
                if len(group.updates) < max(2, self.min_group_size):
                    reason = "too few updates with the same body, dtype and shared operands"
                elif self.donated_only and not group.donated(function):
                    reason = (
                        "no operand position has only donated arguments (donated-only): "
                        "the caller's arrays would be copied into arenas on every call"
                    )
                else:
                    packed.append(group)
                    continue
                refused.update({u.op: reason for u in group.updates})
            self.annotate(refused)
            if packed or segmented:
                packer = FunctionPacker(function, self.chunk_size, self.report)
                arenas, builders = packer.pack(packed, segmented)
                group_kernels(block, arenas, builders, self.scalar_prologue, self.report)
            for group in peeled:
                group.restore()

    def annotate(self, refused: dict[Operation, str]) -> None:
        if self.report:
            for generic, reason in refused.items():
                contract.HORIZONTAL_REFUSED.set(generic, reason)


__all__ = [
    "TessFuseHorizontalPass",
    "body_fingerprint",
    "elementwise_refusal",
]
