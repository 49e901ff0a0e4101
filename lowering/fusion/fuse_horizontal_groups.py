"""
Which generics of a function `tess-fuse-horizontal` packs into one arena kernel: its step
2, grouping, and the families of its step 2b (lowering/fusion/README.md). No IR is changed.

`elementwise_refusal` says why a generic is not an elementwise op over one iteration space
(also what step 1, the sibling merge, asks); `classify` makes it an `Update` of the
function or says why not; `find_groups` puts updates with the same `body_fingerprint`,
element type and shared rank-0 operands in one `Group`. `find_families` finds, per
parameter, the ops that reduce its arguments to rank-0 values (norms), compute on those (a
trust ratio) and update its arguments (a `Member`); members alike up to shapes form a
`Family`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Set
from dataclasses import dataclass, field

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, ShapedType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineMap

from tessc.dialects.contract import DONATED
from tessc.dialects.kernel import GroupOp, yielded_value
from tessc.lowering.linalg.generic_analysis import (
    body_fingerprint,
    generic_maps,
    reads_captured,
    reads_loop_indices,
)

# ---------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------


def shape_of(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape()) if isinstance(value.type, ShapedType) else ()


def element_of(value: SSAValue) -> Attribute:
    typ = value.type
    return typ.get_element_type() if isinstance(typ, ShapedType) else typ


def is_shared_operand(value: SSAValue, affine_map: AffineMap) -> bool:
    """A rank-0 tensor (or scalar) every iteration reads whole, such as a learning rate."""
    return not shape_of(value) and not affine_map.results


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
    if reads_loop_indices(op) or reads_captured(op):
        return "its body reads loop indices or a captured tensor (an indexing op)"
    identity = AffineMap.identity(num_loops)
    for index, (value, affine_map) in enumerate(zip(op.operands, generic_maps(op), strict=True)):
        if index >= len(op.inputs) and block.args[index].uses:
            return f"reads its init (output {index - len(op.inputs)})"
        if not is_shared_operand(value, affine_map) and (
            affine_map != identity or len(shape_of(value)) != num_loops
        ):
            return (
                f"operand {index} is read through {affine_map}, not the identity "
                "(a broadcast, transpose or reduction)"
            )
    return None  # mixed dtypes are fine: each operand position is its own arena


def inputs_with_maps(op: GenericOp) -> list[tuple[SSAValue, AffineMap]]:
    return list(zip(op.inputs, generic_maps(op)[: len(op.inputs)], strict=True))


def append_body(body: Block, block: Block, mapping: dict[SSAValue, SSAValue]) -> list[SSAValue]:
    """`body`'s ops, all but its `linalg.yield`, cloned at the end of `block` with its arguments
    read through `mapping`; returns what it yields, mapped the same way."""
    yielded: list[SSAValue] = []
    for body_op in body.ops:
        if isinstance(body_op, YieldOp):
            yielded += [mapping.get(v, v) for v in body_op.operands]
        else:
            block.add_op(body_op.clone(mapping))
    return yielded


# ---------------------------------------------------------------------------------------
# Grouping (step 2)
# ---------------------------------------------------------------------------------------


@dataclass
class Update:
    """A generic that can join a group, and the argument at each packed operand position."""

    op: GenericOp
    key: Hashable
    arguments: tuple[BlockArgument, ...]

    @property
    def size(self) -> int:
        return math.prod(shape_of(self.op.results[0]))


def classify(op: GenericOp, block: Block, ret: func.ReturnOp) -> Update | str:
    """`op` as an update of the function whose body is `block`, or why it is not one."""
    if (reason := elementwise_refusal(op)) is not None:
        return reason
    arguments: list[BlockArgument] = []
    shared: list[tuple[int, SSAValue]] = []
    for index, (value, affine_map) in enumerate(inputs_with_maps(op)):
        if is_shared_operand(value, affine_map):
            shared.append((index, value))
        elif isinstance(value, BlockArgument) and value.block is block:
            arguments.append(value)
        elif isinstance(value, OpResult):
            return (
                f"operand {index} is computed (by {value.op.name}), not a function "
                "argument: grouped updates must not depend on other ops"
            )
        else:
            return f"operand {index} is not an argument of the function"
    if not arguments:
        return "reads no tensor argument: nothing to pack"
    if len(set(arguments)) != len(arguments):
        return "one argument at two operand positions"
    for index, result in enumerate(op.results):
        returned = sum(use.operation is ret for use in result.uses)
        if returned != 1:
            what = "not returned" if not returned else "returned more than once"
            return f"result {index} is {what} by the function"
    key = (body_fingerprint(op.body.block), element_of(op.results[0]), tuple(shared))
    return Update(op, key, tuple(arguments))


@dataclass
class Group:
    updates: list[Update] = field(default_factory=list[Update])

    def donated(self, function: func.FuncOp) -> bool:
        """Whether some operand position packs only `{tess.donated}` arguments."""
        attrs = function.arg_attrs.data if function.arg_attrs else ()
        positions = zip(*(u.arguments for u in self.updates), strict=True)
        return any(
            all(a.index < len(attrs) and DONATED.in_dict(attrs[a.index]) for a in members)
            for members in positions
        )


def find_groups(
    block: Block, ret: func.ReturnOp, skip: Set[Operation] = frozenset()
) -> tuple[list[Group], dict[Operation, str]]:
    """The groups of `block`'s updates (in program order of their first member) and why
    each other top-level generic is left alone; ops in `skip` are another step's."""
    refused: dict[Operation, str] = {}
    classes: dict[Hashable, Group] = {}
    packed: set[BlockArgument] = set()
    for op in block.ops:
        if not isinstance(op, GenericOp) or op in skip:
            continue
        update = classify(op, block, ret)
        if isinstance(update, str):
            refused[op] = update
        elif taken := [a for a in update.arguments if a in packed]:
            name = taken[0].name_hint or f"argument {taken[0].index}"
            refused[op] = f"%{name} is already packed for another update"
        else:
            packed.update(update.arguments)
            classes.setdefault(update.key, Group()).updates.append(update)
    return list(classes.values()), refused


# ---------------------------------------------------------------------------------------
# Segmented families (step 2b)
# ---------------------------------------------------------------------------------------

COMBINERS = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf")
"""Reduction combiners a segmented reduction splits into chunk partials and a combine."""


@dataclass
class Step:
    """One generic of a member: `kind` is "reduce" (a full reduction to rank 0, whose
    init is the rank-0 generic `init`), "scalar" (rank 0) or "update" (elementwise)."""

    op: GenericOp
    kind: str
    init: GenericOp | None = None


@dataclass
class Member:
    """One parameter's ops in a segmented family: its top-level `ops` (generics and
    `kernel.group`s, in block order), their generics as `steps`, and the full-rank
    arguments they read (`arguments`, in order of first read; all of one shape)."""

    ops: list[Operation]
    steps: list[Step]
    arguments: tuple[BlockArgument, ...]
    key: Hashable

    @property
    def size(self) -> int:
        return math.prod(shape_of(self.arguments[0]))


@dataclass
class Family:
    members: list[Member] = field(default_factory=list[Member])

    def donated(self, function: func.FuncOp) -> bool:
        """Whether some argument position packs only `{tess.donated}` arguments."""
        attrs = function.arg_attrs.data if function.arg_attrs else ()
        positions = zip(*(m.arguments for m in self.members), strict=True)
        return any(
            all(a.index < len(attrs) and DONATED.in_dict(attrs[a.index]) for a in members)
            for members in positions
        )


def _generics(op: Operation) -> list[GenericOp] | None:
    """The generics `op` stands for (a group's members), None if it holds anything else."""
    if isinstance(op, GenericOp):
        return [op]
    if not isinstance(op, GroupOp):
        return None
    generics: list[GenericOp] = []
    for inner in op.members():
        if isinstance(inner, GenericOp):
            generics.append(inner)
        elif inner.name not in ("tensor.empty", "arith.constant"):
            return None
    return generics


def _full_rank_arguments(generics: list[GenericOp], block: Block) -> list[BlockArgument]:
    return [
        v
        for g in generics
        for v in g.operands
        if isinstance(v, BlockArgument) and v.block is block and shape_of(v)
    ]


def combiner(op: GenericOp) -> Operation | None:
    """The op of a full reduction's body that folds an element into the accumulator (one
    of `COMBINERS`, reading the output block argument, which nothing else reads)."""
    block = op.body.block
    if len(op.outputs) != 1 or len(block.args) != len(op.inputs) + 1:
        return None
    acc = block.args[-1]
    yielded = block.last_op.operands if block.last_op else ()
    if len(yielded) != 1 or not isinstance(yielded[0], OpResult):
        return None
    fold = yielded[0].op
    uses = list(acc.uses)
    if fold.name not in COMBINERS or len(uses) != 1 or uses[0].operation is not fold:
        return None
    return fold


def _is_init(op: GenericOp) -> bool:
    """A rank-0 generic with no inputs (the constant a reduction starts from)."""
    return not op.iterator_types and not op.inputs and len(op.outputs) == 1


def _idempotent(init: GenericOp, fold: Operation) -> bool:
    """Whether the constant `init` yields satisfies `init (fold) init == init`, so that
    splitting the reduction into partial sums, each started from it, changes nothing."""
    yielded = init.body.block.last_op.operands if init.body.block.last_op else ()
    constant = yielded[0].owner if len(yielded) == 1 else None
    if not isinstance(constant, arith.ConstantOp) or not isinstance(constant.value, FloatAttr):
        return False
    value = float(constant.value.value.data)
    if fold.name in ("arith.maximumf", "arith.minimumf"):
        return True
    return value == 0.0 if fold.name == "arith.addf" else value in (0.0, 1.0)


def _step(op: GenericOp, inits: dict[SSAValue, GenericOp]) -> Step | str:
    """`op` as a step of a member, or why not."""
    iterators = [it.data for it in op.iterator_types]
    if reads_captured(op) or reads_loop_indices(op) or any(o.regions for o in op.body.ops):
        return "its body reads loop indices or captured tensors, or has regions"
    maps = generic_maps(op)
    for value, affine_map in zip(op.operands, maps, strict=True):
        rank = len(shape_of(value))
        if rank and affine_map != AffineMap.identity(len(iterators)):
            return f"an operand is read through {affine_map}, not the identity"
        if not rank and affine_map.results:
            return "a rank-0 operand is indexed"
    if not iterators:
        if any(shape_of(v) for v in op.operands):
            return "a rank-0 op on a tensor"
        return Step(op, "scalar")
    if all(it == IteratorType.REDUCTION for it in iterators):
        init = op.outputs[0] if len(op.outputs) == 1 else None
        owner = yielded_value(init).owner if init is not None else None
        if shape_of(op.outputs[0]) or not isinstance(owner, GenericOp) or not _is_init(owner):
            return "a reduction that does not start from a rank-0 constant"
        fold = combiner(op)
        if fold is None:
            return "a reduction whose combiner is not one of " + ", ".join(COMBINERS)
        if not _idempotent(owner, fold):
            return "a reduction whose init x init is not the init (chunks would count it twice)"
        inits[owner.results[0]] = owner
        return Step(op, "reduce", owner)
    if (reason := elementwise_refusal(op)) is not None:
        return reason
    return Step(op, "update")


def _member(ops: list[Operation], block: Block, ret: func.ReturnOp) -> Member | str | None:
    """The member made of `ops` (the component of one parameter), why it cannot be one,
    or None if it has no reduction (then it is the plain grouping's business)."""
    generics = [g for op in ops for g in _generics(op) or ()]
    inits: dict[SSAValue, GenericOp] = {}
    steps: list[Step] = []
    for generic in generics:
        step = _step(generic, inits)
        if isinstance(step, str):
            return step
        steps.append(step)
    steps = [s for s in steps if s.op not in inits.values()]
    if not any(s.kind == "reduce" for s in steps):
        return None
    arguments = tuple(dict.fromkeys(_full_rank_arguments(generics, block)))
    if len({shape_of(a) for a in arguments}) != 1:
        return "its full-rank arguments differ in shape"
    position = {a: k for k, a in enumerate(arguments)}
    members = set(ops) | set(generics)
    for argument in arguments:
        if any(block.find_ancestor_op_in_block(u.operation) not in members for u in argument.uses):
            return "an argument is read by other ops too"
    index = {s.op: k for k, s in enumerate(steps)}

    def wire(value: SSAValue) -> Hashable:
        if value in position:
            return ("arg", position[value])
        inner = yielded_value(value)
        if isinstance(inner, OpResult) and inner.op in index:
            return ("step", index[inner.op], inner.index)
        if isinstance(inner, OpResult) and inner.op in inits.values():
            return ("init",)
        if shape_of(value):
            return ("tensor",)  # a full-rank init: checked below
        return ("shared", value)

    key: list[Hashable] = []
    for step in steps:
        op = step.op
        if step.kind == "update":
            if any(wire(v)[0] not in ("arg", "shared", "step") for v in op.inputs):
                return "an update reads a computed tensor"
            if isinstance(op.parent_op(), GroupOp):
                return "an update inside a kernel group"
            if any([u.operation for u in result.uses] != [ret] for result in op.results):
                return "an update's result is not returned once"
        elif step.kind == "scalar":
            for arg, init in zip(op.body.block.args[len(op.inputs) :], op.outputs, strict=True):
                if arg.uses and wire(init)[0] != "step":
                    return "a rank-0 op reads an init that is not a norm"
        if step.kind != "update":
            for result in op.results:
                users = [block.find_ancestor_op_in_block(u.operation) for u in result.uses]
                if any(user not in members for user in users):
                    return "a rank-0 value of the parameter is read by other ops"
        if step.init is not None and any(u.operation is not op for u in step.init.results[0].uses):
            return "a reduction's init is read by other ops"
        init_body = body_fingerprint(step.init.body.block) if step.init else None
        key.append(
            (
                step.kind,
                body_fingerprint(op.body.block),
                tuple(wire(v) for v in op.inputs),
                tuple(wire(v) if step.kind == "scalar" else () for v in op.outputs),
                tuple(element_of(v) for v in op.operands),
                init_body,
            )
        )
    for group in ops:
        if isinstance(group, GroupOp):
            users = [
                block.find_ancestor_op_in_block(u.operation) for r in group.res for u in r.uses
            ]
            if any(user not in members for user in users):
                return "a rank-0 value of the parameter is read by other ops"
    return Member(ops, steps, arguments, tuple(key))


def find_families(block: Block, ret: func.ReturnOp) -> tuple[list[Family], dict[Operation, str]]:
    """The segmented families of `block` (parameters whose ops reduce their arguments;
    members ordered by their first argument) and why other candidates were refused.

    A top-level generic or group is *bound* to a parameter if it reads a full-rank
    argument or a rank-0 value of a bound op; the bound ops that share an argument or a
    value are one parameter's component (union-find). Rank-0 ops that read neither (the
    step count's scalars) are shared by all and stay where they are."""
    parent: dict[object, object] = {}

    def find(x: object) -> object:
        while parent.setdefault(x, x) is not x:
            x = parent[x]
        return x

    def union(a: object, b: object) -> None:
        parent[find(a)] = find(b)

    bound: list[Operation] = []
    refused: dict[Operation, str] = {}
    for op in block.ops:
        generics = _generics(op)
        if not generics:
            continue
        reads = [v for g in generics for v in g.inputs]
        producers = [
            v.op for v in reads if isinstance(v, OpResult) and v.op in bound and not shape_of(v)
        ]
        arguments = _full_rank_arguments(generics, block)
        if not arguments and not producers:
            continue
        bound.append(op)
        for other in [*arguments, *producers]:
            union(op, other)
    components: dict[object, list[Operation]] = {}
    for op in bound:
        components.setdefault(find(op), []).append(op)
    classes: dict[Hashable, Family] = {}
    for ops in components.values():
        member = _member(ops, block, ret)
        if isinstance(member, Member):
            classes.setdefault(member.key, Family()).members.append(member)
        elif member is not None:
            refused.update({op: member for op in ops})
    families = list(classes.values())
    for family in families:
        family.members.sort(key=lambda m: m.arguments[0].index)
    return families, refused


__all__ = [
    "COMBINERS",
    "append_body",
    "Family",
    "Group",
    "Member",
    "Step",
    "Update",
    "body_fingerprint",
    "classify",
    "element_of",
    "elementwise_refusal",
    "combiner",
    "find_families",
    "find_groups",
    "inputs_with_maps",
    "is_shared_operand",
    "shape_of",
]
