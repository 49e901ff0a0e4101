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
  (`tessc.lowering.fusion.fuse_epilogue`, next in the pipeline) groups them into one kernel;
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

xDSL has no fusion pass for `linalg.generic`, hence this one. The pass is split over three
files: the decision (`fuse_plan.py`), the fused op's construction (`fuse_build.py`), and
here the pattern, the report and the pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Operation, OpResult
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tessc.dialects import contract
from tessc.lowering.fusion.fuse_build import build_fused
from tessc.lowering.fusion.fuse_plan import FusionPlan, FusionPolicy, plan_fusion
from tessc.lowering.linalg.generic_analysis import FactsCache, cached_facts, labels, pattern_kind

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
