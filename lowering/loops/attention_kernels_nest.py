"""
Scalar loop-nest building on memrefs at one insertion point, for `tess-attention-kernels`
(its helper): constants, loads and stores, arithmetic, `scf.for` loops carrying values, and
the `micro.mma` register tiles the kernels' block products run on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.builder import Builder
from xdsl.dialects import arith, math, memref, scf
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IndexType, IntegerAttr, i1
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from tessc.dialects.micro import MmaOp

Body = Callable[[SSAValue, list[SSAValue]], Sequence[SSAValue]]


@dataclass
class NestBuilder:
    """Builds scalar loop nests on memrefs at one insertion point."""

    builder: Builder
    element: AnyFloat
    layouts: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict)
    """Arguments lying permuted (`AttentionKernel.layouts`): element `x` at `x[p]...`."""

    def place(self, ref: SSAValue, indices: Sequence[SSAValue]) -> Sequence[SSAValue]:
        layout = self.layouts.get(ref)
        return indices if layout is None else [indices[p] for p in layout]

    def insert(self, op: arith.ArithmeticBinaryOperation | object) -> SSAValue:
        self.builder.insert(op)  # type: ignore[arg-type]
        return op.results[0]  # type: ignore[attr-defined]

    def index(self, value: int) -> SSAValue:
        return self.insert(arith.ConstantOp(IntegerAttr.from_index_int_value(value)))

    def real(self, value: float) -> SSAValue:
        return self.insert(arith.ConstantOp(FloatAttr(value, self.element)))

    def load(self, ref: SSAValue, indices: Sequence[SSAValue]) -> SSAValue:
        return self.insert(memref.LoadOp.get(ref, self.place(ref, indices)))

    def store(self, value: SSAValue, ref: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.builder.insert(memref.StoreOp.get(value, ref, self.place(ref, indices)))

    def add(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.AddfOp(a, b))

    def sub(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.SubfOp(a, b))

    def mul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.MulfOp(a, b))

    def exp(self, a: SSAValue) -> SSAValue:
        return self.insert(math.ExpOp(a))

    def select(self, condition: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.SelectOp(condition, a, b))

    def compare(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.insert(arith.CmpfOp(a, b, predicate))

    def loop(
        self, lower: SSAValue, upper: SSAValue, step: SSAValue, inits: Sequence[SSAValue],
        body: Body, name: str,
    ) -> list[SSAValue]:  # fmt: skip
        """An `scf.for` carrying `inits`; `body(iv, carried)` returns what it yields."""
        block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        block.args[0].name_hint = name
        loop = scf.ForOp(lower, upper, step, list(inits), Region(block))
        self.builder.insert(loop)
        after = self.builder.insertion_point
        self.builder.insertion_point = InsertPoint.at_end(block)
        yielded = body(block.args[0], list(block.args[1:]))
        self.builder.insert(scf.YieldOp(*yielded))
        self.builder.insertion_point = after
        return list(loop.results)

    def range(self, upper: SSAValue, body: Callable[[SSAValue], None], name: str) -> None:
        """`for name in range(upper): body(name)`, carrying nothing."""

        def step(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            body(iv)
            return []

        self.loop(self.index(0), upper, self.index(1), [], step, name)

    def dot(self, a: SSAValue, a_at: Sequence[SSAValue], b: SSAValue, b_at: Sequence[SSAValue],
            length: int) -> SSAValue:  # fmt: skip
        """`sum_e a[*a_at, e] * b[*b_at, e]`, accumulated in a loop-carried scalar."""

        def step(e: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            product = self.mul(self.load(a, [*a_at, e]), self.load(b, [*b_at, e]))
            return [self.add(carried[0], product)]

        zero = self.real(0.0)
        return self.loop(self.index(0), self.index(length), self.index(1), [zero], step, "e")[0]

    def scale_row(self, ref: SSAValue, at: Sequence[SSAValue], factor: SSAValue, n: int) -> None:
        """`ref[*at, :] *= factor`."""
        self.range(
            self.index(n),
            lambda e: self.store(self.mul(self.load(ref, [*at, e]), factor), ref, [*at, e]),
            "e",
        )

    def axpy_row(self, ref: SSAValue, at: Sequence[SSAValue], factor: SSAValue,
                 src: SSAValue, src_at: Sequence[SSAValue], n: int) -> None:  # fmt: skip
        """`ref[*at, :] += factor * src[*src_at, :]`."""

        def body(e: SSAValue) -> None:
            term = self.mul(factor, self.load(src, [*src_at, e]))
            self.store(self.add(self.load(ref, [*at, e]), term), ref, [*at, e])

        self.range(self.index(n), body, "e")

    def fill_row(self, ref: SSAValue, at: Sequence[SSAValue], n: int) -> None:
        zero = self.real(0.0)
        self.range(self.index(n), lambda e: self.store(zero, ref, [*at, e]), "e")

    # -- index arithmetic ---------------------------------------------------------------

    def addi(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.AddiOp(a, b))

    def subi(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.SubiOp(a, b))

    def muli(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.MuliOp(a, b))

    def mini(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.insert(arith.MinSIOp(a, b))

    def flag(self, value: bool) -> SSAValue:
        return self.insert(arith.ConstantOp(IntegerAttr(int(value), i1)))

    def steps(self, lower: SSAValue, upper: SSAValue, step: int,
              body: Callable[[SSAValue], None], name: str) -> None:  # fmt: skip
        """`for name in range(lower, upper, step): body(name)`."""

        def each(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            body(iv)
            return []

        self.loop(lower, upper, self.index(step), [], each, name)

    def fill(self, ref: SSAValue, shape: Sequence[int]) -> None:
        """`ref[...] = 0` over a static `shape`."""
        zero = self.real(0.0)

        def level(at: list[SSAValue]) -> None:
            if len(at) == len(shape):
                return self.store(zero, ref, at)
            self.range(self.index(shape[len(at)]), lambda v: level([*at, v]), f"z{len(at)}")

        level([])

    def product(
        self, lhs: SSAValue, rhs: SSAValue, depth: SSAValue, acc: SSAValue,
        extent: tuple[int, int], layout: tuple[int, int, int], tile: tuple[int, int, int],
        accumulate: bool, acc_row: SSAValue | None = None,
    ) -> None:  # fmt: skip
        """`acc[acc_row + r, c] (+)= sum_{k < depth} lhs[r * sr + k * sk] * rhs[k * skb + c]`
        for `(r, c) < extent` (multiples of the register tile's rows and lanes; `acc_row`
        0 when None), as `micro.mma` register tiles (`tile` = (MR, NR, lanes); NR narrowed
        to `lanes` where it does not divide the columns)."""
        rows, cols, lanes = tile
        if extent[1] % cols:
            cols = lanes
        accumulate_flag, zero = self.flag(accumulate), self.index(0)

        def row_tile(r0: SSAValue) -> None:
            a = self.muli(r0, self.index(layout[0]))
            row = r0 if acc_row is None else self.addi(acc_row, r0)

            def col_tile(c0: SSAValue) -> None:
                self.builder.insert(
                    MmaOp(
                        lhs,
                        a,
                        rhs,
                        c0,
                        depth,
                        acc,
                        [row, c0],
                        accumulate_flag,
                        (rows, cols, lanes),
                        layout,
                    )  # fmt: skip
                )

            self.steps(zero, self.index(extent[1]), cols, col_tile, "c0")

        self.steps(zero, self.index(extent[0]), rows, row_tile, "r0")
