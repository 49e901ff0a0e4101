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

2. Grouping (in `tessc.lowering.fusion.fuse_horizontal_groups`). An *update* is a generic that is
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

The pass is split: step 1 in `fuse_horizontal_siblings.py`, the rewrite of a function's
groups and families over arenas (steps 2 and 2b) in `fuse_horizontal_arenas.py`; here
step 3 and the pass, which runs them.
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


__all__ = ["TessFuseHorizontalPass"]
