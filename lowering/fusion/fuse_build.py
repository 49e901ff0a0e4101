"""
`tess-fuse`'s rewrite: the fused `linalg.generic` of a consumer and a planned producer.

`build_fused` reuses the larger of the two bodies with its arguments and splices the
smaller one in (so fusing a chain of n ops is O(n)), composes the producer's input maps
through the plan's loop map, turns fills and splat constants into scalars, merges
duplicate operands and prunes what the fused body no longer needs. What is fused is
decided in `fuse_plan.py`; the pattern and the pass are in `fuse.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, FloatAttr, ShapedType, TensorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.traits import is_side_effect_free

from tessc.dialects import contract
from tessc.lowering.fusion.fuse_plan import FusionPlan, other_users
from tessc.lowering.linalg.generic_analysis import generic_maps, splat_value


class _OperandList:
    """Operands of the fused op with their maps; an identical (value, map) is merged."""

    def __init__(self) -> None:
        self.values: list[SSAValue] = []
        self.maps: list[AffineMap] = []

    def add(self, value: SSAValue, map: AffineMap, merge: bool = True) -> int:
        if merge:
            for i, (v, m) in enumerate(zip(self.values, self.maps, strict=True)):
                if v is value and m == map:
                    return i
        self.values.append(value)
        self.maps.append(map)
        return len(self.values) - 1


def _scalar_of(producer: Operation, block: Block, before: Operation | None) -> SSAValue:
    """The scalar a fill or splat constant stands for, as a constant in `block` before `before`."""
    if isinstance(producer, FillOp):
        scalar = producer.inputs[0]
        if not (isinstance(scalar, OpResult) and isinstance(scalar.op, arith.ConstantOp)):
            return scalar  # defined above the consumer, so still visible from its body
        constant = scalar.op.clone()
    else:
        value = splat_value(producer)
        assert value is not None and isinstance(producer.results[0].type, TensorType)
        element_type = producer.results[0].type.get_element_type()
        constant = arith.ConstantOp(FloatAttr(value, element_type))
    block.insert_op_before(constant, before) if before else block.add_op(constant)
    return constant.result


def _prune_dead_ops(block: Block, rewriter: PatternRewriter) -> None:
    """Drop side-effect-free body ops whose results nobody reads (from unused yields)."""
    for op in reversed(list(block.ops)):
        if not isinstance(op, YieldOp) and not any(r.uses for r in op.results):
            if is_side_effect_free(op):
                rewriter.erase(op)


def _splice(
    body: Block,
    params: Sequence[BlockArgument],
    args: Sequence[SSAValue | None],
    into: Block,
    *,
    move: bool,
    before: Operation | None = None,
    hints: dict[BlockArgument, str | None] | None = None,
) -> list[SSAValue]:
    """
    Put `body`'s ops (not its yield) into `into` before `before` (default: at the end),
    with its parameters `params` replaced by `args`, and return the values it yields. If
    `body` is `into`, its ops stay where they are; otherwise they move, or are cloned. A
    parameter may stand for itself (a kept argument of `into`); `hints` holds the name
    hints of the kept ones, which name them as if they were new.
    """
    terminator = body.last_op
    assert isinstance(terminator, YieldOp)
    hints = hints or {}
    for param, value in zip(params, args, strict=True):
        if isinstance(value, BlockArgument) and value.owner is into and not value.name_hint:
            # readable names: the first source arg names it
            value.name_hint = hints.get(param, param.name_hint)
    if not move and body is not into:
        mapper = {p: v for p, v in zip(params, args, strict=True) if v is not None}
        for op in body.ops:
            if op is not terminator:
                clone = op.clone(mapper)
                into.insert_op_before(clone, before) if before else into.add_op(clone)
        return [mapper.get(v, v) for v in terminator.operands]
    for param, value in zip(params, args, strict=True):
        if value is not None and value is not param:
            param.replace_all_uses_with(value)
    if body is not into:
        for op in list(body.ops):
            if op is not terminator:
                op.detach()
                into.insert_op_before(op, before) if before else into.add_op(op)
    return list(terminator.operands)


def _has_more_ops(a: Block, b: Block) -> bool:
    """Whether `a` has more ops than `b`, in O(the smaller)."""
    rest = iter(a.ops)
    return all(next(rest, None) is not None for _ in b.ops) and next(rest, None) is not None


def _block_arguments(
    block: Block,
    params: Sequence[BlockArgument],
    slots: Sequence[int | None],
    types: Sequence[Attribute],
) -> tuple[list[BlockArgument], set[BlockArgument]]:
    """
    The arguments of the fused op's block `block`, one per operand type in `types`: each
    parameter of `block` with a slot (an operand index) stays as that slot's argument
    where the slots of kept parameters keep their order, new arguments go between them.
    Replacing the uses of every parameter of the reused block would walk the whole fused
    body at every fusion step (quadratic in a chain). Returns the arguments and the kept
    parameters; the caller erases the others once their uses are replaced.
    """
    kept: dict[int, BlockArgument] = {}
    last = -1
    for param, slot in zip(params, slots, strict=True):
        if slot is not None and slot > last and param.type == types[slot]:
            kept[slot] = param
            last = slot
    arguments: list[BlockArgument] = []
    position = 0
    for slot, arg_type in enumerate(types):
        if slot in kept:
            arguments.append(kept[slot])
            position = kept[slot].index + 1
        else:
            arguments.append(block.insert_arg(arg_type, position))
            position += 1
    return arguments, set(kept.values())


def build_fused(consumer: GenericOp, plan: FusionPlan, rewriter: PatternRewriter) -> GenericOp:
    """
    The generic computing `consumer` with the producer's body inlined into it. The bodies
    are moved, not copied, where their ops are going away anyway: `consumer` and `plan`
    are spent afterwards (the caller replaces the consumer and erases a dead producer).
    """
    producer = plan.producer
    # Operand lists are built from segment sizes at each access: read them once.
    c_inputs, c_outputs = tuple(consumer.inputs), tuple(consumer.outputs)
    generic = isinstance(producer, GenericOp)
    p_inputs = tuple(producer.inputs) if generic else ()
    p_outputs = tuple(producer.outputs) if generic else ()
    consumer_maps = generic_maps(consumer)
    producer_maps = generic_maps(producer) if isinstance(producer, GenericOp) else []
    by_index = {i: (r, t) for i, r, t in plan.uses}
    transforms = list(dict.fromkeys(t for _, _, t in plan.uses))

    # Operands: consumer inputs in order, the producer's inputs at its first use.
    inputs = _OperandList()
    inlined: dict[AffineMap, list[int | None]] = {}
    for i, value in enumerate(c_inputs):
        if i not in by_index:
            inputs.add(value, consumer_maps[i])
            continue
        t = by_index[i][1]
        if t in inlined or not isinstance(producer, GenericOp):
            continue
        body = producer.body.block
        slots: list[int | None] = [
            inputs.add(v, producer_maps[j].compose(t)) for j, v in enumerate(p_inputs)
        ]
        for j, out in enumerate(p_outputs):
            arg = body.args[len(p_inputs) + j]
            if arg.uses and j not in plan.kept_results:
                slots.append(inputs.add(out, producer_maps[len(p_inputs) + j].compose(t)))
            else:
                slots.append(None)
        inlined[t] = slots
    outputs = _OperandList()
    for j, value in enumerate(c_outputs):
        outputs.add(value, consumer_maps[len(c_inputs) + j], merge=False)
    kept_slots: dict[int, int] = {}
    for r in plan.kept_results:
        out_map = producer_maps[len(p_inputs) + r].compose(transforms[0])
        kept_slots[r] = outputs.add(p_outputs[r], out_map, merge=False)
    n_in = len(inputs.values)
    # The operand each block parameter stands for (None: a fused value, or unused).
    producer_slots: dict[AffineMap, list[int | None]] = {}
    for t, slots in inlined.items():
        producer_slots[t] = list(slots)
        for r, slot in kept_slots.items():
            producer_slots[t][len(p_inputs) + r] = n_in + slot
    consumer_slots = [
        None if i in by_index else inputs.add(value, consumer_maps[i])
        for i, value in enumerate(c_inputs)
    ]
    consumer_slots += [n_in + j for j in range(len(c_outputs))]
    types: list[Attribute] = []
    for value in (*inputs.values, *outputs.values):
        assert isinstance(value.type, ShapedType)
        types.append(value.type.get_element_type())

    # The consumer is replaced and a producer without other uses erased, so their bodies
    # can move; only a producer that stays (or is inlined twice) is cloned. The larger
    # body's block is reused, so that fusing a long chain stays linear.
    move_producer = len(transforms) == 1 and (
        bool(plan.kept_results) or not other_users(producer, consumer)
    )
    producer_body = producer.body.block if isinstance(producer, GenericOp) else None
    consumer_body = consumer.body.block
    reuse_producer = (
        move_producer and producer_body is not None and _has_more_ops(producer_body, consumer_body)
    )
    block = producer_body if reuse_producer and producer_body else consumer_body
    terminators = (consumer_body.last_op, producer_body.last_op if producer_body else None)
    producer_params = list(producer_body.args) if producer_body else []
    consumer_params = list(consumer_body.args)
    params = producer_params if block is producer_body else consumer_params
    slots = producer_slots[transforms[0]] if block is producer_body else consumer_slots
    new_args, kept_params = _block_arguments(block, params, slots, types)
    hints = {p: p.name_hint for p in kept_params}
    for param in kept_params:
        param.name_hint = None  # named as a new argument would be (see `_splice`)

    first_consumer_op = consumer_body.first_op
    yielded: dict[AffineMap, list[SSAValue]] = {}
    for t in transforms:
        if producer_body is None:
            yielded[t] = [_scalar_of(producer, block, first_consumer_op)]
            continue
        args = [None if k is None else new_args[k] for k in producer_slots[t]]
        before = None if reuse_producer else first_consumer_op
        yielded[t] = _splice(
            producer_body,
            producer_params,
            args,
            block,
            move=move_producer,
            before=before,
            hints=hints,
        )

    consumer_args: list[SSAValue | None] = []
    for i, slot in enumerate(consumer_slots):
        if slot is None:
            r, t = by_index[i]
            consumer_args.append(yielded[t][r])
        else:
            consumer_args.append(new_args[slot])
    results = _splice(consumer_body, consumer_params, consumer_args, block, move=True, hints=hints)
    results += [yielded[transforms[0]][r] for r in plan.kept_results]
    block.add_op(YieldOp(*results))
    for terminator in terminators:
        if terminator is not None and terminator.parent is block:
            rewriter.erase(terminator)
    for param in params:
        if param not in kept_params:
            block.erase_arg(param)
    assert block.parent is not None
    block.parent.detach_block(block)
    if len(producer.results) > 1:
        _prune_dead_ops(block, rewriter)  # the inlined producer computed results nobody reads

    fused = GenericOp(
        inputs.values,
        outputs.values,
        Region(block),
        [AffineMapAttr(m) for m in (*inputs.maps, *outputs.maps)],
        consumer.iterator_types,
        [*consumer.result_types, *(producer.results[r].type for r in plan.kept_results)],
    )
    ours = (contract.FUSED.name, contract.FUSION_REFUSED.name, contract.KIND.name)
    fused.attributes.update({k: v for k, v in consumer.attributes.items() if k not in ours})
    return fused
