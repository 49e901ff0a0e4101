"""
`tess-fuse-epilogue`: a reduction or contraction and the work after it that needs only its
finished rows become one `kernel.group`, one future kernel (level 3).

`tess-fuse` cannot fuse a reduction into its consumer (a matmul's bias and relu, softmax's
`x - max`): one generic cannot wait for a finished result. But the consumer needs it only
row by row, so both can share the kernel's outer parallel loop over rows, each row running
the nests in order. This pass decides which ops go together (ops sharing all the root's
outer loops, in program order, until the first reader that cannot join) and wraps them in
a `kernel.group`; `tess-linalg-to-loops` carries it out (nest fusion). With `in-place` an
epilogue overwrites the accumulator it reads. Nothing is recomputed. The algorithm is in
lowering/fusion/README.md. MLIR would tile and fuse into the containing op; xDSL has
neither that nor a kernel boundary op, hence this pass and the `kernel` dialect.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from tessc.dialects import contract
from tessc.dialects.kernel import GroupOp, YieldOp, escaping_results
from tessc.dialects.tess import PatternKind
from tessc.lowering.linalg.generic_analysis import labels, pattern_kind
from tessc.lowering.linalg.loop_nests import NestSummary, shared_by_chain, summarize_nest

_ROOT_KINDS = (PatternKind.REDUCTION, PatternKind.MATMUL)


def is_tensor_generic(op: Operation) -> bool:
    return (
        isinstance(op, GenericOp)
        and bool(op.res)
        and all(isinstance(v.type, TensorType) for v in (*op.outputs, *op.res))
    )


def is_group_root(op: Operation) -> bool:
    return is_tensor_generic(op) and pattern_kind(op) in _ROOT_KINDS


def _all_parallel(op: GenericOp) -> bool:
    return all(it.data == IteratorType.PARALLEL for it in op.iterator_types)


@dataclass(frozen=True)
class GroupPolicy:
    chain_reductions: bool = True


@dataclass
class GroupPlan:
    """The members of one group, in the order they run, and the loops they share."""

    root: GenericOp
    block: Block
    shared: int
    policy: GroupPolicy
    members: list[GenericOp] = field(default_factory=list[GenericOp])
    nests: list[NestSummary] = field(default_factory=list[NestSummary])

    def is_member_result(self, value: SSAValue) -> bool:
        return isinstance(value, OpResult) and value.op in self.members

    def buffer_of_value(self, value: SSAValue) -> Hashable:
        """The buffer `value` will live in: a member result written in place into its
        init lives in the init's buffer."""
        while self.is_member_result(value):
            assert isinstance(value, OpResult) and isinstance(value.op, GenericOp)
            init = value.op.outputs[value.index]
            if not (self.is_member_result(init) and init.has_one_use()):
                break
            value = init
        return value

    def buffer_of(self, op: Operation, index: int) -> Hashable:
        assert isinstance(op, GenericOp)
        num_inputs = len(op.inputs)
        operand = op.operands[index]
        if index < num_inputs:
            return self.buffer_of_value(operand)
        if self.is_member_result(operand) and operand.has_one_use():
            return self.buffer_of_value(operand)  # written in place
        return op.res[index - num_inputs]

    def pullable_inits(self, op: GenericOp) -> list[GenericOp]:
        """The generics that write `op`'s `outs` (its inits) and that only `op` reads."""
        inits: list[GenericOp] = []
        for init in op.outputs:
            producer = init.owner
            if (
                isinstance(init, OpResult)
                and is_tensor_generic(producer)
                and isinstance(producer, GenericOp)
                and producer.parent_block() is self.block
                and producer not in self.members
                and _all_parallel(producer)
                and all(u.operation is op for r in producer.res for u in r.uses)
            ):
                inits.append(producer)
        return inits

    def refusal(self, op: Operation) -> str | None:
        """Why `op` cannot join the group as it is now, or None."""
        if not is_tensor_generic(op):
            return f"'{op.name}' is not a linalg.generic on tensors"
        assert isinstance(op, GenericOp)
        kind = pattern_kind(op)
        if kind == PatternKind.OPAQUE:
            return "opaque to grouping (indexing maps are not projections)"
        if op is not self.root and kind in _ROOT_KINDS and not self.policy.chain_reductions:
            return f"a further {kind.name.lower()} (chain-reductions=false)"
        for init in op.outputs:
            if self.is_member_result(init) and not init.has_one_use():
                return "its init is a group result that other ops read too"
        nest = summarize_nest(op, self.buffer_of)
        if nest is None:
            return "its loop extents are not static"
        shared = shared_by_chain(self.nests, nest, min(self.shared, len(nest.outer_loops)))
        if shared < self.shared:
            return (
                f"it shares {shared} of the group's {self.shared} outer parallel loops "
                "(it reads or writes group results at other rows, or its loops differ)"
            )
        if self.shared == 0 and nest.outer_loops and not self.is_root_fill(op):
            return "it has parallel loops and the group (a full reduction) has none to share"
        self.members.append(op)
        self.nests.append(nest)
        return None

    def is_root_fill(self, op: GenericOp) -> bool:
        """Whether `op` is a constant fill that only the root reads, as its init: it runs
        before the root in the same kernel (a column sum's zeros: one kernel, not two)."""
        return (
            not self.members
            and not op.inputs
            and all(u.operation is self.root for r in op.res for u in r.uses)
            and op.body.block.first_op is not None
            and all(isinstance(o, arith.ConstantOp | LinalgYieldOp) for o in op.body.block.ops)
        )

    def try_join(self, ops: Sequence[GenericOp]) -> str | None:
        """Add `ops` in order if all can join, else change nothing and say why not."""
        size = len(self.members)
        for op in ops:
            reason = self.refusal(op)
            if reason is not None:
                del self.members[size:], self.nests[size:]
                return reason
        return None

    def join_with_inits(self, op: GenericOp) -> str | None:
        """Add `op`, preceded by its inits when they can join too."""
        inits = self.pullable_inits(op)
        if inits and self.try_join([*inits, op]) is None:
            return None
        return self.try_join([op])


def uses_any(op: Operation, members: Sequence[Operation]) -> bool:
    """Whether `op` or an op nested in it reads a result of `members`: an earlier group
    holding a reader is a reader (its members must keep seeing the value defined before
    them, so a group cannot move past it)."""
    return any(
        isinstance(v, OpResult) and v.op in members for inner in op.walk() for v in inner.operands
    )


def plan_group(
    root: GenericOp, policy: GroupPolicy
) -> tuple[GroupPlan | None, list[tuple[Operation, str]]]:
    """The group `root` starts and the (op, reason) of each op refused on the way."""
    refused: list[tuple[Operation, str]] = []
    block = root.parent_block()
    nest = summarize_nest(root)
    if block is None or nest is None:
        return None, refused
    plan = GroupPlan(root, block, len(nest.outer_loops), policy)
    reason = plan.join_with_inits(root)
    assert reason is None, reason  # a nest shares its own outer loops
    op = root.next_op
    while op is not None:
        if uses_any(op, plan.members):
            if not isinstance(op, GenericOp):
                break  # a view, a call, the return: the group ends before it
            reason = plan.join_with_inits(op)
            if reason is not None:
                refused.append((op, reason))
                break
        op = op.next_op
    return plan, refused


def build_group(plan: GroupPlan, rewriter: PatternRewriter) -> GroupOp:
    """Move the members into a `kernel.group` after the last of them."""
    members: list[Operation] = list(plan.members)
    last = max(members, key=lambda m: plan.block.get_operation_index(m))
    outside = escaping_results(members)
    group = GroupOp([r.type for r in outside], [])
    rewriter.insert(group, InsertPoint.after(last))
    body = InsertPoint.before(group.yield_op)
    for member in members:
        for operand in member.operands:
            empty = operand.owner
            if (
                isinstance(empty, tensor.EmptyOp)
                and empty.parent_block() is plan.block
                and all(u.operation in members for u in empty.tensor.uses)
            ):
                empty.detach()
                rewriter.insert(empty, body)
        member.detach()
        rewriter.insert(member, body)
    rewriter.replace(group.yield_op, YieldOp(*outside))
    for result, new in zip(outside, group.res, strict=True):
        rewriter.replace_uses_with_if(
            result, new, lambda use: use.operation.parent_op() is not group
        )
    return group


def reusable_input(member: GenericOp) -> int | None:
    """The input whose buffer `member` can write its result into, or None: `member` is
    all-parallel with one fresh output whose init it does not read, and the input is a
    result of another member of the group, read by nothing else, of the output's type and
    read at the element the output is written to."""
    group = member.parent_op()
    if len(member.outputs) != 1 or not _all_parallel(member):
        return None
    init, out_arg = member.outputs[0], member.body.block.args[len(member.inputs)]
    if not isinstance(init.owner, tensor.EmptyOp) or out_arg.uses:
        return None
    maps = [m.data for m in member.indexing_maps]
    for index, value in enumerate(member.inputs):
        if (
            isinstance(value, OpResult)
            and isinstance(value.op, GenericOp)
            and value.op.parent_op() is group
            and value.has_one_use()
            and value.type == init.type
            and maps[index] == maps[-1]
        ):
            return index
    return None


def write_in_place(member: GenericOp, index: int, rewriter: PatternRewriter) -> GenericOp:
    """`member` with input `index` made its `outs`: it reads the element from its output
    and overwrites it, so the result lives in that input's buffer."""
    body = rewriter.move_region_contents_to_new_regions(member.body)
    args = body.block.args
    args[index].replace_all_uses_with(args[len(member.inputs)])
    body.block.erase_arg(args[index])
    maps = list(member.indexing_maps)
    del maps[index]
    inputs = [v for i, v in enumerate(member.inputs) if i != index]
    rewritten = GenericOp(
        inputs,
        [member.inputs[index]],
        body,
        maps,
        member.iterator_types,
        member.result_types,
        member.doc,
        member.library_call,
    )
    rewritten.attributes.update(member.attributes)
    empty = member.outputs[0].owner
    rewriter.replace(member, rewritten)
    if isinstance(empty, tensor.EmptyOp) and not empty.tensor.uses:
        rewriter.erase(empty)
    return rewritten


@dataclass(frozen=True)
class GroupReductionEpilogue(RewritePattern):
    """Root a `kernel.group` at a reduction or contraction (module docstring)."""

    policy: GroupPolicy
    report: bool
    in_place: bool

    @op_type_rewrite_pattern
    def match_and_rewrite(self, root: GenericOp, rewriter: PatternRewriter) -> None:
        if not isinstance(root.parent_op(), func.FuncOp) or not is_group_root(root):
            return
        plan, refused = plan_group(root, self.policy)
        if self.report:
            root_label = ",".join(labels(root))
            for op, reason in refused:
                text = reason if op is root else f"not grouped with {root_label}: {reason}"
                contract.GROUP_REFUSED.set(op, text)
        if plan is None or len(plan.members) < 2:
            return
        names = [label for member in plan.members for label in labels(member)]
        group = build_group(plan, rewriter)
        in_place: list[str] = []
        if self.in_place:
            for member in list(plan.members):
                index = reusable_input(member)
                if index is not None:
                    in_place += labels(member)
                    write_in_place(member, index, rewriter)
        if self.report:
            contract.GROUPED.set(group, names)
            contract.SHARED_LOOPS.set(group, plan.shared)
            if in_place:
                contract.IN_PLACE.set(group, in_place)


@dataclass(frozen=True)
class TessFuseEpiloguePass(ModulePass):
    """
    Group each reduction or contraction with the ops after it that need only its finished
    rows into one `kernel.group` (see the module docstring).

    Options: `report` writes `tess.grouped`, `tess.shared_loops`, `tess.in_place` and
    `tess.group_refused`; `chain-reductions` lets further reductions and contractions join
    a group; `in-place` lets an elementwise member write into the buffer it reads.
    """

    name = "tess-fuse-epilogue"

    report: bool = False
    chain_reductions: bool = True
    in_place: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        policy = GroupPolicy(self.chain_reductions)
        pattern = GroupReductionEpilogue(policy, self.report, self.in_place)
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = [
    "TessFuseEpiloguePass",
    "plan_group",
]
