"""
Op construction without repeated work: `Operation.__init__` sets its fields directly, and
an IRDL op whose arguments are plain is built from a plan computed once per op definition
(anything else goes to xDSL 0.74's own `irdl_op_init`, with its error messages). Every op
parsed, cloned or created by a pass goes through here: ~21,000 for the 1,000-op program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import xdsl.irdl.operations as irdl_operations
from xdsl.dialects.builtin import UNKNOWN_LOC, DenseArrayBase, LocationAttr, i32
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.core import SSAValues, Use
from xdsl.irdl.operations import (
    AttrSizedOperandSegments,
    AttrSizedRegionSegments,
    AttrSizedResultSegments,
    AttrSizedSegments,
    OpDef,
    OptionalDef,
    VariadicDef,
)

from tessc.xdsl_patches.registry import Patch


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
    successors) and imports `UNKNOWN_LOC` anew for every op: 40% more time per op."""
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


OPERATIONS_BUILT_WITHOUT_SETTERS = Patch(
    Operation,
    "__init__",
    operation_init,
    "speedup",
    upstream=(
        "ir: Operation.__init__ sets its fields directly. A new op has no uses to detach: "
        "build its operand uses and results in place instead of going through the "
        "`operands` and `successors` setters, skip building empty successor tuples, and "
        "import UNKNOWN_LOC at module level instead of in every call. Same fields; 40% less "
        "time per op constructed."
    ),
)


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


PLAIN_OP_CONSTRUCTION_AT_ONCE = Patch(
    irdl_operations,
    "irdl_op_init",
    irdl_op_init,
    "speedup",
    upstream=(
        "irdl: build IRDL ops from a per-definition plan. irdl_op_init re-reads the op "
        "definition on every construction (four argument lists checked against it, each "
        "argument converted, a new segment-size DenseArrayBase built from scratch): two "
        "thirds of the time of building a linalg.generic. Compute the kind of each "
        "operand/result/region definition and the segment options once per OpDef, take a "
        "fast path when every argument already has the type its definition takes, share "
        "segment-size attributes, and fall back to today's path (and its errors) otherwise."
    ),
)

PATCHES = (OPERATIONS_BUILT_WITHOUT_SETTERS, PLAIN_OP_CONSTRUCTION_AT_ONCE)

__all__ = [
    "OPERATIONS_BUILT_WITHOUT_SETTERS",
    "PATCHES",
    "PLAIN_OP_CONSTRUCTION_AT_ONCE",
    "irdl_op_init",
    "operation_init",
]
