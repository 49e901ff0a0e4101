"""
`tess-sink-aliasing-views`: views of a buffer made inside the parallel loops that use the
buffer under another name (level 5, loops; the last loop-level pass).

Numba compiles an `scf.parallel` run as a `prange` into a function of the arrays its body
uses, one argument each, marked `noalias`; its alias analysis does not see that a reshape or
a subview made outside the loop shares memory with the array it was made from. A body that
writes through one name and reads through the other is then reordered by LLVM: a conv's zero
fill of `out` moved past the products read through `out`'s (N, F, O) view (lowering/loops/
README.md, "A fixed bug"). This pass makes every such view again at the top of the loop's
body, so the body names one array per buffer. Views of the memory plan's arena
(`memref.view`) are the plan's disjoint buffers and are left where they are. It runs after
`cse`, which would otherwise merge the copies back into the ones outside.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

ALIASING_VIEWS = (
    memref.CollapseShapeOp,
    memref.ExpandShapeOp,
    memref.SubviewOp,
    memref.ReinterpretCastOp,
)
"""Ops whose result is a view of their first operand's memory (`memref.cast` is not here:
the code generator gives it its source's name, so it is no second name)."""


def view_chain(value: SSAValue) -> list[Operation]:
    """The views `value` is made by, the one taken of the buffer first (empty for a buffer)."""
    chain: list[Operation] = []
    while isinstance(value, OpResult) and isinstance(value.op, (*ALIASING_VIEWS, memref.CastOp)):
        chain.append(value.op)
        value = value.op.operands[0]
    return chain[::-1]


def buffer_of(value: SSAValue) -> SSAValue:
    chain = view_chain(value)
    return chain[0].operands[0] if chain else value


def outside_memrefs(loop: scf.ParallelOp) -> Iterator[SSAValue]:
    """The memrefs `loop`'s body uses that are defined outside it, once each."""
    seen: set[SSAValue] = set()
    for op in loop.body.walk():
        for operand in op.operands:
            if operand in seen or not isinstance(operand.type, MemRefType):
                continue
            owner = operand.owner
            defining = owner.parent_op() if not isinstance(owner, Operation) else owner
            if defining is not None and loop.is_ancestor(defining):
                continue
            seen.add(operand)
            yield operand


def aliased_views(loop: scf.ParallelOp) -> list[SSAValue]:
    """The views `loop`'s body uses whose buffer it also uses under another name, in the
    order the body first uses them."""
    names: dict[SSAValue, list[SSAValue]] = {}
    for value in outside_memrefs(loop):
        chain = view_chain(value)
        if chain and all(isinstance(op, memref.CastOp) for op in chain):
            continue  # the buffer's own name in the generated code
        names.setdefault(buffer_of(value), []).append(value)
    return [
        value for group in names.values() if len(group) > 1 for value in group if view_chain(value)
    ]


def sink_views(loop: scf.ParallelOp, views: list[SSAValue]) -> None:
    """Make each of `views` again at the top of `loop`'s body, for the uses in it."""
    block = loop.body.block
    first = block.first_op
    made: dict[SSAValue, SSAValue] = {}
    for view in views:
        for op in view_chain(view):
            result = op.results[0]
            if result in made:
                continue
            clone = op.clone(value_mapper=dict(made))
            if first is None:
                block.add_op(clone)
            else:
                block.insert_op_before(clone, first)
            clone.results[0].name_hint = result.name_hint
            made[result] = clone.results[0]
        inside = made[view]
        for use in list(view.uses):
            if loop.is_ancestor(use.operation):
                use.operation.operands[use.index] = inside


def enclosing_parallel(op: Operation) -> scf.ParallelOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, scf.ParallelOp):
        parent = parent.parent_op()
    return parent


@dataclass(frozen=True)
class TessSinkAliasingViewsPass(ModulePass):
    name = "tess-sink-aliasing-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Numba runs only the outermost parallel loop as a `prange`.
        outermost = [
            loop
            for loop in op.walk()
            if isinstance(loop, scf.ParallelOp)
            and not isinstance(enclosing_parallel(loop), scf.ParallelOp)
        ]
        for loop in outermost:
            views = aliased_views(loop)
            if views:
                sink_views(loop, views)
