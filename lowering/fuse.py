"""
Vertical fusion of `linalg.generic` ops on tensors (`tess-fuse`).

`tess-to-linalg` emits one `linalg.generic` per `tess` op. This pass merges a producer into
its consumer when that saves memory traffic without adding work, as MLIR's
`FuseElementwiseOps` does: the producer's body is inlined into the consumer's, the consumer
reads the producer's inputs directly, and the intermediate tensor disappears.

Indexing maps. Let `Mc` be the consumer's map for the fused operand (consumer loops ->
producer result indices) and `Mp` the producer's map for that result, a permutation because
the producer is all-parallel. `T = inverse(Mp) . Mc` maps consumer loops to producer loops,
and every producer input map `Mi` becomes `Mi . T`. Broadcasts compose through `T`: a
constant-0 result of `Mc` pins the producer loop to 0, and dropped leading dims simply do
not appear. So the seed's `(3,5,1) * (1,5,4)` zip followed by a sum over dim 1 becomes one
generic over `(3,5,4)` reading `(d0,d1,0)` and `(0,d1,d2)`, accumulating into the reduce's
unchanged init: the `tensor<3x5x4xf32>` intermediate never exists.

Rules, not luck. Every op gets a `PatternKind` (TVM's FuseOps classes, from
`tessc.dialects.tess`) derived from its iterators and maps, and an edge producer->consumer
is fused only when all of these hold (otherwise the reason is what `report` prints):

- the producer is elementwise, broadcast or injective (all-parallel). A reduction or
  matmul-like producer is never fused into its consumer: an epilogue (bias add, relu) must
  run after the reduction has finished, which one `linalg.generic` cannot express. That is
  left to a later grouping op (kernel boundaries at level 3), not done here;
- the producer is not recomputed in a way that multiplies work: if the consumer visits a
  producer element more than once (a broadcast, or a matmul operand indexed without `j`),
  only a free producer (a copy, transpose or constant: no arithmetic) may be fused into a
  reduction, and only a cheap one (at most `max-cheap-ops` arithmetic ops, none of them
  transcendental or a division) into an all-parallel consumer. A zip into a reduce is fine
  exactly when the zip's iteration space is the reduce's (each product computed once);
- a producer that keeps other uses after the fusion is duplicated only when cheap. An
  expensive one is instead fused *multi-output*: the fused generic also yields the
  producer's result (e.g. a forward value and a saved activation), provided the consumer is
  all-parallel over exactly the producer's iteration space and every other use comes after
  the consumer. Otherwise the edge is refused and the producer stays a kernel of its own;
- every loop of the fused op still has its extent given by some operand.

Fusion is a greedy fixpoint, so it does not depend on how an expression was written:
`a + (b - a) * w` and `a * (1 - w) + b * w` both end as one generic (a `linalg.fill` or a
splat constant is inlined as a scalar, and duplicate inputs are merged). Fused producers
are erased; the greedy driver removes the `tensor.empty` ops left unused.

With `report=true` every generic gets `tess.kind` (its pattern kind), every fused generic
`tess.fused` (the ops it merged, in order; a generic lowered from `tess.mul` is named by
its `tess.op` attribute when `tess-to-linalg` sets one, else by its body), and every
consumer with refused edges `tess.fusion_refused`, one `operand <i> (<producer>): <reason>`
clause per edge, joined by "; ". Output is deterministic.

xDSL has no fusion pass for `linalg.generic`, hence this one.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence
from dataclasses import dataclass, field

from tessc.dialects.tess import PatternKind
from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    ModuleOp,
    ShapedType,
    StringAttr,
    TensorType,
)
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import is_side_effect_free

FUSED_ATTR = "tess.fused"
REFUSED_ATTR = "tess.fusion_refused"
KIND_ATTR = "tess.kind"
ORIGIN_ATTR = "tess.op"

# Ops that are not worth recomputing: transcendental functions and divisions. Everything
# else in `math` is a cheap bit/rounding operation.
_CHEAP_MATH_OPS = frozenset(
    {"math.absf", "math.copysign", "math.fma", "math.floor", "math.ceil", "math.round",
     "math.roundeven", "math.trunc"}
)  # fmt: skip
_EXPENSIVE_ARITH_OPS = frozenset({"arith.divf", "arith.remf"})
_VIEW_OPS = (tensor.CollapseShapeOp, tensor.ExpandShapeOp)


# ---------------------------------------------------------------------------------------
# Classification and cost
# ---------------------------------------------------------------------------------------


def _maps(op: GenericOp) -> list[AffineMap]:
    return [attr.data for attr in op.indexing_maps]


def _is_reduction(op: GenericOp) -> bool:
    return any(it.data == IteratorType.REDUCTION for it in op.iterator_types)


def _is_permutation(m: AffineMap) -> bool:
    return len(m.results) == m.num_dims and m.is_projected_permutation()


def _is_projection(m: AffineMap) -> bool:
    """Each result is a distinct loop dim or the constant 0 (a broadcast, permute or copy)."""
    dims = [r.position for r in m.results if isinstance(r, AffineDimExpr)]
    zeros = [r for r in m.results if isinstance(r, AffineConstantExpr) and r.value == 0]
    return (
        not m.num_symbols
        and len(dims) + len(zeros) == len(m.results)
        and len(set(dims)) == len(dims)
    )


def _splat_value(op: Operation) -> float | None:
    """The element of an `arith.constant` splat tensor, else None."""
    if not isinstance(op, arith.ConstantOp) or not isinstance(op.value, DenseIntOrFPElementsAttr):
        return None
    values = op.value.get_values()
    if not values or any(v != values[0] for v in values):
        return None
    return float(values[0])


def pattern_kind(op: Operation) -> PatternKind:
    """TVM's FuseOps class of `op`, read off its iterators and indexing maps."""
    if isinstance(op, FillOp) or _splat_value(op) is not None:
        return PatternKind.ELEMENTWISE
    if isinstance(op, _VIEW_OPS):
        return PatternKind.INJECTIVE
    if not isinstance(op, GenericOp):
        return PatternKind.OPAQUE
    maps = _maps(op)
    if not all(_is_projection(m) for m in maps):
        return PatternKind.OPAQUE
    if _is_reduction(op):
        # A contraction (matmul-like) reduces two inputs that each carry a parallel dim the
        # other lacks, as (i,k) and (k,j) do; anything else is a plain reduction.
        reduced = {d for d, it in enumerate(op.iterator_types) if it.data == IteratorType.REDUCTION}
        kept = [m.used_dims() - reduced for m in maps[: len(op.inputs)] if reduced & m.used_dims()]
        contraction = any(not a <= b and not b <= a for a in kept for b in kept)
        return PatternKind.MATMUL if contraction else PatternKind.REDUCTION
    out_maps = maps[len(op.inputs) :]
    if not all(_is_permutation(m) for m in out_maps):
        return PatternKind.OPAQUE
    if all(m == AffineMap.identity(m.num_dims) for m in maps):
        return PatternKind.ELEMENTWISE
    in_order = all(
        [r.position for r in m.results if isinstance(r, AffineDimExpr)]
        == sorted(r.position for r in m.results if isinstance(r, AffineDimExpr))
        for m in maps
    )
    return PatternKind.BROADCAST if in_order else PatternKind.INJECTIVE


def _payload(op: GenericOp) -> list[Operation]:
    """The body ops that compute something (no constants, no yield)."""
    return [o for o in op.body.block.ops if not isinstance(o, arith.ConstantOp | YieldOp)]


def _is_expensive(op: Operation) -> bool:
    if op.name.startswith("math."):
        return op.name not in _CHEAP_MATH_OPS
    return op.name in _EXPENSIVE_ARITH_OPS


def producer_cost(op: Operation) -> tuple[int, bool]:
    """(number of arithmetic ops per element, whether any is expensive)."""
    if not isinstance(op, GenericOp):
        return 0, False
    payload = _payload(op)
    return len(payload), any(_is_expensive(o) for o in payload)


def labels(op: Operation) -> list[str]:
    """What `op` stands for in `tess.fused`: the ops already merged into it, else its origin."""
    fused = op.attributes.get(FUSED_ATTR)
    if isinstance(fused, ArrayAttr):
        return [a.data for a in fused if isinstance(a, StringAttr)]
    origin = op.attributes.get(ORIGIN_ATTR)
    if isinstance(origin, StringAttr):
        return [origin.data]
    if isinstance(op, GenericOp):
        payload = _payload(op)
        if not payload:
            yielded = op.body.block.last_op
            is_copy = yielded is not None and any(
                isinstance(v.owner, Block) for v in yielded.operands
            )
            return ["linalg.copy" if is_copy else "linalg.fill"]
        return ["+".join(o.name for o in payload)]
    return [op.name]


# ---------------------------------------------------------------------------------------
# The fusion decision
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionPolicy:
    max_cheap_ops: int = 4
    multi_output: bool = True


@dataclass(frozen=True)
class FusionPlan:
    """Fuse `producer` into a consumer: which consumer inputs it feeds, through which maps."""

    producer: Operation
    uses: tuple[tuple[int, int, AffineMap], ...]
    """(consumer input index, producer result index, consumer loops -> producer loops)."""
    kept_results: tuple[int, ...]
    """Producer results the fused op also yields (multi-output fusion)."""


def _other_users(producer: Operation, consumer: Operation) -> list[Operation]:
    """Ops other than the consumer's inputs that read a result of `producer`."""
    users: list[Operation] = []
    inputs = set(range(len(consumer.inputs))) if isinstance(consumer, GenericOp) else ()
    for result in producer.results:
        for use in result.uses:
            if use.operation is consumer and use.index in inputs:
                continue
            if use.operation not in users:
                users.append(use.operation)
    return users


def _covers_all_loops(maps: Sequence[AffineMap], num_loops: int) -> int | None:
    """The first loop no map gives an extent to, or None."""
    seen = {r.position for m in maps for r in m.results if isinstance(r, AffineDimExpr)}
    return next((d for d in range(num_loops) if d not in seen), None)


def plan_fusion(consumer: GenericOp, index: int, policy: FusionPolicy) -> FusionPlan | str | None:
    """How to fuse the producer of input `index` into `consumer`: a plan, a refusal, or None."""
    value = consumer.inputs[index]
    if not isinstance(value, OpResult) or not isinstance(value.type, TensorType):
        return None
    producer = value.op
    if isinstance(producer, tensor.EmptyOp):
        return None
    if isinstance(producer, _VIEW_OPS):
        return f"{producer.name} is a view, not a linalg.generic; fusion stops at reshapes"
    kind = pattern_kind(producer)
    if kind in (PatternKind.REDUCTION, PatternKind.MATMUL):
        return (
            f"producer is a {kind.name.lower()}: its epilogue must run after the reduction "
            "finishes, which needs a grouping op, not one linalg.generic"
        )
    if kind == PatternKind.OPAQUE or (
        isinstance(producer, GenericOp | FillOp) and not producer.results
    ):
        return f"producer {producer.name} is opaque to fusion"
    if producer.parent_block() is not consumer.parent_block():
        return "producer is in another block"

    maps = _maps(consumer)
    out_maps = _maps(producer)[len(producer.inputs) :] if isinstance(producer, GenericOp) else []
    uses: list[tuple[int, int, AffineMap]] = []
    for i, operand in enumerate(consumer.inputs):
        if not isinstance(operand, OpResult) or operand.op is not producer:
            continue
        result_map = (
            out_maps[operand.index] if out_maps else AffineMap.identity(len(maps[i].results))
        )
        inverse = result_map.inverse_permutation()
        if inverse is None:
            return "producer result map is not invertible"
        uses.append((i, operand.index, inverse.compose(maps[i])))

    try:
        extents = consumer.get_static_loop_ranges()
    except NotImplementedError:
        return "consumer loop extents are not computable"
    transforms = list(dict.fromkeys(t for _, _, t in uses))
    visits = sum(
        pymath.prod(extents[d] for d in range(t.num_dims) if d not in t.used_dims())
        for t in transforms
    )
    cost, expensive = producer_cost(producer)
    cheap = cost <= policy.max_cheap_ops and not expensive
    if visits > 1 and cost > 0:
        if _is_reduction(consumer):
            return f"would recompute the producer {visits} times per element inside a reduction"
        if not cheap:
            return f"expensive producer would be recomputed {visits} times (broadcast)"

    kept: tuple[int, ...] = ()
    others = _other_users(producer, consumer)
    if others and cost > 0 and not cheap:
        refusal = f"producer has {len(others) + 1} uses and is expensive"
        if not policy.multi_output:
            return refusal
        if _is_reduction(consumer):
            return f"{refusal}; multi-output fusion needs an all-parallel consumer"
        if len(transforms) != 1 or not _is_permutation(transforms[0]):
            return f"{refusal}; the consumer's iteration space differs from the producer's"
        block = consumer.parent_block()
        assert block is not None
        for user in others:
            ancestor = block.find_ancestor_op_in_block(user)
            if ancestor is None or not consumer.is_before_in_block(ancestor):
                return f"{refusal}; another use precedes the consumer"
        kept = tuple(
            r.index
            for r in producer.results
            if any(u.operation is not consumer or u.index >= len(consumer.inputs) for u in r.uses)
        )

    fused_maps = [m for i, m in enumerate(maps) if i not in {u[0] for u in uses}]
    if isinstance(producer, GenericOp):
        # The producer's inputs, kept results and inits its body reads join the fused op.
        n, args = len(producer.inputs), producer.body.block.args
        carried = [
            m for j, m in enumerate(_maps(producer)) if j < n or j - n in kept or args[j].uses
        ]
        fused_maps += [m.compose(t) for t in transforms for m in carried]
    missing = _covers_all_loops(fused_maps, len(extents))
    if missing is not None:
        return f"the fused op would lose the extent of loop d{missing}"
    return FusionPlan(producer, tuple(uses), kept)


# ---------------------------------------------------------------------------------------
# Building the fused op
# ---------------------------------------------------------------------------------------


def _element_type(value: SSAValue) -> Attribute:
    assert isinstance(value.type, ShapedType)
    return value.type.get_element_type()


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


def _scalar_of(producer: Operation, block: Block) -> SSAValue:
    """The scalar a fill or splat constant stands for, materialised as a constant in `block`."""
    if isinstance(producer, FillOp):
        scalar = producer.inputs[0]
        if not (isinstance(scalar, OpResult) and isinstance(scalar.op, arith.ConstantOp)):
            return scalar  # defined above the consumer, so still visible from its body
        constant = scalar.op.clone()
    else:
        value = _splat_value(producer)
        assert value is not None and isinstance(producer.results[0].type, TensorType)
        element_type = producer.results[0].type.get_element_type()
        constant = arith.ConstantOp(FloatAttr(value, element_type))
    block.add_op(constant)
    return constant.result


def _prune_dead_ops(block: Block) -> None:
    """Drop side-effect-free body ops whose results nobody reads (from unused yields)."""
    for op in reversed(list(block.ops)):
        if (
            not isinstance(op, YieldOp)
            and all(not r.uses for r in op.results)
            and is_side_effect_free(op)
        ):
            op.detach()
            op.erase()


def build_fused(consumer: GenericOp, plan: FusionPlan) -> GenericOp:
    """The generic computing `consumer` with the producer's body inlined into it."""
    producer = plan.producer
    consumer_maps = _maps(consumer)
    producer_maps = _maps(producer) if isinstance(producer, GenericOp) else []
    by_index = {i: (r, t) for i, r, t in plan.uses}
    transforms = list(dict.fromkeys(t for _, _, t in plan.uses))

    # Operands: consumer inputs in order, the producer's inputs at its first use.
    inputs = _OperandList()
    inlined: dict[AffineMap, list[int | None]] = {}
    for i, value in enumerate(consumer.inputs):
        if i not in by_index:
            inputs.add(value, consumer_maps[i])
            continue
        t = by_index[i][1]
        if t in inlined or not isinstance(producer, GenericOp):
            continue
        body = producer.body.block
        slots: list[int | None] = [
            inputs.add(v, producer_maps[j].compose(t)) for j, v in enumerate(producer.inputs)
        ]
        for j, out in enumerate(producer.outputs):
            arg = body.args[len(producer.inputs) + j]
            if arg.uses and j not in plan.kept_results:
                slots.append(inputs.add(out, producer_maps[len(producer.inputs) + j].compose(t)))
            else:
                slots.append(None)
        inlined[t] = slots
    outputs = _OperandList()
    for j, value in enumerate(consumer.outputs):
        outputs.add(value, consumer_maps[len(consumer.inputs) + j], merge=False)
    kept_slots: dict[int, int] = {}
    for r in plan.kept_results:
        out_map = producer_maps[len(producer.inputs) + r].compose(transforms[0])
        kept_slots[r] = outputs.add(producer.outputs[r], out_map, merge=False)

    n_in = len(inputs.values)
    block = Block(arg_types=[_element_type(v) for v in (*inputs.values, *outputs.values)])
    mapper: dict[SSAValue, SSAValue] = {}
    yielded: dict[AffineMap, list[SSAValue]] = {}
    for t in transforms:
        if not isinstance(producer, GenericOp):
            yielded[t] = [_scalar_of(producer, block)]
            continue
        body = producer.body.block
        slots = inlined[t]
        for arg, slot in zip(body.args, slots, strict=True):
            if slot is not None:
                mapper[arg] = block.args[slot]
        for r, slot in kept_slots.items():
            mapper[body.args[len(producer.inputs) + r]] = block.args[n_in + slot]
        for op in body.ops:
            if not isinstance(op, YieldOp):
                block.add_op(op.clone(mapper))
        assert isinstance(body.last_op, YieldOp)
        yielded[t] = [mapper.get(v, v) for v in body.last_op.operands]

    consumer_body = consumer.body.block
    for i, arg in enumerate(consumer_body.args[: len(consumer.inputs)]):
        if i in by_index:
            r, t = by_index[i]
            mapper[arg] = yielded[t][r]
        else:
            mapper[arg] = block.args[inputs.add(consumer.inputs[i], consumer_maps[i])]
    for j, arg in enumerate(consumer_body.args[len(consumer.inputs) :]):
        mapper[arg] = block.args[n_in + j]
    for op in consumer_body.ops:
        if not isinstance(op, YieldOp):
            block.add_op(op.clone(mapper))
    assert isinstance(consumer_body.last_op, YieldOp)
    results = [mapper.get(v, v) for v in consumer_body.last_op.operands]
    results += [yielded[transforms[0]][r] for r in plan.kept_results]
    block.add_op(YieldOp(*results))
    _prune_dead_ops(block)
    for old, new in mapper.items():  # keep readable names: the first source arg names it
        if isinstance(old, BlockArgument) and new.owner is block and not new.name_hint:
            new.name_hint = old.name_hint

    fused = GenericOp(
        inputs.values,
        outputs.values,
        Region(block),
        [AffineMapAttr(m) for m in (*inputs.maps, *outputs.maps)],
        consumer.iterator_types,
        [*consumer.result_types, *(producer.results[r].type for r in plan.kept_results)],
    )
    fused.attributes.update(
        {
            k: v
            for k, v in consumer.attributes.items()
            if k not in (FUSED_ATTR, REFUSED_ATTR, KIND_ATTR)
        }
    )
    return fused


# ---------------------------------------------------------------------------------------
# Pattern and pass
# ---------------------------------------------------------------------------------------


Origins = dict[Operation, list[tuple[int, str]]]
"""For each op made by fusion, the (program position, label) of every op merged into it."""


def _origins(
    op: Operation, origins: Origins, positions: dict[Operation, int]
) -> list[tuple[int, str]]:
    if op in origins:
        return origins[op]
    return [(positions.get(op, len(positions)), label) for label in labels(op)]


@dataclass(frozen=True)
class FuseProducerIntoGeneric(RewritePattern):
    """Fuse the first fusable producer of a generic's inputs into it."""

    policy: FusionPolicy
    positions: dict[Operation, int] = field(default_factory=dict[Operation, int])
    """Program order of the ops before fusion, so that `tess.fused` lists them in order."""
    origins: Origins = field(default_factory=Origins)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, consumer: GenericOp, rewriter: PatternRewriter) -> None:
        if not consumer.results:
            return  # memref semantics: not this level
        for index in range(len(consumer.inputs)):
            plan = plan_fusion(consumer, index, self.policy)
            if isinstance(plan, FusionPlan):
                break
        else:
            return
        fused = build_fused(consumer, plan)
        self.origins[fused] = sorted(
            _origins(plan.producer, self.origins, self.positions)
            + _origins(consumer, self.origins, self.positions)
        )
        self.origins.pop(consumer, None)
        num_results = len(consumer.results)
        rewriter.replace(consumer, fused, fused.results[:num_results])
        for k, r in enumerate(plan.kept_results):
            rewriter.replace_all_uses_with(plan.producer.results[r], fused.results[num_results + k])
        if all(not r.uses for r in plan.producer.results):
            rewriter.erase(plan.producer)
            self.origins.pop(plan.producer, None)


def annotate(module: ModuleOp, policy: FusionPolicy) -> None:
    """Write each generic's kind and the reason each of its remaining input edges was refused."""
    for op in module.walk():
        if not isinstance(op, GenericOp):
            continue
        op.attributes[KIND_ATTR] = StringAttr(pattern_kind(op).name.lower())
        reasons: list[str] = []
        for index, value in enumerate(op.inputs):
            plan = plan_fusion(op, index, policy)
            if isinstance(plan, str):
                assert isinstance(value, OpResult)
                producer = ",".join(labels(value.op))
                reasons.append(f"operand {index} ({producer}): {plan}")
        if reasons:
            op.attributes[REFUSED_ATTR] = StringAttr("; ".join(reasons))


@dataclass(frozen=True)
class TessFusePass(ModulePass):
    """
    Vertical fusion of `linalg.generic` ops on tensors (see the module docstring).

    Options: `report` writes `tess.kind`, `tess.fused` and `tess.fusion_refused`;
    `max-cheap-ops` bounds the arithmetic ops of a producer that may be recomputed;
    `multi-output` allows a fused generic to also yield an expensive producer's result.
    """

    name = "tess-fuse"

    report: bool = False
    max_cheap_ops: int = 4
    multi_output: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        policy = FusionPolicy(max_cheap_ops=self.max_cheap_ops, multi_output=self.multi_output)
        pattern = FuseProducerIntoGeneric(policy, {o: i for i, o in enumerate(op.walk())})
        PatternRewriteWalker(
            GreedyRewritePatternApplier([pattern]), apply_recursively=True
        ).rewrite_module(op)
        if self.report:
            for fused, merged in pattern.origins.items():
                names = ArrayAttr([StringAttr(label) for _, label in merged])
                fused.attributes[FUSED_ATTR] = names
            annotate(op, policy)
