"""
`tess-hoist-constants`: constants out of `scf.for` nests in one walk (level 5, loops).

xDSL's `canonicalize` hoists a loop's constants one loop level per sweep of the module,
so loop-level IR took it three sweeps (two thirds of its time on a 1,000-op program). This
pass puts every constant of an `scf.for` nest where those sweeps would, in the order they
would, so canonicalize's first sweep finds nothing to hoist; nests where canonicalize could
simplify a loop or fold a constant (trip counts of 0 or 1, ops of constants, regions) are
left to it. Its output after `canonicalize` is the same module as without it
(tests/test_compile_latency.py); the rule in full is in lowering/loops/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import ConstantLike


def _constant_int(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


class _Folds:
    """Which values are computed from constants only (canonicalize may fold them into
    one), memoized: the module does not change while the nests are examined."""

    def __init__(self) -> None:
        self._known: dict[Operation, bool] = {}

    def __call__(self, value: SSAValue) -> bool:
        if not isinstance(value, OpResult):
            return False
        op = value.op
        known = self._known.get(op)
        if known is None:
            self._known[op] = False  # a cycle (invalid IR) does not fold
            known = isinstance(op, arith.ConstantOp) or (
                not op.regions and bool(op.operands) and all(self(v) for v in op.operands)
            )
            self._known[op] = known
        return known


def _settled(loop: scf.ForOp, may_fold: _Folds) -> bool:
    """Whether canonicalize leaves `loop` a loop: its trip count is not 0 or 1, and no
    bound is a computation it may fold into a constant."""
    bounds = (loop.lb, loop.ub, loop.step)
    if any(_constant_int(b) is None and may_fold(b) for b in bounds):
        return False
    lb, ub, step = (_constant_int(b) for b in bounds)
    if lb is None or ub is None:
        return True
    return ub - lb > 0 and (step is None or step < ub - lb)


def nest_constants(outer: scf.ForOp, may_fold: _Folds) -> list[Operation] | None:
    """The constants in the `scf.for` bodies of the nest `outer` heads, by depth and then in
    program order; None if a loop of the nest is not `_settled`."""
    constants: list[Operation] = []
    level: list[scf.ForOp] = [outer]
    while level:
        inner: list[scf.ForOp] = []
        for loop in level:
            if not _settled(loop, may_fold):
                return None
            for op in loop.body.block.ops:
                if op.has_trait(ConstantLike):
                    constants.append(op)
                elif isinstance(op, scf.ForOp):
                    inner.append(op)
                elif op.regions or any(may_fold(result) for result in op.results):
                    return None
        level = inner
    return constants


def hoist_constants(root: Operation) -> None:
    """Move the constants of every settled `scf.for` nest in `root` to just before it."""
    may_fold = _Folds()
    for op in root.walk():
        if not isinstance(op, scf.ForOp) or isinstance(op.parent_op(), scf.ForOp):
            continue
        block = op.parent_block()
        assert block is not None
        for constant in nest_constants(op, may_fold) or ():
            constant.detach()
            block.insert_op_before(constant, op)


@dataclass(frozen=True)
class TessHoistConstantsPass(ModulePass):
    """Move constants out of `scf.for` nests, where `canonicalize` would put them (see
    the module docstring)."""

    name = "tess-hoist-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        hoist_constants(op)
