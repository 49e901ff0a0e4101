"""
Horizontal fusion of independent elementwise updates into arena kernels (`tess-fuse-horizontal`).

An optimizer step updates each of hundreds of parameters with the same few elementwise
clauses (`w - lr * g`; Adagrad's five). After `tess-fuse` each parameter's clauses are one
or two `linalg.generic`s, but they are still one kernel per parameter, each a launch and a
pass over a small array. This pass makes all of them ONE generic over contiguous storage:
the parameters live in one 1-D buffer (an arena), the gradients in another, the states in a
third, and one 1-D loop covers them all. It runs at level 3 (linalg on tensors), after
`tess-fuse`, in two steps.

1. Sibling merge (`merge-siblings`). Two all-parallel generics of a function that read a
   common tensor, over the same iteration space, become one multi-output generic (its
   body both bodies, then xDSL's `cse`: what `tess-fuse` duplicated into each, such as
   Adagrad's `s + g * g`, is computed once). Legal when every use of the first one's
   results comes after the second, so that the second cannot depend on the first; the
   merged op takes the second one's place. So each parameter's update is one generic.

2. Grouping. An *update* is a generic that is elementwise (all iterators parallel, rank
   >= 1, each operand read through the identity map, or a rank-0 tensor broadcast through
   `(d...) -> ()`, its init never read, one element type), whose full-rank operands are
   distinct ARGUMENTS of the function and whose results are RESULTS of the function (each
   returned once). Updates with structurally identical bodies (same ops, attributes and
   operand wiring; constants equal), one element type and the same rank-0 operands (the
   same SSA values, such as `lr`) form a group; each argument can be packed once, so an
   update whose argument another update already packs is refused. Because every packed
   operand is a function argument and every shared operand dominates all members, no
   member can depend on another: the grouped ops are independent by construction (an
   update reading another's result is refused for not reading an argument). A group of
   at least `min-group-size` updates is rewritten:

   - each operand position's K arguments become ONE argument `tensor<N x dtype>`, the
     arena, in the argument list where its first member was (members in argument order;
     member m at element offset o_m = the sum of the sizes before it, no padding); the
     arena is `{tess.donated}` when all its members were;
   - each result position's K results become ONE result `tensor<N x dtype>` in place of
     its first member's;
   - ONE 1-D generic computes them, with the members' body, identity maps on arenas and
     `(d0) -> ()` on shared operands, carrying `tess.chunk_size` (option `chunk-size`, if
     N exceeds it): the code generator runs its loop as a `prange` handing out chunks of
     that many elements (Numba's `parallel_chunksize`), so each thread streams cache-sized
     pieces of the arena and a busy core does not hold up the others. The members' loops
     are erased;
   - other uses of a packed argument, or of a member's result, read a view of the arena:
     `tensor.extract_slice` (offset o_m, size of the member), then `tensor.expand_shape`
     back to the member's shape.

   The function gets `tess.arena_layout = {inputs = [...], outputs = [...], input_names =
   [...]}`: for each ORIGINAL input (and result), in order, `array<i64: host, offset,
   shape...>`, the index of the argument (result) that now holds it and its element offset
   there, or offset -1 if it is passed as it was. Bufferization keeps the attribute (results
   become out-params in result order), codegen copies it into `TESSC_SIGNATURES` as plain
   data, and the runtime `Executable` keeps the original calling convention with it: it
   takes the separate arrays, passes an arena as it is when the caller's arrays are already
   views of one buffer at those offsets (`tessc.arena` makes such views), else packs them
   (one copy), and returns each output as a view of its output arena. With donation the
   memory plan makes the output arena alias the input arena: the update is in place.

Only functions that no `func.call` of the module calls are rewritten (their signature
changes), and functions that already carry `tess.arena_layout` are left alone. Not grouped,
with the reason in `report` mode: reductions and contractions, broadcasts, transposes,
rank-0 ops, generics inside a `kernel.group`, updates that read a computed tensor (a
dependency) or whose results are not returned, mixed element types, and updates alone in
their class. An update of intermediates (a gradient computed in the same function) would
need its producer to write into a slice of the arena; that is not done.

`report=true` writes `tess.horizontal_members = K` on each arena generic and
`tess.horizontal_refused = "<reason>"` on each all-parallel generic left as it was. xDSL
has no horizontal fusion (nor a packing of function arguments), hence this pass.
"""

from __future__ import annotations

import os.path
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    ShapedType,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse

LAYOUT_ATTR = "tess.arena_layout"
CHUNK_ATTR = "tess.chunk_size"
MEMBERS_ATTR = "tess.horizontal_members"
REFUSED_ATTR = "tess.horizontal_refused"
DONATED_ATTR = "tess.donated"
NOT_PACKED = -1
"""The offset `tess.arena_layout` gives an argument or result that is passed as it was."""


# ---------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------


def _maps(op: GenericOp) -> list[AffineMap]:
    return [attr.data for attr in op.indexing_maps]


def _rank(value: SSAValue) -> int:
    return value.type.get_num_dims() if isinstance(value.type, ShapedType) else 0


def is_shared_operand(value: SSAValue, affine_map: AffineMap) -> bool:
    """A rank-0 tensor (or scalar) every iteration reads whole, such as a learning rate."""
    return _rank(value) == 0 and not affine_map.results


def elementwise_refusal(op: GenericOp) -> str | None:
    """Why `op` is not an elementwise op over one iteration space; None if it is."""
    if not op.results:
        return "on memrefs: not this level"
    if any(it.data != IteratorType.PARALLEL for it in op.iterator_types):
        return "has reduction iterators"
    num_loops = len(op.iterator_types)
    if num_loops == 0:
        return "a rank-0 op: arenas pack tensors of rank >= 1"
    block = op.body.block
    if any(o.regions for o in block.ops):
        return "its body has nested regions"
    identity = AffineMap.identity(num_loops)
    maps = _maps(op)
    for index, (value, affine_map) in enumerate(zip(op.operands, maps, strict=True)):
        if index >= len(op.inputs) and block.args[index].uses:
            return f"reads its init (output {index - len(op.inputs)})"
        if not is_shared_operand(value, affine_map) and (
            affine_map != identity or _rank(value) != num_loops
        ):
            return (
                f"operand {index} is read through {affine_map}, not the identity "
                "(a broadcast, transpose or reduction)"
            )
    types = {v.type.get_element_type() for v in op.operands if isinstance(v.type, ShapedType)}
    if len(types) > 1:
        names = ", ".join(sorted(str(t) for t in types))
        return f"mixed dtypes ({names}): an arena holds one dtype"
    return None


def element_type(op: GenericOp) -> Attribute:
    result_type = op.results[0].type
    assert isinstance(result_type, TensorType)
    return result_type.get_element_type()


def shape_of(op: GenericOp) -> tuple[int, ...]:
    result_type = op.results[0].type
    assert isinstance(result_type, TensorType)
    return tuple(result_type.get_shape())


def body_fingerprint(block: Block) -> Hashable:
    """The body up to renaming: op names, properties, attributes, result types and how
    operands are wired (block argument k, result r of the j-th op, or an outside value)."""
    positions = {op: j for j, op in enumerate(block.ops)}

    def wire(value: SSAValue) -> Hashable:
        if isinstance(value, BlockArgument) and value.block is block:
            return ("arg", value.index)
        if isinstance(value, OpResult) and value.op in positions:
            return ("result", positions[value.op], value.index)
        return ("outside", value)

    return (
        tuple(arg.type for arg in block.args),
        tuple(
            (
                op.name,
                tuple(sorted(op.properties.items())),
                tuple(sorted(op.attributes.items())),
                tuple(wire(v) for v in op.operands),
                tuple(r.type for r in op.results),
            )
            for op in block.ops
        ),
    )


def _top_level(op: Operation, block: Block) -> Operation | None:
    return block.find_ancestor_op_in_block(op)


# ---------------------------------------------------------------------------------------
# Step 1: sibling merge
# ---------------------------------------------------------------------------------------


def can_merge_siblings(first: GenericOp, second: GenericOp, block: Block) -> bool:
    """`second` (later in `block`) and `first` iterate the same space, share an input, and
    every use of `first`'s results comes after `second` (so `second` does not depend on it)."""
    if elementwise_refusal(first) or elementwise_refusal(second):
        return False
    if shape_of(first) != shape_of(second) or element_type(first) != element_type(second):
        return False
    shared = {
        v
        for v, m in zip(first.inputs, _maps(first)[: len(first.inputs)], strict=True)
        if not is_shared_operand(v, m)
    }
    if not any(v in shared for v in second.inputs):
        return False
    for result in first.results:
        for use in result.uses:
            user = _top_level(use.operation, block)
            if user is None or user is second or not second.is_before_in_block(user):
                return False
    return True


def merge_siblings(first: GenericOp, second: GenericOp) -> GenericOp:
    """One generic computing both, in `second`'s place; both are erased."""
    inputs: list[SSAValue] = []
    maps: list[AffineMap] = []
    for value, affine_map in [
        *zip(first.inputs, _maps(first)[: len(first.inputs)], strict=True),
        *zip(second.inputs, _maps(second)[: len(second.inputs)], strict=True),
    ]:
        if not any(v is value and m == affine_map for v, m in zip(inputs, maps, strict=True)):
            inputs.append(value)
            maps.append(affine_map)
    outputs = [*first.outputs, *second.outputs]
    out_maps = [*_maps(first)[len(first.inputs) :], *_maps(second)[len(second.inputs) :]]
    block = Block(arg_types=[_element(v) for v in (*inputs, *outputs)])
    yielded: list[SSAValue] = []
    for op, offset in ((first, 0), (second, len(first.outputs))):
        body = op.body.block
        mapping: dict[SSAValue, SSAValue] = {}
        for index, value in enumerate(op.inputs):
            slot = next(
                k for k, v in enumerate(inputs) if v is value and maps[k] == _maps(op)[index]
            )
            mapping[body.args[index]] = block.args[slot]
        for index in range(len(op.outputs)):
            mapping[body.args[len(op.inputs) + index]] = block.args[len(inputs) + offset + index]
        for body_op in body.ops:
            if isinstance(body_op, YieldOp):
                yielded += [mapping.get(v, v) for v in body_op.operands]
            else:
                block.add_op(body_op.clone(mapping))
    block.add_op(YieldOp(*yielded))
    merged = GenericOp(
        inputs,
        outputs,
        Region(block),
        [AffineMapAttr(m) for m in (*maps, *out_maps)],
        second.iterator_types,
        [*first.result_types, *second.result_types],
    )
    merged.attributes.update(first.attributes)
    merged.attributes.update(second.attributes)
    parent = second.parent_block()
    assert parent is not None
    parent.insert_op_before(merged, second)
    cse(merged.body.block)
    old = [*first.results, *second.results]
    for old_result, new_result in zip(old, merged.results, strict=True):
        new_result.name_hint = old_result.name_hint
        old_result.replace_all_uses_with(new_result)
    for op in (second, first):
        op.detach()
        op.erase()
    return merged


def _element(value: SSAValue) -> Attribute:
    typ = value.type
    return typ.get_element_type() if isinstance(typ, ShapedType) else typ


def merge_all_siblings(block: Block) -> None:
    """Merge sibling generics of `block` until none is left: each generic in program order
    with the first later reader of one of its tensor inputs it can merge with, again and
    again (a merged op may have further siblings)."""
    worklist = [op for op in block.ops if isinstance(op, GenericOp)]
    worklist.reverse()
    while worklist:
        first = worklist.pop()
        if first.parent is not block or elementwise_refusal(first):
            continue
        readers = {
            use.operation
            for value in first.inputs
            if isinstance(value.type, ShapedType) and value.type.get_num_dims()
            for use in value.uses
        }
        candidates = [
            op
            for op in readers
            if isinstance(op, GenericOp)
            and op is not first
            and op.parent is block
            and first.is_before_in_block(op)
        ]
        candidates.sort(key=lambda op: _position(op, block))
        second = next((g for g in candidates if can_merge_siblings(first, g, block)), None)
        if second is not None:
            worklist.append(merge_siblings(first, second))


def _position(op: Operation, block: Block) -> int:
    return next(k for k, o in enumerate(block.ops) if o is op)


# ---------------------------------------------------------------------------------------
# Step 2: grouping
# ---------------------------------------------------------------------------------------


@dataclass
class Update:
    """A generic that can join a group: its packed operands and returned results."""

    op: GenericOp
    key: Hashable
    arguments: tuple[BlockArgument, ...]
    """The function argument at each packed operand position, in operand order."""
    returned: tuple[int, ...]
    """The return operand index of each result."""

    @property
    def size(self) -> int:
        n = 1
        for d in shape_of(self.op):
            n *= d
        return n


def classify(op: GenericOp, block: Block, ret: func.ReturnOp) -> Update | str:
    """`op` as an update of the function whose body is `block`, or why it is not one."""
    if (reason := elementwise_refusal(op)) is not None:
        return reason
    maps = _maps(op)
    arguments: list[BlockArgument] = []
    shared: list[Hashable] = []
    for index, value in enumerate(op.inputs):
        if is_shared_operand(value, maps[index]):
            shared.append((index, value))
        elif isinstance(value, BlockArgument) and value.block is block:
            arguments.append(value)
        elif isinstance(value, OpResult):
            producer = value.op.name
            return (
                f"operand {index} is computed (by {producer}), not a function argument: "
                "grouped updates must not depend on other ops"
            )
        else:
            return f"operand {index} is not an argument of the function"
    if not arguments:
        return "reads no tensor argument: nothing to pack"
    if len(set(arguments)) != len(arguments):
        return "one argument at two operand positions"
    returned: list[int] = []
    for index, result in enumerate(op.results):
        positions = [use.index for use in result.uses if use.operation is ret]
        if len(positions) != 1:
            what = "not returned" if not positions else "returned more than once"
            return f"result {index} is {what} by the function"
        returned.append(positions[0])
    key = (body_fingerprint(op.body.block), element_type(op), tuple(shared), len(op.inputs))
    return Update(op, key, tuple(arguments), tuple(returned))


@dataclass
class Group:
    updates: list[Update] = field(default_factory=list[Update])


def find_groups(block: Block, ret: func.ReturnOp) -> tuple[list[Group], dict[Operation, str]]:
    """The groups of `block`'s updates (program order of their first member) and the
    reason each other all-parallel generic is left alone."""
    refused: dict[Operation, str] = {}
    classes: dict[Hashable, Group] = {}
    packed: set[BlockArgument] = set()
    for op in block.ops:
        if not isinstance(op, GenericOp):
            continue
        update = classify(op, block, ret)
        if isinstance(update, str):
            refused[op] = update
            continue
        taken = [a for a in update.arguments if a in packed]
        if taken:
            name = taken[0].name_hint or f"argument {taken[0].index}"
            refused[op] = f"%{name} is already packed for another update"
            continue
        packed.update(update.arguments)
        classes.setdefault(update.key, Group()).updates.append(update)
    return list(classes.values()), refused


# ---------------------------------------------------------------------------------------
# Rewriting a function
# ---------------------------------------------------------------------------------------


def _view(value: SSAValue, offset: int, shape: Sequence[int], before: Operation) -> SSAValue:
    """Elements [offset, offset + prod(shape)) of the 1-D `value`, shaped `shape`."""
    block = before.parent_block()
    assert block is not None and isinstance(value.type, TensorType)
    size = 1
    for d in shape:
        size *= d
    flat_type = TensorType(value.type.get_element_type(), [size])
    view: Operation = tensor.ExtractSliceOp(value, [offset], [size], [1], flat_type)
    block.insert_op_before(view, before)
    if len(shape) > 1:
        groups = ArrayAttr([ArrayAttr([IntegerAttr(d, i64) for d in range(len(shape))])])
        shaped = TensorType(value.type.get_element_type(), shape)
        view_op = tensor.ExpandShapeOp(view.results[0], [], groups, list(shape), shaped)
        block.insert_op_before(view_op, before)
        view = view_op
    return view.results[0]


def _arena_name(values: Sequence[SSAValue], suffix: str, fallback: str) -> str:
    """`p_arena` for members `%p0, %p1, ...`; `fallback` when their names share no stem."""
    stem = os.path.commonprefix([v.name_hint or "" for v in values]).rstrip("0123456789_")
    return f"{stem}_arena{suffix}" if stem else fallback


def _shape(value: SSAValue) -> list[int]:
    return list(value.type.get_shape()) if isinstance(value.type, ShapedType) else []


@dataclass
class Arena:
    """One arena of a group: the values it packs (arguments, or results) at `offsets`."""

    members: list[SSAValue]
    offsets: list[int]
    arena_type: TensorType
    name: str


def plan_arenas(group: Group, number: int) -> tuple[list[Update], list[Arena], list[Arena]]:
    """The group's updates in argument order, and its input and output arenas."""
    updates = sorted(group.updates, key=lambda u: u.arguments[0].index)
    offsets: list[int] = []
    total = 0
    for update in updates:
        offsets.append(total)
        total += update.size
    arena_type = TensorType(element_type(updates[0].op), [total])
    inputs = [
        Arena(members, offsets, arena_type, _arena_name(members, "", f"arena{number}_{position}"))
        for position in range(len(updates[0].arguments))
        for members in [[u.arguments[position] for u in updates]]
    ]
    outputs = [
        Arena(members, offsets, arena_type, _arena_name(members, "_new", f"arena{number}_new{r}"))
        for r in range(len(updates[0].op.results))
        for members in [[u.op.results[r] for u in updates]]
    ]
    return updates, inputs, outputs


def build_arena_generic(
    updates: Sequence[Update], arena_args: Sequence[BlockArgument], chunk_size: int
) -> tuple[list[Operation], GenericOp]:
    """The 1-D generic over the arenas with the members' body (ops to insert, in order)."""
    first = updates[0].op
    maps = _maps(first)
    packed = iter(arena_args)
    inputs = [
        value if is_shared_operand(value, maps[k]) else next(packed)
        for k, value in enumerate(first.inputs)
    ]
    arena_type = arena_args[0].type
    assert isinstance(arena_type, TensorType)
    empties = [tensor.EmptyOp([], arena_type) for _ in first.outputs]
    identity = AffineMap.identity(1)
    new_maps = [
        AffineMap(1, 0, ()) if is_shared_operand(v, maps[k]) else identity
        for k, v in enumerate(first.inputs)
    ] + [identity] * len(first.outputs)
    generic = GenericOp(
        inputs,
        [e.results[0] for e in empties],
        first.body.clone(),
        [AffineMapAttr(m) for m in new_maps],
        ArrayAttr([IteratorTypeAttr.parallel()]),
        [arena_type] * len(first.outputs),
    )
    generic.attributes.update(
        {k: v for k, v in first.attributes.items() if k not in (REFUSED_ATTR, MEMBERS_ATTR)}
    )
    if 0 < chunk_size < arena_type.get_shape()[0]:
        generic.attributes[CHUNK_ATTR] = IntegerAttr(chunk_size, i64)
    return [*empties, generic], generic


@dataclass
class FunctionPacker:
    """Rewrites one function: each group into an arena generic, its signature to arenas."""

    function: func.FuncOp
    chunk_size: int
    report: bool

    def pack(self, groups: Sequence[Group]) -> None:
        function = self.function
        block = function.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        old_args = list(block.args)
        old_attrs = list(function.arg_attrs.data) if function.arg_attrs else []
        attrs: dict[SSAValue, DictionaryAttr] = dict(zip(old_args, old_attrs, strict=False))
        names = _unique_names([a.name_hint or f"in{k}" for k, a in enumerate(old_args)])
        old_returned = list(ret.operands)
        input_slot: dict[SSAValue, tuple[SSAValue, int]] = {}
        output_slot: dict[SSAValue, tuple[SSAValue, int]] = {}
        erased: list[Operation] = []
        for number, group in enumerate(groups):
            updates, in_arenas, out_arenas = plan_arenas(group, number)
            arena_args: list[BlockArgument] = []
            for arena in in_arenas:
                lead = min(arena.members, key=lambda a: a.index)  # type: ignore[attr-defined]
                arg = block.insert_arg(arena.arena_type, lead.index)  # type: ignore[attr-defined]
                arg.name_hint = arena.name
                donated = all(
                    DONATED_ATTR in attrs.get(m, DictionaryAttr({})).data for m in arena.members
                )
                attrs[arg] = DictionaryAttr({DONATED_ATTR: UnitAttr()} if donated else {})
                arena_args.append(arg)
                for member, offset in zip(arena.members, arena.offsets, strict=True):
                    input_slot[member] = (arg, offset)
            ops, generic = build_arena_generic(updates, arena_args, self.chunk_size)
            if self.report:
                generic.attributes[MEMBERS_ATTR] = IntegerAttr(len(updates), i64)
            positions = {o: k for k, o in enumerate(block.ops)}
            start = min((u.op for u in updates), key=positions.__getitem__)
            block.insert_ops_before(ops, start)
            for arena, result in zip(out_arenas, generic.results, strict=True):
                result.name_hint = arena.name
                for member, offset in zip(arena.members, arena.offsets, strict=True):
                    output_slot[member] = (result, offset)
                    for use in list(member.uses):
                        if use.operation is not ret:  # views go right after the generic
                            view = _view(result, offset, _shape(member), start)
                            use.operation.operands[use.index] = view
            erased += [u.op for u in updates]
        # The return: each output arena where its first member was, once.
        returned: list[SSAValue] = []
        output_entries: list[tuple[SSAValue, int, SSAValue]] = []
        for value in old_returned:
            holder, offset = output_slot.get(value, (value, NOT_PACKED))
            if holder not in returned:
                returned.append(holder)
            output_entries.append((holder, offset, value))
        block.insert_op_before(func.ReturnOp(*returned), ret)
        for op in [ret, *erased]:
            op.detach()
            op.erase()
        for op in list(block.ops):  # the members' inits
            if isinstance(op, tensor.EmptyOp) and not op.results[0].uses:
                op.detach()
                op.erase()
        # Packed arguments: views where still read, then gone.
        first_op = block.first_op
        assert first_op is not None
        for member, (arena, offset) in input_slot.items():
            if member.uses:
                member.replace_all_uses_with(_view(arena, offset, _shape(member), first_op))
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
            _layout_entry(holder.index, offset, value)  # type: ignore[attr-defined]
            for value in old_args
            for holder, offset in [input_slot.get(value, (value, NOT_PACKED))]
        ]
        outputs = [
            _layout_entry(returned.index(holder), offset, value)
            for holder, offset, value in output_entries
        ]
        function.attributes[LAYOUT_ATTR] = DictionaryAttr(
            {
                "inputs": ArrayAttr(inputs),
                "outputs": ArrayAttr(outputs),
                "input_names": ArrayAttr([StringAttr(n) for n in names]),
            }
        )


def _unique_names(names: Sequence[str]) -> list[str]:
    """`names` with repeats numbered as the printer does (xDSL drops a `_<n>` suffix from
    name hints, so `params_0, params_1` are both `params`): `params, params_1, ...`."""
    seen: dict[str, int] = {}
    unique: list[str] = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        unique.append(f"{name}_{count}" if count else name)
    return unique


def _layout_entry(host: int, offset: int, value: SSAValue) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [host, offset, *_shape(value)])


# ---------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------


def called_functions(module: ModuleOp) -> set[str]:
    return {op.callee.root_reference.data for op in module.walk() if isinstance(op, func.CallOp)}


@dataclass(frozen=True)
class TessFuseHorizontalPass(ModulePass):
    """
    Independent elementwise updates of function arguments -> one arena kernel (see the
    module docstring).

    Options: `report` writes `tess.horizontal_members` and `tess.horizontal_refused`;
    `chunk-size` (elements, 0 = none) is the scheduling chunk of the arena loop;
    `min-group-size` is the fewest updates worth an arena; `merge-siblings` merges a
    parameter's clauses (generics reading a common tensor) into one generic first.
    """

    name = "tess-fuse-horizontal"

    report: bool = False
    chunk_size: int = 16384
    min_group_size: int = 2
    merge_siblings: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        called = called_functions(op)
        for function in list(op.body.block.ops):
            if not isinstance(function, func.FuncOp) or function.is_declaration:
                continue
            if len(function.body.blocks) != 1 or LAYOUT_ATTR in function.attributes:
                continue
            block = function.body.block
            ret = block.last_op
            if not isinstance(ret, func.ReturnOp):
                continue
            if function.sym_name.data in called:
                self.refuse_all(block, f"@{function.sym_name.data} is called by another function")
                continue
            if self.merge_siblings:
                merge_all_siblings(block)
            groups, refused = find_groups(block, ret)
            small = [g for g in groups if len(g.updates) < max(2, self.min_group_size)]
            for group in small:
                for update in group.updates:
                    refused[update.op] = (
                        "too few updates with the same body, dtype and shared operands"
                    )
            large = [g for g in groups if g not in small]
            if self.report:
                for generic, reason in refused.items():
                    generic.attributes[REFUSED_ATTR] = StringAttr(reason)
            if large:
                FunctionPacker(function, self.chunk_size, self.report).pack(large)

    def refuse_all(self, block: Block, reason: str) -> None:
        if self.report:
            for generic in block.ops:
                if isinstance(generic, GenericOp):
                    generic.attributes[REFUSED_ATTR] = StringAttr(reason)


__all__ = [
    "CHUNK_ATTR",
    "LAYOUT_ATTR",
    "MEMBERS_ATTR",
    "REFUSED_ATTR",
    "TessFuseHorizontalPass",
    "body_fingerprint",
    "elementwise_refusal",
]
