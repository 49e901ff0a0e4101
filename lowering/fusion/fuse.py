"""
`tess-fuse`: vertical fusion of `linalg.generic` ops on tensors (level 3).

`tess-to-linalg` emits one generic per `tess` op; this pass inlines a producer into its
consumer where that saves memory traffic without adding work, as MLIR's
`FuseElementwiseOps` does: the consumer reads the producer's inputs through composed maps
and the intermediate tensor disappears (the seed's broadcast zip then sum never builds its
(3,5,4) product). Which edges fuse is decided by rules on each op's `PatternKind`, not by
luck, and `report=true` names why an edge was refused. The rules, the map composition and
why the greedy fixpoint is O(n) are in lowering/fusion/README.md. Split over three files:
the decision (`fuse_plan.py`), the fused op (`fuse_build.py`), and here the pattern, the
report and the pass. xDSL has no fusion pass for `linalg.generic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
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
from tessc.lowering.fusion.fuse_fc import stack_all
from tessc.lowering.fusion.fuse_plan import FusionPlan, FusionPolicy, plan_fusion
from tessc.lowering.fusion.fuse_pool import DEFAULT_MAX_DEPTH, fuse_pools
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
    `multi-output` allows a fused generic to also yield an expensive producer's result;
    `horizontal-fc` then stacks products sharing their right operand into one
    (`fuse_fc.py`; report: `tess.fc_stacked`, `tess.fc_refused`); `pool-windows` computes
    a conv inside the non-overlapping windows of the pool reading it (`fuse_pool.py`;
    report: `tess.pool_fused`, `tess.pool_refused`), if it has fewer than `pool-max-depth`
    channels (0: any).
    """

    name = "tess-fuse"

    report: bool = False
    max_cheap_ops: int = 4
    multi_output: bool = True
    horizontal_fc: bool = True
    pool_windows: bool = True
    pool_max_depth: int = DEFAULT_MAX_DEPTH

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        policy = FusionPolicy(max_cheap_ops=self.max_cheap_ops, multi_output=self.multi_output)
        pattern = FuseProducerIntoGeneric(policy, {o: i for i, o in enumerate(op.walk())})
        PatternRewriteWalker(
            GreedyRewritePatternApplier([pattern]), apply_recursively=True
        ).rewrite_module(op)
        if self.report:
            for fused, merged in pattern.origins.items():
                contract.FUSED.set(fused, [label for _, label in merged])
        if self.pool_windows:
            for function in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
                for block in function.body.blocks:
                    fuse_pools(block, self.report, self.pool_max_depth)
        if self.horizontal_fc:
            for function in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
                for block in function.body.blocks:
                    stack_all(block, self.report)
        if self.report:
            annotate(op, policy)
