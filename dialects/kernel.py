"""
The `kernel` dialect: explicit kernel boundaries at the fused level (level 3) and below.

`tess-fuse` merges ops into one `linalg.generic` where one loop nest can compute them.
What a single generic cannot express is a reduction (or a contraction) followed by work
that needs its finished result: a matmul's bias add and activation, softmax's `x - max`
after the row max. Those still belong in one kernel when every step only needs the rows
the steps before it produced. `kernel.group` says so: its one region holds the generics
that make up one future kernel, in order, and `kernel.yield` names the values the rest of
the function reads.

On tensors (level 3):

    %out = kernel.group -> (tensor<4x16xf32>) {
      %init = linalg.generic ... outs(%e0 : tensor<4x16xf32>) { yield 0.0 }
      %mm = linalg.generic {... "reduction"} ins(%x, %w ...) outs(%init ...)
      %r = linalg.generic ... ins(%mm, %b ...) outs(%e1 ...) { addf, maximumf }
      kernel.yield %r : tensor<4x16xf32>
    }

On memrefs (after `tess-bufferize`) the group has no results and its generics write the
buffers allocated before it; the terminator then has no operands and is left implicit in
the custom form:

    kernel.group {
      linalg.generic ... outs(%c : memref<4x16xf32>)
      linalg.generic ... ins(%c, %b ...) outs(%out : memref<4x16xf32>)
    }

The region is not isolated from above: its ops read values defined before the group.
It holds only `linalg` structured ops, the `tensor.empty` ops that give them their
destinations, `arith.constant`s and the terminator; no nested groups. The group has the
memory effects of its contents (a group on tensors is pure and disappears when unused).
`tess-fuse-epilogue` makes groups, `tess-bufferize` carries them to memrefs,
`tess-outline-kernels` makes each one kernel function and `tess-linalg-to-loops` shares
the outer parallel loop between its nests. MLIR has no op for a multi-op kernel boundary
at the linalg level (`scf.execute_region` would be inlined by canonicalization and says
nothing about kernels), hence this dialect.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.utils import AbstractYieldOperation
from xdsl.ir import Attribute, Block, Dialect, Operation, OpResult, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    region_def,
    traits_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

GROUP_MEMBER_TYPES: tuple[type[Operation], ...] = (
    LinalgStructuredOperation,
    tensor.EmptyOp,
    arith.ConstantOp,
)
"""The ops a `kernel.group` may hold besides its terminator."""


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """The values of a `kernel.group` that ops after it read (none on memrefs)."""

    name = "kernel.yield"

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GroupOp), Pure()))


@irdl_op_definition
class GroupOp(IRDLOperation):
    """The ops of one future kernel, run in order; its results are what the body yields."""

    name = "kernel.group"

    res = var_result_def(TensorType)
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(
        self,
        result_types: Sequence[Attribute],
        body: Region | Sequence[Operation],
        attributes: dict[str, Attribute] | None = None,
    ):
        if not isinstance(body, Region):
            block = Block(body)
            if not isinstance(block.last_op, YieldOp):
                block.add_op(YieldOp())
            body = Region(block)
        super().__init__(result_types=[result_types], regions=[body], attributes=attributes)

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        terminator = self.body.block.last_op
        assert isinstance(terminator, YieldOp)
        return terminator

    def members(self) -> list[Operation]:
        """The body's ops without the terminator, in order."""
        return [op for op in self.body.block.ops if not isinstance(op, YieldOp)]

    @classmethod
    def parse(cls, parser: Parser) -> GroupOp:
        result_types: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            result_types = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, parser.parse_type
            )
        attributes = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        block = region.block
        if not isinstance(block.last_op, YieldOp):
            block.add_op(YieldOp())  # implicit when the group yields nothing
        return cls(result_types, region, attributes.data if attributes else None)

    def print(self, printer: Printer) -> None:
        if self.res:
            printer.print_string(" -> (")
            printer.print_list(self.res.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        terminator = self.body.block.last_op if self.body.blocks else None
        implicit = isinstance(terminator, YieldOp) and not terminator.operands
        printer.print_region(
            self.body, print_entry_block_args=False, print_block_terminators=not implicit
        )

    def verify_(self) -> None:
        block = self.body.block
        if block.args:
            raise VerifyException(f"'{self.name}' body takes no block arguments")
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            raise VerifyException(f"'{self.name}' body must end with 'kernel.yield'")
        for op in block.ops:
            if op is not terminator and not isinstance(op, GROUP_MEMBER_TYPES):
                raise VerifyException(
                    f"'{self.name}' may hold only linalg ops, tensor.empty and "
                    f"arith.constant, not '{op.name}'"
                )
        yielded = [v.type for v in terminator.operands]
        if yielded != list(self.res.types):
            raise VerifyException(
                f"'{self.name}' yields {_types(yielded)} but its results are "
                f"{_types(self.res.types)}"
            )


def _types(types: Sequence[Attribute]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def yielded_value(value: SSAValue) -> SSAValue:
    """The value inside the group that a `kernel.group` result stands for (else `value`)."""
    if isinstance(value, OpResult) and isinstance(value.op, GroupOp):
        return value.op.yield_op.operands[value.index]
    return value


def escaping_results(members: Sequence[Operation]) -> list[OpResult]:
    """The results of `members` that an op outside them reads, in order: what a
    `kernel.group` made of `members` must yield."""
    return [
        result
        for member in members
        for result in member.results
        if any(use.operation not in members for use in result.uses)
    ]


def wrap_in_group(members: Sequence[Operation]) -> GroupOp:
    """Move `members` (ops of one block, in order, with the `tensor.empty` inits of their
    operands) into one new `kernel.group` in the last one's place; what ops outside read
    comes out as the group's results."""
    last = members[-1]
    block = last.parent_block()
    assert block is not None
    outside = escaping_results(members)
    group = GroupOp([r.type for r in outside], [])
    block.insert_op_before(group, last)
    body = group.block
    terminator = group.yield_op
    for member in members:
        for init in member.operands if isinstance(member, LinalgStructuredOperation) else ():
            empty = init.owner
            if isinstance(empty, tensor.EmptyOp) and empty.parent_block() is block:
                empty.detach()
                if all(use.operation in members for use in empty.results[0].uses):
                    body.insert_op_before(empty, terminator)
                else:  # shared with ops outside: it must still come before them all
                    block.insert_op_before(empty, group)
        member.detach()
        body.insert_op_before(member, terminator)
    terminator.detach()
    terminator.erase()
    body.add_op(YieldOp(*outside))
    for result, new in zip(outside, group.res, strict=True):
        new.name_hint = result.name_hint
        result.replace_all_uses_with(new)
        for use in list(new.uses):
            if use.operation.parent_op() is group:  # the yield itself
                use.operation.operands[use.index] = result
    return group


Kernel = Dialect("kernel", [GroupOp, YieldOp])

__all__ = [
    "GROUP_MEMBER_TYPES",
    "GroupOp",
    "Kernel",
    "YieldOp",
    "escaping_results",
    "wrap_in_group",
    "yielded_value",
]
