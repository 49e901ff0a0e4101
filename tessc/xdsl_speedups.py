"""
The compile-time fixes to xDSL 0.74: the same answers xDSL gives, without its super-linear
or repeated work. Each is an `@xdsl_fix` (`tessc.xdsl_fixes`, which applies them with its
bug fixes), names the xDSL code it replaces and what that cost on the 1,000-op program
(`bench/bench_compile.py`), and has a test counting the work, not the time
(`tests/test_compile_latency.py`):

- effect queries (`is_side_effect_free`, `only_has_effect`, ...) stop at the first effect
  that decides them instead of collecting every nested op's effects;
- trait lookups by type read a per-class cache;
- op construction: `Operation.__init__` sets its fields directly, and an IRDL op whose
  arguments are plain is built from a per-definition plan (anything else goes to xDSL's
  own `irdl_op_init`, with its error messages);
- verification checks each op signature's IRDL constraints once (traits every time), the
  variadic segment counts at once, and `IsolatedFromAbove` by a set lookup in one walk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import xdsl.irdl.operations as irdl_operations
import xdsl.traits
import xdsl.transforms.common_subexpression_elimination as common_subexpression_elimination
import xdsl.transforms.dead_code_elimination as dead_code_elimination
from xdsl.dialects.builtin import (
    UNKNOWN_LOC,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    LocationAttr,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.core import OpTrait, OpTraits, SSAValues, Use
from xdsl.irdl.operations import (
    AttrSizedOperandSegments,
    AttrSizedRegionSegments,
    AttrSizedResultSegments,
    AttrSizedSegments,
    OpDef,
    OptionalDef,
    VariadicDef,
    VarIRConstruct,
)
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from tessc.xdsl_fixes import xdsl_fix


def effects_all(root: Operation, allowed: Callable[[EffectInstance], bool]) -> bool:
    """Whether every effect `get_effects(root)` would list satisfies `allowed` (False when
    they are unknown), stopping at the first that does not.

    xDSL 0.74's `get_effects(root)`, for an op with `RecursiveMemoryEffect` (`scf.for`,
    `scf.parallel`, a kernel), builds the set of every effect of every nested op before
    its callers look at one, and its callers ask for every op at every step: the greedy
    rewriter and `region_dce` (is this op dead?), CSE (is it pure? read-only? does an op
    between two loads write?). A loop nest of depth d and n ops cost O(n * d) per sweep,
    and CSE asked again for every op between two candidate loads. Here the nested ops are
    visited last first (a loop body's store is just before its yield), and the same
    effects are consulted as `get_effects` would: an op's own `MemoryEffect` traits, and
    nested ops only through `RecursiveMemoryEffect`; an op without a `MemoryEffect` trait,
    or a trait answering None, has unknown effects."""
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


@xdsl_fix
def effect_queries_exit_early() -> None:
    """See `effects_all`: canonicalize on a 15,000-op loop-level module spent half its
    time in `get_effects`, CSE two thirds. Every caller that only tests the effects gets
    the early-exit form (same answers); `get_effects` itself is unchanged."""
    dead_code_elimination.result_only_effects = result_only_effects
    for module in (xdsl.traits, common_subexpression_elimination):
        module.is_side_effect_free = is_side_effect_free  # type: ignore[attr-defined]
        module.only_has_effect = only_has_effect  # type: ignore[attr-defined]
    common_subexpression_elimination.has_other_side_effecting_op_in_between = (
        has_other_side_effecting_op_in_between
    )


_TRAITS_BY_TYPE = "_tessc_traits_by_type"


def _traits_by_type(cls: type[Operation], trait_type: type[OpTrait]) -> tuple[OpTrait, ...]:
    traits = cls.traits
    cache: dict[type[OpTrait], tuple[OpTrait, ...]] | None = vars(traits).get(_TRAITS_BY_TYPE)
    if cache is None:
        cache = {}
        setattr(traits, _TRAITS_BY_TYPE, cache)
    found = cache.get(trait_type)
    if found is None:
        found = cache[trait_type] = tuple(t for t in traits if isinstance(t, trait_type))
    return found


_original_get_trait = Operation.get_trait.__func__  # type: ignore[attr-defined]
_original_add_trait = OpTraits.add_trait


# The three lookups read the cache inline: passes ask ~150,000 times for the 1,000-op
# program, and the call layers cost as much as the lookup.


def _get_trait(cls: type[Operation], trait: Any) -> Any:
    if isinstance(trait, type):
        cache = vars(cls.traits).get(_TRAITS_BY_TYPE)
        found = cache.get(trait) if cache is not None else None
        if found is None:
            found = _traits_by_type(cls, trait)
        return found[0] if found else None
    return _original_get_trait(cls, trait)


def _has_trait(cls: type[Operation], trait: Any, *, value_if_unregistered: bool = True) -> bool:
    if isinstance(trait, type):
        cache = vars(cls.traits).get(_TRAITS_BY_TYPE)
        found = cache.get(trait) if cache is not None else None
        if found is None:
            found = _traits_by_type(cls, trait)
        return bool(found)
    return _original_get_trait(cls, trait) is not None


def _get_traits_of_type(cls: type[Operation], trait_type: type[OpTrait]) -> list[OpTrait]:
    cache = vars(cls.traits).get(_TRAITS_BY_TYPE)
    found = cache.get(trait_type) if cache is not None else None
    return list(found if found is not None else _traits_by_type(cls, trait_type))


def _add_trait(self: OpTraits, trait: OpTrait) -> None:
    vars(self).pop(_TRAITS_BY_TYPE, None)
    _original_add_trait(self, trait)


@xdsl_fix
def trait_lookups_by_type_are_cached() -> None:
    """`Operation.get_trait(T)`, `has_trait(T)` and `get_traits_of_type(T)` scan the op
    class's traits with `isinstance` on every call; every rewrite step asks several (is it
    a terminator, a symbol, foldable, constant-like, pure, its canonicalization patterns),
    so passes over large modules spent ~15% of their time there. The answers depend only on
    the op class and its trait set: they are cached on the class's `OpTraits`, and
    `OpTraits.add_trait` drops the cache. For a type, `get_trait` returns the first trait
    of that type in the same (frozenset) order as before; lookups by trait instance are
    unchanged."""
    Operation.get_trait = classmethod(_get_trait)  # type: ignore[method-assign, assignment]
    Operation.has_trait = classmethod(_has_trait)  # type: ignore[method-assign, assignment]
    Operation.get_traits_of_type = classmethod(_get_traits_of_type)  # type: ignore[method-assign, assignment]
    OpTraits.add_trait = _add_trait  # type: ignore[method-assign]


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


@xdsl_fix
def fixed_construct_counts_verify_at_once() -> None:
    """Verifying an IRDL op checks its operand, result, region and successor counts
    against its definition four times per op, each time scanning the definition's options
    and variadic definitions again: a third of `module.verify()` on a 12,000-op
    loop-level module. What the definition says is computed once per op definition (kept
    on it); the check for ops whose counts are fixed is one comparison."""
    irdl_operations.verify_variadic_size = verify_variadic_size


_original_operation_init = Operation.__init__


def operation_init(
    self: Operation,
    *,
    operands: Sequence[SSAValue] = (),
    result_types: Sequence[Attribute] = (),
    properties: Mapping[str, Attribute] = {},  # noqa: B006 (never mutated, as in xDSL)
    attributes: Mapping[str, Attribute] = {},  # noqa: B006
    location: LocationAttr | None = None,
    successors: Sequence[Block] = (),
    regions: Sequence[Region] = (),
) -> None:
    """`Operation.__init__`: the same fields, set directly. xDSL's goes through the
    `operands` and `successors` setters (which first detach the uses of the operands and
    successors a new op does not have, and build empty tuples for an op without
    successors) and imports `UNKNOWN_LOC` anew for every op."""
    operands = SSAValues(operands)
    uses = tuple([Use(self, index) for index in range(len(operands))])
    for operand, use in zip(operands, uses, strict=True):
        operand.add_use(use)
    self._operands = operands
    self._operand_uses = uses
    self.results = SSAValues([OpResult(t, self, index) for index, t in enumerate(result_types)])
    self.properties = dict(properties)
    self.attributes = dict(attributes)
    self.location = UNKNOWN_LOC if location is None else location
    if successors:
        self.successors = list(successors)
    else:
        self._successors, self._successor_uses = (), ()
    self.regions = ()
    for region in regions:
        self.add_region(region)
    self.__post_init__()


@xdsl_fix
def operations_built_without_setters() -> None:
    """Every op built (parsed, cloned, created by a pass: ~21,000 for the 1,000-op
    program) runs `Operation.__init__`; see `operation_init`, 40% less time per op."""
    Operation.__init__ = operation_init  # type: ignore[method-assign]


_original_irdl_op_init = irdl_operations.irdl_op_init
_INIT_PLAN = "_tessc_init_plan"
_SINGLE, _OPTIONAL, _VARIADIC = 0, 1, 2
_SEGMENT_SIZES: dict[tuple[int, ...], Attribute] = {}


def _definition_kinds(defs: Sequence[tuple[str, Any]]) -> tuple[int, ...]:
    def kind(definition: Any) -> int:
        if isinstance(definition, OptionalDef):
            return _OPTIONAL
        return _VARIADIC if isinstance(definition, VariadicDef) else _SINGLE

    return tuple(kind(d) for _, d in defs)


def _init_plan(op_def: OpDef) -> tuple[Any, ...] | None:
    """What `irdl_op_init` needs to know of `op_def`, kept on it: the kind of each operand,
    result and region definition and the segment-size options (construct index, option);
    None for a definition with successors or another option (xDSL builds those)."""
    plan = vars(op_def).get(_INIT_PLAN, False)
    if plan is False:
        segments: list[tuple[int, AttrSizedSegments]] = []
        for option in op_def.options:
            constructs = (
                AttrSizedOperandSegments, AttrSizedResultSegments, AttrSizedRegionSegments
            )  # fmt: skip
            which = [k for k, c in enumerate(constructs) if isinstance(option, c)]
            if not which:
                segments = []
                break
            segments.append((which[0], option))
        simple = not op_def.successors and len(segments) == len(op_def.options)
        plan = (
            (
                _definition_kinds(op_def.operands),
                _definition_kinds(op_def.results),
                _definition_kinds(op_def.regions),
                tuple(segments),
            )
            if simple
            else None
        )
        setattr(op_def, _INIT_PLAN, plan)
    return plan


def _plain_arguments(
    args: Sequence[Any], kinds: tuple[int, ...], cls: type
) -> tuple[list[Any], list[int]] | None:
    """The flat list and the group sizes of `args` (operands, result types or regions) if
    each is what its definition takes as is: one `cls` for a single definition, a list or
    tuple of them (or None when optional) for a variadic one; else None."""
    if len(args) != len(kinds):
        return None
    flat: list[Any] = []
    sizes: list[int] = []
    for arg, kind in zip(args, kinds, strict=True):
        if isinstance(arg, cls):
            flat.append(arg)
            sizes.append(1)
        elif kind == _SINGLE:
            return None
        elif arg is None:
            if kind != _OPTIONAL:
                return None
            sizes.append(0)
        elif type(arg) in (list, tuple) or isinstance(arg, SSAValues):
            if (kind == _OPTIONAL and len(arg) > 1) or not all(isinstance(a, cls) for a in arg):
                return None
            flat.extend(arg)
            sizes.append(len(arg))
        else:
            return None
    return flat, sizes


def _segment_sizes(sizes: list[int]) -> Attribute:
    key = tuple(sizes)
    attr = _SEGMENT_SIZES.get(key)
    if attr is None:
        if len(_SEGMENT_SIZES) >= 1024:
            _SEGMENT_SIZES.clear()
        attr = _SEGMENT_SIZES[key] = DenseArrayBase.from_list(i32, sizes)
    return attr


def irdl_op_init(
    self: Operation,
    op_def: OpDef,
    *,
    operands: Sequence[Any],
    result_types: Sequence[Any],
    properties: Mapping[str, Attribute | None],
    attributes: Mapping[str, Attribute | None],
    successors: Sequence[Any],
    regions: Sequence[Any],
) -> None:
    """`irdl_operations.irdl_op_init` (what every IRDL op's `__init__` calls), building
    the op at once when its arguments are plain (see `_plain_arguments`), as passes give
    them; anything else (an op for its result, successors, an argument count or kind that
    is an error) goes to xDSL's, with its messages."""
    # Blocks and op lists become regions here, once (xDSL's would not convert them twice).
    regions = [irdl_operations.irdl_build_regions_arg(region) for region in regions]
    plan = _init_plan(op_def)
    if plan is not None and not successors:
        operand_kinds, result_kinds, region_kinds, segments = plan
        built = (
            _plain_arguments(operands, operand_kinds, SSAValue),
            _plain_arguments(result_types, result_kinds, Attribute),
            _plain_arguments(regions, region_kinds, Region),
        )
        if None not in built:
            (ops, op_sizes), (types, type_sizes), (regs, reg_sizes) = built  # type: ignore[misc]
            props = {name: value for name, value in properties.items() if value is not None}
            attrs = {name: value for name, value in attributes.items() if value is not None}
            for which, option in segments:
                container = props if option.as_property else attrs
                sizes = (op_sizes, type_sizes, reg_sizes)[which]
                container[option.attribute_name] = _segment_sizes(sizes)
            Operation.__init__(
                self, operands=ops, result_types=types, properties=props, attributes=attrs,
                regions=regs,
            )  # fmt: skip
            return
    _original_irdl_op_init(
        self,  # type: ignore[arg-type]
        op_def,
        operands=operands,
        result_types=result_types,
        properties=properties,
        attributes=attributes,
        successors=successors,
        regions=regions,
    )


@xdsl_fix
def plain_op_construction_at_once() -> None:
    """Building an IRDL op (`arith.AddfOp(a, b)`, `GenericOp(...)`) went through
    `irdl_op_init`, which for every call re-reads the definition (four argument lists
    checked against it, each argument converted, a new segment-size attribute built from
    scratch): two thirds of the time of making a `linalg.generic`, and passes make tens of
    thousands of ops (0.15 s of the 1,000-op program's compile). See `irdl_op_init`: the
    same op (operands, result types, properties and attributes in the same order), from
    the definition's kinds computed once and segment-size attributes shared."""
    irdl_operations.irdl_op_init = irdl_op_init


_original_op_def_verify = OpDef.verify
_VERIFIED = "_tessc_verified_signatures"
VERIFIED_SIGNATURES_KEPT = 4096
LARGE_CONSTANT_BYTES = 1024
"""Signatures remembered per op definition; past that the memory is cleared (a program
with more distinct constants than this re-checks some)."""


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


@xdsl_fix
def op_constraints_verify_once_per_signature() -> None:
    """Verifying a module runs every op's IRDL definition check: for each operand, result,
    property and attribute, a constraint object's `verify` through several layers of
    accessors; two thirds of verifying a 12,000-op loop-level module, where a few dozen
    distinct signatures (`arith.addf` on f32, `memref.load` of one memref type...) repeat.
    See `verify_op_definition`: the constraints are checked once per signature and op
    definition, the traits every time; a failing op still fails with xDSL's message."""
    OpDef.verify = verify_op_definition  # type: ignore[method-assign]


def verify_isolated_from_above(trait: xdsl.traits.IsolatedFromAbove, op: Operation) -> None:
    """`xdsl.traits.IsolatedFromAbove.verify`: every operand of an op in `op`'s regions
    (not looking into nested isolated ops, which check themselves) is defined strictly
    inside `op`. The same walk, in the same order; a value defined by an op or block it
    has already walked is inside `op` without asking `op.is_ancestor`, which climbs from
    the definition to the top of the module."""
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


@xdsl_fix
def isolated_from_above_checks_defined_values() -> None:
    """`IsolatedFromAbove.verify` (a `func.func`, a module) asked `op.is_ancestor(owner)`
    for every operand of every op inside it, each climbing from the definition to the
    top: O(ops x nesting depth), a fifth of verifying a loop-level module. See
    `verify_isolated_from_above`: the same answers, a set lookup for almost every use."""
    xdsl.traits.IsolatedFromAbove.verify = verify_isolated_from_above  # type: ignore[method-assign, assignment]
