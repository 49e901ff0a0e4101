"""
Fix: ops a pass creates carry a source location. In xDSL 0.74 they have none (MLIR's
builders take the matched op's), so IR a pass broke was reported at no line of the user's
file. An op replacing another (`Rewriter.replace_op`, `PatternRewriter.replace`) takes the
replaced op's location, and an op a pattern inserts the matched op's, each with the ops
nested in it; ops that already have a location (moved, cloned) keep theirs. Passes that
build with a plain `Builder` use `tessc.dialects.locations.inherit_location`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import Rewriter

from tessc.dialects.locations import stamp_location
from tessc.xdsl_patches.registry import Patch


def _as_ops(new_ops: Operation | Sequence[Operation]) -> Sequence[Operation]:
    return (new_ops,) if isinstance(new_ops, Operation) else new_ops


STOCK_REPLACE_OP = vars(Rewriter)["replace_op"].__func__
STOCK_PATTERN_REPLACE = PatternRewriter.replace
STOCK_PATTERN_REWRITER_INIT = PatternRewriter.__init__


def replace_op_keeping_location(
    op: Operation,
    new_ops: Operation | Sequence[Operation],
    new_results: Sequence[SSAValue | None] | None = None,
    safe_erase: bool = True,
) -> None:
    stamp_location(_as_ops(new_ops), op.location)
    STOCK_REPLACE_OP(op, new_ops, new_results, safe_erase)


def pattern_replace_keeping_location(
    self: PatternRewriter,
    op: Operation,
    new_ops: Operation | Sequence[Operation],
    new_results: Sequence[SSAValue | None] | None = None,
    safe_erase: bool = True,
) -> None:
    stamp_location(_as_ops(new_ops), op.location)
    STOCK_PATTERN_REPLACE(self, op, new_ops, new_results, safe_erase)


def pattern_rewriter_init_stamping(self: PatternRewriter, insert_point: Any) -> None:
    STOCK_PATTERN_REWRITER_INIT(self, insert_point)

    def stamp_matched(op: Operation) -> None:
        # The walker reuses one rewriter, resetting the matched op: read it at insertion.
        matched = self._current_operation
        if matched is not None:
            stamp_location((op,), matched.location)

    self.operation_insertion_handler.append(stamp_matched)


UPSTREAM = (
    "rewriter: new ops inherit the source location. Ops built by a rewrite pattern get "
    "UnknownLoc, so a verifier error in IR a pass produced points nowhere; MLIR's "
    "PatternRewriter builds at the matched op's location. In Rewriter.replace_op and "
    "PatternRewriter.replace, give the new ops (and ops nested in them) without a location "
    "the replaced op's; in PatternRewriter, ops inserted while matching an op take that "
    "op's location. Add a test that an op created by a pattern prints the matched op's loc "
    "with --print-debuginfo."
)

PATCHES: tuple[Patch, ...] = (
    Patch(Rewriter, "replace_op", staticmethod(replace_op_keeping_location), "fix", UPSTREAM),
    Patch(PatternRewriter, "replace", pattern_replace_keeping_location, "fix", UPSTREAM),
    Patch(PatternRewriter, "__init__", pattern_rewriter_init_stamping, "fix", UPSTREAM),
)

__all__ = ["PATCHES"]
