"""
`tess-register-accumulate`: an innermost loop that accumulates into one memory element
keeps the running value in a register instead (scalar replacement; level 5, loops).

A reduction lowered as linalg states it loads, combines and stores its output element
every iteration, and Numba, unable to prove the arrays do not alias, cannot keep it in a
register: the loop does not vectorise. This pass makes the element a loop-carried value
(`iter_args`: a Python local, which LLVM vectorises as a reduction). It matches an
`scf.for` of static trip count with one store to a memref at loop-invariant indices, every
load of that memref at the same indices, and only pure ops besides; a kernel's distinct
memrefs do not overlap where one is written. Runs after `tess-tile-dot`. The order of
operations is unchanged. The match in full is in lowering/loops/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import is_side_effect_free

from tessc.lowering.loops.index_values import constant_int, same_index


@dataclass(frozen=True)
class Accumulation:
    """The element `memref[indices]` a loop accumulates into, and its one store."""

    memref: SSAValue
    indices: tuple[SSAValue, ...]
    store: memref.StoreOp


def _defined_outside(value: SSAValue, loop: scf.ForOp) -> bool:
    owner = value.owner
    op = owner if isinstance(owner, Operation) else owner.parent_op()
    return op is None or not loop.is_ancestor(op)


def match_accumulation(loop: scf.ForOp) -> Accumulation | None:
    """The element `loop` accumulates into, if it is the kind this pass rewrites."""
    if loop.iter_args:
        return None
    lb, ub, step = (constant_int(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0 or ub <= lb:
        return None
    ops = list(loop.body.block.ops)
    if not isinstance(ops[-1], scf.YieldOp) or ops[-1].operands:
        return None
    stores: list[memref.StoreOp] = []
    for op in ops[:-1]:
        if op.regions:
            return None
        if isinstance(op, memref.StoreOp):
            stores.append(op)
        elif not isinstance(op, memref.LoadOp) and not is_side_effect_free(op):
            return None
    if len(stores) != 1:
        return None
    (store,) = stores
    indices = tuple(store.indices)
    if not all(_defined_outside(v, loop) or constant_int(v) is not None for v in indices):
        return None
    for op in ops[:-1]:
        if isinstance(op, memref.LoadOp) and op.memref is store.memref:
            if len(op.indices) != len(indices) or not all(
                same_index(a, b) for a, b in zip(op.indices, indices, strict=True)
            ):
                return None
    return Accumulation(store.memref, indices, store)


class AccumulateInRegister(RewritePattern):
    """Rewrite one accumulating `scf.for` to carry the element as an iter_arg."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, loop: scf.ForOp, rewriter: PatternRewriter) -> None:
        found = match_accumulation(loop)
        if found is None:
            return
        memref_type = found.memref.type
        assert isinstance(memref_type, MemRefType)
        # Constant indices may be defined in the loop: the load and store around it get
        # their own copies.
        hoisted = [
            v.owner.clone() if not _defined_outside(v, loop) else None for v in found.indices
        ]
        indices = [
            op.results[0] if op is not None else v
            for op, v in zip(hoisted, found.indices, strict=True)
        ]
        constants = [op for op in hoisted if op is not None]
        init = memref.LoadOp.get(found.memref, indices)
        block = loop.body.block
        acc = block.insert_arg(memref_type.element_type, 1)
        acc.name_hint = "acc"
        current: SSAValue = acc
        for op in list(block.ops):
            if isinstance(op, memref.LoadOp) and op.memref is found.memref:
                rewriter.replace(op, [], [current])
            elif op is found.store:
                current = op.value
                rewriter.erase(op)
            elif isinstance(op, scf.YieldOp):
                rewriter.replace(op, scf.YieldOp(current))
        body = rewriter.move_region_contents_to_new_regions(loop.body)
        new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, [init.res], body)
        final = memref.StoreOp.get(new_loop.res[0], found.memref, indices)
        rewriter.replace(loop, [*constants, init, new_loop, final], [])


@dataclass(frozen=True)
class TessRegisterAccumulatePass(ModulePass):
    """Keep the element an innermost loop accumulates into in a register (an iter_arg)."""

    name = "tess-register-accumulate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(AccumulateInRegister(), apply_recursively=False).rewrite_module(op)


__all__ = ["Accumulation", "TessRegisterAccumulatePass", "match_accumulation"]
