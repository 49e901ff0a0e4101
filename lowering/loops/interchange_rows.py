"""
`tess-interchange-rows`: a row loop's short inner loops turned inside out, so that the
rows are what vectorises (level 5, loops).

Where a row is short (a softmax over 10 classes) its inner loops cannot vectorise: LLVM
does not split a 10-trip reduction across lanes and an `exp` in it stays a libm call. This
pass splits the row loop (fission) around each top-level loop of fewer than `max-trip`
steps and puts that loop outside a loop over the rows, whose accesses then vectorise and
whose `exp` `tess-expand-math` expands. Legal when the rows are independent (checked:
every written memref is accessed at the row index only) and only pure values cross the
split (recomputed). Each row's ops keep their order: results are bitwise the same. Runs
before `tess-register-accumulate` and `tess-expand-math`; the example and the match are in
lowering/loops/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import is_side_effect_free

from tessc.lowering.loops.row_analysis import (
    defined_in,
    moves_by_one,
    recomputable_ops,
    rows_independent,
)
from tessc.lowering.loops.trip_counts import trip_bound, trip_count

DEFAULT_MAX_TRIP = 16
"""Inner loops shorter than a vector of f32 on AVX-512 (16 lanes) are turned inside out."""
DEFAULT_MIN_ROWS = 8
"""Fewer rows than a vector of f32 on AVX2 would leave the vector loop mostly empty."""


def _pure(op: Operation) -> bool:
    return not op.regions and is_side_effect_free(op)


def row_values(loop: scf.ForOp) -> set[SSAValue]:
    """The values that name the row: the induction variable and the values computed at
    the loop's top level that move with it by one (`loop_analysis.moves_by_one`)."""
    results = (r for op in loop.body.block.ops for r in op.results)
    return {loop.body.block.args[0], *(r for r in results if moves_by_one(r, loop))}


def short_loop(op: Operation, max_trip: int) -> bool:
    """Whether `op` is a short loop to turn inside out (module docstring)."""
    if not isinstance(op, scf.ForOp) or op.iter_args:
        return False
    trips = trip_count(op.lb, op.ub, op.step)
    if trips is None or not 2 <= trips < max_trip:
        return False
    body = list(op.body.block.ops)[:-1]
    return any(isinstance(o, memref.LoadOp) for o in body) and all(
        isinstance(o, memref.LoadOp | memref.StoreOp) or _pure(o) for o in body
    )


@dataclass(frozen=True)
class Plan:
    """A row loop's top-level ops: the pure ones (recomputed where needed) and the runs in
    order, each a list of row-level ops or one short loop."""

    pure: tuple[Operation, ...]
    runs: tuple[tuple[Operation, ...] | scf.ForOp, ...]


def plan(loop: scf.ForOp, max_trip: int) -> Plan | None:
    ops = list(loop.body.block.ops)[:-1]
    pure = recomputable_ops(loop, ops)  # cloned into any loop that reads them
    runs: list[tuple[Operation, ...] | scf.ForOp] = []
    current: list[Operation] = []
    for op in ops:
        if op in pure:
            continue
        if short_loop(op, max_trip):
            if current:
                runs.append(tuple(current))
                current = []
            runs.append(op)  # type: ignore[arg-type]
        else:
            current.append(op)
    if current:
        runs.append(tuple(current))
    if not any(isinstance(run, scf.ForOp) for run in runs):
        return None
    # A value an op of one run defines may be used in that run only.
    run_of = {
        op: k
        for k, run in enumerate(runs)
        for op in ((run,) if isinstance(run, scf.ForOp) else run)
    }
    for k, run in enumerate(runs):
        for op in (run,) if isinstance(run, scf.ForOp) else run:
            for inner in op.walk():
                for value in inner.operands:
                    owner = value.owner
                    if isinstance(owner, Operation) and run_of.get(owner, k) != k:
                        return None
    return Plan(tuple(pure), tuple(runs))


def _operands(ops: Iterable[Operation]) -> set[SSAValue]:
    return {v for op in ops for inner in op.walk() for v in inner.operands}


@dataclass
class Fission:
    """Builds the loops replacing one row loop (module docstring)."""

    loop: scf.ForOp
    pure: tuple[Operation, ...]

    def pure_slice(self, ops: Sequence[Operation]) -> list[Operation]:
        """The pure ops of the row loop that `ops` read, directly or through each other."""
        needed, values = set[Operation](), _operands(ops)
        for op in reversed(self.pure):
            if any(r in values for r in op.results):
                needed.add(op)
                values |= set(op.operands)
        return [op for op in self.pure if op in needed]

    def rows(self, ops: Sequence[Operation], mapping: dict[SSAValue, SSAValue]) -> scf.ForOp:
        """A loop over the rows running `ops` (with the pure ops they read) per row."""
        block = Block(arg_types=[IndexType()])
        block.args[0].name_hint = self.loop.body.block.args[0].name_hint
        values = {**mapping, self.loop.body.block.args[0]: block.args[0]}
        for op in (*self.pure_slice(ops), *ops):
            block.add_op(op.clone(values))
        block.add_op(scf.YieldOp())
        return scf.ForOp(self.loop.lb, self.loop.ub, self.loop.step, [], block)

    def interchanged(self, short: scf.ForOp) -> list[Operation]:
        """`short`'s loop outside, over a loop over the rows running its body."""
        hoisted: list[Operation] = []
        mapping: dict[SSAValue, SSAValue] = {}
        for bound in (short.lb, short.ub, short.step):
            if defined_in(bound, self.loop) and bound not in mapping:
                assert isinstance(bound.owner, Operation)  # a constant: the trip is static
                hoisted.append(clone := bound.owner.clone())
                mapping[bound] = clone.results[0]
        outer = Block(arg_types=[IndexType()])
        outer.args[0].name_hint = short.body.block.args[0].name_hint
        inner = self.rows(
            list(short.body.block.ops)[:-1], {short.body.block.args[0]: outer.args[0]}
        )
        outer.add_ops([inner, scf.YieldOp()])
        bounds = (mapping.get(v, v) for v in (short.lb, short.ub, short.step))
        return [*hoisted, scf.ForOp(*bounds, [], outer)]


@dataclass
class InterchangeShortRows(RewritePattern):
    """Split a row loop around its short inner loops and turn those inside out."""

    max_trip: int
    min_rows: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, loop: scf.ForOp, rewriter: PatternRewriter) -> None:
        if loop.iter_args:
            return
        rows = trip_bound(loop.lb, loop.ub, loop.step)
        if rows is not None and rows < self.min_rows:
            return
        found = plan(loop, self.max_trip)
        if found is None or not rows_independent(loop.body.walk(), row_values(loop)):
            return
        fission = Fission(loop, found.pure)
        new_ops: list[Operation] = []
        for run in found.runs:
            if isinstance(run, scf.ForOp):
                new_ops += fission.interchanged(run)
            else:
                new_ops.append(fission.rows(run, {}))
        rewriter.replace(loop, new_ops, [])


@dataclass(frozen=True)
class TessInterchangeRowsPass(ModulePass):
    """Turn a row loop's short inner loops inside out (see the module docstring)."""

    name = "tess-interchange-rows"

    max_trip: int = DEFAULT_MAX_TRIP
    min_rows: int = DEFAULT_MIN_ROWS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pattern = InterchangeShortRows(self.max_trip, self.min_rows)
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)


__all__ = ["TessInterchangeRowsPass", "row_values", "short_loop"]
