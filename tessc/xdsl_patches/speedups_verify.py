"""
Verification without repeated work: an op definition's fixed construct counts are checked
by one comparison, its IRDL constraints once per distinct op signature (traits every time),
and `IsolatedFromAbove` by a set lookup in one walk. xDSL 0.74 gives the same answers, and
the same messages for a failing op, through the code it replaces.
"""

from __future__ import annotations

from typing import Any

import xdsl.irdl.operations as irdl_operations
import xdsl.traits
from xdsl.dialects.builtin import DenseArrayBase, DenseIntOrFPElementsAttr
from xdsl.ir import Operation, SSAValue
from xdsl.irdl.operations import OpDef, VariadicDef, VarIRConstruct
from xdsl.utils.exceptions import VerifyException

from tessc.xdsl_patches.registry import Patch

_original_verify_variadic_size = irdl_operations.verify_variadic_size
_FIXED_COUNTS = "_tessc_fixed_counts"


def verify_variadic_size(op: Operation, op_def: OpDef, construct: VarIRConstruct) -> None:
    """`irdl.operations.verify_variadic_size`, answering at once for an op definition
    whose `construct` (operands, results, regions, successors) has no variadic definition
    and no size attribute, when the op has exactly as many as defined; every other case
    (and every failure, with its message) goes to xDSL's."""
    counts: dict[VarIRConstruct, int | None] | None = vars(op_def).get(_FIXED_COUNTS)
    if counts is None:
        counts = {}
        setattr(op_def, _FIXED_COUNTS, counts)
    if construct not in counts:
        size_option = irdl_operations.get_attr_size_option(construct)
        defs = irdl_operations.get_construct_defs(op_def, construct)
        fixed = not any(isinstance(o, size_option) for o in op_def.options) and not any(
            isinstance(d, VariadicDef) for _, d in defs
        )
        counts[construct] = len(defs) if fixed else None
    expected = counts[construct]
    if expected is None or len(irdl_operations.get_op_constructs(op, construct)) != expected:
        _original_verify_variadic_size(op, op_def, construct)


FIXED_CONSTRUCT_COUNTS_AT_ONCE = Patch(
    irdl_operations,
    "verify_variadic_size",
    verify_variadic_size,
    "speedup",
    upstream=(
        "irdl: precompute variadic-size facts per OpDef. verify_variadic_size runs four "
        "times per verified op, each time scanning the definition's options and variadic "
        "definitions: a third of module.verify() on a 12,000-op module. Cache, per OpDef "
        "and construct, whether its count is fixed and which; a fixed count is then one "
        "length comparison (the general path, and its messages, unchanged)."
    ),
)


_original_op_def_verify = OpDef.verify
_VERIFIED = "_tessc_verified_signatures"
VERIFIED_SIGNATURES_KEPT = 4096
"""Signatures remembered per op definition; past that the memory is cleared (a program
with more distinct constants than this re-checks some)."""
LARGE_CONSTANT_BYTES = 1024


def op_signature(op: Operation) -> tuple[Any, ...] | None:
    """Everything an op definition's constraints read (see `verify_op_definition`): operand
    and result types, region block counts and entry argument types, the successor count,
    properties and attributes; None when one of them cannot be hashed, or holds a large
    constant (remembered, it would stay in memory after its module is gone)."""
    for value in (*op.properties.values(), *op.attributes.values()):
        if isinstance(value, DenseIntOrFPElementsAttr | DenseArrayBase):
            if len(value.data.data) > LARGE_CONSTANT_BYTES:
                return None
    regions = tuple(
        (len(region.blocks), block.arg_types if (block := region.first_block) else None)
        for region in op.regions
    )
    signature = (
        tuple([operand.type for operand in op.operands]),
        tuple([result.type for result in op.results]),
        regions,
        len(op.successors),
        tuple(op.properties.items()),
        tuple(op.attributes.items()),
    )
    try:
        hash(signature)
    except TypeError:
        return None
    return signature


def verify_op_definition(op_def: OpDef, op: Operation) -> None:
    """`OpDef.verify`, which checks an op's operand, result, region, successor, property
    and attribute constraints and then its traits, checking the constraints once per
    distinct signature (`op_signature`): IRDL constraints are functions of those
    attributes alone, so an op with a signature that already passed passes again. Traits
    (which may look at the op's neighbours and regions) are verified every time."""
    signature = op_signature(op)
    if signature is None:
        _original_op_def_verify(op_def, op)
        return
    verified: set[tuple[Any, ...]] | None = vars(op_def).get(_VERIFIED)
    if verified is None:
        verified = set()
        setattr(op_def, _VERIFIED, verified)
    if signature not in verified:
        _original_op_def_verify(op_def, op)  # raises on the first failing constraint
        if len(verified) >= VERIFIED_SIGNATURES_KEPT:
            verified.clear()
        verified.add(signature)
        return
    for trait in op_def.traits:
        trait.verify(op)


OP_CONSTRAINTS_ONCE_PER_SIGNATURE = Patch(
    OpDef,
    "verify",
    verify_op_definition,
    "speedup",
    upstream=(
        "irdl: verify an op's IRDL constraints once per signature. OpDef.verify runs every "
        "operand/result/property/attribute constraint through several accessor layers for "
        "every op: two thirds of verifying a 12,000-op module where a few dozen signatures "
        "repeat. Constraints read only the op's types, region entry types and counts, and "
        "attributes: remember (bounded, per OpDef) the hashable signatures that passed and "
        "verify only the traits for those."
    ),
)


def verify_isolated_from_above(trait: xdsl.traits.IsolatedFromAbove, op: Operation) -> None:
    """`xdsl.traits.IsolatedFromAbove.verify`: every operand of an op in `op`'s regions
    (not looking into nested isolated ops, which check themselves) is defined strictly
    inside `op`. The same walk, in the same order; a value defined by an op or block it
    has already walked is inside `op` without asking `op.is_ancestor`, which climbs from
    the definition to the top of the module: O(ops x nesting depth), a fifth of verifying
    a loop-level module."""
    inside: set[SSAValue] = set()
    regions = list(op.regions)
    while regions:
        region = regions.pop()
        for block in region.blocks:
            inside.update(block.args)
            for child_op in block.ops:
                for operand in child_op.operands:
                    if operand in inside:
                        continue
                    if not op.is_ancestor(operand.owner) or operand.owner is op:
                        raise VerifyException(
                            "Operation using value defined out of its "
                            f"IsolatedFromAbove parent: {child_op}"
                        )
                inside.update(child_op.results)
                if not child_op.has_trait(xdsl.traits.IsolatedFromAbove):
                    regions += child_op.regions


ISOLATED_FROM_ABOVE_BY_SET_LOOKUP = Patch(
    xdsl.traits.IsolatedFromAbove,
    "verify",
    verify_isolated_from_above,
    "speedup",
    upstream=(
        "traits: IsolatedFromAbove.verify by a set of values defined inside. It asks "
        "op.is_ancestor(operand.owner) for every operand of every nested op, each climbing "
        "to the top of the module. Walk in the same order keeping the block arguments and "
        "results seen so far in a set; only operands not in it need is_ancestor. Same "
        "errors."
    ),
)

PATCHES = (
    FIXED_CONSTRUCT_COUNTS_AT_ONCE,
    OP_CONSTRAINTS_ONCE_PER_SIGNATURE,
    ISOLATED_FROM_ABOVE_BY_SET_LOOKUP,
)

__all__ = [
    "FIXED_CONSTRUCT_COUNTS_AT_ONCE",
    "ISOLATED_FROM_ABOVE_BY_SET_LOOKUP",
    "LARGE_CONSTANT_BYTES",
    "OP_CONSTRAINTS_ONCE_PER_SIGNATURE",
    "PATCHES",
    "VERIFIED_SIGNATURES_KEPT",
    "op_signature",
    "verify_isolated_from_above",
    "verify_op_definition",
    "verify_variadic_size",
]
