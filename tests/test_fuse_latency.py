"""tess-fuse's work grows linearly with a chain it fuses (issue 12: compile latency).

Not timed: the test counts the body ops the pass iterates over (walks and block scans)
and the operand uses it rewrites, on elementwise chains of two lengths, so that a
quadratic creeping back fails on any machine, however loaded. Each fusion step used to
walk the whole fused body (its kind, cost and index use) and rewrite every use of the
reused block's arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.ir import SSAValue
from xdsl.ir.core import _BlockOpsIterator

from tessc.compiler import print_module
from tessc.fuzz.programs import chain_program
from tessc.pipelines import run_passes
from tessc.reference import parse_module


def elementwise_chain(n: int) -> str:
    """`n` elementwise ops (add, mul, relu, exp, neg, tanh) in one dependence chain."""
    return chain_program(n, 4)


@contextmanager
def counting_work() -> Iterator[list[int]]:
    """Count ops iterated over in blocks (walks included) and uses rewritten."""
    count = [0]
    next_op, replace = _BlockOpsIterator.__next__, SSAValue.replace_all_uses_with

    def counted_next(self):  # type: ignore[no-untyped-def]
        count[0] += 1
        return next_op(self)

    def counted_replace(self, value):  # type: ignore[no-untyped-def]
        if value is not self:
            count[0] += self.uses.get_length()
        return replace(self, value)

    _BlockOpsIterator.__next__ = counted_next  # type: ignore[method-assign]
    SSAValue.replace_all_uses_with = counted_replace  # type: ignore[method-assign]
    try:
        yield count
    finally:
        _BlockOpsIterator.__next__ = next_op  # type: ignore[method-assign]
        SSAValue.replace_all_uses_with = replace  # type: ignore[method-assign]


def fuse_work(n: int) -> tuple[int, str]:
    module = parse_module(elementwise_chain(n))
    run_passes(module, "tess-to-linalg")
    with counting_work() as count:
        run_passes(module, "tess-fuse")
    return count[0], print_module(module)


def test_fusing_a_chain_is_linear_in_its_length() -> None:
    (small, _), (large, fused) = fuse_work(250), fuse_work(1000)
    assert fused.count("linalg.generic") == 1  # the whole chain is one generic
    assert large < 4.6 * small, (small, large)
