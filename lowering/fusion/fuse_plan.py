"""
`tess-fuse`'s decision: whether a producer may be fused into a consumer, through which maps.

`plan_fusion` builds a `FusionCandidate` for one consumer input (its producer and, computed
on first use, what the rules ask about the pair) and asks `FUSION_RULES` in order: each row
is a named check that returns the reason it refuses the edge, or None. The first refusal
wins and is what the report prints; if none refuses, the edge gets a `FusionPlan` (the uses
it feeds, each with its consumer-to-producer loop map, and the results the fused op also
yields). Why each rule exists: lowering/fusion/README.md (`tess-fuse`); adding a rule is
adding a row. It reads the IR and changes nothing, so the report (`annotate`) asks it too;
the rewrite is in `fuse_build.py`, the pattern and the pass in `fuse.py`.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import tensor
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.linalg.attrs import IteratorType
from xdsl.dialects.linalg.ops import FillOp, GenericOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap

from tessc.dialects.tess import PatternKind
from tessc.lowering.linalg.generic_analysis import (
    VIEW_OPS,
    BodyFacts,
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


Use = tuple[int, int, AffineMap]
"""(consumer input index, producer result index, consumer loops -> producer loops)."""


@dataclass(frozen=True)
class FusionPlan:
    """Fuse `producer` into a consumer: which consumer inputs it feeds, through which maps."""

    producer: Operation
    uses: tuple[Use, ...]
    kept_results: tuple[int, ...]
    """Producer results the fused op also yields (multi-output fusion)."""


def other_users(producer: Operation, consumer: GenericOp) -> list[Operation]:
    """Ops other than the consumer's inputs that read a result of `producer`, in use order."""
    uses = (u for r in producer.results for u in r.uses)
    n = len(consumer.inputs)
    others = (u.operation for u in uses if u.operation is not consumer or u.index >= n)
    return list(dict.fromkeys(others))


@dataclass(frozen=True, eq=False)
class FusionCandidate:
    """The producer of one consumer input, and what the rules ask about the pair. Each fact
    is computed on first use, so that a rule refusing early spares the later ones their
    work; a fact a rule reads holds only if the rules before it passed (`uses` needs
    invertible result maps, `extents` static loop ranges)."""

    consumer: GenericOp
    inputs: tuple[SSAValue, ...]
    """The consumer's inputs (built from segment sizes at each access: read once)."""
    producer: Operation
    policy: FusionPolicy
    facts: FactsCache | None

    @staticmethod
    def of(
        consumer: GenericOp, index: int, policy: FusionPolicy, facts: FactsCache | None
    ) -> FusionCandidate | None:
        """The candidate for input `index`, or None if it has no producer to fuse."""
        inputs = tuple(consumer.inputs)
        value = inputs[index]
        if not isinstance(value, OpResult) or not isinstance(value.type, TensorType):
            return None
        if isinstance(value.op, tensor.EmptyOp | tensor.ExtractSliceOp):
            return None  # nothing to compute: an init, or a slice read in place (a view)
        return FusionCandidate(consumer, inputs, value.op, policy, facts)

    @cached_property
    def kind(self) -> PatternKind:
        return cached_kind(self.producer, self.facts)

    @cached_property
    def producer_facts(self) -> BodyFacts | None:
        if not isinstance(self.producer, GenericOp):
            return None
        return cached_facts(self.producer, self.facts)

    @property
    def cost(self) -> int:
        """Arithmetic ops per producer element (0 for a copy, fill or constant)."""
        return self.producer_facts.cost if self.producer_facts else 0

    @property
    def cheap(self) -> bool:
        """Whether the producer may be recomputed (few ops, none expensive)."""
        expensive = self.producer_facts.expensive if self.producer_facts else False
        return self.cost <= self.policy.max_cheap_ops and not expensive

    @cached_property
    def maps(self) -> tuple[AffineMap, ...]:
        """The consumer's indexing maps, inputs first."""
        return tuple(generic_maps(self.consumer))

    @cached_property
    def use_transforms(self) -> tuple[tuple[int, int, AffineMap | None], ...]:
        """Each use of the producer as a consumer input: (input, result, consumer loops ->
        producer loops), the map None where the producer's result map is not invertible."""
        producer = self.producer
        out_maps = (
            generic_maps(producer)[len(producer.inputs) :]
            if isinstance(producer, GenericOp)
            else []
        )
        found: list[tuple[int, int, AffineMap | None]] = []
        for i, operand in enumerate(self.inputs):
            if not isinstance(operand, OpResult) or operand.op is not producer:
                continue
            result_map = (
                out_maps[operand.index]
                if out_maps
                else AffineMap.identity(len(self.maps[i].results))
            )
            inverse = result_map.inverse_permutation()
            transform = inverse.compose(self.maps[i]) if inverse is not None else None
            found.append((i, operand.index, transform))
        return tuple(found)

    @cached_property
    def uses(self) -> tuple[Use, ...]:
        """The uses with their loop maps (after `invertible-result-map` passed)."""
        uses = tuple((i, r, t) for i, r, t in self.use_transforms if t is not None)
        assert len(uses) == len(self.use_transforms), "a result map is not invertible"
        return uses

    @cached_property
    def transforms(self) -> tuple[AffineMap, ...]:
        """The distinct loop maps of the uses: one copy of the producer's body each."""
        return tuple(dict.fromkeys(t for _, _, t in self.uses))

    @cached_property
    def extents(self) -> tuple[int, ...] | None:
        """The consumer's static loop extents, or None if they are not computable."""
        try:
            return tuple(self.consumer.get_static_loop_ranges())
        except NotImplementedError:
            return None

    @cached_property
    def visits(self) -> int:
        """How many times the fused op computes each producer element (after
        `static-extents` passed). A loop the producer does not use multiplies its work
        even at extent 1: decisions do not depend on extents being 1, so that ops alike
        up to shapes fuse alike (`tess-fuse-horizontal` packs a one-element parameter's
        step with the others)."""
        extents = self.extents
        assert extents is not None, "the consumer's loop extents are not computable"
        return sum(
            pymath.prod(max(extents[d], 2) for d in range(t.num_dims) if d not in t.used_dims())
            for t in self.transforms
        )

    @cached_property
    def others(self) -> list[Operation]:
        return other_users(self.producer, self.consumer)

    @property
    def shared_and_expensive(self) -> bool:
        """Whether the producer has other users and may not be recomputed: the fused op
        must also yield its results (multi-output fusion) or the edge is refused."""
        return bool(self.others) and self.cost > 0 and not self.cheap

    @cached_property
    def kept_results(self) -> tuple[int, ...]:
        """Producer results the fused op also yields: those read elsewhere, when shared."""
        if not self.shared_and_expensive:
            return ()
        n_inputs = len(self.inputs)
        return tuple(
            r.index
            for r in self.producer.results
            if any(u.operation is not self.consumer or u.index >= n_inputs for u in r.uses)
        )


# ---------------------------------------------------------------------------------------
# The rules, in the order they are asked: each returns the reason it refuses, or None.
# ---------------------------------------------------------------------------------------


def view_producer(c: FusionCandidate) -> str | None:
    """A reshape is no generic: its maps are not affine in the consumer's loops."""
    if isinstance(c.producer, VIEW_OPS):
        return f"{c.producer.name} is a view, not a linalg.generic; fusion stops at reshapes"
    return None


def reduction_producer(c: FusionCandidate) -> str | None:
    """An epilogue must run after its reduction finishes: tess-fuse-epilogue groups them."""
    if c.kind in (PatternKind.REDUCTION, PatternKind.MATMUL):
        return (
            f"producer is a {c.kind.name.lower()}: its epilogue must run after the reduction "
            "finishes, which one linalg.generic cannot express (tess-fuse-epilogue groups them)"
        )
    return None


def opaque_producer(c: FusionCandidate) -> str | None:
    """No indexing map describes what an opaque op (a gather, a call) reads."""
    producer = c.producer
    if c.kind == PatternKind.OPAQUE or (
        isinstance(producer, GenericOp | FillOp) and not producer.results
    ):
        return f"producer {producer.name} is opaque to fusion"
    return None


def same_block(c: FusionCandidate) -> str | None:
    """The fused op replaces the consumer, where the producer's operands must be visible."""
    if c.producer.parent_block() is not c.consumer.parent_block():
        return "producer is in another block"
    return None


def invertible_result_map(c: FusionCandidate) -> str | None:
    """Consumer loops map to producer loops through the inverse of its result map."""
    # A guard: the producers `opaque-producer` lets through have permutation result maps.
    if any(t is None for _, _, t in c.use_transforms):
        return "producer result map is not invertible"
    return None


def index_reads_aligned(c: FusionCandidate) -> str | None:
    """A body reading `linalg.index` d must see the loop d it was written for."""
    if c.producer_facts is None or not c.producer_facts.indexed:
        return None
    if any(any(r != AffineDimExpr(d) for d, r in enumerate(t.results)) for _, _, t in c.uses):
        return "producer reads its loop indices (linalg.index) and the consumer's loops differ"
    return None


def static_extents(c: FusionCandidate) -> str | None:
    """The rules below weigh work by the consumer's loop extents."""
    if c.extents is None:
        return "consumer loop extents are not computable"
    return None


def transpose_into_contraction(c: FusionCandidate) -> str | None:
    """A transpose kept apart is a packed operand the contraction walks unit-stride."""
    # Fused, `a @ w.T` reads `w[j, k]` for `wT[k, j]`: the reduction loop walks the
    # operand's last dim, so the contraction cannot run i-k-j with `j` unit stride (0.3
    # MFLOP of the digits MLP's backward took 56 us fused, as dot products of 10). Kept
    # apart, the transpose is a copy. From `PACKED_MIN_WORK` multiply-adds on,
    # `tess-pack-matmul` packs the operand itself, in any layout: there it is fused.
    producer = c.producer
    if not isinstance(producer, GenericOp):
        return None
    if cached_kind(c.consumer, c.facts) != PatternKind.MATMUL:
        return None
    assert c.extents is not None
    if pymath.prod(c.extents) >= PACKED_MIN_WORK:
        return None
    if len(producer.inputs) != 1 or c.cost != 0:
        return None
    reductions = {
        d for d, it in enumerate(c.consumer.iterator_types) if it.data == IteratorType.REDUCTION
    }
    (source_map,) = generic_maps(producer)[:1]
    for i, _, transform in c.uses:
        last = c.maps[i].results[-1] if c.maps[i].results else None
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


def recompute_in_reduction(c: FusionCandidate) -> str | None:
    """Only a free producer (copy, transpose, constant) is recomputed inside a reduction."""
    if c.visits > 1 and c.cost > 0 and is_reduction(c.consumer):
        return f"would recompute the producer {c.visits} times per element inside a reduction"
    return None


def recompute_expensive(c: FusionCandidate) -> str | None:
    """Only a cheap producer is recomputed per element of an all-parallel consumer."""
    if c.visits > 1 and c.cost > 0 and not is_reduction(c.consumer) and not c.cheap:
        return f"expensive producer would be recomputed {c.visits} times per element"
    return None


def materialized_full_reads(c: FusionCandidate) -> str | None:
    """A reduction reads what a contraction materializes anyway, not recomputes it."""
    # Recomputing a producer that reads two or more full tensors loads more than its one
    # result: an MLP's `b1` gradient `(dz @ w2.T * (pre > 0)).sum(0)` beside `x.T @ dh`
    # would read 2 arrays and the bias instead of `dh`.
    producer = c.producer
    if c.cost == 0 or not is_reduction(c.consumer) or not isinstance(producer, GenericOp):
        return None
    if not any(
        isinstance(user, GenericOp) and cached_kind(user, c.facts) == PatternKind.MATMUL
        for user in c.others
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


def _shared_refusal(c: FusionCandidate) -> str:
    return f"producer has {len(c.others) + 1} uses and is expensive"


def shared_needs_multi_output(c: FusionCandidate) -> str | None:
    """A shared expensive producer is not duplicated: the fused op must also yield it."""
    if c.shared_and_expensive and not c.policy.multi_output:
        return _shared_refusal(c)
    return None


def multi_output_parallel_consumer(c: FusionCandidate) -> str | None:
    """A reduction writes fewer elements than the producer's results it would yield."""
    if c.shared_and_expensive and is_reduction(c.consumer):
        return f"{_shared_refusal(c)}; multi-output fusion needs an all-parallel consumer"
    return None


def multi_output_same_space(c: FusionCandidate) -> str | None:
    """The fused op yields the producer's results only over the producer's own loops."""
    if c.shared_and_expensive and (len(c.transforms) != 1 or not is_permutation(c.transforms[0])):
        return f"{_shared_refusal(c)}; the consumer's iteration space differs from the producer's"
    return None


def multi_output_uses_after(c: FusionCandidate) -> str | None:
    """The producer's other users read the fused op's result, which the consumer defines."""
    if not c.shared_and_expensive:
        return None
    block = c.consumer.parent_block()
    assert block is not None
    for user in c.others:
        ancestor = block.find_ancestor_op_in_block(user)
        if ancestor is None or not c.consumer.is_before_in_block(ancestor):
            return f"{_shared_refusal(c)}; another use precedes the consumer"
    return None


def loop_extents_kept(c: FusionCandidate) -> str | None:
    """Every loop of the fused op must still get its extent from some operand."""
    fused_uses = {i for i, _, _ in c.uses}
    fused_maps = [m for i, m in enumerate(c.maps) if i not in fused_uses]
    producer = c.producer
    if isinstance(producer, GenericOp):
        # The producer's inputs, kept results and inits its body reads join the fused op.
        n, args = len(producer.inputs), producer.body.block.args
        carried = [
            m
            for j, m in enumerate(generic_maps(producer))
            if j < n or j - n in c.kept_results or args[j].uses
        ]
        fused_maps += [m.compose(t) for t in c.transforms for m in carried]
    assert c.extents is not None
    seen = {r.position for m in fused_maps for r in m.results if isinstance(r, AffineDimExpr)}
    missing = next((d for d in range(len(c.extents)) if d not in seen), None)
    if missing is not None:
        return f"the fused op would lose the extent of loop d{missing}"
    return None


@dataclass(frozen=True)
class FusionRule:
    """One row of `FUSION_RULES`: a named check returning its refusal reason, or None."""

    name: str
    check: Callable[[FusionCandidate], str | None]


FUSION_RULES: tuple[FusionRule, ...] = (
    FusionRule("view-producer", view_producer),
    FusionRule("reduction-producer", reduction_producer),
    FusionRule("opaque-producer", opaque_producer),
    FusionRule("same-block", same_block),
    FusionRule("invertible-result-map", invertible_result_map),
    FusionRule("index-reads-aligned", index_reads_aligned),
    FusionRule("static-extents", static_extents),
    FusionRule("transpose-into-contraction", transpose_into_contraction),
    FusionRule("recompute-in-reduction", recompute_in_reduction),
    FusionRule("recompute-expensive", recompute_expensive),
    FusionRule("materialized-full-reads", materialized_full_reads),
    FusionRule("shared-needs-multi-output", shared_needs_multi_output),
    FusionRule("multi-output-parallel-consumer", multi_output_parallel_consumer),
    FusionRule("multi-output-same-space", multi_output_same_space),
    FusionRule("multi-output-uses-after", multi_output_uses_after),
    FusionRule("loop-extents-kept", loop_extents_kept),
)
"""The fusion rules in the order they are asked: the first that refuses an edge decides."""


def first_refusal(candidate: FusionCandidate) -> tuple[FusionRule, str] | None:
    """The first rule that refuses `candidate`, with its reason; None if all accept."""
    for rule in FUSION_RULES:
        reason = rule.check(candidate)
        if reason is not None:
            return rule, reason
    return None


def plan_fusion(
    consumer: GenericOp, index: int, policy: FusionPolicy, facts: FactsCache | None = None
) -> FusionPlan | str | None:
    """How to fuse the producer of input `index` into `consumer`: a plan, a refusal, or None.
    `facts` caches body facts and kinds across calls."""
    candidate = FusionCandidate.of(consumer, index, policy, facts)
    if candidate is None:
        return None
    refusal = first_refusal(candidate)
    if refusal is not None:
        return refusal[1]
    return FusionPlan(candidate.producer, candidate.uses, candidate.kept_results)
