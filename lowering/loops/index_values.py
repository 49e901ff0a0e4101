"""
Index values at the loop level (`scf`), read the same way by the loop passes and the code
generators: a constant's value, two indices provably equal, and the index constants a
rewrite that builds a new nest reuses or makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free


def constant_int(value: SSAValue) -> int | None:
    """The value of an integer or index `arith.constant`, None for any other value."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return int(owner.value.value.data)
    return None


def same_index(a: SSAValue, b: SSAValue) -> bool:
    """Whether two index values are provably equal: one value, equal constants, or one
    pure op on equal operands."""
    if a is b or (constant_int(a) is not None and constant_int(a) == constant_int(b)):
        return True
    oa, ob = a.owner, b.owner
    return (
        isinstance(oa, Operation)
        and isinstance(ob, Operation)
        and oa.name == ob.name
        and is_side_effect_free(oa)
        and not oa.regions
        and (oa.attributes, oa.properties) == (ob.attributes, ob.properties)
        and len(oa.operands) == len(ob.operands)
        and all(same_index(x, y) for x, y in zip(oa.operands, ob.operands, strict=True))
    )


@dataclass
class IndexConstants:
    """Index constants for a new loop nest: `made` by value (those defined before the
    nest in its block, reused, and new ones), and the new ones in `ops`, for the caller to
    insert before the nest."""

    made: dict[int, SSAValue] = field(default_factory=dict[int, SSAValue])
    ops: list[Operation] = field(default_factory=list[Operation])

    @classmethod
    def before(cls, op: Operation) -> IndexConstants:
        """The index constants defined before `op` in its block."""
        constants = cls()
        block = op.parent_block()
        assert block is not None
        for existing in block.ops:
            if existing is op:
                break
            if existing.results and isinstance(existing.results[0].type, IndexType):
                if (value := constant_int(existing.results[0])) is not None:
                    constants.made.setdefault(value, existing.results[0])
        return constants

    def __call__(self, value: int) -> SSAValue:
        if value not in self.made:
            self.ops.append(constant := arith.ConstantOp(IntegerAttr.from_index_int_value(value)))
            self.made[value] = constant.result
        return self.made[value]
