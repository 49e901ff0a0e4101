"""
`tess-fuse`'s decision: whether a producer may be fused into a consumer, through which maps.

`plan_fusion` applies the rules (lowering/fusion/README.md, `tess-fuse`) to one consumer
input and returns a `FusionPlan` (the uses it feeds, each with its consumer-to-producer
loop map, and the results the fused op also yields), or the reason the edge is refused,
which the report prints. It reads the IR and changes nothing, so the report (`annotate`)
asks it too; the rewrite is in `fuse_build.py`, the pattern and the pass in `fuse.py`.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import tensor
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp
from xdsl.ir import Operation, OpResult
from xdsl.ir.affine import AffineDimExpr, AffineMap

from tessc.dialects.tess import PatternKind
from tessc.lowering.linalg.generic_analysis import (
    VIEW_OPS,
    FactsCache,
    cached_facts,
    cached_kind,
    generic_maps,
    is_permutation,
    is_reduction,
)
from tessc.lowering.linalg.loop_nests import PACKED_MIN_WORK


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


def other_users(producer: Operation, consumer: GenericOp) -> list[Operation]:
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
    others = other_users(producer, consumer)
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
