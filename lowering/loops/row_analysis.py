"""
Whether a loop's rows are independent, and what a pass that splits a row loop may move
or recompute: `tess-tile`'s row kernels, `tess-row-dots` and `tess-interchange-rows` ask
the same questions here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from xdsl.dialects import arith, memref, scf
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import IsTerminator, is_side_effect_free


def defined_in(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined by `op` or inside its regions."""
    owner = value.owner
    holder = owner.parent_op() if isinstance(owner, Block) else owner
    return holder is not None and op.is_ancestor(holder)


def moves_by_one(value: SSAValue, loop: scf.ForOp) -> bool:
    """Whether `value` is `loop`'s variable plus values defined outside the loop (a row
    index: a block's first row plus a tile's first row plus the row within it), so that
    consecutive iterations give consecutive values."""
    if value is loop.body.block.args[0]:
        return True
    owner = value.owner
    if not isinstance(owner, arith.AddiOp):
        return False
    a, b = owner.lhs, owner.rhs
    return (moves_by_one(a, loop) and not defined_in(b, loop)) or (
        moves_by_one(b, loop) and not defined_in(a, loop)
    )


def recomputable_ops(loop: scf.ForOp, ops: Sequence[Operation]) -> list[Operation]:
    """The ops of `ops` (the loop body's, in order) that a loop split out of `loop` can
    clone: pure, without regions, their operands defined outside the loop, the loop's
    variable or results of such ops (index arithmetic, constants)."""
    iv = loop.body.block.args[0]
    found: list[Operation] = []
    for op in ops:
        if (
            not op.regions
            and is_side_effect_free(op)
            and all(v is iv or not defined_in(v, loop) or v.owner in found for v in op.operands)
        ):
            found.append(op)
    return found


def rows_independent(ops: Iterable[Operation], rows: Collection[SSAValue]) -> bool:
    """Whether no row reads or writes what another row writes, for the ops of a loop over
    rows (`ops`: everything in its body, nested ops included) and the values that name a
    row (`rows`): memory is touched only by loads and stores, and every access to a memref
    the ops write has one and the same row value at one common index position. (Distinct
    memrefs of a kernel do not overlap where one is written: `tess-outline-kernels` and
    `tess-memory-plan` guarantee it.) `tess-tile`'s row kernels, `tess-row-dots` and
    `tess-interchange-rows` split or reorder the rows of loops this holds for."""
    accesses: dict[SSAValue, list[tuple[SSAValue, ...]]] = {}
    written: set[SSAValue] = set()
    for op in ops:
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            accesses.setdefault(op.memref, []).append(tuple(op.indices))
            if isinstance(op, memref.StoreOp):
                written.add(op.memref)
        elif not (op.regions or is_side_effect_free(op) or op.has_trait(IsTerminator)):
            return False
    for memory in written:
        first, *others = accesses[memory]
        if not any(
            value in rows and all(len(o) == len(first) and o[d] is value for o in others)
            for d, value in enumerate(first)
        ):
            return False
    return True
