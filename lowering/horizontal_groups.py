"""
Which generics of a function `tess-fuse-horizontal` packs into one arena kernel: its
step 2, grouping (the algorithm is in that pass's module docstring). No IR is changed here.

`elementwise_refusal` says why a generic is not an elementwise op over one iteration space
(also what step 1, the sibling merge, asks before merging two); `classify` makes it an
`Update` of the function (its full-rank operands distinct function arguments, its results
each returned once) or says why not; `find_groups` puts updates with the same
`body_fingerprint`, element type and shared rank-0 operands in one `Group`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import ShapedType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineMap

from tessc.dialects.contract import DONATED
from tessc.lowering.generic_analysis import generic_maps, reads_captured, reads_loop_indices

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
    types = {element_of(v) for v in op.operands if isinstance(v.type, ShapedType)}
    if len(types) > 1:
        names = ", ".join(sorted(str(t) for t in types))
        return f"mixed dtypes ({names}): an arena holds one dtype"
    return None


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


def inputs_with_maps(op: GenericOp) -> list[tuple[SSAValue, AffineMap]]:
    return list(zip(op.inputs, generic_maps(op)[: len(op.inputs)], strict=True))


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


def find_groups(block: Block, ret: func.ReturnOp) -> tuple[list[Group], dict[Operation, str]]:
    """The groups of `block`'s updates (in program order of their first member) and why
    each other top-level generic is left alone."""
    refused: dict[Operation, str] = {}
    classes: dict[Hashable, Group] = {}
    packed: set[BlockArgument] = set()
    for op in block.ops:
        if not isinstance(op, GenericOp):
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


__all__ = [
    "Group",
    "Update",
    "body_fingerprint",
    "classify",
    "element_of",
    "elementwise_refusal",
    "find_groups",
    "inputs_with_maps",
    "is_shared_operand",
    "shape_of",
]
