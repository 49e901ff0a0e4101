"""
`tess-fuse-horizontal`: independent elementwise updates of many arguments become ONE
generic over arenas (level 3).

An optimizer step updates hundreds of parameters with the same few clauses; after
`tess-fuse` that is still a kernel per parameter. This pass packs each operand position's
arguments into one 1-D arena argument and computes every member in one generic (recording
`tess.arena_layout` so the runtime keeps the caller's convention), in three steps: 1.
sibling merge (`fuse_horizontal_siblings.py`), 2. grouping (`fuse_horizontal_groups.py`)
and the arena rewrite (`fuse_horizontal_arenas.py`), with 2b. segmented reductions for
per-parameter norms (`fuse_horizontal_segments.py`: Lamb is two kernels), and 3. the
step count's scalar prologue moved into the arena kernel, here with the pass. The
algorithm, the refusals and the measured chunk size are in lowering/fusion/README.md.
xDSL has no horizontal fusion (nor a packing of function arguments).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult
from xdsl.passes import ModulePass

from tessc.dialects import contract
from tessc.dialects.contract import ARENA_LAYOUT
from tessc.dialects.functions import called_functions
from tessc.dialects.kernel import GroupOp, wrap_in_group
from tessc.lowering.fusion.fuse_horizontal_arenas import FunctionPacker
from tessc.lowering.fusion.fuse_horizontal_computed import group_computed_updates
from tessc.lowering.fusion.fuse_horizontal_groups import (
    Family,
    Group,
    find_families,
    find_groups,
)
from tessc.lowering.fusion.fuse_horizontal_segments import Peeled, SegmentedBuilder
from tessc.lowering.fusion.fuse_horizontal_siblings import merge_all_siblings

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
    computed_groups: bool = True

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
            if self.computed_groups:
                size = max(2, self.min_group_size)
                for group in group_computed_updates(block, ret, refused, size):
                    members = [g for g in group.block.ops if isinstance(g, GenericOp)]
                    for member in members:
                        member.attributes.pop(contract.HORIZONTAL_REFUSED.name, None)
                    if self.report:
                        contract.HORIZONTAL_MEMBERS.set(group, len(members))
            for group in peeled:
                group.restore()

    def annotate(self, refused: dict[Operation, str]) -> None:
        if self.report:
            for generic, reason in refused.items():
                contract.HORIZONTAL_REFUSED.set(generic, reason)


__all__ = ["TessFuseHorizontalPass"]
