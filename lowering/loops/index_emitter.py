"""
Index arithmetic and loops with static extents, folded where static: the loop builders of
the passes that rewrite loop nests (`tess-tile`, `tess-pack-matmul`, `tess-row-dots`).

An index is an `IndexValue`: a Python int while it is known (it becomes an `arith.constant`
only when an op uses it), else an SSA value. An `Extent` is a trip count with every value it
can take, so a builder knows which sizes a block can have: `emit_loop` emits no loop for a
trip count of 0 or 1, `block_extent` leaves out the `min` of a dim its tile divides, and
`in_groups` leaves out remainder loops that never run. Shared code, not a pass.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.traits import Commutative

from tessc.lowering.loops.index_values import IndexConstants

IndexValue = int | SSAValue
"""An index: a Python int when static (made an `arith.constant` when an op uses it)."""

_FOLDS: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: operator.add,
    arith.SubiOp: operator.sub,
    arith.MuliOp: operator.mul,
    arith.MinSIOp: min,
    arith.DivUIOp: operator.floordiv,
    arith.RemUIOp: operator.mod,
}
_RIGHT_IDENTITY = {arith.AddiOp: 0, arith.SubiOp: 0, arith.MuliOp: 1, arith.DivUIOp: 1}


@dataclass(frozen=True)
class Extent:
    """A trip count and every value it can take (just one: `value` is that int)."""

    value: IndexValue
    sizes: frozenset[int]


def make_extent(value: IndexValue, sizes: set[int] | frozenset[int]) -> Extent:
    return Extent(next(iter(sizes)) if len(sizes) == 1 else value, frozenset(sizes))


def static(count: int) -> Extent:
    return Extent(count, frozenset({count}))


@dataclass
class Emitter:
    """Appends index arithmetic to `block`, folding static operands."""

    block: Block
    constant: IndexConstants

    def value(self, v: IndexValue) -> SSAValue:
        return self.constant(v) if isinstance(v, int) else v

    def apply(
        self, kind: type[Operation], a: IndexValue, b: IndexValue, hint: str | None = None
    ) -> IndexValue:
        """`kind(a, b)`, folded when both are static or one is an identity."""
        if isinstance(a, int) and isinstance(b, int):
            return _FOLDS[kind](a, b)
        if isinstance(b, int) and b == _RIGHT_IDENTITY.get(kind):
            return a
        if kind is arith.AddiOp and isinstance(a, int) and a == 0:
            return b
        if kind is arith.MuliOp and isinstance(b, int) and b == 0:
            return 0
        if isinstance(a, int) and kind.has_trait(Commutative):
            a, b = b, a  # the constant on the right, as canonicalize would put it
        self.block.add_op(op := kind(self.value(a), self.value(b)))
        op.results[0].name_hint = hint
        return op.results[0]

    def add(self, a: IndexValue, b: IndexValue, hint: str | None = None) -> IndexValue:
        return self.apply(arith.AddiOp, a, b, hint)

    def mul(self, a: IndexValue, b: int, hint: str | None = None) -> IndexValue:
        return self.apply(arith.MuliOp, a, b, hint)


def emit_loop(
    e: Emitter, count: Extent, hint: str, body: Callable[[Emitter, IndexValue], None]
) -> scf.ForOp | None:
    """`scf.for` 0 to `count` step 1 around what `body` emits; no loop for a count of 0
    (nothing) or 1 (the body at index 0)."""
    if count.sizes == {0}:
        return None
    if count.sizes == {1}:
        body(e, 0)
        return None
    block = Block(arg_types=[IndexType()])
    block.args[0].name_hint = hint
    body(Emitter(block, e.constant), block.args[0])
    block.add_op(scf.YieldOp())
    e.block.add_op(loop := scf.ForOp(e.value(0), e.value(count.value), e.value(1), [], block))
    return loop


def in_groups(
    e: Emitter,
    extent: Extent,
    start: IndexValue,
    size: int,
    hints: tuple[str, str, str],
    body: Callable[[Emitter, list[IndexValue]], None],
) -> None:
    """`body` on `size` consecutive indices from `start` per full group in `extent`, then
    on one index per leftover. `hints`: a group's first index, group loop, leftover loop."""
    first_hint, group_hint, left_hint = hints

    def group(eg: Emitter, g: IndexValue) -> None:
        first = eg.add(start, eg.mul(g, size), first_hint)
        body(eg, [eg.add(first, offset) for offset in range(size)])

    count = e.apply(arith.DivUIOp, extent.value, size, f"n{group_hint}")
    groups = make_extent(count, {s // size for s in extent.sizes})
    emit_loop(e, groups, group_hint, group)
    if (leftover := {s % size for s in extent.sizes}) != {0}:
        done = e.mul(groups.value, size)
        left = make_extent(e.apply(arith.SubiOp, extent.value, done, f"n{left_hint}"), leftover)
        rest = e.add(start, done)
        emit_loop(e, left, left_hint, lambda el, t: body(el, [el.add(rest, t)]))


def block_extent(e: Emitter, extent: IndexValue, tile: int, start: IndexValue, hint: str) -> Extent:
    """`min(tile, extent - start)`: the size of the block at `start` (any of 1..tile for
    an `extent` known only at run time, a `?` dim's N)."""
    if isinstance(extent, int) and extent % tile == 0:
        return static(tile)
    rest = e.apply(arith.SubiOp, extent, start)
    sizes = {tile, extent % tile} if isinstance(extent, int) else set(range(1, tile + 1))
    return make_extent(e.apply(arith.MinSIOp, tile, rest, hint), sizes)


def block_count(e: Emitter, extent: IndexValue, tile: int, hint: str | None = None) -> Extent:
    """The blocks of `tile` that cover `extent`: `(extent + tile - 1) // tile`."""
    if isinstance(extent, int):
        return static(-(-extent // tile))
    count = e.apply(arith.DivUIOp, e.add(extent, tile - 1), tile, hint)
    return make_extent(count, set())
