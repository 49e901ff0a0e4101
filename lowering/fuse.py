"""
Vertical fusion of `linalg.generic` ops on tensors (`tess-fuse`).

`tess-to-linalg` emits one `linalg.generic` per `tess` op. This pass merges a producer into
its consumer when that saves memory traffic without adding work, as MLIR's
`FuseElementwiseOps` does: the producer's body is inlined into the consumer's, the consumer
reads the producer's inputs directly, and the intermediate tensor disappears.

Indexing maps. With `Mc` the consumer's map of the fused operand and `Mp` the producer's
map of that result (a permutation: the producer is all-parallel), `T = inverse(Mp) . Mc`
maps consumer loops to producer loops and each producer input map `Mi` becomes `Mi . T`.
Broadcasts compose through `T`: a constant-0 result of `Mc` pins a producer loop to 0, and
dropped leading dims do not appear. So the seed's `(3,5,1) * (1,5,4)` zip then sum over
dim 1 becomes one generic over `(3,5,4)` reading `(d0,d1,0)` and `(0,d1,d2)` into the
reduce's unchanged init: the `tensor<3x5x4xf32>` intermediate never exists.

Rules, not luck. Each op has a `PatternKind` (TVM's FuseOps classes, from
`tessc.dialects.tess`) read off its iterators and maps. An edge is fused only if all hold
(otherwise `report` prints which failed):

- the producer is elementwise, broadcast or injective. A reduction or matmul-like producer
  is not fused into its consumer: an epilogue (bias add, relu) must run after the
  reduction finishes, which one `linalg.generic` cannot express; `tess-fuse-epilogue`
  (`tessc.lowering.fuse_epilogue`, next in the pipeline) groups them into one kernel;
- no work is multiplied: where the consumer visits a producer element more than once (a
  broadcast, or a matmul operand indexed without `j`), only a free producer (copy,
  transpose, constant) may go into a reduction, and only a cheap one (at most
  `max-cheap-ops` ops, no transcendental or division) into an all-parallel consumer. A zip
  into a reduce is fine exactly when the zip's iteration space is the reduce's;
- a transpose is not fused into a contraction where it would put the reduction loop on
  the operand's last (unit-stride) dim (`a @ w.T`): kept as a copy, it is a packed
  right-hand side the contraction reads i-k-j; except in contractions `tess-pack-matmul`
  will pack (`PACKED_MIN_WORK`), whose packing reads it transposed for free;
- a producer with other uses is duplicated only when cheap; an expensive one is fused
  *multi-output* instead (the fused generic also yields its result, e.g. a forward value
  and a saved activation) when the consumer is all-parallel over exactly the producer's
  iteration space and all other uses come after the consumer; else the edge is refused.
  Nor is a cheap one duplicated into a reduction where a contraction reads it too (so it
  is materialized anyway) and it reads two or more tensors at full rank: the reduction
  reads its one result instead (an MLP's `b1` gradient sums `dh` beside `x.T @ dh`);
- every loop of the fused op still has its extent given by some operand;
- a producer whose body reads its loop indices (`linalg.index`: one-hot, iota-like ops)
  is fused only where the consumer's loop d is the producer's loop d. A generic whose
  body reads a tensor it captures (a gather's `tensor.extract`) is opaque: its reads are
  data-dependent, which no indexing map describes.

The greedy fixpoint makes fusion independent of how an expression is written:
`a + (b - a) * w` and `a * (1 - w) + b * w` both end as one generic (fills and splat
constants become scalars, duplicate inputs merge). Fused producers are erased; the greedy
driver removes the `tensor.empty` ops left unused.

Fusing a chain of n ops is O(n): a fusion step touches the smaller body only. The larger
block is reused with its arguments (new operands get new arguments, only the other
block's are remapped), and the facts the rules ask of a body (cost, index and captured
reads: `BodyFacts`) are carried from producer and consumer to the fused op, not walked.

`report=true` writes `tess.kind` on every generic, `tess.fused` (the merged ops in program
order, named by the `tess.op` attribute `tess-to-linalg` sets, else by their bodies) on
every fused one, and `tess.fusion_refused` (`operand <i> (<producer>): <reason>` clauses
joined by "; ") on consumers with refused edges. Output is deterministic.

xDSL has no fusion pass for `linalg.generic`, hence this one.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    FloatAttr,
    ModuleOp,
    ShapedType,
    TensorType,
)
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import is_side_effect_free

from tessc.dialects import contract
from tessc.dialects.tess import PatternKind
from tessc.lowering.generic_analysis import (
    VIEW_OPS,
    FactsCache,
    cached_facts,
    cached_kind,
    generic_maps,
    is_permutation,
    is_reduction,
    labels,
    pattern_kind,
    splat_value,
)
from tessc.lowering.loop_analysis import PACKED_MIN_WORK

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


def _other_users(producer: Operation, consumer: GenericOp) -> list[Operation]:
    """Ops other than the consumer's inputs that read a result of `producer`, in use order."""
    uses = (u for r in producer.results for u in r.uses)
    n = len(consumer.inputs)
    others = (u.operation for u in uses if u.operation is not consumer or u.index >= n)
    return list(dict.fromkeys(others))


def _materialized_full_reads(
    producer: Operation,
    consumer: GenericOp,
    others: Sequence[Operation],
    cost: int,
    facts: FactsCache | None,
) -> str | None:
    """Why a reduction should read a producer's result rather than recompute it: the
    producer is materialized anyway (a contraction reads it, which never fuses a producer
    with arithmetic) and reads two or more tensors at full rank, so recomputing it loads
    more than its one result (an MLP's `b1` gradient `(dz @ w2.T * (pre > 0)).sum(0)`
    beside `x.T @ dh`: 2 arrays and the bias instead of `dh`). None if fusing is fine."""
    if cost == 0 or not is_reduction(consumer) or not isinstance(producer, GenericOp):
        return None
    if not any(
        isinstance(user, GenericOp) and cached_kind(user, facts) == PatternKind.MATMUL
        for user in others
    ):
        return None
    maps = generic_maps(producer)[: len(producer.inputs)]
    full = sum(1 for m in maps if is_permutation(m))
    if full < 2:
        return None
    return (
        f"producer is materialized for a contraction and reads {full} full tensors: "
        "the reduction reads its result instead of recomputing it"
    )


def _covers_all_loops(maps: Sequence[AffineMap], num_loops: int) -> int | None:
    """The first loop no map gives an extent to, or None."""
    seen = {r.position for m in maps for r in m.results if isinstance(r, AffineDimExpr)}
    return next((d for d in range(num_loops) if d not in seen), None)


def _transposes_contraction_operand(
    consumer: GenericOp,
    producer: Operation,
    uses: Sequence[tuple[int, int, AffineMap]],
    maps: Sequence[AffineMap],
    extents: Sequence[int],
    facts: FactsCache | None = None,
) -> str | None:
    """A refusal when fusing transpose `producer` into contraction `consumer` would make an
    operand whose last dim the unfused contraction walks with a parallel loop walk it with
    the reduction loop instead (`a @ w.T`: `w[j, k]` for `wT[k, j]`). The contraction then
    cannot run i-k-j with `j` unit stride; kept apart, the transpose is a copy (a packed
    right-hand side: 0.3 MFLOP of the digits MLP's backward took 56 us fused, as dot
    products of 10, and runs as a tiled i-k-j matmul after a 1280-element copy). From
    `PACKED_MIN_WORK` multiply-adds on, `tess-pack-matmul` packs the operand itself, reading
    it in any layout: there the transpose is fused and no copy is made."""
    if not isinstance(producer, GenericOp):
        return None
    if cached_kind(consumer, facts) != PatternKind.MATMUL:
        return None
    if pymath.prod(extents) >= PACKED_MIN_WORK:
        return None
    if len(producer.inputs) != 1 or cached_facts(producer, facts).cost != 0:
        return None
    reductions = {
        d for d, it in enumerate(consumer.iterator_types) if it.data == IteratorType.REDUCTION
    }
    (source_map,) = generic_maps(producer)[:1]
    for i, _, transform in uses:
        last = maps[i].results[-1] if maps[i].results else None
        fused = source_map.compose(transform).results
        if (
            isinstance(last, AffineDimExpr)
            and last.position not in reductions
            and fused
            and isinstance(fused[-1], AffineDimExpr)
            and fused[-1].position in reductions
        ):
            return (
                "a transpose fused into this contraction would put its reduction loop on the "
                "operand's unit-stride dim (kept as a copy: a packed operand)"
            )
    return None


def plan_fusion(
    consumer: GenericOp, index: int, policy: FusionPolicy, facts: FactsCache | None = None
) -> FusionPlan | str | None:
    """How to fuse the producer of input `index` into `consumer`: a plan, a refusal, or None.
    `facts` caches body facts and kinds across calls."""
    inputs = tuple(consumer.inputs)  # built from segment sizes at each access: read once
    value = inputs[index]
    if not isinstance(value, OpResult) or not isinstance(value.type, TensorType):
        return None
    producer = value.op
    if isinstance(producer, tensor.EmptyOp | tensor.ExtractSliceOp):
        return None  # nothing to compute: an init, or a slice read in place (a view)
    if isinstance(producer, VIEW_OPS):
        return f"{producer.name} is a view, not a linalg.generic; fusion stops at reshapes"
    producer_facts = cached_facts(producer, facts) if isinstance(producer, GenericOp) else None
    kind = cached_kind(producer, facts)
    if kind in (PatternKind.REDUCTION, PatternKind.MATMUL):
        return (
            f"producer is a {kind.name.lower()}: its epilogue must run after the reduction "
            "finishes, which one linalg.generic cannot express (tess-fuse-epilogue groups them)"
        )
    if kind == PatternKind.OPAQUE or (
        isinstance(producer, GenericOp | FillOp) and not producer.results
    ):
        return f"producer {producer.name} is opaque to fusion"
    if producer.parent_block() is not consumer.parent_block():
        return "producer is in another block"

    maps = generic_maps(consumer)
    out_maps = (
        generic_maps(producer)[len(producer.inputs) :] if isinstance(producer, GenericOp) else []
    )
    uses: list[tuple[int, int, AffineMap]] = []
    for i, operand in enumerate(inputs):
        if not isinstance(operand, OpResult) or operand.op is not producer:
            continue
        result_map = (
            out_maps[operand.index] if out_maps else AffineMap.identity(len(maps[i].results))
        )
        inverse = result_map.inverse_permutation()
        if inverse is None:
            return "producer result map is not invertible"
        transform = inverse.compose(maps[i])
        if (
            producer_facts is not None
            and producer_facts.indexed
            and any(r != AffineDimExpr(d) for d, r in enumerate(transform.results))
        ):
            return "producer reads its loop indices (linalg.index) and the consumer's loops differ"
        uses.append((i, operand.index, transform))

    try:
        extents = consumer.get_static_loop_ranges()
    except NotImplementedError:
        return "consumer loop extents are not computable"
    transforms = list(dict.fromkeys(t for _, _, t in uses))
    # A loop the producer does not use multiplies its work even at extent 1: decisions do
    # not depend on extents being 1, so that ops alike up to shapes fuse alike
    # (`tess-fuse-horizontal` packs a one-element parameter's step with the others).
    visits = sum(
        pymath.prod(max(extents[d], 2) for d in range(t.num_dims) if d not in t.used_dims())
        for t in transforms
    )
    cost, expensive = (
        (producer_facts.cost, producer_facts.expensive) if producer_facts else (0, False)
    )
    cheap = cost <= policy.max_cheap_ops and not expensive
    transposed = _transposes_contraction_operand(consumer, producer, uses, maps, extents, facts)
    if transposed is not None:
        return transposed
    if visits > 1 and cost > 0:
        if is_reduction(consumer):
            return f"would recompute the producer {visits} times per element inside a reduction"
        if not cheap:
            return f"expensive producer would be recomputed {visits} times per element"

    kept: tuple[int, ...] = ()
    others = _other_users(producer, consumer)
    materialized = _materialized_full_reads(producer, consumer, others, cost, facts)
    if materialized is not None:
        return materialized
    if others and cost > 0 and not cheap:
        refusal = f"producer has {len(others) + 1} uses and is expensive"
        if not policy.multi_output:
            return refusal
        if is_reduction(consumer):
            return f"{refusal}; multi-output fusion needs an all-parallel consumer"
        if len(transforms) != 1 or not is_permutation(transforms[0]):
            return f"{refusal}; the consumer's iteration space differs from the producer's"
        block = consumer.parent_block()
        assert block is not None
        for user in others:
            ancestor = block.find_ancestor_op_in_block(user)
            if ancestor is None or not consumer.is_before_in_block(ancestor):
                return f"{refusal}; another use precedes the consumer"
        n_inputs = len(inputs)
        kept = tuple(
            r.index
            for r in producer.results
            if any(u.operation is not consumer or u.index >= n_inputs for u in r.uses)
        )

    fused_maps = [m for i, m in enumerate(maps) if i not in {u[0] for u in uses}]
    if isinstance(producer, GenericOp):
        # The producer's inputs, kept results and inits its body reads join the fused op.
        n, args = len(producer.inputs), producer.body.block.args
        carried = [
            m
            for j, m in enumerate(generic_maps(producer))
            if j < n or j - n in kept or args[j].uses
        ]
        fused_maps += [m.compose(t) for t in transforms for m in carried]
    missing = _covers_all_loops(fused_maps, len(extents))
    if missing is not None:
        return f"the fused op would lose the extent of loop d{missing}"
    return FusionPlan(producer, tuple(uses), kept)


# ---------------------------------------------------------------------------------------
# Building the fused op
# ---------------------------------------------------------------------------------------


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
        bool(plan.kept_results) or not _other_users(producer, consumer)
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
    facts: FactsCache = field(default_factory=FactsCache)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, consumer: GenericOp, rewriter: PatternRewriter) -> None:
        if not consumer.results:
            return  # memref semantics: not this level
        for index in range(len(consumer.inputs)):
            plan = plan_fusion(consumer, index, self.policy, self.facts)
            if isinstance(plan, FusionPlan):
                break
        else:
            return
        merged = sorted(
            _origins(plan.producer, self.origins, self.positions)
            + _origins(consumer, self.origins, self.positions)
        )
        producer = plan.producer
        consumer_facts = cached_facts(consumer, self.facts)
        if not isinstance(producer, GenericOp):
            fused_facts = consumer_facts  # a fill or splat becomes a constant: no cost
        elif len(producer.results) == 1:
            copies = len({t for _, _, t in plan.uses})
            fused_facts = consumer_facts.with_inlined(cached_facts(producer, self.facts), copies)
        else:
            fused_facts = None  # dead parts of the producer's body are pruned: walk it again
        fused = build_fused(consumer, plan, rewriter)
        self.origins[fused] = merged
        self.origins.pop(consumer, None)
        self.facts.forget(consumer)
        if fused_facts is not None:
            self.facts.bodies[fused] = fused_facts
        num_results = len(consumer.results)
        rewriter.replace(consumer, fused, fused.results[:num_results])
        for k, r in enumerate(plan.kept_results):
            rewriter.replace_all_uses_with(plan.producer.results[r], fused.results[num_results + k])
        if all(not r.uses for r in plan.producer.results):
            rewriter.erase(plan.producer)
            self.origins.pop(plan.producer, None)
            self.facts.forget(plan.producer)


def annotate(module: ModuleOp, policy: FusionPolicy) -> None:
    """Write each generic's kind and the reason each of its remaining input edges was refused."""
    facts = FactsCache()
    for op in module.walk():
        if not isinstance(op, GenericOp):
            continue
        contract.KIND.set(op, pattern_kind(op).name.lower())
        reasons: list[str] = []
        for index, value in enumerate(op.inputs):
            plan = plan_fusion(op, index, policy, facts)
            if isinstance(plan, str):
                assert isinstance(value, OpResult)
                producer = ",".join(labels(value.op))
                reasons.append(f"operand {index} ({producer}): {plan}")
        if reasons:
            contract.FUSION_REFUSED.set(op, "; ".join(reasons))


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
                contract.FUSED.set(fused, [label for _, label in merged])
            annotate(op, policy)
