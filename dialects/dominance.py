"""
SSA dominance: every use of a value must come after its definition.

xDSL's parser accepts forward references (`%0 = tess.add %0, %a`, or two ops each using
the other's result) and its verifier never checks dominance (`xdsl.irdl.dominance` only
relates blocks), so such a module verifies, and later loops forever in a pass or is
silently reordered. MLIR's verifier rejects it; `verify_dominance` does the same:

- a use of an op result in the same block must come strictly after the defining op
  (a value used in its own definition, and every cycle, fails this);
- a use nested in a region of a later op of the defining block is fine (the use is
  dominated through its ancestor op);
- across blocks of one region, the defining block must dominate the using block
  (`xdsl.irdl.dominance.DominanceInfo`);
- a block argument dominates everything in its block and in the regions nested in it.

Graph regions (`builtin.module`'s body) hold no SSA uses between ops in tessc and are not
checked. The error is raised at the using op through `emit_error`, so it carries the op's
source location.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.irdl.dominance import DominanceInfo
from xdsl.utils.exceptions import VerifyException


class _Order:
    """Positions of ops in their blocks and block dominance, computed once per block."""

    def __init__(self) -> None:
        self._index: dict[Block, dict[Operation, int]] = {}
        self._dominance: dict[Region, DominanceInfo] = {}

    def index(self, op: Operation) -> int:
        block = op.parent_block()
        assert block is not None
        positions = self._index.get(block)
        if positions is None:
            positions = {o: k for k, o in enumerate(block.ops)}
            self._index[block] = positions
        return positions[op]

    def block_dominates(self, a: Block, b: Block) -> bool:
        region = a.parent
        assert region is not None
        info = self._dominance.get(region)
        if info is None:
            info = self._dominance[region] = DominanceInfo(region)
        return info.dominates(a, b)


def _ancestor_in(block: Block, op: Operation) -> Operation | None:
    """`op` or the op enclosing it that is directly in `block`, if any."""
    current: Operation | None = op
    while current is not None and current.parent_block() is not block:
        current = current.parent_op()
    return current


def _ancestor_block_in(region: Region, op: Operation) -> Block | None:
    """The block of `region` that holds `op` (maybe nested), if any."""
    current: Operation | None = op
    while current is not None:
        block = current.parent_block()
        if block is not None and block.parent is region:
            return block
        current = current.parent_op()
    return None


def _dominates(value: SSAValue, user: Operation, order: _Order) -> bool:
    if isinstance(value, BlockArgument):
        block, definition = value.block, None
    else:
        assert isinstance(value, OpResult)
        definition = value.op
        block = definition.parent_block()
        if block is None:
            return False
    ancestor = _ancestor_in(block, user)
    if ancestor is not None:
        return definition is None or order.index(definition) < order.index(ancestor)
    region = block.parent
    if region is None:
        return False
    using_block = _ancestor_block_in(region, user)
    return using_block is not None and order.block_dominates(block, using_block)


def verify_dominance(module: Operation) -> None:
    """Raise a `VerifyException` (at the using op) for the first use of a value its
    definition does not dominate.

    One walk in program order keeps the values already defined in the blocks enclosing
    the current op (block arguments, then each op's results after its regions): a use of
    one of them is dominated, which settles almost every use in a set lookup. Any other
    use (a value of another block of a multi-block region, or no dominating definition at
    all) is decided by `_dominates`."""
    order = _Order()
    visible: set[SSAValue] = set()
    for region in module.regions:
        for block in region.blocks:
            _verify_block(block, isinstance(module, ModuleOp), visible, order)


def _verify_block(block: Block, graph: bool, visible: set[SSAValue], order: _Order) -> None:
    """Check the uses in `block` (not its own, if it is a `graph` region's) and in the
    regions nested in it, with `visible` the values defined before it in its ancestors;
    `visible` is the same on return."""
    defined: list[SSAValue] = list(block.args)
    visible.update(defined)
    for op in block.ops:
        if not graph:
            for index, operand in enumerate(op.operands):
                if operand not in visible and not _dominates(operand, op, order):
                    _report(op, index, operand)
        nested_graph = isinstance(op, ModuleOp)
        for region in op.regions:
            for nested in region.blocks:
                _verify_block(nested, nested_graph, visible, order)
        visible.update(op.results)
        defined.extend(op.results)
    visible.difference_update(defined)


def _report(op: Operation, index: int, operand: SSAValue) -> None:
    name = f" (%{operand.name_hint})" if operand.name_hint else ""
    if isinstance(operand, OpResult) and operand.op is op:
        message = f"'{op.name}' operand {index}{name} is the op's own result"
    else:
        message = (
            f"'{op.name}' operand {index}{name} is used before its definition "
            "(the definition does not dominate this use)"
        )
    op.emit_error(message, VerifyException(message))


__all__ = ["verify_dominance"]
