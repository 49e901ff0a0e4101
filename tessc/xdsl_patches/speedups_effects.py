"""
Effect queries that stop at the first effect deciding them (`effects_all`), for every xDSL
0.74 caller that only tests the effects: `is_side_effect_free`, `only_has_effect` (in
`xdsl.traits` and as CSE imported them), DCE's `result_only_effects` and CSE's
`has_other_side_effecting_op_in_between`. The same answers; canonicalize on a 15,000-op
loop-level module spent half its time in `get_effects`, CSE two thirds.
`get_effects` itself is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import xdsl.traits
import xdsl.transforms.common_subexpression_elimination as common_subexpression_elimination
import xdsl.transforms.dead_code_elimination as dead_code_elimination
from xdsl.ir import Operation, SSAValue
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind, RecursiveMemoryEffect

from tessc.xdsl_patches.registry import Patch


def effects_all(root: Operation, allowed: Callable[[EffectInstance], bool]) -> bool:
    """Whether every effect `get_effects(root)` would list satisfies `allowed` (False when
    they are unknown), stopping at the first that does not.

    xDSL 0.74's `get_effects(root)`, for an op with `RecursiveMemoryEffect` (`scf.for`, a
    kernel), builds the set of every effect of every nested op before its callers look at
    one, and its callers ask for every op at every step (the greedy rewriter and
    `region_dce`: is this op dead? CSE: is it pure? does an op between two loads write?):
    O(n * depth) per sweep. Here the nested ops are visited last first (a loop body's store
    is just before its yield), and the same effects are consulted as `get_effects` would:
    an op's own `MemoryEffect` traits, and nested ops only through `RecursiveMemoryEffect`;
    an op without a `MemoryEffect` trait, or a trait answering None, has unknown effects."""
    stack = [root]
    while stack:
        op = stack.pop()
        traits = op.get_traits_of_type(MemoryEffect)
        if not traits:
            return False
        for trait in traits:
            if isinstance(trait, RecursiveMemoryEffect):
                for region in op.regions:
                    for block in region.blocks:
                        stack.extend(block.ops)
                continue
            effects = trait.get_effects(op)
            if effects is None or not all(allowed(effect) for effect in effects):
                return False
    return True


def result_only_effects(root: Operation) -> bool:
    """`dead_code_elimination.result_only_effects`: whether `root`, were its results
    unused, could be erased (it only reads, or allocates values defined inside it)."""

    def allowed(effect: EffectInstance) -> bool:
        if effect.kind == MemoryEffectKind.READ:
            return True
        value = effect.value
        return (
            effect.kind == MemoryEffectKind.ALLOC
            and isinstance(value, SSAValue)
            and root.is_ancestor(value.owner)  # type: ignore[arg-type]
        )

    return effects_all(root, allowed)


def is_side_effect_free(op: Operation) -> bool:
    """`xdsl.traits.is_side_effect_free`: no effect at all, nested ones included."""
    return effects_all(op, lambda effect: False)


def only_has_effect(op: Operation, kind: MemoryEffectKind) -> bool:
    """`xdsl.traits.only_has_effect`: known effects, all of kind `kind`."""
    return effects_all(op, lambda effect: effect.kind == kind)


def has_other_side_effecting_op_in_between(from_op: Operation, to_op: Operation) -> bool:
    """`common_subexpression_elimination.has_other_side_effecting_op_in_between`: whether
    an op from `from_op` (included) up to `to_op` (excluded) may write."""
    assert from_op.parent is to_op.parent
    op: Operation | None = from_op
    while op is not to_op:
        assert op is not None, "Incorrect order of ops in side-effect search"
        if not effects_all(op, lambda effect: effect.kind is not MemoryEffectKind.WRITE):
            return True
        op = op.next_op
    return False


UPSTREAM = (
    "traits: effect queries exit early. is_side_effect_free, only_has_effect, "
    "dead_code_elimination.result_only_effects and CSE's "
    "has_other_side_effecting_op_in_between call get_effects(op), which collects every "
    "effect of every nested op of a RecursiveMemoryEffect op into a set, only to test "
    "them all against one predicate. Add `all_effects_satisfy(op, predicate) -> bool` to "
    "xdsl.traits, walking the same traits (nested ops through RecursiveMemoryEffect; no "
    "MemoryEffect trait or a None answer = unknown = False) and returning at the first "
    "effect failing the predicate; express the four queries with it. Same answers; "
    "canonicalize on a 15,000-op loop nest module 2x faster, CSE 3x."
)

PATCHES = (
    Patch(dead_code_elimination, "result_only_effects", result_only_effects, "speedup", UPSTREAM),
    Patch(xdsl.traits, "is_side_effect_free", is_side_effect_free, "speedup", UPSTREAM),
    Patch(xdsl.traits, "only_has_effect", only_has_effect, "speedup", UPSTREAM),
    Patch(
        common_subexpression_elimination,
        "is_side_effect_free",
        is_side_effect_free,
        "speedup",
        UPSTREAM,
    ),
    Patch(
        common_subexpression_elimination, "only_has_effect", only_has_effect, "speedup", UPSTREAM
    ),
    Patch(
        common_subexpression_elimination,
        "has_other_side_effecting_op_in_between",
        has_other_side_effecting_op_in_between,
        "speedup",
        UPSTREAM,
    ),
)

__all__ = [
    "PATCHES",
    "effects_all",
    "has_other_side_effecting_op_in_between",
    "is_side_effect_free",
    "only_has_effect",
    "result_only_effects",
]
